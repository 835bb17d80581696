"""Rules on what the pods get: a tmpfs at /dev/shm for GPU pods, and GPUs that fit the ScalingConfig.

- A container's /dev/shm is 64 MiB by default (Docker and containerd). NCCL moves the traffic between the GPUs of
  one pod through it, and PyTorch's DataLoader workers (``num_workers > 0``) pass their batches through it. The
  manifest shows the GPUs per pod; it does not show whether the script starts DataLoader workers.
- Ray Train places ``num_workers`` workers of ``resources_per_worker`` GPUs each (1 with ``use_gpu``); a worker
  cannot span two pods. When the pods cannot hold them, the placement group stays pending and Ray Train V2
  retries the start without limit.
"""
from __future__ import annotations

import math

from dsv3_preflight.result import Actor, Finding, failure, warning

from . import fixes
from .entrypoint import ScalingClaim, environment, scaling_claim, workers_gpus
from .manifest import (
    GPU_RESOURCE,
    Group,
    ManifestFacts,
    RayManifest,
    gpus_per_pod,
    job_line,
    pods,
    ray_container,
    volume_of,
)
from .verdict import Judgement, at

SHM_CAUSE = "kuberay.shm_default"
GPU_CAUSE = "kuberay.gpus_mismatch"


def shm_volume(group: Group) -> str | None:
    """What is mounted at /dev/shm in the Ray container: "tmpfs" for an emptyDir of medium Memory, else the
    volume's source; None when nothing is (the container default)."""
    container = ray_container(group)
    mount = next((m for m in (container["mounts"] if container else []) if m["path"].rstrip("/") == "/dev/shm"), None)
    if mount is None:
        return None
    volume = volume_of(group, mount)
    if volume and volume["source"] == "emptyDir" and (volume["medium"] or "").lower() == "memory":
        return "tmpfs" + (f" (sizeLimit {volume['size_limit']})" if volume["size_limit"] else "")
    return volume["source"] if volume else f"undeclared volume {mount['volume']}"


def rule_shm(facts: ManifestFacts, manifest: RayManifest, group: Group) -> Finding | None:
    """FAIL: a pod with 2+ GPUs and no tmpfs at /dev/shm; WARN: one GPU (no NCCL peer in the pod, but
    DataLoader workers would need it)."""
    gpus, mounted = gpus_per_pod(group), shm_volume(group)
    if gpus == 0 or (mounted or "").startswith("tmpfs"):
        return None
    where = f"{at(facts, group['line'])}: {manifest['kind']} {manifest['name']}, group {group['name']}"
    left = "left at the container default (64 MiB)" if mounted is None else f"mounted from {mounted}, not a tmpfs"
    fix = fixes.shm_fix(facts["path"], manifest, group)
    if gpus >= 2:
        return failure(f"{where}: {GPU_RESOURCE} {gpus} per pod and /dev/shm {left}: NCCL moves the traffic between "
                       "the GPUs of one pod through /dev/shm and fails with 'No space left on device'", fix,
                       actor=Actor.JOB, cause=SHM_CAUSE)
    return warning(f"{where}: {GPU_RESOURCE} 1 per pod and /dev/shm {left}: no NCCL peer shares the pod, but "
                   "DataLoader workers (num_workers > 0) pass batches through /dev/shm and die with a bus error; "
                   "the manifest does not show whether the script starts them", fix, actor=Actor.JOB, cause=SHM_CAUSE)


def judge_shm(facts: ManifestFacts) -> Judgement:
    judged = Judgement()
    for manifest in facts["manifests"]:
        for group in manifest["groups"]:
            label = f"{manifest['kind']} {manifest['name']} {group['name']}"
            gpus, mounted = gpus_per_pod(group), shm_volume(group)
            judged.evidence[label] = {"gpus_per_pod": gpus, "dev_shm": mounted or "container default"}
            if gpus == 0:
                judged.not_judged.append(f"{label}: no {GPU_RESOURCE}: whether DataLoader workers need /dev/shm is "
                                         "not in the manifest")
                continue
            found = rule_shm(facts, manifest, group)
            judged.findings.add(found, rule="rule_shm")
            if found is None:
                judged.ok.append(f"{label}: {gpus} GPU(s) per pod, /dev/shm is a {mounted}")
        if not manifest["groups"]:
            judged.not_judged.append(f"{manifest['kind']} {manifest['name']}: no pods in this file (clusterSelector)")
    return judged


