"""kuberay.deadline: a RayJob has an activeDeadlineSeconds (Ray Train retries its start without limit)."""
from kuberay_lab import KUBERAY, judge
from paste_lint import paste_problems

from dsv3_preflight.kuberay.job import judge_deadline
from dsv3_preflight.result import Actor, Status


def test_no_deadline_warns_with_trains_endless_retry():
    r = judge("rayjob_loses_checkpoints.yaml", judge_deadline)
    assert r.status is Status.WARN and r.actor is Actor.JOB and r.cause == "kuberay.no_deadline"
    assert r.summary.startswith(f"{KUBERAY}/rayjob_loses_checkpoints.yaml:3: RayJob pytorch-lora-* has no "
                                "activeDeadlineSeconds")
    assert "(controller_failure_limit -1)" in r.summary
    assert "${DEADLINE_S:?seconds the whole job may take, start-up included}" in r.remediation
    assert paste_problems(r.remediation) == []


def test_a_deadline_passes():
    r = judge("rayjob_good.yaml", judge_deadline)
    assert r.status is Status.PASS and r.summary == "RayJob lora-finetune: activeDeadlineSeconds 86400"


def test_a_raycluster_has_no_deadline_to_judge():
    assert judge("raycluster_8gpu.yaml", judge_deadline).status is Status.SKIP
