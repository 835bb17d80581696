"""Pure helpers about storage: which filesystems are network filesystems."""
from __future__ import annotations

#: filesystem types that are network or cluster filesystems (saving adapters there during training stalls runs)
NETWORK_FS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "glusterfs", "fuse.glusterfs", "ceph", "fuse.ceph", "beegfs",
    "gpfs", "fuse.sshfs", "9p", "fuse.s3fs", "fuse.gcsfuse", "wekafs", "fuse.juicefs"})


def is_network_fs(fstype: str | None) -> bool:
    fstype = fstype or ""
    return fstype in NETWORK_FS or fstype.startswith("nfs")
