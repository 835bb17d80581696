"""Which nodes the Ray cluster has, what they are called, and which node rank each one gets.

Pure functions (``assign_node_ranks``, ``unique_names``) take plain :class:`NodeInfo` records so the
launcher and the tests can use them without Ray; ``alive_nodes`` is the one function asking Ray.
"""
from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..net.master import is_loopback


@dataclass(frozen=True)
class NodeInfo:
    """One Ray node as the cluster runner sees it."""

    node_id: str                 # Ray's hex node id
    ip: str                      # the address Ray uses for the node (NodeManagerAddress)
    hostname: str                # the node's host name as Ray reports it
    is_head: bool = False        # the Ray head node
    is_driver: bool = False      # the node this command runs on
    name: str = ""               # unique, stable name used in results (see unique_names)
    node_rank: int | None = None
    resources: dict[str, float] = field(default_factory=dict, compare=False)
    node_manager_port: int | None = field(default=None, compare=False)     # the raylet's, as Ray reports it
    object_manager_port: int | None = field(default=None, compare=False)

    @property
    def short_id(self) -> str:
        return self.node_id[:6]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "node_id": self.node_id, "ip": self.ip, "hostname": self.hostname,
                "is_head": self.is_head, "is_driver": self.is_driver, "node_rank": self.node_rank}


def alive_nodes(driver_node_id: str | None = None) -> list[NodeInfo]:
    """The alive nodes of the Ray cluster this process is connected to (ray.init first)."""
    import ray

    if driver_node_id is None:
        try:
            driver_node_id = ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001 - not connected as a driver: no driver node
            driver_node_id = None
    nodes = []
    for entry in ray.nodes():
        if not entry.get("Alive"):
            continue
        resources = dict(entry.get("Resources") or {})
        nodes.append(NodeInfo(
            node_id=entry["NodeID"],
            ip=entry.get("NodeManagerAddress", ""),
            hostname=entry.get("NodeManagerHostname", "") or entry.get("NodeManagerAddress", ""),
            is_head=bool(entry.get("IsHeadNode")) or "node:__internal_head__" in resources,
            is_driver=entry["NodeID"] == driver_node_id,
            resources=resources,
            node_manager_port=entry.get("NodeManagerPort") or None,
            object_manager_port=entry.get("ObjectManagerPort") or None,
        ))
    return nodes


def unique_names(nodes: Iterable[NodeInfo], reported: dict[str, str] | None = None) -> list[NodeInfo]:
    """Give every node a unique, stable name.

    The base name is what the node reported (``$DSV3_PREFLIGHT_NODE_NAME`` there, else its host name;
    ``reported`` maps node id to it), else Ray's host name, else (when other Ray nodes share that host
    name at other addresses: cloned images, containers started with one ``--hostname``) the address Ray
    reports for it. Nodes sharing a base name (several Ray nodes on one host) get ``-<first 6 hex digits
    of the Ray node id>`` appended, and so does a node named after a host name that other Ray nodes share
    (it never reported its own name).
    """
    nodes = list(nodes)
    reported = reported or {}
    hosts: dict[str, int] = {}
    ips: dict[str, int] = {}
    for n in nodes:
        hosts[n.hostname] = hosts.get(n.hostname, 0) + 1
        ips[n.ip] = ips.get(n.ip, 0) + 1

    def unreported(n: NodeInfo) -> str:
        if n.hostname and hosts[n.hostname] > 1 and n.ip and ips[n.ip] == 1:
            return n.ip   # its host name is not its own: the address Ray reaches it at is
        return n.hostname or n.ip or n.short_id

    base = {n.node_id: reported.get(n.node_id) or unreported(n) for n in nodes}
    counts: dict[str, int] = {}
    for value in base.values():
        counts[value] = counts.get(value, 0) + 1
    # a node that never said its name is called after its host: when Ray nodes share that host name (one
    # machine, or containers sharing a name) it keeps the node id even if the others reported other names

    def shared(n: NodeInfo) -> bool:
        name = base[n.node_id]
        return counts[name] > 1 or (not reported.get(n.node_id) and name == n.hostname and hosts[n.hostname] > 1)

    return [replace(n, name=f"{base[n.node_id]}-{n.short_id}" if shared(n) else base[n.node_id]) for n in nodes]


def _ip_key(ip: str) -> tuple[int, int, str]:
    try:
        addr = ipaddress.ip_address(ip)
        return (addr.version, int(addr), ip)
    except ValueError:
        return (9, 0, ip)


def master_addresses(master_addr: str) -> set[str]:
    """MASTER_ADDR and what it resolves to (empty resolution when it does not resolve)."""
    found = {master_addr}
    try:
        found |= {info[4][0] for info in socket.getaddrinfo(master_addr, None, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError, ValueError):
        pass
    return found


def _is_loopback(addresses: Iterable[str]) -> bool:
    return any(is_loopback(a) for a in addresses)   # the one is_loopback, MASTER_ADDR's module's


def holds_master(node: NodeInfo, master_addr: str, addresses: set[str] | None = None) -> bool:
    addresses = master_addresses(master_addr) if addresses is None else addresses
    if _is_loopback(addresses):
        return node.is_driver
    return node.ip in addresses or node.hostname == master_addr or node.name == master_addr


def assign_node_ranks(nodes: Sequence[NodeInfo], master_addr: str, addresses: set[str] | None = None) -> list[NodeInfo]:
    """Node ranks as the launcher assigns them; returns the nodes ordered by rank, ``node_rank`` set.

    Rule: node 0 is the node holding MASTER_ADDR (its Ray address or host name equals MASTER_ADDR or
    one of the addresses MASTER_ADDR resolves to; a loopback MASTER_ADDR means the node this command
    runs on). When several Ray nodes hold it (one host running several Ray nodes), the driver's node
    wins, then the Ray head, then the first in the order below. When none holds it, the Ray head is
    node 0 (the cluster check ``cluster.master_node`` then fails). The other nodes follow ordered
    by IP address (numerically), then host name, then name, then Ray node id: deterministic for a
    given cluster, and independent of the order Ray lists them in.
    """
    addresses = master_addresses(master_addr) if addresses is None else addresses
    ordered = sorted(nodes, key=lambda n: (_ip_key(n.ip), n.hostname, n.name, n.node_id))
    holders = [n for n in ordered if holds_master(n, master_addr, addresses)]
    first = None
    for pick in (lambda n: n.is_driver, lambda n: n.is_head, lambda n: True):
        first = next((n for n in holders if pick(n)), None)
        if first is not None:
            break
    if first is None:
        first = next((n for n in ordered if n.is_head), ordered[0] if ordered else None)
    if first is None:
        return []
    rest = [n for n in ordered if n.node_id != first.node_id]
    return [replace(n, node_rank=i) for i, n in enumerate([first, *rest])]
