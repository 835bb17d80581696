"""Rule: a RayJob's Ray Train storage path outlives the pods and is seen by every pod.

With ``shutdownAfterJobFinishes: true`` KubeRay deletes the RayCluster when the entrypoint ends: a storage path
inside the pods (no volume mounted there, or an ``emptyDir``) is deleted with it, checkpoints included. Without
it, a pod-local path still differs from pod to pod, and Ray Train fails at the first checkpoint with "Unable to
set up cluster storage" (ray-project/ray#37177, #41641).
"""
from __future__ import annotations

import posixpath
import re
from typing import TypedDict

from dsv3_preflight.result import Actor, Finding, failure, warning

from . import fixes
from .entrypoint import DEFAULT_STORAGE_PATH, RAY_IMAGE_HOME, StorageClaim, environment, storage_claim
from .manifest import (
    NODE_VOLUMES,
    SHARED_VOLUMES,
    Group,
    ManifestFacts,
    RayManifest,
    job_line,
    ray_container,
    volume_of,
)
from .verdict import Judgement, at

CAUSE = "kuberay.storage_in_pod"
SHARED_MOUNT = "/mnt/cluster_storage"
_URI = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


class Location(TypedDict):
    group: str
    kind: str               # "remote", "shared", "node" or "pod"
    detail: str


def locate(path: str, group: Group) -> Location:
    """Where ``path`` lives for the pods of ``group``: a remote URI, a shared volume, the node, or the pod."""
    scheme = _URI.match(path)
    if scheme and scheme.group(1).lower() not in ("file", "local"):
        return Location(group=group["name"], kind="remote", detail=f"{scheme.group(1)}:// storage, outside the pods")
    local = _URI.sub("", path)
    if local.startswith("~"):
        local = RAY_IMAGE_HOME + local[1:]   # the rayproject/ray images' home
    if not local.startswith("/"):
        return Location(group=group["name"], kind="pod", detail="a relative path: inside the pod's working directory")
    local = posixpath.normpath(local)
    container = ray_container(group)
    mounts = [m for m in (container["mounts"] if container else [])
              if local == m["path"].rstrip("/") or local.startswith(m["path"].rstrip("/") + "/")]
    if not mounts:
        return Location(group=group["name"], kind="pod", detail=f"{local}: no volume is mounted there")
    mount = max(mounts, key=lambda m: len(m["path"]))
    volume = volume_of(group, mount)
    source = volume["source"] if volume else "undeclared"
    where = f"{local}: volume {mount['volume']} ({source}) at {mount['path']}"
    if source in SHARED_VOLUMES:
        return Location(group=group["name"], kind="shared", detail=where)
    if source in NODE_VOLUMES:
        return Location(group=group["name"], kind="node", detail=where)
    return Location(group=group["name"], kind="pod", detail=where)


def _claim_text(claim: StorageClaim) -> str:
    return f"storage_path {claim['path']} ({claim['source']})"


def _fix(facts: ManifestFacts, manifest: RayManifest) -> str:
    volumes = fixes.shared_volume_fix(facts["path"], manifest, manifest["groups"], SHARED_MOUNT)
    return (f"{volumes}\n# and in the training script: RunConfig(storage_path=\"{SHARED_MOUNT}/RUN_NAME\") "
            "(or a bucket URI such as s3:// or gs://)")


def rule_storage(facts: ManifestFacts, manifest: RayManifest, claim: StorageClaim,
                 places: list[Location]) -> Finding | None:
    """FAIL: shutdownAfterJobFinishes deletes a pod-local storage path; WARN: a pod-local or node-local path
    that the other pods do not see."""
    job = manifest["job"]
    assert job is not None
    in_pod = [p for p in places if p["kind"] == "pod"]
    on_node = [p for p in places if p["kind"] == "node"]
    shutdown = job["shutdown_after_job_finishes"] is True
    if in_pod and shutdown:
        return failure(
            f"{at(facts, job_line(manifest, 'shutdownAfterJobFinishes'))}: RayJob {manifest['name']}: "
            f"shutdownAfterJobFinishes: true deletes the pods when the job ends, and {_claim_text(claim)} "
            f"lives inside the pods of {', '.join(p['group'] for p in in_pod)}: the checkpoints and results are "
            "deleted with the cluster", _fix(facts, manifest), actor=Actor.JOB, cause=CAUSE)
    if in_pod and len(manifest["groups"]) > 1:
        return warning(
            f"{at(facts, job_line(manifest, 'entrypoint'))}: RayJob {manifest['name']}: {_claim_text(claim)} "
            f"lives inside the pods of {', '.join(p['group'] for p in in_pod)}: each pod has its own copy, and Ray "
            "Train fails at the first checkpoint with 'Unable to set up cluster storage'",
            _fix(facts, manifest), actor=Actor.JOB, cause=CAUSE)
    if on_node and len(manifest["groups"]) > 1:
        return warning(
            f"{at(facts, job_line(manifest, 'entrypoint'))}: RayJob {manifest['name']}: {_claim_text(claim)} is a "
            f"hostPath on {', '.join(p['group'] for p in on_node)}: it outlives the pods, but each Kubernetes node "
            "keeps its own copy, which the pods on other nodes do not see", _fix(facts, manifest),
            actor=Actor.JOB, cause=CAUSE)
    return None


def judge_storage(facts: ManifestFacts) -> Judgement:
    """Every RayJob's storage path, located in every group's pods."""
    judged = Judgement()
    for manifest in facts["manifests"]:
        label = f"{manifest['kind']} {manifest['name']}"
        if manifest["job"] is None:
            judged.not_judged.append(f"{label}: a RayCluster runs no entrypoint (its jobs name their storage path)")
            continue
        env = environment(manifest)
        claim = storage_claim(manifest, env)
        if claim is None:
            judged.not_judged.append(
                f"{label}: the entrypoint names no storage path (no --storage-path, RunConfig(storage_path=...), "
                "*STORAGE_PATH variable) and no TorchTrainer: the script sets it, or uses Ray Train's default "
                f"{DEFAULT_STORAGE_PATH}, which the manifest does not show")
            continue
        if not manifest["groups"]:
            judged.not_judged.append(f"{label}: runs on an existing cluster (clusterSelector): its pods are not in "
                                     "this file")
            continue
        places = [locate(claim["path"], g) for g in manifest["groups"]]
        judged.evidence[label] = {"storage": claim, "where": places,
                                  "shutdownAfterJobFinishes": manifest["job"]["shutdown_after_job_finishes"]}
        found = rule_storage(facts, manifest, claim, places)
        judged.findings.add(found, rule="rule_storage")
        if found is None:
            judged.ok.append(f"{label}: {_claim_text(claim)}: "
                             + "; ".join(f"{p['group']}: {p['detail']}" for p in places))
    return judged
