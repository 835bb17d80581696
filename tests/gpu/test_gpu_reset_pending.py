"""gpu.reset_pending (checks/gpu_reset_pending.py): its rule (dsv3_preflight/gpu/recovery.py) on recorded NVML
health documents."""
from __future__ import annotations

import pytest
from gpu_lab import gather_nvml, profile
from paste_lint import paste_problems

from dsv3_preflight.checks.gpu_reset_pending import reset_pending
from dsv3_preflight.gpu import recovery
from dsv3_preflight.result import Status


@pytest.mark.parametrize("fields, words, cause", [
    ({"226": 1, "227": 0, "230": 0}, "the driver asks for GPU Reset Required", "gpu.reset_pending:00000000:9A:00.0"),
    ({"226": 0, "227": 1}, "the driver asks for Drain and Reset", "gpu.reset_pending:00000000:9A:00.0"),
    ({"226": 0, "227": 0, "230": 2}, "the driver asks for Node Reboot Required", "gpu.reboot_required"),
])
def test_rule_no_reset_pending_follows_the_drivers_recovery_action(fields, words, cause):
    (found,) = recovery.rule_no_reset_pending(gather_nvml("h100_sxm_healthy", g4={"field_values": fields})["gpus"])
    assert words in found.message and found.cause == cause and paste_problems(found.fix) == []


def test_a_driver_without_reset_fields_skips_reset_pending_and_says_which_check_still_covers_it():
    r = reset_pending(nvml=gather_nvml("h100_sxm_healthy", **{f"g{i}": {"field_values": {}} for i in range(8)}),
                      profile=profile())
    assert r.status is Status.SKIP and "gpu.memory_errors still reports pending row remapping" in r.summary
