"""What the gate runs on the training workers' nodes (inside a Ray Train worker actor, so with the workers' own
runtime env): who the node is, the storage_path nonces, a free port the way Ray Train picks MASTER_PORT, and the
suite's node checks through the one run API. Plain data in and out: nothing here judges."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: under storage_path: <storage_path>/.dsv3-preflight/<run id>/<node key>.nonce
NONCE_DIR = ".dsv3-preflight"


def identity() -> dict[str, Any]:
    """This node as the suite names it ($DSV3_PREFLIGHT_NODE_NAME, else the host name) and as Ray knows it."""
    import ray

    from ..runner import this_node_name

    return {"name": this_node_name(), "hostname": socket.gethostname(), "pid": os.getpid(),
            "node_id": ray.get_runtime_context().get_node_id(), "node_ip": ray.util.get_node_ip_address()}


def address_and_port() -> tuple[str, int]:
    """The (node IP, free port) Ray Train's torch backend picks on the rank-0 worker for MASTER_ADDR/MASTER_PORT."""
    from ray.train._internal.utils import get_address_and_port

    return get_address_and_port()


def nonce_dir(storage_path: str, run_id: str) -> Path:
    return Path(os.path.expanduser(storage_path)) / NONCE_DIR / run_id


def write_nonce(storage_path: str, run_id: str, key: str, nonce: str) -> dict[str, Any]:
    """Create storage_path (as Ray would) and this node's nonce file in it; the free space there."""
    directory = nonce_dir(storage_path, run_id)
    fact: dict[str, Any] = {"path": str(directory.parent.parent), "wrote": False, "error": None, "free_bytes": None}
    try:
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / f"{key}.nonce"
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(nonce)
            fh.flush()
            os.fsync(fh.fileno())
        fact["wrote"] = True
        fact["free_bytes"] = shutil.disk_usage(directory).free
    except OSError as exc:
        fact["error"] = f"[Errno {exc.errno}] {exc.strerror}: {exc.filename!r}" if exc.errno else str(exc)
    return fact


def read_nonces(storage_path: str, run_id: str, expected: Mapping[str, str]) -> dict[str, str]:
    """For each writer key: "ok" (its nonce is there, unchanged), "missing", "mismatch", or the read error."""
    directory = nonce_dir(storage_path, run_id)
    seen: dict[str, str] = {}
    for key, nonce in expected.items():
        try:
            text = (directory / f"{key}.nonce").read_text(encoding="utf-8")
        except FileNotFoundError:
            seen[key] = "missing"
            continue
        except OSError as exc:
            seen[key] = str(exc)
            continue
        seen[key] = "ok" if text == nonce else "mismatch"
    return seen


def remove_nonce(storage_path: str, run_id: str, key: str) -> None:
    """Remove this node's nonce, then the run's and the gate's directories when empty (never anything else)."""
    directory = nonce_dir(storage_path, run_id)
    with contextlib.suppress(OSError):
        (directory / f"{key}.nonce").unlink()
    for path in (directory, directory.parent):
        with contextlib.suppress(OSError):
            path.rmdir()


def node_checks(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Run the selected checks on this node once, through the runner the CLI uses (``runner.run_this_node``, as a
    cluster node task does: cluster checks are judged by the gate on every node's facts, which come back in the node
    entry); ``payload``: profile (a Profile dict), only, checks_dirs, timeout, node_name, wave (a
    :class:`dsv3_preflight.wave.Wave` as plain data: the collective gang's parameters, handed to the probes as the
    engine fact ``wave``, never through the environment)."""
    from ..profile import Profile
    from ..registry import load_registry
    from ..runner import run_this_node
    from ..secrets import mask
    from ..wave import Wave

    registry = load_registry(tuple(payload.get("checks_dirs") or ()))
    wanted = [name for name in payload["only"] if name in registry.checks]
    selected = registry.select(wanted).selected if wanted else []
    outcome = run_this_node(registry, selected, Profile.from_dict(payload["profile"]), node=payload.get("node_name"),
                            timeout=payload.get("timeout"), cluster_checks_here=False,
                            wave=Wave.from_dict(payload.get("wave")))
    return {"results": mask([r.to_dict() for r in outcome.results if r.node != "cluster"]),
            "entry": mask(outcome.entry)}
