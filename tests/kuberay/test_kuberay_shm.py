"""kuberay.shm: pods with GPUs mount a tmpfs at /dev/shm instead of the container's 64 MiB."""
from kuberay_lab import KUBERAY, judge
from paste_lint import paste_problems

from dsv3_preflight.kuberay.pods import judge_shm
from dsv3_preflight.result import Actor, Status


def test_two_gpus_per_pod_without_a_tmpfs_fail_at_the_groups_line():
    r = judge("rayjob_env_scaling.yaml", judge_shm)
    assert r.status is Status.FAIL and r.actor is Actor.JOB and r.cause == "kuberay.shm_default"
    assert r.summary.startswith(f"{KUBERAY}/rayjob_env_scaling.yaml:34: RayJob env-scaling, group a100x2: "
                                "nvidia.com/gpu 2 per pod and /dev/shm left at the container default (64 MiB)")
    assert ".spec.rayClusterSpec.workerGroupSpecs[0].template.spec.volumes) += [{\\\"name\\\": \\\"dshm\\\"" \
        in r.remediation
    assert paste_problems(r.remediation) == []


def test_eight_gpus_of_a_raycluster_fail_too():
    r = judge("raycluster_8gpu.yaml", judge_shm)
    assert r.status is Status.FAIL and "group h100x8: nvidia.com/gpu 8 per pod" in r.summary
    assert ".spec.workerGroupSpecs[0].template.spec.containers[0].volumeMounts" in r.remediation


def test_one_gpu_per_pod_warns_and_says_what_the_manifest_cannot_show():
    r = judge("rayjob_loses_checkpoints.yaml", judge_shm)
    assert r.status is Status.WARN
    assert "no NCCL peer shares the pod" in r.summary
    assert "the manifest does not show whether the script starts them" in r.summary


def test_a_memory_emptydir_at_dev_shm_passes():
    r = judge("rayjob_good.yaml", judge_shm)
    assert r.status is Status.PASS
    assert "gpu-group: 2 GPU(s) per pod, /dev/shm is a tmpfs (sizeLimit 32Gi)" in r.summary


def test_a_disk_emptydir_at_dev_shm_is_not_a_tmpfs():
    r = judge("rayjob_good.yaml", judge_shm, {"                  medium: Memory\n": ""})
    assert r.status is Status.FAIL and "/dev/shm mounted from emptyDir, not a tmpfs" in r.summary


def test_pods_without_gpus_are_not_judged():
    r = judge("rayjob_script_sets.yaml", judge_shm)
    assert r.status is Status.SKIP
    assert "cpu-group: no nvidia.com/gpu: whether DataLoader workers need /dev/shm is not in the manifest" in r.summary
