"""Shared by the GPU stack tests (test_gpu_stack.py, test_gpu_cuda_init.py, test_gpu_fabric_manager.py,
test_gpu_inventory.py): the compiled fake libcuda, a recorded machine stood up and gathered by the real probes, and
the three stack checks judged on its facts. Test modules import the fixtures by name."""
from __future__ import annotations

import pytest
from gpu_lab import compile_libcuda, gather, profile, stand_up

from dsv3_preflight.checks.gpu_cuda_init import cuda_init as cuda_init_check
from dsv3_preflight.checks.gpu_fabric_manager import fabric_manager as fm_check
from dsv3_preflight.checks.gpu_inventory import inventory as inventory_check


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory):
    return compile_libcuda(tmp_path_factory.mktemp("libcuda"))


@pytest.fixture
def machine(tmp_path, libcuda, monkeypatch):
    def build(name):
        return gather(stand_up(name, tmp_path, libcuda), monkeypatch)
    return build


def judge_all(facts, prof=None):
    prof = prof or profile()
    return {
        "cuda_init": cuda_init_check(cuda_init=facts["cuda_init"], nvml=facts["nvml"], fabric_manager=facts["fabric_manager"], profile=prof),
        "fabric_manager": fm_check(fabric_manager=facts["fabric_manager"], nvml=facts["nvml"], profile=prof),
        "inventory": inventory_check(nvml=facts["nvml"], profile=prof),
    }
