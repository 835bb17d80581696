"""dist.allreduce: torch.distributed comes up and all_reduce returns the exact sum, within the timeout."""
from __future__ import annotations

from dsv3_preflight import check
from dsv3_preflight.collective.judge import judge_collective


@check("dist.allreduce", needs=["collective", "profile", "nic_route", "port_reach"], tags=["dist", "network"],
       timeout=3600)
def allreduce(collective, profile, nic_route, port_reach):
    """torch.distributed init + all_reduce of a known sum across this node's ranks (hang-proof, with the cause)."""
    return judge_collective(collective, profile, nic_route, port_reach)
