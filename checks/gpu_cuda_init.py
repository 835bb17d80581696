"""gpu.cuda_init: CUDA initialises (driver API and torch's runtime), with a root-cause verdict on failure."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.gpu.common import NOT_EXPECTED
from dsv3_preflight.gpu.cuda_init_rules import GATES, evidence_of
from dsv3_preflight.gpu.facts import CudaInitFact, FabricManagerFact, NvmlFact
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Findings


@check("gpu.cuda_init", needs=["cuda_init", "nvml", "fabric_manager", "profile"], tags=["gpu"], timeout=150)
def cuda_init(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile):
    """cuInit and torch's CUDA runtime initialise and see GPUs; on failure, the root cause (802 → Fabric Manager, …)."""
    evidence = evidence_of(cuda_init, nvml)
    if not profile.expects_gpus:
        return Result.skipped(NOT_EXPECTED, evidence)
    found = Findings()
    for gate in GATES:
        found.check(gate, cuda_init, nvml, fabric_manager, profile)
        if found:
            break
    driver = cuda_init.get("driver") or {}
    runtime = cuda_init.get("runtime") or {}
    return found.result(
        f"cuInit OK ({driver.get('device_count')} devices, driver CUDA {nvml.get('cuda_driver_version_str') or driver.get('cuda_driver_version')}); "
        f"torch {runtime.get('torch_version')} (CUDA {runtime.get('cuda_built')}) sees {runtime.get('device_count')}",
        evidence)
