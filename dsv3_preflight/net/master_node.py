"""The rules of cluster.master_node: node 0 holds MASTER_ADDR, and no node resolves it to loopback or elsewhere.

MASTER_ADDR is judged as every node resolves it (``nic_route`` records each node's resolution): the workers
connect to what *they* resolve, and the head's NCCL/Gloo pick the interface of the route to what *it*
resolves. A head whose own /etc/hosts maps its name to 127.0.1.1 (the Debian default) while the workers map
it to its training address holds MASTER_ADDR for the workers, and routes through loopback itself: the fix is
that hosts line, with the address the workers resolve."""
from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsv3_preflight.host.facts import HostFact
from dsv3_preflight.net.facts import NicRouteFact
from dsv3_preflight.net.master import is_loopback, resolutions, training_address
from dsv3_preflight.result import Actor, Finding, failure

LOOPBACK_CAUSE = "net.master_loopback"


def own_addresses(host_fact: HostFact | None) -> set[str]:
    """A node's addresses (the host fact's interfaces), without scope ids."""
    return {a.split("%")[0] for lst in ((host_fact or {}).get("addresses") or {}).values() for a in lst}


def _ere(text: str) -> str:
    return re.sub(r"([.\[\]()*+?{}|^$\\/])", r"\\\1", text)


def hosts_fix(node: str, name: str, loop: str, want: str) -> str:
    """Lines that make ``name`` resolve to ``want`` on ``node`` instead of the loopback ``loop``, in place.

    The name leaves the loopback line (localhost stays), a line ``want name`` is added, and /etc/hosts is
    rewritten in place (a container's /etc/hosts is a bind mount where `sed -i` cannot rename over it).
    """
    expr = f"/^{_ere(loop)}[[:space:]]/ s/[[:space:]]{_ere(name)}([[:space:]]|$)/\\1/"
    line = f"{want} {name}"
    return (f"hosts=$(sed -E {shlex.quote(expr)} /etc/hosts) && printf '%s\\n' \"$hosts\" {shlex.quote(line)} > /etc/hosts"
            f"   # on {node}: {name} resolves to {loop} (loopback) there, to {want} on the other nodes\n"
            f"getent hosts {shlex.quote(name)}   # on {node}: must print {want} now")


def rule_literal_loopback(addr: str, profile: Any, node0: str, node0_ip: str | None) -> Finding | None:
    if not is_loopback(addr) or profile.nnodes <= 1:
        return None
    want = node0_ip or "${HEAD_ADDR:?node 0 address on the training network}"
    return failure(f"MASTER_ADDR {addr} is a loopback address but the job has {profile.nnodes} nodes: workers cannot reach it",
                   f"export MASTER_ADDR={want}   # on every node ({node0}'s address), before ray start and the launch",
                   actor=Actor.JOB, cause=LOOPBACK_CAUSE)


def rule_resolves_to_loopback(addr: str, res: Mapping[str, list[str]], want: str | None) -> list[Finding]:
    """Nodes resolving the name MASTER_ADDR to loopback while others resolve it to a training address."""
    if is_loopback(addr) or want is None:
        return []
    found = []
    for node, addresses in res.items():
        loops = [a for a in addresses if is_loopback(a)]
        if not loops or addresses[0] not in loops:
            continue
        others = sorted(n for n, lst in res.items() if n != node and lst and not is_loopback(lst[0]))
        found.append(failure(
            f"{node} resolves MASTER_ADDR {addr} to {loops[0]} (loopback); {', '.join(others) or 'the other nodes'} "
            f"resolve{'s' if len(others) == 1 else ''} it to {want}: on {node} NCCL/Gloo would take the loopback route",
            hosts_fix(node, addr, loops[0], want), actor=Actor.NODE, cause=LOOPBACK_CAUSE))
    return found


def rule_unresolved(addr: str, res: Mapping[str, list[str]], want: str | None) -> Finding | None:
    bad = [n for n, lst in res.items() if not lst]
    if not bad or not res or len(bad) == len(res):
        return None
    fix = "\n".join(f"echo {shlex.quote(f'{want} {addr}')} >> /etc/hosts   # on {n}: as the other nodes resolve it"
                    for n in bad) if want else f"getent hosts {shlex.quote(addr)}   # on {', '.join(bad)}"
    return failure(f"MASTER_ADDR {addr} does not resolve on {', '.join(bad)}", fix, actor=Actor.NODE, cause="net.master_unresolved")


