"""The fact `collective_pairs`: this node's side of one pair of `run --all-nodes --probe=pairs`.

Cluster mode's driver runs the pairs in rounds; in each round it starts this probe on the nodes of that
round's pairs and hands each its part in the engine fact ``wave`` (``wave.pair``, a
:class:`dsv3_preflight.wave.PairPart`). The probe runs a 2-rank process group with its partner (rank 0, the pair's first node,
hosts the store on the pair's own port) under a hard timeout: the p50 of ``iters`` small all_reduces (the
latency) and ``iters`` all_reduces of ``busbw_bytes`` (nccl-tests' bus bandwidth; for 2 ranks busbw =
algbw), the bandwidth phase bounded by time (:func:`sweep_reserve`): on a slow link it stops with the iterations
done, and their bandwidth is reported. Without its part it says the pairs were not requested.

The fact holds outcomes only: ``{"requested", "pairs": [measurement], "planned", "nodes", "sample"}``. The
driver appends the measurements of every round into the one fact of each node; `dist.pairs` judges them.
"""
from __future__ import annotations

from typing import Any

from dsv3_preflight.registry import probe
from dsv3_preflight.wave import Wave

from .local import PROBE_TIMEOUT_S, choose_backend

NOT_REQUESTED = "not requested (`dsv3-preflight run --all-nodes --probe=pairs` tests every pair of nodes)"
#: untimed all_reduces before the timed bandwidth iterations
WARMUP = 2


def sweep_reserve(timeout_s: float) -> float:
    """Seconds the bandwidth phase leaves before the pair's deadline (the barrier and teardown over a slow link):
    the phase is bounded by time and reports the bandwidth of the iterations it did."""
    return max(2.0, 0.15 * timeout_s)


@probe("collective_pairs", needs=["profile", "wave"], timeout=PROBE_TIMEOUT_S, after=["port_bind", "port_holders"])
def collective_pairs(profile, wave: Wave) -> dict[str, Any]:
    """This node's side of one pair of the pairwise probe, when cluster mode asks for it."""
    part = wave.pair
    if part is None:
        return {"requested": False, "reason": NOT_REQUESTED, "pairs": []}
    from dsv3_preflight.collective import probe_node

    first, second = part.pair
    backend, note = choose_backend(part.backend)
    outcome = probe_node(master_addr=part.store_addr, master_port=part.port, world_size=2, node_rank=part.role,
                         nproc_per_node=1, backend=backend, timeout_s=part.timeout_s, sweep=True,
                         sweep_sizes=(part.busbw_bytes,), steady_iters=part.iters, sweep_iters=part.iters,
                         sweep_warmup=WARMUP, startup_s=part.startup_s, sweep_reserve_s=sweep_reserve(part.timeout_s))
    measurement = {"round": part.round, "pair": [first, second], "role": part.role, "me": part.me, "peer": part.peer,
                   "addrs": dict(part.addrs), "store": f"{part.store_addr}:{part.port}", "backend": backend,
                   "backend_note": note, "timeout_s": part.timeout_s, "startup_s": part.startup_s,
                   "iters": part.iters, "busbw_bytes": part.busbw_bytes, "outcome": outcome}
    return {"requested": True, "pairs": [measurement], "planned": part.planned, "nodes": part.nodes,
            "rounds": part.rounds, "sample": part.sample}