def capacity(manifest: RayManifest, per_worker: float) -> tuple[int, float, list[str]]:
    """(workers the pods can hold, GPUs they have, one line per group) for workers of ``per_worker`` GPUs."""
    held, total, lines = 0, 0.0, []
    for group in manifest["groups"]:
        gpus, count = gpus_per_pod(group), pods(group, manifest["autoscaling"])
        fits = count * (math.floor(gpus / per_worker + 1e-9) if per_worker > 0 else 0)
        held, total = held + fits, total + gpus * count
        grow = " (maxReplicas: the autoscaler may grow it)" if manifest["autoscaling"] and group["role"] == "worker" else ""
        lines.append(f"{group['name']}: {count} pod(s) × {gpus} GPU{grow}")
    return held, total, lines


def _numbers(claim: ScalingClaim, per: float) -> str:
    num = claim["num_workers"] or 0
    return (f"num_workers {num} × {per:g} GPU = {num * per:g} GPUs "
            f"({', '.join(f'{k} from {v}' for k, v in claim['sources'].items())})")


def rule_gpus(facts: ManifestFacts, manifest: RayManifest, claim: ScalingClaim, per: float) -> Finding | None:
    """FAIL: the pods cannot hold num_workers workers (the placement group pends forever); WARN: GPUs idle."""
    num = claim["num_workers"] or 0
    held, total, lines = capacity(manifest, per)
    where = f"{at(facts, job_line(manifest, 'entrypoint'))}: RayJob {manifest['name']}"
    fix = ("# make the worker groups hold num_workers workers (or lower num_workers): replicas × "
           f"{GPU_RESOURCE} per pod, each pod a whole number of workers\n"
           + "\n".join(fixes.yq_edit(facts["path"], manifest, f"{g['yq']}.replicas", "=",
                                     "${REPLICAS:?pods in group " + g["name"] + "}")
                       for g in manifest["groups"] if g["role"] == "worker"))
    if per > 0 and held < num:
        return failure(f"{where}: the ScalingConfig asks {_numbers(claim, per)}; the pods hold {held} such worker(s) "
                       f"({'; '.join(lines)}): the placement group stays pending and Ray Train retries the start "
                       "without end", fix, actor=Actor.JOB, cause=GPU_CAUSE)
    if total > num * per:
        idle = "use_gpu is false" if per == 0 else f"{total - num * per:g} GPU(s) stay idle"
        return warning(f"{where}: the ScalingConfig asks {_numbers(claim, per)}; the pods have {total:g} GPUs "
                       f"({'; '.join(lines)}): {idle}", fix, actor=Actor.JOB, cause=GPU_CAUSE)
    return None


def judge_gpus(facts: ManifestFacts) -> Judgement:
    judged = Judgement()
    for manifest in facts["manifests"]:
        label = f"{manifest['kind']} {manifest['name']}"
        if manifest["job"] is None or not manifest["groups"]:
            why = "a RayCluster runs no entrypoint" if manifest["job"] is None else "its pods are not in this file"
            judged.not_judged.append(f"{label}: {why}: no ScalingConfig to compare")
            continue
        claim = scaling_claim(manifest, environment(manifest))
        per = workers_gpus(claim)
        judged.evidence[label] = {"scaling": claim}
        if claim["num_workers"] is None or per is None:
            missing = [w for w, gone in (("num_workers", claim["num_workers"] is None),
                                         ("use_gpu or GPUs per worker", per is None)) if gone]
            judged.not_judged.append(
                f"{label}: {' and '.join(missing)} not stated on the entrypoint's command line, in a "
                "ScalingConfig(...) it writes, or as NUM_WORKERS/USE_GPU/GPUS_PER_WORKER: the script sets them")
            continue
        found = rule_gpus(facts, manifest, claim, per)
        judged.findings.add(found, rule="rule_gpus")
        if found is None:
            judged.ok.append(f"{label}: {_numbers(claim, per)} fit the pods exactly")
    return judged
