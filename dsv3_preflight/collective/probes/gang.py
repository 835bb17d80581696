"""The fact `collective_gang`: this node's rank of one all_reduce over every node (`run --all-nodes --probe`).

Cluster mode's driver starts this probe on every node at once and hands each its part of the gang
through the environment (``DSV3_PREFLIGHT_GANG``, JSON: ``master_addr``, ``master_port``, ``world``,
``node_rank``, ``backend``, ``timeout_s``; optional ``startup_s``, the start-up allowance), the way
`net.port_reach` gets its listener token. Without it the fact says the gang was not requested. The fact
holds the outcome only; `dist.allreduce_cluster` judges all nodes' facts together.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsv3_preflight.registry import probe

from .local import PROBE_TIMEOUT_S, choose_backend, wave_params

GANG_ENV = "DSV3_PREFLIGHT_GANG"
NOT_REQUESTED = "not requested (`dsv3-preflight run --all-nodes --probe` runs the gang on every node at once)"
_KEYS = ("master_addr", "master_port", "world", "node_rank", "backend", "timeout_s")


def gang_params(environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The gang this node is asked to join (None: not requested); a malformed value raises ValueError."""
    return wave_params(GANG_ENV, _KEYS, environ)


@probe("collective_gang", needs=["profile"], timeout=PROBE_TIMEOUT_S, after=["port_bind", "port_holders"])
def collective_gang(profile) -> dict[str, Any]:
    """This node's rank of the gang all_reduce over every node, when cluster mode asks for it."""
    params = gang_params()
    if params is None:
        return {"requested": False, "reason": NOT_REQUESTED}
    from dsv3_preflight.collective import probe_node

    backend, note = choose_backend(params["backend"])
    outcome = probe_node(master_addr=str(params["master_addr"]), master_port=int(params["master_port"]),
                         world_size=int(params["world"]), node_rank=int(params["node_rank"]), nproc_per_node=1,
                         backend=backend, timeout_s=float(params["timeout_s"]),
                         sweep=profile.min_busbw_gbps is not None, startup_s=float(params.get("startup_s") or 0.0))
    return {"requested": True, "mode": "gang", "world": int(params["world"]), "node_rank": int(params["node_rank"]),
            "master_addr": params["master_addr"], "master_port": int(params["master_port"]), "backend": backend,
            "backend_note": note, "timeout_s": float(params["timeout_s"]), "outcome": outcome}
