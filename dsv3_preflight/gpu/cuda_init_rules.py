"""The rules of gpu.cuda_init (pure: facts in, findings out): CUDA initialises (driver API and torch's runtime), with a root-cause verdict on failure."""
from __future__ import annotations

from typing import Any

from dsv3_preflight.gpu import remedies
from dsv3_preflight.gpu.common import NO_DRIVER
from dsv3_preflight.gpu.cuda_causes import cause_of, headline
from dsv3_preflight.gpu.cuda_errors import decode
from dsv3_preflight.gpu.facts import CudaInitFact, FabricManagerFact, NvmlFact
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Actor, Finding, failure


def gate_driver_hung(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile) -> Finding | None:
    driver = cuda_init.get("driver") or {}
    if not driver.get("timed_out"):
        return None
    return failure(f"CUDA driver init hung: {driver.get('error')} (a wedged driver or GPU)",
                   "timeout 20 nvidia-smi   # does it answer?\n" + remedies.kernel_xid_log() +
                   "\nreboot   # a hung cuInit rarely recovers", actor=Actor.NODE, cause="gpu.driver_hung")


def gate_driver_loaded(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile) -> Finding | None:
    driver = cuda_init.get("driver") or {}
    if driver.get("loaded"):
        return None
    return failure(f"no NVIDIA driver: {driver.get('error')}; NVML: {nvml.get('error') or 'ok'}",
                   remedies.install_driver(nvml), actor=Actor.NODE, cause=NO_DRIVER)


def _code_failure(code: int, cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact,
                  profile: Profile, prefix: str = "") -> Finding:
    why = cause_of(code, cuda_init, nvml, fabric_manager, profile)
    return failure(f"{prefix}{headline(code)}: {why.why}", why.fix, actor=why.actor, cause=why.key)


def gate_driver_code(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile) -> Finding | None:
    code = (cuda_init.get("driver") or {}).get("code")
    if code in (0, None):
        return None
    return _code_failure(int(code), cuda_init, nvml, fabric_manager, profile)


def gate_runtime_hung(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile) -> Finding | None:
    runtime = cuda_init.get("runtime") or {}
    if not runtime.get("timed_out"):
        return None
    return failure(f"torch CUDA init hung: {runtime.get('error')}",
                   "timeout 120 python -c 'import torch; print(torch.cuda.device_count())'   # reproduce\n"
                   + remedies.kernel_xid_log(), actor=Actor.NODE, cause="gpu.driver_hung")


def gate_torch_installed(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile) -> Finding | None:
    runtime = cuda_init.get("runtime") or {}
    if runtime.get("installed"):
        return None
    return failure(f"torch cannot be imported: {runtime.get('error')}", remedies.torch_cuda_build(cuda_init, nvml),
                   actor=Actor.JOB, cause="gpu.torch_missing")


def gate_torch_cuda_build(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile) -> Finding | None:
    runtime = cuda_init.get("runtime") or {}
    if runtime.get("cuda_built"):
        return None
    return failure(f"torch {runtime.get('torch_version')} is a CPU-only build: it cannot use the GPUs",
                   remedies.torch_cuda_build(cuda_init, nvml), actor=Actor.JOB, cause="gpu.torch_cpu_build")


def gate_runtime_code(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile) -> Finding | None:
    code = (cuda_init.get("runtime") or {}).get("code")
    if code in (0, None):
        return None
    return _code_failure(int(code), cuda_init, nvml, fabric_manager, profile, prefix="torch: ")


def gate_runtime_devices(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile) -> Finding | None:
    runtime = cuda_init.get("runtime") or {}
    if not runtime.get("error") and runtime.get("device_count"):
        return None
    return failure(f"torch sees {runtime.get('device_count', 0)} CUDA devices: {runtime.get('error') or 'no error given'}",
                   "python -c 'import torch; torch.cuda.init()'   # shows the full error", actor=Actor.NODE,
                   cause="gpu.cuda_error")


GATES = (gate_driver_hung, gate_driver_loaded, gate_driver_code, gate_runtime_hung, gate_torch_installed,
         gate_torch_cuda_build, gate_runtime_code, gate_runtime_devices)


def evidence_of(cuda_init: CudaInitFact, nvml: NvmlFact) -> dict[str, Any]:
    driver = cuda_init.get("driver") or {}
    runtime = cuda_init.get("runtime") or {}
    evidence: dict[str, Any] = {
        "driver_api": {k: driver.get(k) for k in ("library", "library_file", "library_version", "loaded", "cuInit",
                                                   "device_count", "code", "timed_out", "error", "cuda_driver_version")},
        "runtime": {k: runtime.get(k) for k in ("installed", "torch_version", "cuda_built", "device_count", "code",
                                                "error", "timed_out", "nccl_version")},
        "kernel_module_version": cuda_init.get("kernel_module_version"),
        "nvml_driver_version": nvml.get("driver_version"),
    }
    code = driver.get("code") if driver.get("code") not in (0, None) else runtime.get("code")
    if code not in (0, None):
        evidence["decoded"] = decode(code)
    return evidence
