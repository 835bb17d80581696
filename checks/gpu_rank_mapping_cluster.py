"""gpu.rank_mapping_cluster: every rank gets its own GPU, the same way on every node."""
from __future__ import annotations

from typing import Any

from dsv3_preflight import Result, check
from dsv3_preflight.gpu.common import NOT_EXPECTED
from dsv3_preflight.gpu.rankmap import (
    find_duplicates,
    mapping_table,
)
from dsv3_preflight.gpu.rankmap_rules import (
    judge_nodes,
    node_rank_fix,
    rule_no_shared_gpu,
    rule_node_ranks,
    rule_one_machine_per_node,
    rule_same_order,
    rule_world_size,
)
from dsv3_preflight.result import Findings


@check("gpu.rank_mapping_cluster", scope="cluster", needs=["nvml", "env", "host", "profile", "node_ranks"],
       tags=["gpu", "launch"], timeout=30)
def rank_mapping_cluster(nvml, env, host, profile, node_ranks):
    """Across nodes: unique node ranks and hosts, a world size that adds up, and no two ranks on one GPU of one host."""
    evidence: dict[str, Any] = {"node_ranks": dict(node_ranks)}
    if not profile.expects_gpus:
        return Result.skipped(NOT_EXPECTED, evidence)
    nproc = profile.nproc_per_node
    hosts = {n: host.get(n) or {} for n in node_ranks}
    found = Findings()
    found.check(rule_node_ranks, node_ranks, profile.nnodes)
    found.check(rule_one_machine_per_node, hosts, profile.nnodes)
    found.check(rule_world_size, node_ranks, nproc, profile.effective_world_size)
    rows, orders = judge_nodes(found, nvml, env, hosts, node_ranks, profile)
    found.check(rule_same_order, orders)
    dups = find_duplicates(rows)
    found.check(rule_no_shared_gpu, dups, "host", node_rank_fix(profile.nnodes))
    evidence.update(table=mapping_table(rows), duplicates=dups, orders=orders,
                    hosts={n: {k: h.get(k) for k in ("hostname", "machine_id", "boot_id")} for n, h in hosts.items()})
    return found.result(f"{len(rows)} ranks on {len(node_ranks)} nodes, each on its own GPU", evidence)
