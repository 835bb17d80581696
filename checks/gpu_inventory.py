"""gpu.inventory: the GPUs the profile expects are here, of an accepted model, persistent and free."""
from __future__ import annotations

from typing import Any

from dsv3_preflight import Result, check
from dsv3_preflight.gpu.common import NOT_EXPECTED
from dsv3_preflight.gpu.facts import NvmlFact
from dsv3_preflight.gpu.inventory_rules import (
    MIB,
    rule_count,
    rule_models,
    rule_no_other_processes,
    rule_nvml_answers,
    rule_one_model,
    rule_persistence,
)
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Findings


@check("gpu.inventory", needs=["nvml", "profile"], tags=["gpu"], timeout=30)
def inventory(nvml: NvmlFact, profile: Profile):
    """GPU count and model match the profile; persistence mode on; no other process on the GPUs."""
    gpus = nvml.get("gpus") or []
    evidence: dict[str, Any] = {
        "driver_version": nvml.get("driver_version"),
        "cuda_driver_version": nvml.get("cuda_driver_version_str"),
        "gpus": [{k: g.get(k) for k in ("index", "name", "uuid", "pci_bus_id", "memory_total_bytes", "persistence_mode",
                                         "processes")} for g in gpus],
        "expected": {"gpus_per_node": profile.gpus_per_node, "gpu_models": list(profile.gpu_models)},
    }
    if not profile.expects_gpus:
        return Result.skipped(NOT_EXPECTED, evidence)
    found = Findings()
    if found.check(rule_nvml_answers, nvml):
        evidence["nvml_error"] = nvml.get("error")
        return found.result("NVML answers", evidence)
    found.check(rule_count, gpus, profile.gpus_per_node)
    found.check(rule_models, gpus, profile.gpu_models)
    found.check(rule_one_model, gpus)
    found.check(rule_persistence, gpus)
    found.check(rule_no_other_processes, gpus)
    if not gpus:
        return found.result("no GPUs", evidence)
    mem = (gpus[0].get("memory_total_bytes") or 0) // MIB
    return found.result(f"{len(gpus)} × {gpus[0].get('name')} ({mem} MiB), driver {nvml.get('driver_version')}, "
                        "persistence on, no other processes", evidence)
