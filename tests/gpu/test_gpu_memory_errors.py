"""gpu.memory_errors (checks/gpu_memory_errors.py): its rules (dsv3_preflight/gpu/memory.py) on recorded NVML
health documents (tests/data/gpu/health/, read by the real NVML probe; variants change one recorded value)."""
from __future__ import annotations

from gpu_lab import gather_nvml

from dsv3_preflight.gpu import memory
from dsv3_preflight.result import Status


def test_rule_uncorrectable_since_boot_fails_each_gpu_with_its_reset():
    gpus = gather_nvml("h100_sxm_healthy", g3={"ecc_uncorrected_volatile": 2})["gpus"]
    (found,) = memory.rule_uncorrectable_since_boot(gpus)
    assert found.message == "GPU 3 (00000000:5D:00.0): 2 uncorrectable ECC errors since boot"
    assert "nvidia-smi -r -i 00000000:5D:00.0" in found.fix and found.cause == "gpu.reset_pending:00000000:5D:00.0"


def test_rule_uncorrectable_lifetime_warns_with_the_count():
    gpus = gather_nvml("h100_sxm_healthy", g6={"ecc_uncorrected_aggregate": 1})["gpus"]
    found = memory.rule_uncorrectable_lifetime(gpus)
    assert found.status is Status.WARN and "GPU 6 (00000000:BA:00.0) (1)" in found.message


def test_rule_ecc_enabled_warns_when_ecc_is_off():
    found = memory.rule_ecc_enabled(gather_nvml("h100_sxm_healthy", g0={"ecc_mode": [0, 0]})["gpus"])
    assert found.status is Status.WARN and found.fix.startswith("nvidia-smi -i 00000000:18:00.0 -e 1")


def test_rule_remap_failure_asks_for_replacement_not_a_reset():
    (found,) = memory.rule_remap_failure(gather_nvml("h100_sxm_healthy", g2={"remapped_rows": [0, 8, 0, 1]})["gpus"])
    assert "needs replacing" in found.message and found.cause == "gpu.replace:00000000:3A:00.0"
    assert "nvidia-bug-report.sh" in found.fix and "nvidia-smi -r" not in found.fix


def test_rule_remap_pending_fails_after_uncorrectable_errors_and_warns_after_correctable_ones():
    (hard,) = memory.rule_remap_pending(gather_nvml("gpud80_remap_pending")["gpus"])
    (soft,) = memory.rule_remap_pending(gather_nvml("a100_sxm4_remap_pending")["gpus"])
    assert (hard.status, soft.status) == (Status.FAIL, Status.WARN)


def test_rule_retired_pages_pending_and_counts_on_page_retirement_gpus():
    gpus = gather_nvml("h100_sxm_healthy", g1={"retired_pages_pending": 1, "retired_pages_dbe": [4096, 8192]})["gpus"]
    (pending,) = memory.rule_retired_pages_pending(gpus)
    counted = memory.rule_retired_pages(gpus)
    assert pending.status is Status.FAIL and "retired memory pages are pending" in pending.message
    assert counted.status is Status.WARN and "GPU 1 (00000000:2A:00.0) (2)" in counted.message
