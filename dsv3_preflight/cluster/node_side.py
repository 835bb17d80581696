"""The node side of cluster mode: what the Ray task runs on each node (through ``preflight.run_preflight``).

Only plain data crosses Ray: the payload in, a dict of results and the node entry out, so a node
whose dsv3-preflight differs (or is missing, see :mod:`.bootstrap`) cannot break unpickling.
"""
from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Mapping
from typing import Any


def run_node(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Run the selected node checks here; return results, the node entry and who this node is."""
    started = time.monotonic()
    # e.g. the listener token for port_reach, a gang's or a pair's parameters: set for this task only (Ray reuses
    # its worker processes, and a later task of another wave must not inherit them)
    env = {key: str(value) for key, value in (payload.get("env") or {}).items()}
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        return _run_node(payload, started)
    finally:
        from .connect import restore_environ

        restore_environ(saved)


def _run_node(payload: Mapping[str, Any], started: float) -> dict[str, Any]:
    from .. import __version__
    from ..preflight import RunOptions, run_preflight
    from ..profile import Profile
    from ..registry import load_registry
    from ..runner import this_node_name

    node_id = None
    try:
        import ray

        # outside a Ray task (tests of this function) there is no node id; asking for one there would start a
        # local Ray instance (Ray's auto-init), so ask only inside Ray
        if ray.is_initialized():
            node_id = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - no Ray, or a Ray that cannot say: no node id
        pass
    checks_dirs = tuple(payload.get("checks_dirs") or ())
    known = load_registry(checks_dirs).checks
    wanted = list(payload.get("checks") or ())
    unknown = [n for n in wanted if n not in known]
    name = this_node_name()
    doc = run_preflight(RunOptions(profile=Profile.from_dict(payload["profile"]), only=tuple(n for n in wanted if n in known),
                                   checks_dirs=checks_dirs, timeout=payload.get("timeout"), node_name=name,
                                   cluster_checks="defer", progress=False)) if set(wanted) - set(unknown) else None
    entry = (doc or {}).get("nodes", [None])[0] or {"node": name, "state": "ok", "error": None, "facts": {},
                                                     "fact_errors": {}, "fact_timings_s": {}}
    return {
        "ok": True,
        "node_id": node_id,
        "node_name": name,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "python": sys.executable,
        "version": __version__,
        "unknown_checks": unknown,
        "results": [r for r in (doc or {}).get("results", []) if r["node"] != "cluster"],
        "entry": entry,
        "elapsed_s": time.monotonic() - started,
    }
