"""cluster.node_count and cluster.master_node: the nodes the job needs are there, and node 0 holds MASTER_ADDR."""
from __future__ import annotations

import ipaddress

from dsv3_preflight import Result, check


@check("cluster.node_count", scope="cluster", needs=["node_ranks", "profile"], tags=["cluster"], timeout=5)
def node_count(node_ranks, profile):
    """The cluster has the number of nodes the profile expects (a missing node fails, naming those present)."""
    present = list(node_ranks)
    evidence = {"expected": profile.nnodes, "present": present, "node_ranks": dict(node_ranks),
                "nnodes_source": profile.sources.get("nnodes")}
    if len(present) < profile.nnodes:
        missing = profile.nnodes - len(present)
        return Result.failed(
            f"{missing} node(s) missing: the profile expects {profile.nnodes} nodes ({profile.sources.get('nnodes')}), "
            f"{len(present)} present: {', '.join(present) or 'none'}",
            evidence,
            "ray status   # on the head: which nodes joined\n"
            "ray start --address=<head IP>:6379   # on each missing node, then re-run dsv3-preflight run --all-nodes",
        )
    if len(present) > profile.nnodes:
        extra = [n for n, r in node_ranks.items() if r >= profile.nnodes]
        return Result.warned(
            f"{len(present)} nodes present but the profile expects {profile.nnodes}: the launch uses node ranks "
            f"0..{profile.nnodes - 1}, leaving {', '.join(extra)} idle",
            evidence, f"export NNODES={len(present)}   # if all of them should train",
        )
    return Result.passed(f"{len(present)} of {profile.nnodes} expected nodes present: {', '.join(present)}", evidence)


def _is_loopback(value: str) -> bool:
    try:
        return ipaddress.ip_address(value).is_loopback
    except ValueError:
        return value == "localhost"


@check("cluster.master_node", scope="cluster", needs=["host", "node_ranks", "profile"], tags=["cluster", "launch"], timeout=5)
def master_node(host, node_ranks, profile):
    """Node 0 holds MASTER_ADDR (one of its addresses or its host name), so torchrun's rendezvous is where workers look."""
    ranked = sorted(node_ranks, key=lambda n: node_ranks[n])
    if not ranked:
        return Result.skipped("no node reported")
    first = ranked[0]
    addr = profile.master_addr
    evidence = {"master_addr": addr, "source": profile.sources.get("master_addr"), "node0": first}
    facts = host.get(first)
    if facts is None:
        return Result.skipped(f"node 0 ({first}) did not report its addresses", evidence)
    addresses = sorted({a.split("%")[0] for lst in (facts.get("addresses") or {}).values() for a in lst})
    evidence["node0_addresses"] = addresses
    holders = [n for n, f in host.items()
               if addr in {a.split("%")[0] for lst in (f.get("addresses") or {}).values() for a in lst}
               or addr in (f.get("hostname"), f.get("node_name"))]
    evidence["holders"] = holders
    if _is_loopback(addr):
        if profile.nnodes > 1:
            return Result.failed(
                f"MASTER_ADDR {addr} is a loopback address but the job has {profile.nnodes} nodes: workers cannot reach it",
                evidence, f"export MASTER_ADDR=<{first}'s IP on the training network>   # on every node")
        return Result.passed(f"single-node job: MASTER_ADDR {addr} is this node", evidence)
    if first in holders:
        return Result.passed(f"node 0 ({first}) holds MASTER_ADDR {addr}", evidence)
    if holders:
        return Result.failed(f"MASTER_ADDR {addr} belongs to {holders[0]}, but node 0 is {first}", evidence,
                             f"run the launcher's node rank 0 on {holders[0]}")
    return Result.failed(
        f"no node holds MASTER_ADDR {addr} ({profile.sources.get('master_addr')}): node 0 is {first} with "
        f"{', '.join(a for a in addresses if not _is_loopback(a)) or 'no address'}",
        evidence, f"export MASTER_ADDR=<{first}'s IP on the training network>   # on every node, before ray start and the launch")
