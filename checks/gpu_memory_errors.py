"""gpu.memory_errors: no uncorrectable ECC errors since boot, no failed or pending row remapping, no pending page retirement."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.gpu.common import NO_DRIVER, NOT_EXPECTED, no_nvml_summary, nvml_reason
from dsv3_preflight.gpu.memory import FIELDS, RULES
from dsv3_preflight.result import Findings


@check("gpu.memory_errors", needs=["nvml", "profile"], tags=["gpu", "health"], timeout=20)
def memory_errors(nvml, profile):
    """Uncorrectable ECC errors since boot, row remapping failed or pending, pages pending retirement (NVML)."""
    gpus = nvml.get("gpus") or []
    evidence = {"gpus": [{"index": g.get("index"), "pci_bus_id": g.get("pci_bus_id"), **{k: g.get(k) for k in FIELDS}}
                         for g in gpus]}
    if not profile.expects_gpus:
        return Result.skipped(NOT_EXPECTED, evidence)
    if not nvml.get("available"):
        return Result.skipped(f"cannot read GPU memory errors: {no_nvml_summary(nvml)}", evidence, cause=NO_DRIVER)
    counters = ("ecc_uncorrected_volatile", "remapped_rows", "retired_pages_dbe")
    if not gpus or all(g.get(k) is None for g in gpus for k in counters):
        return Result.skipped("NVML reported no memory error counters (ECC, row remapper, page retirement): "
                              + nvml_reason(gpus, "ecc_uncorrected_volatile", "remapped_rows"), evidence)
    found = Findings()
    for rule in RULES:
        found.check(rule, gpus)
    return found.result(f"{len(gpus)} GPUs: no uncorrectable ECC errors since boot, no pending or failed row remapping",
                        evidence)
