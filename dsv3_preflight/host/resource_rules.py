"""The rules of host.resources (pure: facts in, findings out): /dev/shm size, room in the output directory, and leftovers holding GPUs or the rendezvous port.

Small pure rules over the facts (``shm``, ``output_dir``, ``port_holders``, ``gpu_holders``), each returning
findings with their own fix; where the output dir lies and whether it is writable is lora.output_dir's."""
from __future__ import annotations

from dsv3_preflight.host.facts import GpuHoldersFact, OutputDirFact, PortHoldersFact, ShmFact
from dsv3_preflight.host.processes import describe, find_holder_fix, kill_fix
from dsv3_preflight.net import causes
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Actor, Finding, failure, warning

GIB = 1 << 30


MIN_CHECKPOINT_FREE_GIB = 10


SYSTEM_GPU_USERS = {"nvidia-persistenced", "nv-hostengine", "nv-fabricmanager", "Xorg", "dcgm-exporter", "nvidia-smi"}




def shm_size_fix(gib: int) -> str:
    return (f"mount -o remount,size={gib}G /dev/shm   # as root; in a container, restart it with docker run --shm-size={gib}g "
            "(a remount inside does not outlive it)")


def shm_big_enough(shm: ShmFact, profile: Profile) -> Finding | None:
    gib = max(int(profile.shm_min_gib), 1)
    if not shm.get("exists"):
        return failure("/dev/shm does not exist: NCCL and the DataLoader need it",
                       f"mount -t tmpfs -o size={gib}g tmpfs /dev/shm   # as root; in a container, start it with "
                       f"docker run --shm-size={gib}g", actor=Actor.NODE, cause="host.shm_small")
    if shm["total_bytes"] >= profile.shm_min_gib * GIB:
        return None
    return failure(f"/dev/shm is {shm['total_bytes'] / GIB:.1f} GiB, below {profile.shm_min_gib:g} GiB: NCCL fails with "
                   "'No space left on device'", shm_size_fix(gib), actor=Actor.NODE, cause="host.shm_small")


def setting_of(output_dir: OutputDirFact) -> str:
    """The profile field naming the directory (``output_dir`` or ``checkpoint_dir``)."""
    setting = output_dir.get("setting")
    return setting if setting in ("output_dir", "checkpoint_dir") else "output_dir"


def usable(output_dir: OutputDirFact) -> bool:
    """The directory is writable, or can be created (else lora.output_dir says why)."""
    return bool(output_dir.get("writable") or output_dir.get("parent_writable"))


def output_dir_has_room(output_dir: OutputDirFact) -> Finding | None:
    free = output_dir.get("free_bytes")
    if not output_dir.get("configured") or not usable(output_dir) or free is None or free >= MIN_CHECKPOINT_FREE_GIB * GIB:
        return None
    setting, path = setting_of(output_dir), output_dir["path"]
    return warning(f"{setting} {path} has only {free / GIB:.1f} GiB free",
                   f"df -h {output_dir.get('parent') or path}   # free room, or point {setting} at a node-local disk with "
                   "room for the checkpoints", actor=Actor.NODE, cause="host.output_dir_full")


def rendezvous_port_not_held(port_holders: PortHoldersFact) -> list[Finding]:
    out = []
    for holder in port_holders.get("holders", []):
        if holder["port"] != port_holders["port"]:
            continue   # facts recorded by older versions also listed ports in NCCL_PORT_RANGE, which NCCL does not have
        proc = holder.get("process")
        out.append(failure(f"port {holder['port']} is held by {describe(proc)}",
                           kill_fix(proc) if proc else find_holder_fix(holder["port"]), actor=Actor.NODE,
                           cause=causes.PORT_HELD))
    return out


def gpus_not_held(gpu_holders: GpuHoldersFact) -> list[Finding]:
    return [failure(f"{', '.join(proc['devices'])} held by {describe(proc)}", kill_fix(proc), actor=Actor.NODE,
                    cause="host.gpu_held")
            for proc in gpu_holders.get("holders", []) if proc.get("name") not in SYSTEM_GPU_USERS]


def ok_summary(shm: ShmFact, output_dir: OutputDirFact, port_holders: PortHoldersFact) -> str:
    parts = [f"/dev/shm {(shm.get('total_bytes') or 0) / GIB:.1f} GiB"]
    if not output_dir.get("configured"):
        parts.append("no output dir configured")
    elif not usable(output_dir):
        parts.append(f"{setting_of(output_dir)} {output_dir['path']} cannot be used (lora.output_dir says why)")
    else:
        free = output_dir.get("free_bytes")
        parts.append(f"{setting_of(output_dir)} {output_dir['path']}: "
                     + (f"{free / GIB:.1f} GiB free" if free is not None else "free space unknown"))
    parts.append(f"port {port_holders['port']} and GPUs not held")
    return ", ".join(parts)
