"""gpu.clocks (checks/gpu_clocks.py): its rules (dsv3_preflight/gpu/clocks.py) on recorded NVML health documents."""
from __future__ import annotations

from gpu_lab import gather_nvml
from paste_lint import paste_problems

from dsv3_preflight.gpu import clocks as clock_rules
from dsv3_preflight.result import Status


def test_rule_hardware_slowdown_names_the_power_brake_and_the_bmc():
    (found,) = clock_rules.rule_hardware_slowdown(gather_nvml("v100_sxm2_power_brake")["gpus"])
    assert "ipmitool sdr type 'Power Supply'" in found.fix and paste_problems(found.fix) == []


def test_rule_software_thermal_warns_with_the_temperature():
    gpus = gather_nvml("h100_sxm_healthy", g1={"clocks_event_reasons": clock_rules.SW_THERMAL, "temperature": 87})["gpus"]
    (found,) = clock_rules.rule_software_thermal(gpus)
    assert found.status is Status.WARN and "SW thermal slowdown at 87 C" in found.message


def test_the_power_cap_and_idle_reasons_are_normal_operation():
    gpus = gather_nvml("h100_sxm_healthy", g0={"clocks_event_reasons": clock_rules.SW_POWER_CAP | clock_rules.IDLE})["gpus"]
    assert clock_rules.rule_hardware_slowdown(gpus) == [] and clock_rules.rule_software_thermal(gpus) == []
