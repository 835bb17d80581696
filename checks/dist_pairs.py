"""dist.pairs: every pair of nodes (`run --all-nodes --probe=pairs`): names the slow or unreachable node or
link, with the coverage ("P of P pairs tested")."""
from __future__ import annotations

from dsv3_preflight import check
from dsv3_preflight.collective.pairs_judge import judge_pairs


@check("dist.pairs", scope="cluster", needs=["collective_pairs", "profile", "node_ranks"],
       tags=["dist", "network", "probe"], timeout=60)
def pairs(collective_pairs, profile, node_ranks):
    """Every pair of nodes as a 2-rank process group: p50 latency and busbw per pair, the outlier node or link named."""
    return judge_pairs(collective_pairs, profile, node_ranks)
