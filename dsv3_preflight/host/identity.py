"""Rules over the nodes' identities (the ``host`` fact of every node): host names that tell the nodes apart.

Reports name a node by its host name, and DeepSpeed's launcher, torchrun's summaries and Ray's own
tables group ranks by it: two nodes answering one host name (a cloned VM image, containers started
with one ``--hostname``) read as one node there. Several Ray nodes on one machine share its name
legitimately; they are told apart from clones by the address Ray reports for them (one address, one
network stack, one machine).
"""
from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from dsv3_preflight.result import Actor, Finding, failure

CAUSE = "host.duplicate_hostname"


def _routable(addresses: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The node's addresses without loopback and link-local ones (its network stack, as the host fact lists it)."""
    found = set()
    for lst in (addresses or {}).values():
        for a in lst or ():
            a = str(a).split("%")[0]
            try:
                ip = ipaddress.ip_address(a)
            except ValueError:
                continue
            if not (ip.is_loopback or ip.is_link_local):
                found.add(a)
    return tuple(sorted(found))


def node_address(host_fact: Mapping[str, Any] | None, state: Mapping[str, Any] | None) -> str | None:
    """The address a node is known by: Ray's address for it, else its first routable address."""
    ip = (state or {}).get("ip")
    if ip:
        return str(ip)
    own = _routable((host_fact or {}).get("addresses"))
    return own[0] if own else None


def _where(host_fact: Mapping[str, Any] | None, state: Mapping[str, Any] | None) -> tuple[str, ...]:
    """What tells machines apart: Ray's address for the node, else its set of routable addresses."""
    ip = (state or {}).get("ip")
    return (str(ip),) if ip else _routable((host_fact or {}).get("addresses"))


def rule_shared_hostname(host: Mapping[str, Mapping[str, Any]],
                         node_states: Mapping[str, Mapping[str, Any]] | None = None) -> list[Finding]:
    """One FAIL per host name that nodes on different machines (different addresses) answer with."""
    node_states = node_states or {}
    groups: dict[str, dict[tuple[str, ...], list[str]]] = {}
    for node, fact in host.items():
        name = (fact or {}).get("hostname")
        if not name:
            continue
        groups.setdefault(name, {}).setdefault(_where(fact, node_states.get(node)), []).append(node)
    found = []
    for name, machines in groups.items():
        if len(machines) < 2:
            continue  # one machine (several Ray nodes on one address share its name)
        nodes = [nodes[0] for nodes in machines.values()]
        shown = [f"{n} ({node_address(host[n], node_states.get(n)) or 'address unknown'})" for n in nodes]
        keep, rest = nodes[0], nodes[1:]
        fix = (f"# {keep} ({node_address(host[keep], node_states.get(keep)) or 'address unknown'}) keeps {name}; on each other node:\n"
               + "\n".join(f'hostnamectl set-hostname "${{NEW_NAME:?a host name of its own for this node}}"'
                           f"   # on {n} ({node_address(host[n], node_states.get(n)) or 'address unknown'})" for n in rest))
        fix += ("\n# a container: start it with its own --hostname; a cloned VM: also regenerate /etc/machine-id "
                "(rm /etc/machine-id && systemd-machine-id-setup)\n"
                "# then map each new name to its training address in /etc/hosts or DNS on every node, and restart ray start there")
        found.append(failure(
            f"{len(nodes)} nodes answer the host name {name!r}: {', '.join(shown)}; reports, DeepSpeed's hostfile and "
            "tools that group ranks by host name take them for one node",
            fix, actor=Actor.NODE, cause=CAUSE))
    return found
