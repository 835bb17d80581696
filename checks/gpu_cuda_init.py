"""gpu.cuda_init: CUDA initialises (driver API and torch's runtime), with a root-cause verdict on failure."""
from __future__ import annotations

from typing import Any, Mapping

from dsv3_preflight import Result, check
from dsv3_preflight.gpu.common import NOT_EXPECTED
from dsv3_preflight.gpu.cuda_errors import decode

FM_UNIT = "nvidia-fabricmanager"


def fm_install_commands(driver: str) -> str:
    """The exact commands installing Fabric Manager of the driver's version, on Debian/Ubuntu and RHEL-likes."""
    branch = driver.split(".")[0]
    return "\n".join([
        f"apt-get install -y --allow-downgrades nvidia-fabricmanager-{branch}={driver}-1   # Ubuntu/Debian; `apt-cache madison nvidia-fabricmanager-{branch}` lists the revisions",
        f"dnf install -y nvidia-fabric-manager-{driver}-1   # RHEL / Oracle Linux",
        f"apt-mark hold nvidia-fabricmanager-{branch}   # keep it from drifting from the driver again",
        f"systemctl enable --now {FM_UNIT}",
        f"nvidia-smi -q | grep -i -A2 Fabric   # Hopper: State Completed, Status Success",
    ])


#: CUDA builds PyTorch publishes wheels for (download.pytorch.org/whl/<tag>), oldest first.
TORCH_CUDA_TAGS = ("cu118", "cu121", "cu124", "cu126", "cu128", "cu129", "cu130")


def torch_cuda_build_command(cuda_init: Mapping[str, Any], nvml: Mapping[str, Any]) -> str:
    """pip command installing a CUDA build of the *same* torch version, from a CUDA no newer than the driver's.

    Unpinned, ``pip install torch --index-url .../cu121`` silently installs whatever newest torch that index has."""
    version = str((cuda_init.get("runtime") or {}).get("torch_version") or "").split("+")[0]
    pin = f"torch=={version}" if version else "torch"
    driver_cuda = nvml.get("cuda_driver_version_str")
    tag, too_old = "cu121", False
    try:
        major, minor = (int(x) for x in str(driver_cuda).split(".")[:2])
        fitting = [t for t in TORCH_CUDA_TAGS if (int(t[2:-1]), int(t[-1])) <= (major, minor)]
        tag, too_old = (fitting[-1], False) if fitting else (TORCH_CUDA_TAGS[0], True)
    except ValueError:
        pass
    what = "a CUDA build of the same torch" if version else "a CUDA build of torch (pin the version the other nodes run)"
    if too_old:
        limit = f"the driver supports only CUDA {driver_cuda}, older than any current PyTorch build: upgrade the driver first"
    elif driver_cuda:
        limit = f"the driver supports CUDA {driver_cuda}: any cuXYZ up to it that pytorch.org lists for this torch version"
    else:
        limit = "any cuXYZ up to the CUDA version nvidia-smi shows that pytorch.org lists for this torch version"
    return f"pip install --force-reinstall {pin} --index-url https://download.pytorch.org/whl/{tag}   # {what}; {limit}"


def _fm_mismatch(fabric_manager: Mapping[str, Any], driver_version: str | None) -> tuple[str, str] | None:
    """(fm_version, driver_version) when FM and the driver differ, from the log line or the versions."""
    for finding in (fabric_manager.get("log") or {}).get("findings", [])[::-1]:
        if finding.get("kind") == "version_mismatch":
            return finding["fm"], finding["driver"]
    fm = fabric_manager.get("version")
    if fm and driver_version and fm != driver_version:
        return fm, driver_version
    return None


