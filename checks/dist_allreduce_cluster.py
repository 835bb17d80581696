"""dist.allreduce_cluster: one all_reduce over every node at once (`run --all-nodes --probe`), judged by
the same rules as dist.allreduce: the exact sum, who never joined and why, two ranks on one GPU, and
min_busbw_gbps."""
from __future__ import annotations

from dsv3_preflight import check
from dsv3_preflight.collective.judge import judge_gang


@check("dist.allreduce_cluster", scope="cluster", needs=["collective_gang", "profile", "node_ranks", "node_states"],
       tags=["dist", "network", "probe"], timeout=60)
def allreduce_cluster(collective_gang, profile, node_ranks, node_states):
    """The collective gang over all nodes (one rank per node): every rank joins and all_reduce returns the exact sum."""
    return judge_gang(collective_gang, profile, node_ranks, node_states)
