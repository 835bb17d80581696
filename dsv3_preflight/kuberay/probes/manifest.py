"""The fact ``kuberay_manifest``: the RayJobs and RayClusters of the file the profile names, with their lines."""
from __future__ import annotations

import os

from dsv3_preflight.inputs import InputError, read_text
from dsv3_preflight.kuberay.manifest import ManifestError, ManifestFacts, parse_manifests
from dsv3_preflight.registry import probe

#: a manifest larger than this is not one (the biggest of KubeRay's samples is under 20 KiB)
MAX_BYTES = 4 * 1024 * 1024


def read_manifest(path: str) -> ManifestFacts:
    """The manifest's facts; :class:`InputError` (a usage error) when it is not a readable RayJob/RayCluster file."""
    text = read_text(path, what="KubeRay manifest", max_bytes=MAX_BYTES)
    try:
        return parse_manifests(text, path)
    except ManifestError as exc:
        raise InputError(f"KubeRay manifest {path}: {exc}", path=path, reason=str(exc)) from None


@probe("kuberay_manifest", needs=["profile"], timeout=10)
def kuberay_manifest(profile) -> ManifestFacts:
    """The RayJob/RayCluster manifest named by --kuberay-manifest, parsed (or why it cannot be)."""
    path = profile.kuberay_manifest
    if not path:
        return ManifestFacts(given=False)
    path = os.path.expanduser(path)
    try:
        return read_manifest(path)
    except InputError as exc:
        return ManifestFacts(given=True, path=path, error=exc.reason)
