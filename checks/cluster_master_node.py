"""cluster.master_node: node 0 holds MASTER_ADDR, as every node resolves it.

MASTER_ADDR is judged as every node resolves it (``nic_route`` records each node's resolution): the workers
connect to what *they* resolve, and the head's NCCL/Gloo pick the interface of the route to what *it*
resolves. A head whose own /etc/hosts maps its name to 127.0.1.1 (the Debian default) while the workers map
it to its training address holds MASTER_ADDR for the workers, and routes through loopback itself: the fix is
that hosts line, with the address the workers resolve."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.cluster.master import is_loopback, resolutions, training_address
from dsv3_preflight.net.master_node import (
    own_addresses,
    rule_literal_loopback,
    rule_node0_holds,
    rule_resolutions_differ,
    rule_resolves_to_loopback,
    rule_unresolved,
)
from dsv3_preflight.result import Findings


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
