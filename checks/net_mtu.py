"""net.mtu: the interfaces the job uses between the nodes have the same MTU on every node.

Judged on the interface each node uses toward the others: the route to MASTER_ADDR as the node resolves
it, and on a head whose own resolution is loopback the interface holding the address the workers resolve
(never the head's ``lo`` against the workers' NICs)."""
from __future__ import annotations

from collections import Counter

from dsv3_preflight import Result, check
from dsv3_preflight.net.mtu_rules import rule_mtu_differs, rule_nodes_missing, rule_unknown, used_interfaces
from dsv3_preflight.result import Actor, Findings


@check("net.mtu", scope="cluster", needs=["nic_route", "node_states", "profile"], tags=["network"], timeout=10)
def mtu(nic_route, node_states, profile):
    """The interfaces toward the other nodes have the same MTU on all nodes (a mismatch stalls large collectives while small ones pass)."""
    per_node = used_interfaces(nic_route, profile.master_addr, profile.nnodes)
    known = {node: v for node, v in per_node.items() if v["mtu"] is not None}
    evidence = {"nodes": per_node, "expected_nodes": profile.nnodes}
    if not known:
        return Result.failed("no node reported the MTU of its interface toward the other nodes (see net.nic_route)", evidence,
                             "ip route get \"$MASTER_ADDR\"   # on each node: which interface, and is it up",
                             actor=Actor.NODE)
    found = Findings()
    found.check(rule_mtu_differs, known)
    found.check(rule_unknown, per_node, profile.nnodes)
    if not found.failures:
        found.check(rule_nodes_missing, known, profile.nnodes, node_states)
    value = Counter(v["mtu"] for v in known.values()).most_common(1)[0][0]
    return found.result(f"MTU {value} on " + ", ".join(f"{n} ({v['interface']})" for n, v in known.items()), evidence)
