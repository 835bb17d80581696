"""host.resources: /dev/shm size, checkpoint directory, and leftovers holding GPUs or the rendezvous port."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.probes.resources import NETWORK_FS
from dsv3_preflight.text import one_line

GIB = 1 << 30
MIN_CHECKPOINT_FREE_GIB = 10
# Daemons that legitimately keep NVIDIA device files open.
SYSTEM_GPU_USERS = {"nvidia-persistenced", "nv-hostengine", "nv-fabricmanager", "Xorg", "dcgm-exporter", "nvidia-smi"}


def _proc_line(proc: dict) -> str:
    if not proc:
        return "an unknown process (run as root to see it)"
    return f"pid {proc['pid']} ({one_line(proc.get('cmdline')) or proc.get('name') or '?'}, user {proc.get('user')}, since {proc.get('started')})"


@check("host.resources", needs=["shm", "checkpoint_dir", "port_holders", "gpu_holders", "profile"], tags=["host"], timeout=20)
def resources(shm, checkpoint_dir, port_holders, gpu_holders, profile):
    """/dev/shm is big enough, the checkpoint dir is local, writable and has room, and no leftover holds GPUs or the port."""
    fails: list[str] = []
    warns: list[str] = []
    fixes: list[str] = []
    evidence: dict = {"shm": shm, "checkpoint_dir": checkpoint_dir}

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

    if checkpoint_dir.get("configured"):
        path = checkpoint_dir["path"]
        fstype = (checkpoint_dir.get("mount") or {}).get("fstype", "")
        if not checkpoint_dir.get("writable"):
            fails.append(f"checkpoint dir {path} is not writable ({checkpoint_dir.get('write_error', 'permission denied')})")
            fixes.append(f"mkdir -p {path} && chown \"$(id -u):$(id -g)\" {path}")
        if fstype in NETWORK_FS or fstype.startswith("nfs"):
            warns.append(f"checkpoint dir {path} is on {fstype} ({checkpoint_dir['mount']['mountpoint']}): saving there during training caused trouble; use a node-local disk")
            fixes.append("set checkpoint_dir/output_dir to a node-local path (for example /local/ckpt) and copy to NFS after the run")
        free = checkpoint_dir.get("free_bytes")
        if free is not None and free < MIN_CHECKPOINT_FREE_GIB * GIB:
            warns.append(f"checkpoint dir {path} has only {free / GIB:.1f} GiB free")

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
    parts.append(f"checkpoint dir {checkpoint_dir['path']} writable" if checkpoint_dir.get("configured") else "no checkpoint dir configured")
    parts.append(f"port {port_holders['port']} and GPUs not held")
    return Result.passed(", ".join(parts), evidence)
