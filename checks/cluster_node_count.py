"""cluster.node_count and cluster.master_node: the nodes the job needs are there, and node 0 holds MASTER_ADDR.

MASTER_ADDR is judged as every node resolves it (``nic_route`` records each node's resolution): the workers
connect to what *they* resolve, and the head's NCCL/Gloo pick the interface of the route to what *it*
resolves. A head whose own /etc/hosts maps its name to 127.0.1.1 (the Debian default) while the workers map
it to its training address holds MASTER_ADDR for the workers, and routes through loopback itself: the fix is
that hosts line, with the address the workers resolve.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from dsv3_preflight import Result, check
from dsv3_preflight.cluster.master import is_loopback, resolutions, training_address
from dsv3_preflight.result import Actor, Finding, Findings, failure

LOOPBACK_CAUSE = "net.master_loopback"


def _gcs(node_states: Mapping[str, Mapping[str, Any]]) -> str | None:
    return next((s.get("gcs_address") for s in node_states.values() if s.get("gcs_address")), None)


def join_command(node_states: Mapping[str, Mapping[str, Any]]) -> str:
    gcs = _gcs(node_states)
    return f"ray start --address={gcs}" if gcs else 'ray start --address="${RAY_HEAD:?the head GCS address, host:port}"'


@check("cluster.node_count", scope="cluster", needs=["node_ranks", "node_states", "profile"], tags=["cluster"], timeout=5)
def node_count(node_ranks, node_states, profile):
    """The cluster has the number of nodes the profile expects, alive (a missing or lost node fails, naming those present)."""
    lost = [n for n in node_ranks if (node_states.get(n) or {}).get("state") == "dead"]
    present = [n for n in node_ranks if n not in lost]
    evidence = {"expected": profile.nnodes, "present": present, "lost": lost, "node_ranks": dict(node_ranks),
                "nnodes_source": profile.sources.get("nnodes"), "gcs_address": _gcs(node_states)}
    join = join_command(node_states)
    if len(present) < profile.nnodes:
        missing = profile.nnodes - len(present)
        lost_part = ""
        if lost:
            lost_part = " (lost during the run: " + ", ".join(
                f"{n} {node_states[n].get('phase') or ''}".strip() for n in lost) + ")"
        fix = ("ray status   # on the head: which nodes joined\n"
               + "".join(f"{join}   # on {n} once it is repaired\n" for n in lost)
               + (f"{join}   # on each node that never joined (the job's environment exported first)\n"
                  if missing > len(lost) else "")
               + "dsv3-preflight run --all-nodes   # then again")
        return Result.failed(
            f"{missing} node(s) missing: the profile expects {profile.nnodes} nodes ({profile.sources.get('nnodes')}), "
            f"{len(present)} present: {', '.join(present) or 'none'}{lost_part}",
            evidence, fix, actor=Actor.NODE, cause="cluster.node_lost" if lost else "cluster.node_missing")
    if len(present) > profile.nnodes:
        extra = [n for n, r in node_ranks.items() if r >= profile.nnodes]
        return Result.warned(
            f"{len(present)} nodes present but the profile expects {profile.nnodes}: the launch uses node ranks "
            f"0..{profile.nnodes - 1}, leaving {', '.join(extra)} idle",
            evidence, f"export NNODES={len(present)}   # if all of them should train", actor=Actor.JOB)
    return Result.passed(f"{len(present)} of {profile.nnodes} expected nodes present: {', '.join(present)}", evidence)


# -- cluster.master_node ---------------------------------------------------------------------------------------


def own_addresses(host_fact: Mapping[str, Any] | None) -> set[str]:
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


@check("cluster.master_node", scope="cluster", needs=["host", "nic_route", "node_ranks", "node_states", "profile"],
       tags=["cluster", "launch"], timeout=5)
def master_node(host, nic_route, node_ranks, node_states, profile):
    """Node 0 holds MASTER_ADDR as the nodes resolve it, and no node resolves it to loopback or elsewhere."""
    ranked = sorted(node_ranks, key=lambda n: node_ranks[n])
    if not ranked:
        return Result.skipped("no node reported")
    node0 = ranked[0]
    addr = profile.master_addr
    res = resolutions(nic_route)
    want = training_address(res, addr)
    seen = {a for lst in res.values() for a in lst if not is_loopback(a)} | ({want} if want else set())
    holders = [n for n in ranked if own_addresses(host.get(n)) & seen
               or addr in ((host.get(n) or {}).get("hostname"), (host.get(n) or {}).get("node_name"))]
    node0_ip = (node_states.get(node0) or {}).get("ip") or next(
        (a for a in sorted(own_addresses(host.get(node0))) if not is_loopback(a) and ":" not in a), None)
    evidence = {"master_addr": addr, "source": profile.sources.get("master_addr"), "node0": node0,
                "resolved": res, "training_address": want, "holders": holders,
                "node0_addresses": sorted(own_addresses(host.get(node0)))}
    if host.get(node0) is None:
        return Result.skipped(f"node 0 ({node0}) did not report its addresses", evidence)
    if profile.nnodes <= 1 and (is_loopback(addr) or (res and all(lst and all(map(is_loopback, lst)) for lst in res.values()))):
        return Result.passed(f"single-node job: MASTER_ADDR {addr} is this node", evidence)
    found = Findings()
    found.check(rule_literal_loopback, addr, profile, node0, node0_ip)
    found.check(rule_resolves_to_loopback, addr, res, want)
    found.check(rule_unresolved, addr, res, want)
    found.check(rule_resolutions_differ, addr, res)
    found.check(rule_node0_holds, addr, node0, holders, seen, node0_ip, res)
    shown = f" ({want} on every node)" if want and want != addr else ""
    return found.result(f"node 0 ({node0}) holds MASTER_ADDR {addr}{shown}", evidence)
