"""kuberay.backoff: a RayJob does not retry by rebuilding its RayCluster."""
from kuberay_lab import KUBERAY, judge
from paste_lint import paste_problems

from dsv3_preflight.kuberay.job import judge_backoff
from dsv3_preflight.result import Actor, Status


def test_a_backoff_limit_warns_at_its_line_with_the_number_of_clusters():
    r = judge("rayjob_loses_checkpoints.yaml", judge_backoff)
    assert r.status is Status.WARN and r.actor is Actor.JOB and r.cause == "kuberay.backoff_rebuilds"
    assert r.summary.startswith(f"{KUBERAY}/rayjob_loses_checkpoints.yaml:9: RayJob pytorch-lora-*: backoffLimit 2: "
                                "each retry deletes the RayCluster and builds a new one")
    assert "runs 3 times" in r.summary
    assert r.remediation.endswith('yq -i "(select(document_index == 0) | .spec.backoffLimit) = 0" '
                                  f"{KUBERAY}/rayjob_loses_checkpoints.yaml")
    assert paste_problems(r.remediation) == []


def test_backoff_limit_zero_passes():
    r = judge("rayjob_good.yaml", judge_backoff)
    assert r.status is Status.PASS and r.summary == "RayJob lora-finetune: backoffLimit 0"


def test_no_backoff_limit_is_kuberays_zero():
    r = judge("rayjob_env_scaling.yaml", judge_backoff)
    assert r.status is Status.PASS and r.summary == "RayJob env-scaling: backoffLimit not set (KubeRay: 0)"
