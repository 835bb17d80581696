"""kuberay.gpu_limits: nvidia.com/gpu × replicas hold the ScalingConfig the entrypoint states."""
from kuberay_lab import KUBERAY, facts, judge
from paste_lint import paste_problems

from dsv3_preflight.kuberay.entrypoint import environment, scaling_claim
from dsv3_preflight.kuberay.pods import judge_gpus
from dsv3_preflight.result import Actor, Status


def test_more_gpu_workers_than_the_pods_hold_fail_with_the_numbers():
    r = judge("rayjob_env_scaling.yaml", judge_gpus)
    assert r.status is Status.FAIL and r.actor is Actor.JOB and r.cause == "kuberay.gpus_mismatch"
    assert r.summary.startswith(f"{KUBERAY}/rayjob_env_scaling.yaml:10: RayJob env-scaling: the ScalingConfig asks "
                                "num_workers 8 × 1 GPU = 8 GPUs (num_workers from env NUM_WORKERS (runtimeEnvYAML "
                                "env_vars), use_gpu from env USE_GPU (runtimeEnvYAML env_vars)); the pods hold 4 such "
                                "worker(s) (head: 1 pod(s) × 0 GPU; a100x2: 2 pod(s) × 2 GPU)")
    assert "placement group stays pending" in r.summary
    assert paste_problems(r.remediation) == []


def test_a_worker_larger_than_any_pod_fails():
    r = judge("rayjob_idle_gpus.yaml", judge_gpus,
              {"ScalingConfig(num_workers=2, use_gpu=True)":
               "ScalingConfig(num_workers=2, use_gpu=True, resources_per_worker={'GPU': 8})"})
    assert r.status is Status.FAIL
    assert "num_workers 2 × 8 GPU = 16 GPUs" in r.summary and "the pods hold 0 such worker(s)" in r.summary


def test_the_workers_fit_the_pods_exactly():
    r = judge("rayjob_good.yaml", judge_gpus)
    assert r.status is Status.PASS
    assert "num_workers 4 × 1 GPU = 4 GPUs (num_workers from entrypoint --num-workers/--num_workers, use_gpu from " \
           "entrypoint --use-gpu/--use_gpu) fit the pods exactly" in r.summary


def test_gpus_the_scalingconfig_leaves_idle_warn():
    r = judge("rayjob_idle_gpus.yaml", judge_gpus)
    assert r.status is Status.WARN and "the pods have 4 GPUs" in r.summary and "2 GPU(s) stay idle" in r.summary


def test_use_gpu_false_on_gpu_pods_warns():
    r = judge("rayjob_good.yaml", judge_gpus, {" --use-gpu ": " --use-gpu=false "})
    assert r.status is Status.WARN and r.summary.endswith("use_gpu is false")


def test_the_autoscaler_may_grow_a_group_to_max_replicas():
    r = judge("rayjob_env_scaling.yaml", judge_gpus, {
        "  rayClusterSpec:\n": "  rayClusterSpec:\n    enableInTreeAutoscaling: true\n",
        "      - replicas: 2\n": "      - replicas: 2\n        maxReplicas: 4\n"})
    assert r.status is Status.PASS, r.summary
    assert r.evidence["RayJob env-scaling"]["scaling"]["num_workers"] == 8


def test_a_scalingconfig_the_script_sets_is_not_guessed():
    r = judge("rayjob_script_sets.yaml", judge_gpus)
    assert r.status is Status.SKIP
    assert "num_workers and use_gpu or GPUs per worker not stated on the entrypoint's command line" in r.summary


def test_a_raycluster_has_no_scalingconfig():
    r = judge("raycluster_8gpu.yaml", judge_gpus)
    assert r.status is Status.SKIP and "no ScalingConfig to compare" in r.summary


def test_a_dataloaders_num_workers_is_not_read_as_the_scalingconfigs():
    manifest = facts("rayjob_idle_gpus.yaml", {"ScalingConfig(num_workers=2, use_gpu=True)":
                                               "ScalingConfig(use_gpu=True), loader=DataLoader(ds, num_workers=6)"})
    claim = scaling_claim(manifest["manifests"][0], environment(manifest["manifests"][0]))
    assert claim["num_workers"] is None and claim["use_gpu"] is True and claim["unknown"] == [
        "num_workers", "gpus_per_worker"]
