"""gpu.clocks: no GPU has its clocks held down by a hardware slowdown (thermal, power brake)."""
from __future__ import annotations

from dsv3_preflight import check
from dsv3_preflight.gpu.clocks import reasons, rule_hardware_slowdown, rule_software_thermal
from dsv3_preflight.gpu.common import health_skip, rule_reported
from dsv3_preflight.result import Findings


@check("gpu.clocks", needs=["nvml", "profile"], tags=["gpu", "health"], timeout=20)
def clocks(nvml, profile):
    """Clock event reasons: HW slowdown, HW thermal or HW power brake slowdown fail; SW thermal slowdown warns."""
    gpus = nvml.get("gpus") or []
    evidence = {"gpus": [{"index": g.get("index"), "pci_bus_id": g.get("pci_bus_id"),
                          "clocks_event_reasons": g.get("clocks_event_reasons"), "reasons": reasons(g.get("clocks_event_reasons")),
                          "temperature_c": g.get("temperature_c"), "performance_state": g.get("performance_state")}
                         for g in gpus]}
    skip = health_skip(nvml, profile, evidence, "clocks_event_reasons", "clock event reasons")
    if skip:
        return skip
    found = Findings()
    found.check(rule_reported, gpus, "clocks_event_reasons", "clock event reasons")
    found.check(rule_hardware_slowdown, gpus)
    found.check(rule_software_thermal, gpus)
    return found.result(f"{len(gpus)} GPUs: no hardware or thermal slowdown holds the clocks down", evidence)
