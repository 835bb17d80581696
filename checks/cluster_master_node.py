"""cluster.master_node: node 0 holds MASTER_ADDR, as every node resolves it.

MASTER_ADDR is judged as every node resolves it (``nic_route`` records each node's resolution): the workers
connect to what *they* resolve, and the head's NCCL/Gloo pick the interface of the route to what *it*
resolves. A head whose own /etc/hosts maps its name to 127.0.1.1 (the Debian default) while the workers map
it to its training address holds MASTER_ADDR for the workers, and routes through loopback itself: the fix is
that hosts line, with the address the workers resolve."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.net.master_node import (
    MasterView,
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
    view = MasterView.of(host, nic_route, ranked, node_states, profile.master_addr)
    evidence = view.evidence(host, profile)
    if host.get(view.node0) is None:
        return Result.skipped(f"node 0 ({view.node0}) did not report its addresses", evidence)
    if view.single_node_loopback(profile):
        return Result.passed(f"single-node job: MASTER_ADDR {view.addr} is this node", evidence)
    found = Findings()
    found.check(rule_literal_loopback, view.addr, profile, view.node0, view.node0_ip)
    found.check(rule_resolves_to_loopback, view.addr, view.res, view.want)
    found.check(rule_unresolved, view.addr, view.res, view.want)
    found.check(rule_resolutions_differ, view.addr, view.res)
    found.check(rule_node0_holds, view.addr, view.node0, view.holders, view.seen, view.node0_ip, view.res)
    return found.result(view.ok_summary(), evidence)