def root_cause(code: int, cuda_init: Mapping[str, Any], nvml: Mapping[str, Any],
               fabric_manager: Mapping[str, Any]) -> tuple[str, str, str]:
    """(verdict, remediation, cause key) for a CUDA init error code, combining the other facts."""
    d = decode(code)
    head = f"CUDA init failed with {code} {d['name']} ({d['message']})"
    driver_version = nvml.get("driver_version") or fabric_manager.get("kernel_module_version")
    switches = fabric_manager.get("nvswitch") or {}
    service = fabric_manager.get("service") or {}
    env = cuda_init.get("env") or {}
    if code == 802:
        nvswitch = switches.get("detected") or any((g.get("fabric") or {}).get("supported") for g in nvml.get("gpus", []))
        mismatch = _fm_mismatch(fabric_manager, driver_version)
        if nvswitch and mismatch:
            fm, drv = mismatch
            return (f"{head}: Fabric Manager {fm} does not match driver {drv}, so FM refuses to start and the NVSwitch fabric stays unconfigured",
                    fm_install_commands(drv), "fm_version_mismatch")
        if nvswitch and service.get("active") is False:
            state = service.get("state") or "not running"
            if service.get("installed") is False:
                how = fm_install_commands(driver_version) if driver_version else "install nvidia-fabricmanager of exactly the driver's version"
                return (f"{head}: NVSwitch system and Fabric Manager is not installed", how, "fm_missing")
            return (f"{head}: NVSwitch system and Fabric Manager is {state}",
                    f"systemctl enable --now {FM_UNIT}\njournalctl -u {FM_UNIT} -n 50 --no-pager   # if it stops again: its reason",
                    "fm_stopped")
        pending = [g["index"] for g in nvml.get("gpus", []) if (g.get("fabric") or {}).get("supported")
                   and (g["fabric"].get("state") != 3 or g["fabric"].get("status"))]
        if pending:
            return (f"{head}: GPU fabric registration not completed on GPUs {pending} (Fabric Manager has not finished or failed)",
                    f"systemctl restart {FM_UNIT}\njournalctl -u {FM_UNIT} -n 50 --no-pager\nnvidia-smi -q | grep -i -A2 Fabric",
                    "fabric_not_ready")
        if nvswitch:
            return (f"{head}: NVSwitch system; Fabric Manager state {service.get('state') or 'unknown'}",
                    f"systemctl status {FM_UNIT}\njournalctl -u {FM_UNIT} -n 50 --no-pager\nsystemctl restart {FM_UNIT}",
                    "fm_unknown")
        return (f"{head}: no NVSwitch found, so not Fabric Manager; the driver is not ready",
                "nvidia-smi -q | head -40\ndmesg -T | grep -i -E 'NVRM|Xid' | tail -20\nreboot   # if the driver stays not ready",
                "not_ready")
    if code == 803:
        kmod = cuda_init.get("kernel_module_version") or fabric_manager.get("kernel_module_version")
        lib = (cuda_init.get("driver") or {}).get("library_version")
        what = f"kernel module {kmod}, user-space libcuda {lib}" if kmod or lib else "kernel module and user-space driver differ"
        return (f"{head}: the loaded kernel module and the user-space driver are different versions ({what})",
                "reboot   # after a driver upgrade the old kernel module stays loaded until a reboot\n"
                "# or reinstall one driver version for both: apt-get install --reinstall nvidia-driver-<branch> && reboot",
                "driver_mismatch")
    if code == 804:
        compat = [p for p in (env.get("LD_LIBRARY_PATH") or "").split(":") if "compat" in p]
        where = f" (LD_LIBRARY_PATH has {', '.join(compat)})" if compat else ""
        return (f"{head}: a forward-compatibility libcuda (cuda-compat) was loaded on GPUs that do not support it{where}",
                "export LD_LIBRARY_PATH=$(echo \"$LD_LIBRARY_PATH\" | tr ':' '\\n' | grep -v compat | paste -sd:)   # drop cuda-compat\n"
                "# or use a torch/container built for the installed driver's CUDA version",
                "compat")
    if code == 100:
        cvd = env.get("CUDA_VISIBLE_DEVICES")
        why = (f"CUDA_VISIBLE_DEVICES={cvd!r} hides every GPU" if cvd is not None else
               f"NVML sees {len(nvml.get('gpus', []))} GPUs" if nvml.get("available") else "no GPU is visible to this process")
        return (f"{head}: {why}",
                "unset CUDA_VISIBLE_DEVICES   # or list valid indices, e.g. export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\n"
                "docker run --gpus all ...   # inside a container: start it with the GPUs",
                "no_device")
    if code == 35:
        return (f"{head}: the driver (CUDA {nvml.get('cuda_driver_version_str')}) is older than torch's CUDA runtime "
                f"({(cuda_init.get('runtime') or {}).get('cuda_built')})",
                torch_cuda_build_command(cuda_init, nvml) + "\n# or upgrade the driver to one supporting torch's CUDA",
                "insufficient_driver")
    if code == 999:
        return (f"{head}: the driver reports an unknown error, usually a GPU in a bad state",
                "dmesg -T | grep -i Xid | tail   # Xid 79: fallen off the bus; 48/63/64/94/95: ECC\n"
                "nvidia-smi -r -i <gpu>   # reset an idle GPU, or: reboot",
                "unknown")
    return (f"{head}: {d['meaning']}", "nvidia-smi -q | head -40\ndmesg -T | grep -i -E 'NVRM|Xid' | tail -20", "other")


