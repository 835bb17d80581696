"""host.resources: /dev/shm size, room in the output directory, and leftovers holding GPUs or the rendezvous port."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.text import one_line

GIB = 1 << 30
MIN_CHECKPOINT_FREE_GIB = 10
# Daemons that legitimately keep NVIDIA device files open.
SYSTEM_GPU_USERS = {"nvidia-persistenced", "nv-hostengine", "nv-fabricmanager", "Xorg", "dcgm-exporter", "nvidia-smi"}


def _proc_line(proc: dict) -> str:
    if not proc:
        return "an unknown process (run as root to see it)"
    return f"pid {proc['pid']} ({one_line(proc.get('cmdline')) or proc.get('name') or '?'}, user {proc.get('user')}, since {proc.get('started')})"


@check("host.resources", needs=["shm", "output_dir", "port_holders", "gpu_holders", "profile"], tags=["host"], timeout=20)
def resources(shm, output_dir, port_holders, gpu_holders, profile):
    """/dev/shm is big enough, the output dir's filesystem has room, and no leftover holds GPUs or the port
    (where the output dir lies and whether it is writable is lora.output_dir's)."""
    fails: list[str] = []
    warns: list[str] = []
    fixes: list[str] = []
    evidence: dict = {"shm": shm, "output_dir": output_dir}

    need = profile.shm_min_gib * GIB
    if not shm.get("exists"):
        fails.append("/dev/shm does not exist: NCCL and the DataLoader need it")
        fixes.append("docker run --shm-size=16g …   # or: mount -t tmpfs -o size=16g tmpfs /dev/shm")
    elif shm["total_bytes"] < need:
        fails.append(
            f"/dev/shm is {shm['total_bytes'] / GIB:.1f} GiB, below {profile.shm_min_gib:g} GiB: NCCL fails with "
            "'No space left on device'"
        )
        fixes.append(f"docker run --shm-size={int(profile.shm_min_gib)}g …   # or: mount -o remount,size={int(profile.shm_min_gib)}G /dev/shm")

    if output_dir.get("configured"):
        path = output_dir["path"]
        free = output_dir.get("free_bytes")
        usable = output_dir.get("writable") or output_dir.get("parent_writable")  # else lora.output_dir says why
        if usable and free is not None and free < MIN_CHECKPOINT_FREE_GIB * GIB:
            warns.append(f"{output_dir.get('key', 'output_dir')} {path} has only {free / GIB:.1f} GiB free")
            fixes.append(f"df -h {output_dir.get('parent') or path}   # free room, or point {output_dir.get('key', 'output_dir')} "
                         "at a node-local disk with room for the checkpoints")

    port_procs = [h for h in port_holders.get("holders", []) if h["port"] == port_holders["port"]]
    evidence["port_holders"] = port_procs
    for holder in port_procs:
        proc = holder.get("process")
        fails.append(f"port {holder['port']} is held by {_proc_line(proc)}")
        if proc:
            fixes.append(f"kill {proc['pid']}   # after checking it is a leftover of the previous run: {one_line(proc.get('cmdline'))}")

    leftovers = [h for h in gpu_holders.get("holders", []) if h.get("name") not in SYSTEM_GPU_USERS]
    evidence["gpu_holders"] = gpu_holders.get("holders", [])
    for proc in leftovers:
        fails.append(f"{', '.join(proc['devices'])} held by {_proc_line(proc)}")
        fixes.append(f"kill {proc['pid']}   # after checking it is a leftover of the previous run: {one_line(proc.get('cmdline'))}")

    remediation = "\n".join(dict.fromkeys(fixes)) or None
    evidence["problems"], evidence["warnings"] = fails, warns
    if fails:
        return Result.failed(fails[0] + (f" (+{len(fails) - 1} more)" if len(fails) > 1 else ""), evidence, remediation)
    if warns:
        return Result.warned(warns[0] + (f" (+{len(warns) - 1} more)" if len(warns) > 1 else ""), evidence, remediation)
    parts = [f"/dev/shm {shm['total_bytes'] / GIB:.1f} GiB"]
    if output_dir.get("configured"):
        free = output_dir.get("free_bytes")
        parts.append(f"{output_dir.get('key', 'output_dir')} {output_dir['path']}: "
                     + (f"{free / GIB:.1f} GiB free" if free is not None else "free space unknown"))
    else:
        parts.append("no output dir configured")
    parts.append(f"port {port_holders['port']} and GPUs not held")
    return Result.passed(", ".join(parts), evidence)
