"""Collective probe on real GPUs with NCCL: world 1 on one GPU; two ranks forced onto one GPU."""
from __future__ import annotations

import pytest
from ports import free_port

from dsv3_preflight.checks.dist_allreduce import judge_collective
from dsv3_preflight.collective import combine, probe_node
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Status

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _gpus() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


needs_gpu = pytest.mark.skipif(_gpus() == 0, reason="needs an NVIDIA GPU visible to torch (torch.cuda.is_available() is False here)")


@needs_gpu
def test_nccl_world_1_on_one_gpu_reports_sum_and_pci_bus_id():
    outcome = probe_node(master_addr="127.0.0.1", master_port=free_port(), world_size=1, node_rank=0,
                         backend="nccl", timeout_s=120)
    r = outcome["ranks"][0]
    assert r["last_phase"] == "done", r["log_tail"]
    assert r["sum_ok"] and r["got_sum"] == 1.0
    assert r["pci_bus_id"] and ":" in r["pci_bus_id"]
    assert outcome["env"].get("NCCL_DEBUG") == "INFO"
    print("NCCL interfaces:", r["nccl_interfaces"], "timings:", r["timings"])


@needs_gpu
def test_two_ranks_forced_onto_one_gpu_yield_the_duplicate_gpu_finding():
    outcome = probe_node(master_addr="127.0.0.1", master_port=free_port(), world_size=2, node_rank=0,
                         nproc_per_node=2, backend="nccl", timeout_s=120, device_indices=[0, 0])
    verdict = combine([outcome], 2)
    pcis = {row["pci_bus_id"] for row in verdict["rank_map"]}
    assert len(pcis) == 1 and None not in pcis
    fact = {"requested": True, "mode": "full", "backend": "nccl", "outcome": outcome, "combined": verdict}
    result = judge_collective(fact, resolve_profile(environ={}, profile_name="cpu"))
    assert result.status is Status.FAIL
    assert "Duplicate GPU detected" in result.summary
    print("NCCL said:", [f["line"] for f in verdict["findings"]], "ok:", verdict["ok"])