@check("gpu.cuda_init", needs=["cuda_init", "nvml", "fabric_manager", "profile"], tags=["gpu"], timeout=150)
def cuda_init(cuda_init, nvml, fabric_manager, profile):
    """cuInit and torch's CUDA runtime initialise and see GPUs; on failure, the root cause (802 → Fabric Manager, …)."""
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
    if not profile.expects_gpus:
        return Result.skipped(NOT_EXPECTED, evidence)
    if driver.get("timed_out"):
        return Result.failed(
            f"CUDA driver init hung: {driver.get('error')} (a wedged driver or GPU)", evidence,
            "nvidia-smi   # does it answer?\ndmesg -T | grep -i -E 'NVRM|Xid' | tail -20\nreboot   # a hung cuInit rarely recovers")
    if not driver.get("loaded"):
        return Result.failed(
            f"no NVIDIA driver: {driver.get('error')}; NVML: {nvml.get('error') or 'ok'}", evidence,
            "install the NVIDIA datacenter driver (and on NVSwitch systems the Fabric Manager of the same version)\n"
            "docker run --gpus all ...   # inside a container: start it with the GPUs (NVIDIA container toolkit)")
    if driver.get("code") not in (0, None):
        verdict, remediation, cause = root_cause(int(driver["code"]), cuda_init, nvml, fabric_manager)
        evidence["cause"] = cause
        evidence["decoded"] = decode(driver["code"])
        return Result.failed(verdict, evidence, remediation)
    if runtime.get("timed_out"):
        return Result.failed(f"torch CUDA init hung: {runtime.get('error')}", evidence,
                             "python -c 'import torch; print(torch.cuda.device_count())'   # reproduce, then check dmesg")
    if not runtime.get("installed"):
        return Result.failed(f"torch cannot be imported: {runtime.get('error')}", evidence,
                             "pip install torch   # the version pinned for this job, built for the driver's CUDA")
    if not runtime.get("cuda_built"):
        return Result.failed(f"torch {runtime.get('torch_version')} is a CPU-only build: it cannot use the GPUs", evidence,
                             torch_cuda_build_command(cuda_init, nvml))
    if runtime.get("code") not in (0, None):
        verdict, remediation, cause = root_cause(int(runtime["code"]), cuda_init, nvml, fabric_manager)
        evidence["cause"] = cause
        return Result.failed(f"torch: {verdict}", evidence, remediation)
    if runtime.get("error") or not runtime.get("device_count"):
        return Result.failed(f"torch sees {runtime.get('device_count', 0)} CUDA devices: {runtime.get('error') or 'no error given'}",
                             evidence, "python -c 'import torch; torch.cuda.init()'   # shows the full error")
    return Result.passed(
        f"cuInit OK ({driver.get('device_count')} devices, driver CUDA {nvml.get('cuda_driver_version_str') or driver.get('cuda_driver_version')}); "
        f"torch {runtime.get('torch_version')} (CUDA {runtime.get('cuda_built')}) sees {runtime.get('device_count')}",
        evidence)
