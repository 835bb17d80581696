"""The temporary listener on the node holding MASTER_ADDR while the workers test port reach.

It runs in a Ray actor pinned to node 0 for the duration of the port-reach wave only: node 0's own
checks (``port_bind``: is MASTER_PORT free?) ran before, so the listener cannot make them fail.
"""
from __future__ import annotations

import time
from typing import Any

from .nodes import NodeInfo


class ListenerActor:
    """Holds a :class:`dsv3_preflight.net.probes.listener.Listener` on the node it was placed on."""

    def __init__(self) -> None:
        self._listener = None

    def start(self, host: str, port: int, deadline_s: float) -> dict[str, Any]:
        from dsv3_preflight.net.probes.listener import Listener

        try:
            self._listener = Listener(host=host, port=port, deadline_s=deadline_s).start()
        except (OSError, ValueError) as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}", "port": port}
        return {"ok": True, "port": self._listener.port, "token": self._listener.token, "host": host}

    def stop(self) -> dict[str, Any]:
        if self._listener is None:
            return {"served": []}
        served = list(self._listener.served)
        self._listener.close()
        return {"served": served}


def listener_available() -> bool:
    try:
        from dsv3_preflight.net.probes.listener import Listener  # noqa: F401
    except ImportError:
        return False
    return True


def start_listener(node: NodeInfo, port: int, deadline: float, ipv6: bool = False) -> tuple[Any, dict[str, Any]]:
    """Start the listener on ``node``; (actor handle or None, info with token or error)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    left = deadline - time.monotonic()
    actor = ray.remote(ListenerActor).options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node.node_id, soft=False),
        num_cpus=0, num_gpus=0, max_restarts=0, name=None,
    ).remote()
    try:
        info = ray.get(actor.start.remote("::" if ipv6 else "0.0.0.0", port, max(left, 1.0)), timeout=max(min(left, 60.0), 1.0))
    except Exception as exc:  # noqa: BLE001 - reported in the document; workers then see "refused"
        stop_listener(actor)
        return None, {"ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}", "port": port}
    info["node"] = node.name
    if not info.get("ok"):
        stop_listener(actor)
        return None, info
    return actor, info


def stop_listener(actor: Any, timeout: float = 5.0) -> dict[str, Any]:
    import ray

    if actor is None:
        return {}
    try:
        return ray.get(actor.stop.remote(), timeout=timeout)
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}"}
    finally:
        try:
            ray.kill(actor)
        except Exception:  # noqa: BLE001
            pass
