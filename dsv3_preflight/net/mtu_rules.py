"""The rules of net.mtu (pure: facts in, findings out): the interfaces the job uses between the nodes have the same MTU on every node.

Judged on the interface each node uses toward the others: the route to MASTER_ADDR as the node resolves
it, and on a head whose own resolution is loopback the interface holding the address the workers resolve
(never the head's ``lo`` against the workers' NICs)."""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from dsv3_preflight.net.facts import NicRouteFact
from dsv3_preflight.net.master import job_interface, resolutions, training_address
from dsv3_preflight.result import Actor, Finding, failure, warning


def used_interfaces(nic_route: Mapping[str, NicRouteFact], master_addr: str,
                    nnodes: int = 2) -> dict[str, dict[str, Any]]:
    """{node: {"interface", "mtu", "how"}} for the interface each node uses toward the others (a single-node
    job uses its route to MASTER_ADDR as it is, loopback included)."""
    if nnodes <= 1:
        return {node: {"interface": (f or {}).get("ifname"), "mtu": (f or {}).get("mtu"), "how": "route to MASTER_ADDR"}
                for node, f in nic_route.items()}
    want = training_address(resolutions(nic_route), master_addr)
    return {node: job_interface(fact or {}, want) for node, fact in nic_route.items()}


def reference_mtu(known: Mapping[str, Mapping[str, Any]]) -> tuple[int, list[str]]:
    """The MTU most nodes use (ties: node 0's side), and the nodes using it."""
    counts = Counter(v["mtu"] for v in known.values())
    top = max(counts.values())
    want = next(v["mtu"] for v in known.values() if counts[v["mtu"]] == top)  # rank order: node 0 first
    return want, [n for n, v in known.items() if v["mtu"] == want]


def rule_mtu_differs(known: Mapping[str, Mapping[str, Any]]) -> Finding | None:
    if len({v["mtu"] for v in known.values()}) <= 1:
        return None
    want, same = reference_mtu(known)
    listing = ", ".join(f"{n} {v['interface']}={v['mtu']}" for n, v in known.items())
    fix = "\n".join(f"ip link set dev {v['interface']} mtu {want}   # on {n}: as on {', '.join(same)} "
                    "(the switch ports must carry it too)" for n, v in known.items() if v["mtu"] != want)
    return failure(f"MTU differs between the nodes' interfaces toward each other: {listing}", fix,
                   actor=Actor.NETWORK, cause="net.mtu_mismatch")


def rule_unknown(per_node: Mapping[str, Mapping[str, Any]], nnodes: int) -> Finding | None:
    unknown = {n: v for n, v in per_node.items() if v["mtu"] is None}
    if not unknown or nnodes <= 1:
        return None
    return warning("MTU not judged on " + "; ".join(f"{n} ({v['how']})" for n, v in unknown.items()),
                   "dsv3-preflight run --all-nodes --only 'net.*'   # net.nic_route says why, on those nodes",
                   actor=Actor.NODE, cause="net.master_loopback" if any("loopback" in v["how"] for v in unknown.values()) else None)


def rule_nodes_missing(known: Mapping[str, Any], nnodes: int, node_states: Mapping[str, Mapping[str, Any]]) -> Finding | None:
    missing = nnodes - len(known)
    if missing <= 0 or nnodes <= 1:
        return None
    lost = [n for n, s in node_states.items() if s.get("state") == "dead" and n not in known]
    if lost:  # shown under the lost node's own ERROR (same cause), not as a second alarm
        return warning(f"MTU known on {len(known)} node(s); not on {', '.join(lost)}, lost during the run",
                       "dsv3-preflight run --all-nodes   # once the lost node is back", actor=Actor.NODE,
                       cause="cluster.node_lost")
    return warning(f"MTU known on {len(known)} node(s); {missing} of {nnodes} did not report it",
                   "dsv3-preflight run --all-nodes   # gather every node", actor=Actor.NODE)
