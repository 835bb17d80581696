"""gpu.fabric_manager: on NVSwitch systems Fabric Manager runs, matches the driver exactly, and the fabric is up."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.gpu.common import NOT_EXPECTED
from dsv3_preflight.gpu.fabric_rules import NVSWITCH_RULES, FabricView, fm_evidence, rule_gpus_present
from dsv3_preflight.gpu.facts import FabricManagerFact, NvmlFact
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Findings


@check("gpu.fabric_manager", needs=["fabric_manager", "nvml", "profile"], tags=["gpu"], timeout=30)
def fabric_manager(fabric_manager: FabricManagerFact, nvml: NvmlFact, profile: Profile):
    """NVSwitch system → Fabric Manager active, same version as the driver, Hopper fabric Completed/Success; PCIe-only → not needed."""
    view = FabricView.of(fabric_manager, nvml)
    evidence = fm_evidence(fabric_manager, view)
    if not profile.expects_gpus:
        return Result.skipped(NOT_EXPECTED, evidence)
    found = Findings()
    found.check(rule_gpus_present, view, nvml)
    if not view.nvswitch:
        n = len(view.gpus) or len(view.pci_gpus)
        return found.result(f"no NVSwitch on this node ({n} GPUs on PCIe): Fabric Manager not needed", evidence)
    for rule in NVSWITCH_RULES:
        found.check(rule, view)
    done = f"; fabric Completed/Success on {len(view.fabric_gpus)} GPUs" if view.fabric_gpus else ""
    seen = (f"Fabric Manager {view.fm_version} {view.service.get('state') or 'running'}" if view.service.get("active")
            else f"Fabric Manager {view.fm_version} (service not visible here; the GPUs' fabric state shows it ran)")
    return found.result(f"{view.what}: {seen}, same version as the driver{done}", evidence)
