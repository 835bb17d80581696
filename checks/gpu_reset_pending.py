"""gpu.reset_pending: the driver asks for no GPU reset, drain or reboot (NVML's reset status and recovery action)."""
from __future__ import annotations

from dsv3_preflight import check
from dsv3_preflight.gpu.common import health_skip
from dsv3_preflight.gpu.recovery import needs, rule_no_reset_pending
from dsv3_preflight.result import Findings


@check("gpu.reset_pending", needs=["nvml", "profile"], tags=["gpu", "health"], timeout=20)
def reset_pending(nvml, profile):
    """NVML's "Reset Required", "Drain and Reset Recommended" and GPU recovery action are all clear."""
    gpus = nvml.get("gpus") or []
    evidence = {"gpus": [{"index": g.get("index"), "pci_bus_id": g.get("pci_bus_id"), "reset": g.get("reset"),
                          "needs": needs(g)} for g in gpus]}
    skip = health_skip(nvml, profile, evidence, "reset", "GPU reset status")
    if skip:
        return skip
    if all(not any(v is not None for v in (g.get("reset") or {}).values()) for g in gpus):
        from dsv3_preflight import Result

        return Result.skipped("this driver reports no GPU reset status (NVML fields 226, 227, 230 not supported); "
                              "gpu.memory_errors still reports pending row remapping", evidence)
    found = Findings()
    found.check(rule_no_reset_pending, gpus)
    return found.result(f"{len(gpus)} GPUs: the driver asks for no reset, drain or reboot", evidence)
