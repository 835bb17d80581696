"""Shared by the GPU health tests (tests/gpu/test_gpu_health.py and the per-check files): each node health check
judged on one NVML fact, and the check that every fix of a result pastes."""
from __future__ import annotations

from gpu_lab import profile
from paste_lint import paste_problems

from dsv3_preflight.checks.gpu_clocks import clocks
from dsv3_preflight.checks.gpu_memory_errors import memory_errors
from dsv3_preflight.checks.gpu_modes import modes
from dsv3_preflight.checks.gpu_nvlink import nvlink
from dsv3_preflight.checks.gpu_pcie_link import pcie_link
from dsv3_preflight.checks.gpu_reset_pending import reset_pending

NODE_CHECKS = {"gpu.memory_errors": memory_errors, "gpu.pcie_link": pcie_link, "gpu.clocks": clocks,
               "gpu.modes": modes, "gpu.reset_pending": reset_pending}


def judge(name: str, nvml: dict):
    if name == "gpu.nvlink":
        return nvlink(nvml=nvml, fabric_manager={}, profile=profile())
    return NODE_CHECKS[name](nvml=nvml, profile=profile())


def fixes_paste(result) -> None:
    for text in [result.remediation] + [f.fix for f in result.findings]:
        assert paste_problems(text) == [], text
