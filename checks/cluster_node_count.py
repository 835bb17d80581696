"""cluster.node_count: the nodes the job needs are there, alive."""
from __future__ import annotations

from dsv3_preflight import check
from dsv3_preflight.host.node_count_rules import evidence_of, ok_summary, rule_nodes_extra, rule_nodes_missing
from dsv3_preflight.result import Findings


@check("cluster.node_count", scope="cluster", needs=["node_ranks", "node_states", "profile"], tags=["cluster"], timeout=5)
def node_count(node_ranks, node_states, profile):
    """The cluster has the number of nodes the profile expects, alive (a missing or lost node fails, naming those present)."""
    found = Findings()
    found.check(rule_nodes_missing, node_ranks, node_states, profile)
    found.check(rule_nodes_extra, node_ranks, node_states, profile)
    return found.result(ok_summary(node_ranks, node_states, profile), evidence_of(node_ranks, node_states, profile))
