"""gpu.modes (checks/gpu_modes.py): its rules (dsv3_preflight/gpu/modes.py) on recorded NVML health documents."""
from __future__ import annotations

import pytest
from gpu_lab import gather_nvml

from dsv3_preflight.gpu import modes as mode_rules
from dsv3_preflight.result import Status


def test_rule_mig_disabled_turns_mig_off_by_bus_id_and_resets():
    found = mode_rules.rule_mig_disabled(gather_nvml("a100_mig_enabled")["gpus"])
    assert found.fix.splitlines() == ["nvidia-smi -i 00000000:C1:00.0 -mig 0",
                                      "nvidia-smi -r -i 00000000:C1:00.0   # the mode changes at the reset (drain the node first)"]


def test_rule_mig_not_pending_warns_on_a_change_waiting_for_a_reset():
    found = mode_rules.rule_mig_not_pending(gather_nvml("h100_sxm_healthy", g7={"mig_mode": [0, 1]})["gpus"])
    assert found.status is Status.WARN and "GPU 7 (00000000:DB:00.0)" in found.message


@pytest.mark.parametrize("mode, rule, status", [(2, mode_rules.rule_compute_mode_not_prohibited, Status.FAIL),
                                                (3, mode_rules.rule_compute_mode_shared, Status.WARN)])
def test_compute_modes_other_than_default(mode, rule, status):
    found = rule(gather_nvml("h100_sxm_healthy", g0={"compute_mode": mode})["gpus"])
    assert found.status is status and found.fix == "nvidia-smi -i 00000000:18:00.0 -c DEFAULT"
