"""The node side of cluster mode: what the Ray task runs on each node (through ``runner.run_this_node``).

Only plain data crosses Ray: the payload in, a dict of results and the node entry out, so a node
whose dsv3-preflight differs (or is missing, see :mod:`.bootstrap`) cannot break unpickling.
"""
from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any, Mapping


def run_node(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Run the selected node checks here; return results, the node entry and who this node is."""
    from .. import __version__
    from ..profile import Profile
    from ..registry import load_registry
    from ..runner import run_this_node, this_node_name

    started = time.monotonic()
    for key, value in (payload.get("env") or {}).items():  # e.g. the listener token for port_reach
        os.environ[key] = value
    node_id = None
    try:
        import ray

        node_id = ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - outside Ray (tests of this function): no node id
        pass
    registry = load_registry(payload.get("checks_dirs") or ())
    wanted = list(payload.get("checks") or ())
    selected = [registry.checks[n] for n in wanted if n in registry.checks]
    unknown = [n for n in wanted if n not in registry.checks]
    profile = Profile.from_dict(payload["profile"])
    name = this_node_name()
    outcome = run_this_node(registry, selected, profile, node=name, timeout=payload.get("timeout"),
                            cluster_checks_here=False)
    return {
        "ok": True,
        "node_id": node_id,
        "node_name": name,
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "python": sys.executable,
        "version": __version__,
        "unknown_checks": unknown,
        "results": [r.to_dict() for r in outcome.results if r.node != "cluster"],
        "entry": outcome.entry,
        "elapsed_s": time.monotonic() - started,
    }
