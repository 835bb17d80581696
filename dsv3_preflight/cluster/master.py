"""MASTER_ADDR as the nodes resolve it: pure helpers the cluster checks share (cluster.master_node, net.mtu).

Each node's ``nic_route`` fact records what MASTER_ADDR resolved to there and the interfaces the node has.
The workers connect to what *they* resolve; the head's own resolution may be loopback (a Debian /etc/hosts
maps the host's name to 127.0.1.1) while it holds the address the workers use. No Ray, no I/O here.
"""
from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any


def is_loopback(value: str) -> bool:
    try:
        return ipaddress.ip_address(str(value).split("%")[0]).is_loopback
    except ValueError:
        return value == "localhost"


def resolutions(nic_route: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """{node: the addresses MASTER_ADDR resolved to there, in getaddrinfo order} (empty: did not resolve)."""
    return {n: list((f or {}).get("addresses") or []) for n, f in nic_route.items()}


def training_address(res: Mapping[str, list[str]], master_addr: str) -> str | None:
    """The address the nodes connect to: MASTER_ADDR itself when it is an address, else the first
    non-loopback address a node resolves it to (None when every node resolves it to loopback or not at all)."""
    if not is_loopback(master_addr):
        try:
            ipaddress.ip_address(master_addr.split("%")[0])
            return master_addr.split("%")[0]
        except ValueError:
            pass
    for addresses in res.values():
        for a in addresses:
            if not is_loopback(a):
                return a
    return None


def route_is_loopback(fact: Mapping[str, Any]) -> bool:
    """The node's own route to MASTER_ADDR goes through loopback (lo, or a loopback target)."""
    target = fact.get("target")
    return bool(fact.get("loopback")) or fact.get("ifname") == "lo" or (target is not None and is_loopback(target))


def interface_holding(fact: Mapping[str, Any], address: str) -> Mapping[str, Any] | None:
    """The node's interface (from its nic_route fact) that holds ``address``, if any."""
    for iface in fact.get("interfaces") or []:
        if address in (iface.get("ipv4") or []) or address in (iface.get("ipv6") or []):
            return iface
    return None


def job_interface(fact: Mapping[str, Any], want: str | None) -> dict[str, Any]:
    """The interface the job uses on this node toward the others, and how it was found.

    Normally the interface of the node's route to MASTER_ADDR. When that route is loopback (the head resolves
    its own name to 127.0.1.1) it is the interface holding the address the other nodes resolve MASTER_ADDR to;
    unknown (``interface`` None) when no interface holds it.
    """
    if not route_is_loopback(fact):
        return {"interface": fact.get("ifname"), "mtu": fact.get("mtu"), "how": "route to MASTER_ADDR"}
    iface = interface_holding(fact, want) if want else None
    if iface is None:
        return {"interface": None, "mtu": None,
                "how": f"its route to MASTER_ADDR is loopback ({fact.get('ifname')}) and no interface holds "
                       f"{want or 'an address the other nodes resolve MASTER_ADDR to'}"}
    return {"interface": iface.get("name"), "mtu": iface.get("mtu"),
            "how": f"holds {want}, which the other nodes resolve MASTER_ADDR to (its own route says {fact.get('ifname')})"}
