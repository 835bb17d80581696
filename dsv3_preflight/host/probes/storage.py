"""The fact `output_dir`: the one directory the job writes its checkpoints and adapters to."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from dsv3_preflight.host.storage import is_network_fs
from dsv3_preflight.registry import probe


def mount_of(path: Path) -> dict[str, Any] | None:
    """The mount entry (device, mountpoint, fstype) holding path, by longest mountpoint prefix."""
    import psutil

    best = None
    target = str(path)
    for part in psutil.disk_partitions(all=True):
        mp = part.mountpoint
        if target == mp or target.startswith(mp.rstrip("/") + "/") or mp == "/":
            if best is None or len(mp) > len(best.mountpoint):
                best = part
    if best is None:
        return None
    return {"device": best.device, "mountpoint": best.mountpoint, "fstype": best.fstype}


def _write_test(directory: Path) -> tuple[bool, str | None]:
    try:
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".dsv3-preflight-write-test-") as fh:
            fh.write(b"ok")
            fh.flush()
            os.fsync(fh.fileno())
        return True, None
    except OSError as exc:
        return False, f"{exc.strerror or exc}"


@probe("output_dir", needs=["profile"], timeout=30)
def output_dir(profile) -> dict[str, Any]:
    """The job's output directory (profile output_dir, else checkpoint_dir): filesystem, free space, writability.

    A directory that does not exist yet is described by its nearest existing parent: the trainer creates it.
    ``setting`` names the profile field it comes from (``output_dir`` or ``checkpoint_dir``); ``path`` is absolute
    (fixes name it, and a relative path means another directory on each node).
    Consumed by lora.output_dir (where it lies, whether it is writable) and host.resources (room left).
    """
    raw = profile.output_dir or profile.checkpoint_dir
    if not raw:
        return {"configured": False}
    path = Path(os.path.abspath(Path(raw).expanduser()))
    facts: dict[str, Any] = {"configured": True, "path": str(path),
                             "setting": "output_dir" if profile.output_dir else "checkpoint_dir",
                             "exists": path.exists(), "is_dir": path.is_dir()}
    nearest = path
    while not nearest.exists() and nearest != nearest.parent:
        nearest = nearest.parent
    mount = mount_of(nearest.resolve())
    facts["mount"] = mount
    facts["network_fs"] = bool(mount) and is_network_fs(mount.get("fstype"))
    try:
        st = os.statvfs(nearest)
        facts["free_bytes"] = st.f_bavail * st.f_frsize
        facts["total_bytes"] = st.f_blocks * st.f_frsize
    except OSError as exc:
        facts["statvfs_error"] = str(exc)
    if not path.exists():
        facts["parent"] = str(nearest)
        facts["parent_is_dir"] = nearest.is_dir()
        if nearest.is_dir():
            facts["parent_writable"], error = _write_test(nearest)
            if error:
                facts["write_error"] = error
    if path.is_dir():
        facts["writable"], error = _write_test(path)
        if error:
            facts["write_error"] = error
    return facts
