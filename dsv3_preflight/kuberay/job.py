"""Rules on a RayJob's lifecycle and its NCCL interface.

- Ray Train V2 retries the start of a worker group without limit (``FailureConfig.controller_failure_limit``
  defaults to -1): a ScalingConfig the pods cannot hold waits forever unless the RayJob has an
  ``activeDeadlineSeconds``.
- ``backoffLimit`` retries a failed RayJob by deleting its RayCluster and building a new one.
- Ray Train no longer sets ``NCCL_SOCKET_IFNAME`` (ray-project/ray#42808): NCCL picks an interface itself.
"""
from __future__ import annotations

from collections.abc import Callable

from dsv3_preflight.result import Actor, Finding, warning

from . import fixes
from .entrypoint import environment
from .manifest import Group, ManifestFacts, RayManifest, gpus_per_pod, ray_container, runtime_env_var
from .verdict import Judgement, at

DEADLINE_CAUSE = "kuberay.no_deadline"
BACKOFF_CAUSE = "kuberay.backoff_rebuilds"
NCCL_CAUSE = "kuberay.nccl_ifname_unset"
NCCL_VAR = "NCCL_SOCKET_IFNAME"


def rule_deadline(facts: ManifestFacts, manifest: RayManifest) -> Finding | None:
    job = manifest["job"]
    if job is None or job["active_deadline_seconds"] is not None:
        return None
    fix = fixes.spec_fix(facts["path"], manifest, "activeDeadlineSeconds",
                         "${DEADLINE_S:?seconds the whole job may take, start-up included}")
    return warning(f"{at(facts, manifest['line'])}: RayJob {manifest['name']} has no activeDeadlineSeconds: when its "
                   "ScalingConfig cannot be placed, Ray Train retries the worker group's start without limit "
                   "(controller_failure_limit -1) and the job holds its pods forever", fix,
                   actor=Actor.JOB, cause=DEADLINE_CAUSE)


def rule_backoff(facts: ManifestFacts, manifest: RayManifest) -> Finding | None:
    job = manifest["job"]
    if job is None or not job["backoff_limit"]:
        return None
    fix = ("# retry inside the job instead (FailureConfig(max_failures=N) resumes from the last checkpoint)\n"
           + fixes.spec_fix(facts["path"], manifest, "backoffLimit", "0"))
    return warning(f"{at(facts, job['lines'].get('backoffLimit'))}: RayJob {manifest['name']}: backoffLimit "
                   f"{job['backoff_limit']}: each retry deletes the RayCluster and builds a new one (pods scheduled and "
                   f"images pulled again), so a start-up that cannot succeed runs {job['backoff_limit'] + 1} times",
                   fix, actor=Actor.JOB, cause=BACKOFF_CAUSE)


def judge_lifecycle(rule: Callable[[ManifestFacts, RayManifest], Finding | None], what: str,
                    field: str) -> Callable[[ManifestFacts], Judgement]:
    """A judgement over every RayJob with one lifecycle rule on the spec key ``what`` (JobSpec ``field``)."""
    def judge(facts: ManifestFacts) -> Judgement:
        judged = Judgement()
        for manifest in facts["manifests"]:
            label = f"{manifest['kind']} {manifest['name']}"
            if manifest["job"] is None:
                judged.not_judged.append(f"{label}: a RayCluster has no {what} (a RayJob's setting)")
                continue
            judged.evidence[label] = {what: manifest["job"][field]}  # type: ignore[literal-required]
            found = rule(facts, manifest)
            judged.findings.add(found, rule=rule.__name__)
            if found is None:
                value = judged.evidence[label][what]
                judged.ok.append(f"{label}: {what} {'not set (KubeRay: 0)' if value is None else value}")
        return judged
    return judge


judge_deadline = judge_lifecycle(rule_deadline, "activeDeadlineSeconds", "active_deadline_seconds")
judge_backoff = judge_lifecycle(rule_backoff, "backoffLimit", "backoff_limit")


def _set_in(group: Group) -> bool | None:
    """True when the Ray container sets NCCL_SOCKET_IFNAME, None when an envFrom/valueFrom may (not shown)."""
    container = ray_container(group)
    if container is None:
        return False
    if container["env"].get(NCCL_VAR):
        return True
    if NCCL_VAR in container["env"] or container["env_from"]:
        return None
    return False


def rule_nccl_ifname(facts: ManifestFacts, manifest: RayManifest) -> Finding | None:
    gpu_groups = [g for g in manifest["groups"] if gpus_per_pod(g) > 0]
    if runtime_env_var(manifest, NCCL_VAR):
        return None   # the job's runtime env reaches every Ray Train worker
    missing = [g for g in gpu_groups if _set_in(g) is not True]
    if not missing:
        return None
    hidden = [g["name"] for g in missing if _set_in(g) is None]
    maybe = f" (unless the envFrom/valueFrom of {', '.join(hidden)} sets it: not shown here)" if hidden else ""
    placeholder = "${NCCL_SOCKET_IFNAME:?the pod interface on the training network, for example eth0 or net1}"
    fix = "\n".join(fixes.env_fix(facts["path"], manifest, g, NCCL_VAR, placeholder) for g in missing)
    return warning(f"{at(facts, missing[0]['line'])}: {manifest['kind']} {manifest['name']}: no {NCCL_VAR} in the "
                   f"runtime env or the containers of {', '.join(g['name'] for g in missing)}{maybe}: Ray Train no "
                   "longer sets it, so NCCL picks an interface itself, and with a second network in the pod it may "
                   "pick one the other pods cannot reach", fix, actor=Actor.JOB, cause=NCCL_CAUSE)


def judge_nccl_ifname(facts: ManifestFacts) -> Judgement:
    judged = Judgement()
    for manifest in facts["manifests"]:
        label = f"{manifest['kind']} {manifest['name']}"
        gpu_groups = [g for g in manifest["groups"] if gpus_per_pod(g) > 0]
        if not gpu_groups:
            judged.not_judged.append(f"{label}: no group asks for GPUs: NCCL is not used")
            continue
        env = environment(manifest)
        judged.evidence[label] = {
            "runtime_env": runtime_env_var(manifest, NCCL_VAR),
            "containers": {g["name"]: (ray_container(g) or {"env": {}})["env"].get(NCCL_VAR) for g in gpu_groups},
            "hidden": env["hidden"]}
        found = rule_nccl_ifname(facts, manifest)
        judged.findings.add(found, rule="rule_nccl_ifname")
        if found is None:
            judged.ok.append(f"{label}: {NCCL_VAR} set for every GPU group")
    return judged
