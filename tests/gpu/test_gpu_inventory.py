"""gpu.inventory (checks/gpu_inventory.py) on a recorded healthy node's NVML facts with one value changed."""
from __future__ import annotations

import copy

import pytest
from gpu_lab import gather, profile, stand_up
from gpu_stack_lab import libcuda  # noqa: F401 (pytest fixtures)

from dsv3_preflight.checks.gpu_inventory import inventory as inventory_check
from dsv3_preflight.result import Status


@pytest.fixture(scope="module")
def healthy_nvml(tmp_path_factory, libcuda):
    mp = pytest.MonkeyPatch()
    try:
        return gather(stand_up("a100_nvswitch_fm_running", tmp_path_factory.mktemp("m"), libcuda), mp)["nvml"]
    finally:
        mp.undo()


def _variant(nvml, **per_gpu):
    nvml = copy.deepcopy(nvml)
    for index, changes in per_gpu.items():
        nvml["gpus"][int(index[1:])].update(changes)
    return nvml


@pytest.mark.parametrize("changes, status, text", [
    ({"g0": {"persistence_mode": False}, "g1": {"persistence_mode": False}}, Status.WARN, "persistence mode is off on GPUs 0–1"),
    ({"g2": {"processes": [{"pid": 4242, "used_memory_bytes": 1536 << 20}]}}, Status.FAIL, "pid 4242 on GPU 2 (1536 MiB)"),
    ({"g5": {"name": "NVIDIA A10"}}, Status.FAIL, "GPUs 5 are NVIDIA A10, not one of"),
])
def test_inventory_flags_unhealthy_or_busy_gpus(healthy_nvml, changes, status, text):
    r = inventory_check(nvml=_variant(healthy_nvml, **changes), profile=profile())
    assert r.status is status and text in r.summary, r.summary


def test_inventory_names_the_pid_to_kill(healthy_nvml):
    r = inventory_check(nvml=_variant(healthy_nvml, g2={"processes": [{"pid": 4242, "used_memory_bytes": None}]}), profile=profile())
    assert "kill 4242" in r.remediation


def test_inventory_fails_when_a_gpu_is_missing(healthy_nvml):
    nvml = copy.deepcopy(healthy_nvml)
    del nvml["gpus"][7]
    r = inventory_check(nvml=nvml, profile=profile())
    assert r.status is Status.FAIL and r.summary.startswith("7 GPUs on this node, the profile expects 8")
