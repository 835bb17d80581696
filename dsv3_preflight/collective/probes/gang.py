"""The fact `collective_gang`: this node's rank of one all_reduce over every node (`run --all-nodes --probe`).

Cluster mode's driver starts this probe on every node at once and hands each its part of the gang in the
engine fact ``wave`` (``wave.gang``, a :class:`dsv3_preflight.wave.GangPart`: master address and port, world,
this node's rank, backend, timeout and start-up allowance), as `net.port_reach` gets its listener token.
Without it the fact says the gang was not requested. The fact holds the outcome only;
`dist.allreduce_cluster` judges all nodes' facts together.
"""
from __future__ import annotations

from typing import Any

from dsv3_preflight.registry import probe
from dsv3_preflight.wave import Wave

from .local import PROBE_TIMEOUT_S, choose_backend

NOT_REQUESTED = "not requested (`dsv3-preflight run --all-nodes --probe` runs the gang on every node at once)"


@probe("collective_gang", needs=["profile", "wave"], timeout=PROBE_TIMEOUT_S, after=["port_bind", "port_holders"])
def collective_gang(profile, wave: Wave) -> dict[str, Any]:
    """This node's rank of the gang all_reduce over every node, when cluster mode asks for it."""
    gang = wave.gang
    if gang is None:
        return {"requested": False, "reason": NOT_REQUESTED}
    from dsv3_preflight.collective import probe_node

    backend, note = choose_backend(gang.backend)
    outcome = probe_node(master_addr=gang.master_addr, master_port=gang.master_port, world_size=gang.world,
                         node_rank=gang.node_rank, nproc_per_node=1, backend=backend, timeout_s=gang.timeout_s,
                         sweep=profile.min_busbw_gbps is not None, startup_s=gang.startup_s)
    return {"requested": True, "mode": "gang", "world": gang.world, "node_rank": gang.node_rank,
            "master_addr": gang.master_addr, "master_port": gang.master_port, "backend": backend,
            "backend_note": note, "timeout_s": gang.timeout_s, "outcome": outcome}
