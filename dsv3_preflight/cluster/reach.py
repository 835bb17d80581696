"""Can the driver reach a node's Ray ports? The cluster runner's own look at a node whose task failed while Ray
still lists it alive (a worker that "crashed" before it ran anything, a task that never answered).

Ray's driver pushes each task to a worker process on the node, at a port of the node's worker range
(``ray start --min-worker-port/--max-worker-port``, default 10002-19999); the raylet and the object manager
listen on their own ports. A firewall on the node that lets its raylet register (outbound) but drops what
comes in makes Ray report the task's worker as crashed: the node is alive and unreachable. A TCP connect to
a closed port answers at once (refused), to a filtered one not at all (timeout) or with an ICMP
prohibition (unreachable): what this records, as data.
"""
from __future__ import annotations

import threading
from typing import Any

from ..net.probes import tcp
from .nodes import NodeInfo

#: Ray's default worker port range (`ray start --min-worker-port/--max-worker-port`)
WORKER_PORTS = (10002, 19999)
CONNECT_S = 3.0


def connect(host: str, port: int, timeout: float = CONNECT_S) -> dict[str, Any]:
    """One TCP connect: {"port", "outcome": ok | refused | timeout | unreachable, "error", "seconds"}."""
    return tcp.connect(host, port, timeout)


def ray_ports_reach(node: NodeInfo, timeout: float = CONNECT_S) -> dict[str, Any]:
    """Connects, at once, to the node's raylet and object manager ports and to two ports of the worker range.

    ``filtered``: the worker ports neither accept nor refuse (a firewall drops or prohibits them) while Ray lists
    the node alive."""
    targets = {"worker_port_low": WORKER_PORTS[0], "worker_port_mid": (WORKER_PORTS[0] + WORKER_PORTS[1]) // 2}
    if node.node_manager_port:
        targets["node_manager_port"] = int(node.node_manager_port)
    if node.object_manager_port:
        targets["object_manager_port"] = int(node.object_manager_port)
    found: dict[str, Any] = {}

    def one(key: str, port: int) -> None:
        found[key] = connect(node.ip, port, timeout)

    threads = [threading.Thread(target=one, args=item, daemon=True) for item in targets.items()]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout + 1.0)
    blocked = lambda key: (found.get(key) or {}).get("outcome") in ("timeout", "unreachable")  # noqa: E731
    return {"ip": node.ip, "ports": found, "worker_ports": list(WORKER_PORTS),
            "filtered": [k for k in targets if blocked(k)],
            "workers_filtered": blocked("worker_port_low") and blocked("worker_port_mid")}
