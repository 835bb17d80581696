"""Fixes that paste: ``yq`` (v4, mikefarah's) edits of the manifest file, in place.

Every expression is written in the subset jq shares with yq v4 (paths, ``+=``, ``=``, ``select``), selects the
document by its ``document_index``, and is double-quoted so a ``${NAME:?what to put here}`` placeholder inside
it fails loudly when pasted unset.
"""
from __future__ import annotations

import json
import shlex
from typing import Any

from .manifest import Group, RayManifest, ray_container

SHM_VOLUME = "dshm"


def yq_edit(path: str, manifest: RayManifest, target: str, op: str, value: str) -> str:
    """``yq -i "(select(document_index == N) | TARGET) OP VALUE" FILE``: one edit of one document."""
    expr = f"(select(document_index == {manifest['document']}) | {target}) {op} {value}"
    escaped = expr.replace("\\", "\\\\").replace('"', '\\"')
    return f'yq -i "{escaped}" {shlex.quote(path)}'


def literal(value: Any) -> str:
    """A JSON value for a yq/jq expression."""
    return json.dumps(value)


def container_path(group: Group) -> str:
    index = (ray_container(group) or {"index": 0})["index"]
    return f"{group['yq']}.template.spec.containers[{index}]"


def shm_fix(path: str, manifest: RayManifest, group: Group) -> str:
    volume = literal([{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}])
    mount = literal([{"name": SHM_VOLUME, "mountPath": "/dev/shm"}])
    return "\n".join([
        f"# {group['name']}: a tmpfs at /dev/shm (emptyDir medium Memory; it counts against the pod's memory limit)",
        yq_edit(path, manifest, f"{group['yq']}.template.spec.volumes", "+=", volume),
        yq_edit(path, manifest, f"{container_path(group)}.volumeMounts", "+=", mount),
    ])


def env_fix(path: str, manifest: RayManifest, group: Group, name: str, placeholder: str) -> str:
    value = '[{"name": ' + literal(name) + ', "value": "' + placeholder + '"}]'
    return yq_edit(path, manifest, f"{container_path(group)}.env", "+=", value)


def spec_fix(path: str, manifest: RayManifest, key: str, value: str) -> str:
    return yq_edit(path, manifest, f".spec.{key}", "=", value)


def shared_volume_fix(path: str, manifest: RayManifest, groups: list[Group], mount_path: str) -> str:
    """Mount one ReadWriteMany claim at ``mount_path`` in every group's Ray container."""
    claim = "${CLAIM:?a ReadWriteMany PersistentVolumeClaim (NFS, CephFS, Filestore, EFS) every pod can mount}"
    lines = [f"# mount one shared claim at {mount_path} on the head and every worker group, then point storage_path there"]
    for group in groups:
        volume = '[{"name": "cluster-storage", "persistentVolumeClaim": {"claimName": "' + claim + '"}}]'
        lines.append(yq_edit(path, manifest, f"{group['yq']}.template.spec.volumes", "+=", volume))
        lines.append(yq_edit(path, manifest, f"{container_path(group)}.volumeMounts", "+=",
                             literal([{"name": "cluster-storage", "mountPath": mount_path}])))
    return "\n".join(lines)
