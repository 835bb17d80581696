"""The fact `collective`: the collective probe run on this node (full mode, when this node is the whole job),
and the same fact for `dsv3-preflight probe` (this node's ranks of a multi-node world, run by hand on every
node). The fact holds what happened (the outcome), never a verdict: `dist.allreduce` judges it."""
from __future__ import annotations

import glob
import socket
from collections.abc import Sequence
from typing import Any

from dsv3_preflight.registry import probe

#: the probe's own (engine) timeout; the real work is bounded by profile.collective_timeout inside, clamped below this
PROBE_TIMEOUT_S = 3600.0
#: seconds left between the collective bound and the probe's timeout, for start-up and reading the logs
_MARGIN_S = 30.0


def gpus_visible() -> int:
    """NVIDIA GPUs the driver exposes on this host (no CUDA/torch import)."""
    return len(glob.glob("/proc/driver/nvidia/gpus/*"))


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gang_commands(profile) -> list[str]:
    """What to run instead when one node cannot run the gang alone."""
    common = (f"--nnodes {profile.nnodes} --master-addr {profile.master_addr} --master-port {profile.master_port} "
              f"--backend {profile.backend}")
    return [f"dsv3-preflight probe --node-rank {n} {common}   # on node {n}" for n in range(profile.nnodes)] + [
        "dsv3-preflight run --all-nodes --probe   # or: from the Ray head, all nodes as one gang"]


def choose_backend(backend: Any) -> tuple[str, str | None]:
    """nccl when asked for and GPUs are present, else gloo (with the reason for a fallback).

    ``backend``: "nccl"/"gloo", or a profile (its ``backend``)."""
    wanted = getattr(backend, "backend", backend)
    if wanted == "nccl" and gpus_visible() == 0:
        return "gloo", "nccl was asked for but this host shows no NVIDIA GPU (/proc/driver/nvidia/gpus): ran gloo"
    return wanted, None


# after the probes that inspect MASTER_PORT: rank 0's store listens on it, and they would report this run's own
# ranks (or port_bind's test socket) as the process holding the port
@probe("collective", needs=["profile"], timeout=PROBE_TIMEOUT_S, after=["port_bind", "port_holders"], claims=["master_port"])
def collective(profile) -> dict[str, Any]:
    """torch.distributed init + all_reduce with a known sum across this node's ranks (child processes, hard timeout)."""
    from dsv3_preflight.collective import probe_node

    fact: dict[str, Any] = {"requested": False, "mode": None, "reason": None, "commands": [], "outcome": None}
    if profile.nnodes > 1:
        fact["reason"] = (f"the profile has {profile.nnodes} nodes: the probe needs all of them at once, "
                          "which a single-node run cannot start")
        fact["commands"] = gang_commands(profile)
        return fact
    backend, fallback = choose_backend(profile)
    port, port_note = profile.master_port, None
    if not _port_free(port):
        port = _free_port()
        port_note = (f"MASTER_PORT {profile.master_port} is in use on this host (net.port_free says by whom); "
                     f"the local probe used port {port}")
    timeout_s = min(float(profile.collective_timeout), PROBE_TIMEOUT_S - _MARGIN_S)
    world = profile.nproc_per_node
    outcome = probe_node(master_addr="127.0.0.1", master_port=port, world_size=world, node_rank=0,
                         nproc_per_node=world, backend=backend, timeout_s=timeout_s,
                         sweep=profile.min_busbw_gbps is not None)
    fact.update(requested=True, mode="full", world=world, partial=False, backend=backend, backend_note=fallback,
                port=port, port_note=port_note, timeout_s=timeout_s, outcome=outcome)
    return fact


def probe_by_hand(profile, *, mode: str = "one-per-node", timeout_s: float | None = None, sweep: bool = False,
                  sweep_sizes: Sequence[int] | None = None, log_dir: str | None = None) -> dict[str, Any]:
    """The `collective` fact of `dsv3-preflight probe`: this node's ranks of a world spread over
    ``profile.nnodes`` nodes (``mode`` one-per-node: one rank per node; full: ``nproc_per_node`` ranks per
    node), rendezvous at MASTER_ADDR:MASTER_PORT. The other nodes run the same command at about the same time."""
    from dsv3_preflight.collective import probe_node

    per_node = 1 if mode == "one-per-node" else profile.nproc_per_node
    world = profile.nnodes * per_node
    timeout_s = float(profile.collective_timeout if timeout_s is None else timeout_s)
    backend, fallback = choose_backend(profile)
    outcome = probe_node(master_addr=profile.master_addr, master_port=profile.master_port, world_size=world,
                         node_rank=profile.node_rank, nproc_per_node=per_node, backend=backend, timeout_s=timeout_s,
                         sweep=sweep or profile.min_busbw_gbps is not None,
                         sweep_sizes=tuple(sweep_sizes) if sweep_sizes else None, log_dir=log_dir)
    return {"requested": True, "mode": mode, "world": world, "partial": profile.nnodes > 1, "backend": backend,
            "backend_note": fallback, "port": profile.master_port, "port_note": None, "timeout_s": timeout_s,
            "reason": None, "commands": [], "outcome": outcome}
