"""Why CUDA failed to initialise: one small pure function per CUDA error code, combining the other facts.

``cause_of(code, cuda_init, nvml, fabric_manager, profile)`` returns a :class:`~.fabric_rules.Cause`: the
words after "CUDA init failed with N NAME (message): ", the fix to paste, the root-cause key (shared
with the other gpu checks that see the same problem) and who must act.
"""
from __future__ import annotations

from collections.abc import Callable

from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Actor

from . import remedies
from .cuda_errors import decode
from .fabric_rules import Cause, FabricView, cause_of_802
from .facts import CudaInitFact, FabricManagerFact, NvmlFact

VISIBLE_DEVICES = "gpu.visible_devices"


def _802(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile) -> Cause:
    return cause_of_802(FabricView.of(fabric_manager, nvml))


def _803(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile) -> Cause:
    kmod = cuda_init.get("kernel_module_version") or fabric_manager.get("kernel_module_version")
    lib = (cuda_init.get("driver") or {}).get("library_version")
    what = f"kernel module {kmod}, user-space libcuda {lib}" if kmod or lib else "kernel module and user-space driver differ"
    fix = ["reboot   # after a driver upgrade the old kernel module stays loaded until a reboot"]
    if lib:
        fix.append(f"# if it persists, one driver version for both: reinstall the {lib} driver packages (branch "
                   f"{remedies.driver_branch(lib)}), then reboot")
    return Cause(f"the loaded kernel module and the user-space driver are different versions ({what})",
                 "\n".join(fix), "gpu.driver_mismatch")


def _804(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile) -> Cause:
    env = cuda_init.get("env") or {}
    compat = [p for p in (env.get("LD_LIBRARY_PATH") or "").split(":") if "compat" in p]
    where = f" (LD_LIBRARY_PATH has {', '.join(compat)})" if compat else ""
    return Cause(f"a forward-compatibility libcuda (cuda-compat) was loaded on GPUs that do not support it{where}",
                 "export LD_LIBRARY_PATH=$(echo \"$LD_LIBRARY_PATH\" | tr ':' '\\n' | grep -v compat | paste -sd:)   # drop cuda-compat\n"
                 "# or use a torch/container built for the installed driver's CUDA version",
                 "gpu.cuda_compat", Actor.JOB)


def _100(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile) -> Cause:
    env = cuda_init.get("env") or {}
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    n = len(nvml.get("gpus") or [])
    if cvd is not None:
        return Cause(f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU",
                     remedies.visible_devices(n, profile.nproc_per_node), VISIBLE_DEVICES, Actor.JOB)
    if nvml.get("available") and n:
        return Cause(f"NVML sees {n} GPUs but this process none: a container started without the GPUs?",
                     "# start the container with the GPUs (NVIDIA container toolkit): docker run --gpus all\n"
                     "ls -l /dev/nvidia*   # the device files the process needs", "gpu.no_device", Actor.NODE)
    return Cause("no GPU is visible to this process", remedies.install_driver(nvml), "gpu.no_device", Actor.NODE)


def _35(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile) -> Cause:
    return Cause(f"the driver (CUDA {nvml.get('cuda_driver_version_str')}) is older than torch's CUDA runtime "
                 f"({(cuda_init.get('runtime') or {}).get('cuda_built')})",
                 remedies.torch_cuda_build(cuda_init, nvml) + "\n# or upgrade the driver to one supporting torch's CUDA",
                 "gpu.driver_too_old", Actor.JOB)


def _999(cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact, profile: Profile) -> Cause:
    return Cause("the driver reports an unknown error, usually a GPU in a bad state",
                 remedies.kernel_xid_log() + "   # Xid 79: fallen off the bus; 48, 63, 64, 94, 95: memory errors\n"
                 "nvidia-smi -q | grep -i -A2 -E 'Reset Status|Recovery Action'   # which GPU needs a reset\n"
                 "reboot   # resets every GPU of this node", "gpu.unknown_error")


CAUSES: dict[int, Callable[[CudaInitFact, NvmlFact, FabricManagerFact, Profile], Cause]] = {802: _802, 803: _803, 804: _804, 100: _100, 35: _35, 999: _999}


def cause_of(code: int, cuda_init: CudaInitFact, nvml: NvmlFact, fabric_manager: FabricManagerFact,
             profile: Profile) -> Cause:
    """The cause of a CUDA init error code; codes without their own function get the decoded meaning."""
    explain = CAUSES.get(int(code))
    if explain is not None:
        return explain(cuda_init, nvml, fabric_manager, profile)
    return Cause(str(decode(code)["meaning"]), "nvidia-smi -q | head -40\n" + remedies.kernel_xid_log(), "gpu.cuda_error")


def headline(code: int) -> str:
    d = decode(code)
    return f"CUDA init failed with {code} {d['name']} ({d['message']})"
