"""The GPU checks' fixes: shell an administrator (or the job's owner) pastes, built from the facts.

Pure functions, no I/O. Every text here passes ``bash -n``; prose sits in ``#`` comments; a value the
tool cannot know is a ``${NAME:?what to put here}`` placeholder; known values (driver version, branch,
GPU bus ids) are written out. Checks that share a root cause use the same function, so the fix shown
under the shared cause is the same whichever check leads it.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .common import gpu_label, gpu_target
from .facts import Gpu

FM_UNIT = "nvidia-fabricmanager"

#: CUDA builds PyTorch publishes wheels for (download.pytorch.org/whl/<tag>), oldest first.
TORCH_CUDA_TAGS = ("cu118", "cu121", "cu124", "cu126", "cu128", "cu129", "cu130")


def driver_branch(version: str) -> str:
    """``535.183.06`` → ``535``."""
    return str(version).split(".")[0]


def install_driver(nvml: Mapping[str, Any]) -> str:
    """No driver answers: see whether the GPUs are on the bus, install the datacenter driver, or start the
    container with the GPUs. The branch is a placeholder: nothing on this node says which one the job runs."""
    error = nvml.get("error") or "NVML not available"
    return "\n".join([
        f"# no NVIDIA driver answers on this node (NVML: {error})",
        "lspci -nn | grep -i nvidia   # are the GPUs on the PCI bus at all?",
        "apt-get install -y nvidia-driver-${DRIVER_BRANCH:?the datacenter driver branch the other nodes run, for example 535}-server",
        "# NVSwitch systems (HGX/DGX) also need nvidia-fabricmanager-${DRIVER_BRANCH} of exactly the driver's version",
        "reboot   # load the new kernel module",
        "nvidia-smi -L   # afterwards: every GPU listed",
        "# inside a container: start it with the GPUs instead (NVIDIA container toolkit: docker run --gpus all)",
    ])


def fm_install(driver: str) -> str:
    """Install Fabric Manager of exactly the driver's version, hold it there, start it, verify the fabric."""
    branch = driver_branch(driver)
    return "\n".join([
        f"# Fabric Manager must be exactly the driver's version, {driver}",
        f"apt-get install -y --allow-downgrades nvidia-fabricmanager-{branch}={driver}-1   # Ubuntu/Debian; apt-cache madison nvidia-fabricmanager-{branch} lists the revisions",
        f"# RHEL-like systems instead: dnf install -y nvidia-fabric-manager-{driver}-1",
        f"apt-mark hold nvidia-fabricmanager-{branch}   # keep it from drifting from the driver again",
        f"systemctl enable --now {FM_UNIT}",
        "nvidia-smi -q | grep -i -A2 Fabric   # Hopper: State Completed, Status Success",
    ])


def fm_install_unknown_driver() -> str:
    """Fabric Manager is missing and the driver's version is unknown here."""
    return "\n".join([
        "nvidia-smi --query-gpu=driver_version --format=csv,noheader   # the driver's version: Fabric Manager must match it exactly",
        "apt-get install -y nvidia-fabricmanager-${DRIVER_BRANCH:?the driver branch, for example 535}=${DRIVER_VERSION:?the driver version printed above}-1",
        f"systemctl enable --now {FM_UNIT}",
    ])


def fm_start() -> str:
    return "\n".join([
        f"systemctl enable --now {FM_UNIT}",
        f"journalctl -u {FM_UNIT} -n 50 --no-pager   # if it stops again: its reason",
    ])


def fm_restart_for_fabric() -> str:
    return "\n".join([
        f"systemctl restart {FM_UNIT}",
        f"journalctl -u {FM_UNIT} -n 50 --no-pager",
        "nvidia-smi -q | grep -i -A2 Fabric   # wait for State Completed, Status Success on every GPU",
    ])


def fm_fabric_error() -> str:
    return "\n".join([
        f"journalctl -u {FM_UNIT} -n 100 --no-pager   # which GPU or link failed",
        f"systemctl restart {FM_UNIT}   # if the fabric stays in error: reboot the node",
    ])


def fm_status_on_host() -> str:
    return "\n".join([
        f"systemctl status {FM_UNIT} --no-pager   # on the host: this container cannot see the service",
        "nvidia-smi -q | grep -i -A2 Fabric",
    ])


def torch_cuda_build(cuda_init: Mapping[str, Any], nvml: Mapping[str, Any]) -> str:
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


def visible_devices(n_gpus: int, nproc: int) -> str:
    """One distinct GPU per local rank."""
    if not n_gpus:
        return "unset CUDA_VISIBLE_DEVICES   # let the job see the node's GPUs"
    listed = ",".join(str(i) for i in range(min(nproc, n_gpus)))
    return f"export CUDA_VISIBLE_DEVICES={listed}   # one distinct GPU per local rank, on every node before torchrun"


def reset_gpus(gpus: Iterable[Gpu], why: str) -> str:
    """Reset each GPU by its bus id (the node drained first); a reboot does the same for all."""
    lines = ["# drain this node from the job first: a reset needs the GPU idle"]
    for g in gpus:
        lines.append(f"nvidia-smi -r -i {gpu_target(g)}   # {gpu_label(g)}: {why}")
    lines.append("# if a reset is refused (GPU in use, or NVSwitch systems where GPUs reset together): reboot the node")
    return "\n".join(lines)


def replace_gpus(gpus: Iterable[Gpu], why: str) -> str:
    """Hardware to replace: collect the evidence for the RMA, keep the node out of the job."""
    lines = ["# drain this node from the job: this needs the vendor (RMA), not a reset"]
    for g in gpus:
        lines.append(f"nvidia-smi -q -i {gpu_target(g)} > gpu-{gpu_target(g).replace(':', '-')}-rma.txt   # {gpu_label(g)}: {why}")
    lines.append("nvidia-bug-report.sh   # the log NVIDIA support asks for")
    return "\n".join(lines)


def kernel_xid_log(bus: str | None = None) -> str:
    pattern = f"Xid.*{bus}" if bus else "Xid"
    return f"journalctl -k -b --no-pager | grep -i -E '{pattern}' | tail -20"
