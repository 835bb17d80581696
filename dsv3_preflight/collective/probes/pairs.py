"""The fact `collective_pairs`: this node's side of one pair of `run --all-nodes --probe=pairs`.

Cluster mode's driver runs the pairs in rounds; in each round it starts this probe on the nodes of that
round's pairs and hands each its part through the environment (``DSV3_PREFLIGHT_PAIR``, JSON, see
:data:`PAIR_KEYS`). The probe runs a 2-rank process group with its partner (rank 0, the pair's first node,
hosts the store on the pair's own port) under a hard timeout: the p50 of ``iters`` small all_reduces (the
latency) and ``iters`` all_reduces of ``busbw_bytes`` (nccl-tests' bus bandwidth; for 2 ranks busbw =
algbw), the bandwidth phase bounded by time (:func:`sweep_reserve`): on a slow link it stops with the iterations
done, and their bandwidth is reported. Without the variable it says the pairs were not requested.

The fact holds outcomes only: ``{"requested", "pairs": [measurement], "planned", "nodes", "sample"}``. The
driver appends the measurements of every round into the one fact of each node; `dist.pairs` judges them.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsv3_preflight.registry import probe

from .local import PROBE_TIMEOUT_S, choose_backend, wave_params

PAIR_ENV = "DSV3_PREFLIGHT_PAIR"
NOT_REQUESTED = "not requested (`dsv3-preflight run --all-nodes --probe=pairs` tests every pair of nodes)"
#: what the driver puts in $DSV3_PREFLIGHT_PAIR
PAIR_KEYS = ("round", "rounds", "pair", "addrs", "role", "port", "backend", "timeout_s", "iters", "busbw_bytes",
             "planned", "nodes", "sample")
#: untimed all_reduces before the timed bandwidth iterations
WARMUP = 2


def sweep_reserve(timeout_s: float) -> float:
    """Seconds the bandwidth phase leaves before the pair's deadline (the barrier and teardown over a slow link):
    the phase is bounded by time and reports the bandwidth of the iterations it did."""
    return max(2.0, 0.15 * timeout_s)


def pair_params(environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """This node's part of a pair (None: not requested); a malformed value raises ValueError."""
    return wave_params(PAIR_ENV, PAIR_KEYS, environ)


@probe("collective_pairs", needs=["profile"], timeout=PROBE_TIMEOUT_S, after=["port_bind", "port_holders"])
def collective_pairs(profile) -> dict[str, Any]:
    """This node's side of one pair of the pairwise probe, when cluster mode asks for it."""
    params = pair_params()
    if params is None:
        return {"requested": False, "reason": NOT_REQUESTED, "pairs": []}
    from dsv3_preflight.collective import probe_node

    first, second = params["pair"]
    role = int(params["role"])
    me, peer = (first, second) if role == 0 else (second, first)
    store = params["addrs"][first]
    backend, note = choose_backend(params["backend"])
    startup_s = float(params.get("startup_s") or 0.0)
    outcome = probe_node(master_addr=store, master_port=int(params["port"]), world_size=2, node_rank=role,
                         nproc_per_node=1, backend=backend, timeout_s=float(params["timeout_s"]), sweep=True,
                         sweep_sizes=(int(params["busbw_bytes"]),), steady_iters=int(params["iters"]),
                         sweep_iters=int(params["iters"]), sweep_warmup=WARMUP,
                         startup_s=startup_s, sweep_reserve_s=sweep_reserve(float(params["timeout_s"])))
    measurement = {"round": params["round"], "pair": [first, second], "role": role, "me": me, "peer": peer,
                   "addrs": params["addrs"], "store": f"{store}:{params['port']}", "backend": backend,
                   "backend_note": note, "timeout_s": float(params["timeout_s"]),
                   "startup_s": startup_s, "iters": int(params["iters"]),
                   "busbw_bytes": int(params["busbw_bytes"]), "outcome": outcome}
    return {"requested": True, "pairs": [measurement], "planned": params["planned"], "nodes": params["nodes"],
            "rounds": params["rounds"], "sample": params["sample"]}