def rule_resolutions_differ(addr: str, res: Mapping[str, list[str]]) -> Finding | None:
    first = {n: lst[0] for n, lst in res.items() if lst and not is_loopback(lst[0])}
    if len(set(first.values())) <= 1:
        return None
    shown = ", ".join(f"{n} -> {a}" for n, a in first.items())
    return failure(f"the nodes resolve MASTER_ADDR {addr} to different addresses ({shown}): workers would look for the "
                   "rendezvous on different hosts",
                   "\n".join(f"getent hosts {shlex.quote(addr)}   # on {n}: prints {a}" for n, a in first.items())
                   + "\n# make /etc/hosts or DNS agree on every node, or export MASTER_ADDR as the address itself",
                   actor=Actor.NODE, cause="net.master_unresolved")


def rule_node0_holds(addr: str, node0: str, holders: list[str], seen: set[str], node0_ip: str | None,
                     res: Mapping[str, list[str]]) -> Finding | None:
    if node0 in holders or is_loopback(addr):
        return None
    target = node0_ip or "${HEAD_ADDR:?node 0 address on the training network}"
    loops = sorted({a for lst in res.values() for a in lst if is_loopback(a)})
    if not seen and loops:
        return failure(f"MASTER_ADDR {addr} resolves only to loopback ({', '.join(loops)}) on every node that resolves it: "
                       f"the workers cannot reach node 0 {node0} there",
                       f"export MASTER_ADDR={target}   # on every node: node 0 {node0}, before ray start and the launch",
                       actor=Actor.JOB, cause=LOOPBACK_CAUSE)
    where = f" ({', '.join(sorted(seen))} as the nodes resolve it)" if seen and seen != {addr} else ""
    if holders:
        return failure(f"MASTER_ADDR {addr}{where} belongs to {holders[0]}, but node 0 is {node0}",
                       f"export MASTER_ADDR={target}   # on every node: node 0 {node0}, before ray start and the launch",
                       actor=Actor.JOB, cause="cluster.master_node")
    return failure(f"no node holds MASTER_ADDR {addr}{where}: node 0 is {node0}",
                   f"export MASTER_ADDR={target}   # on every node: node 0 {node0}, before ray start and the launch",
                   actor=Actor.JOB, cause="cluster.master_node")


@dataclass(frozen=True)
class MasterView:
    """MASTER_ADDR as the nodes see it: node 0, what each node resolves MASTER_ADDR to, the address the workers
    connect to (``want``), every non-loopback address seen, and the nodes that hold one of them."""

    addr: str
    node0: str
    res: dict[str, list[str]]
    want: str | None
    seen: set[str]
    holders: list[str]
    node0_ip: str | None

    @classmethod
    def of(cls, host: Mapping[str, HostFact], nic_route: Mapping[str, NicRouteFact], ranked: list[str],
           node_states: Mapping[str, Mapping[str, Any]], addr: str) -> MasterView:
        node0 = ranked[0]
        res = resolutions(nic_route)
        want = training_address(res, addr)
        seen = {a for lst in res.values() for a in lst if not is_loopback(a)} | ({want} if want else set())
        holders = [n for n in ranked if own_addresses(host.get(n)) & seen
                   or addr in ((host.get(n) or {}).get("hostname"), (host.get(n) or {}).get("node_name"))]
        node0_ip = (node_states.get(node0) or {}).get("ip") or next(
            (a for a in sorted(own_addresses(host.get(node0))) if not is_loopback(a) and ":" not in a), None)
        return cls(addr, node0, res, want, seen, holders, node0_ip)

    def evidence(self, host: Mapping[str, HostFact], profile: Any) -> dict[str, Any]:
        return {"master_addr": self.addr, "source": profile.sources.get("master_addr"), "node0": self.node0,
                "resolved": self.res, "training_address": self.want, "holders": self.holders,
                "node0_addresses": sorted(own_addresses(host.get(self.node0)))}

    def single_node_loopback(self, profile: Any) -> bool:
        """A single-node job whose MASTER_ADDR is (or resolves only to) loopback: this node, as it should be."""
        res = self.res
        return profile.nnodes <= 1 and (is_loopback(self.addr) or bool(
            res and all(lst and all(map(is_loopback, lst)) for lst in res.values())))

    def ok_summary(self) -> str:
        shown = f" ({self.want} on every node)" if self.want and self.want != self.addr else ""
        return f"node 0 ({self.node0}) holds MASTER_ADDR {self.addr}{shown}"
