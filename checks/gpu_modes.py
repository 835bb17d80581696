"""gpu.modes: MIG off and compute mode Default on every GPU, as a job of one process per whole GPU expects."""
from __future__ import annotations

from dsv3_preflight import check
from dsv3_preflight.gpu.common import health_skip, rule_reported
from dsv3_preflight.gpu.modes import COMPUTE_MODES, RULES
from dsv3_preflight.result import Findings


@check("gpu.modes", needs=["nvml", "profile"], tags=["gpu", "health"], timeout=20)
def modes(nvml, profile):
    """MIG enabled or compute mode Prohibited fail; a pending MIG change or an exclusive compute mode warns."""
    gpus = nvml.get("gpus") or []
    evidence = {"gpus": [{"index": g.get("index"), "pci_bus_id": g.get("pci_bus_id"), "mig": g.get("mig"),
                          "compute_mode": COMPUTE_MODES.get(g.get("compute_mode"), g.get("compute_mode"))} for g in gpus]}
    skip = health_skip(nvml, profile, evidence, ("compute_mode", "mig"), "compute mode nor MIG mode", "compute_mode")
    if skip:
        return skip
    found = Findings()
    found.check(rule_reported, gpus, "compute_mode", "compute mode")
    found.check(rule_reported, gpus, "mig", "MIG mode")
    for rule in RULES:
        found.check(rule, gpus)
    return found.result(f"{len(gpus)} GPUs: MIG off, compute mode Default", evidence)
