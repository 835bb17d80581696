"""net.mtu: the interfaces toward MASTER_ADDR have the same MTU on every node."""
from __future__ import annotations

from collections import Counter

from dsv3_preflight import Result, check


@check("net.mtu", scope="cluster", needs=["nic_route", "profile"], tags=["network"], timeout=10)
def mtu(nic_route, profile):
    """The chosen interface has the same MTU on all nodes (a mismatch stalls large collectives while small ones pass)."""
    per_node = {node: {"interface": f.get("ifname"), "mtu": f.get("mtu")} for node, f in nic_route.items()}
    known = {node: v for node, v in per_node.items() if v["mtu"] is not None}
    evidence = {"nodes": per_node, "expected_nodes": profile.nnodes}
    if not known:
        return Result.failed("no node reported the MTU of its interface toward MASTER_ADDR (see net.nic_route)", evidence,
                             "ip route get $MASTER_ADDR   # on each node")
    values = Counter(v["mtu"] for v in known.values())
    if len(values) > 1:
        reference_node = next(iter(known))  # rank order: the head first
        want = known[reference_node]["mtu"]
        listing = ", ".join(f"{n} {v['interface']}={v['mtu']}" for n, v in known.items())
        fixes = [f"on {n}: ip link set dev {v['interface']} mtu {want}" for n, v in known.items() if v["mtu"] != want]
        return Result.failed(f"MTU differs between nodes: {listing}", evidence,
                             "\n".join(fixes) + f"   # match {reference_node} (also the switch ports must allow it)")
    (value,) = values
    missing = profile.nnodes - len(known)
    if missing > 0 and profile.nnodes > 1:
        return Result.warned(f"MTU {value} on the {len(known)} node(s) that reported; {missing} of {profile.nnodes} did not",
                             evidence, "dsv3-preflight run --all-nodes   # gather every node")
    return Result.passed(f"MTU {value} on " + ", ".join(f"{n} ({v['interface']})" for n, v in known.items()), evidence)
