"""Facts about local resources: /dev/shm, and processes holding the rendezvous port or GPU device files."""
from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

from dsv3_preflight.registry import probe


def process_info(pid: int) -> dict[str, Any]:
    """pid, user, command line and start time of a process (fields it cannot read are None)."""
    import psutil

    info: dict[str, Any] = {"pid": pid, "user": None, "cmdline": None, "name": None, "started": None}
    try:
        proc = psutil.Process(pid)
        with proc.oneshot():
            info["name"] = proc.name()
            info["user"] = proc.username()
            info["cmdline"] = " ".join(proc.cmdline()) or proc.name()
            info["started"] = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(proc.create_time()))
    except (psutil.Error, OSError):
        pass
    return info


@probe("shm", timeout=3)
def shm() -> dict[str, Any]:
    """Size and free space of /dev/shm, where NCCL keeps its shared-memory segments."""
    path = "/dev/shm"
    if not os.path.isdir(path):
        return {"path": path, "exists": False}
    st = os.statvfs(path)
    return {"path": path, "exists": True, "total_bytes": st.f_blocks * st.f_frsize, "free_bytes": st.f_bavail * st.f_frsize}


def _is_this_run(pid: int, me: int) -> bool | None:
    """Whether ``pid`` is this process or one of its descendants; None when it has ended.

    A child a probe starts holds a copy of every descriptor of this process from its fork until its exec (or
    for its life, when handed one on purpose), so for that moment it holds port_bind's test listener too; and
    psutil names the *last* process it finds holding a socket, the child. Seen in CI: two runs at once, one
    failed on "port 27094 is held by pid 20695 (python -c import ctypes…)": its own CUDA probe's child."""
    import psutil

    if pid == me:
        return True
    try:
        return any(parent.pid == me for parent in psutil.Process(pid).parents())
    except psutil.NoSuchProcess:
        return None
    except psutil.Error:
        return False


#: how many times port_holders looks again when a holder it found ended before it could be named
HOLDER_RESCANS = 3


@probe("port_holders", needs=["profile"], timeout=10, claims=["master_port"])
def port_holders(profile, env=None) -> dict[str, Any]:
    """Sockets of this host bound to the rendezvous port, with their processes (NCCL and Gloo connect on ephemeral
    ports, which no preflight can hold free; NCCL has no port-range variable).

    This run's own sockets are left out, also where a child of this run holds them (see :func:`_is_this_run`).
    When a holder ends between the socket table and its process lookup, the table is read again (at most
    ``HOLDER_RESCANS`` times): a socket outliving the process named for it is held by another process."""
    import psutil

    port = profile.master_port
    me = os.getpid()
    for attempt in range(HOLDER_RESCANS + 1):
        holders, vanished = [], False
        for conn in psutil.net_connections(kind="inet"):
            if not conn.laddr:
                continue
            lport = conn.laddr.port
            if lport != port:
                continue
            if conn.status not in (psutil.CONN_LISTEN, psutil.CONN_NONE) and not (lport == port and conn.status == psutil.CONN_ESTABLISHED):
                continue  # outgoing connections that merely use a local port do not hold it for binding
            if conn.pid:
                ours = _is_this_run(conn.pid, me)
                if ours:
                    continue  # this run's own sockets (port_bind's test listener) are not a leftover
                if ours is None:
                    vanished = True
            holders.append({
                "port": lport,
                "address": conn.laddr.ip,
                "status": conn.status,
                "type": "tcp" if conn.type == 1 else "udp",
                "process": process_info(conn.pid) if conn.pid else None,
            })
        if not vanished or attempt == HOLDER_RESCANS:
            break
        time.sleep(0.05)
    return {"port": port, "holders": holders}


@probe("gpu_holders", timeout=10)
def gpu_holders() -> dict[str, Any]:
    """Processes with an NVIDIA device file (/dev/nvidia0…) open, found through /proc (no NVML needed)."""
    devices = sorted(p.name for p in Path("/dev").glob("nvidia[0-9]*"))
    holders: dict[int, set[str]] = {}
    if devices:
        me = os.getpid()
        for proc_dir in Path("/proc").iterdir():
            if not proc_dir.name.isdigit() or int(proc_dir.name) == me:
                continue
            try:
                for fd in (proc_dir / "fd").iterdir():
                    try:
                        target = os.readlink(fd)
                    except OSError:
                        continue
                    if re.fullmatch(r"/dev/nvidia\d+", target):
                        holders.setdefault(int(proc_dir.name), set()).add(target)
            except OSError:
                continue
        # this run's descendants are not holders (its CUDA probe's child opens the device files), nor a process
        # that ended since
        holders = {pid: devs for pid, devs in holders.items() if _is_this_run(pid, me) is False}
    return {
        "device_files": devices,
        "holders": [dict(process_info(pid), devices=sorted(devs)) for pid, devs in sorted(holders.items())],
    }
