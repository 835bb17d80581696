"""kuberay.storage: the storage path a RayJob states outlives the pods, and every pod sees it."""
from kuberay_lab import KUBERAY, judge
from paste_lint import paste_problems

from dsv3_preflight.kuberay.storage import judge_storage
from dsv3_preflight.result import Actor, Status


def test_shutdown_with_ray_trains_default_under_torchtrainer_fails_at_the_shutdown_line():
    r = judge("rayjob_loses_checkpoints.yaml", judge_storage)
    assert r.status is Status.FAIL and r.actor is Actor.JOB and r.cause == "kuberay.storage_in_pod"
    assert r.summary.startswith(f"{KUBERAY}/rayjob_loses_checkpoints.yaml:8: RayJob pytorch-lora-*: "
                                "shutdownAfterJobFinishes: true deletes the pods")
    assert "storage_path ~/ray_results (Ray Train's default: the entrypoint names TorchTrainer" in r.summary
    assert "inside the pods of head, gpu-group" in r.summary
    assert [p["kind"] for p in r.evidence["RayJob pytorch-lora-*"]["where"]] == ["pod", "pod"]
    assert "persistentVolumeClaim" in r.remediation and "storage_path=" in r.remediation
    assert paste_problems(r.remediation) == []


def test_shutdown_with_a_storage_path_env_var_on_an_emptydir_fails():
    r = judge("rayjob_env_scaling.yaml", judge_storage)
    assert r.status is Status.FAIL
    assert "storage_path /home/ray/checkpoints (env STORAGE_PATH (head container ray-head))" in r.summary
    assert {p["detail"] for p in r.evidence["RayJob env-scaling"]["where"]} == {
        "/home/ray/checkpoints: volume scratch (emptyDir) at /home/ray/checkpoints"}


def test_a_storage_path_on_a_claim_every_group_mounts_passes():
    r = judge("rayjob_good.yaml", judge_storage)
    assert r.status is Status.PASS, r.summary
    assert "storage_path /mnt/cluster_storage/lora-finetune (entrypoint --storage-path)" in r.summary


def test_a_bucket_uri_passes_with_shutdown():
    r = judge("rayjob_good.yaml", judge_storage,
              {"--storage-path /mnt/cluster_storage/lora-finetune": "--storage-path=s3://team-ckpt/lora"})
    assert r.status is Status.PASS and "s3:// storage, outside the pods" in r.summary


def test_the_claim_on_the_head_only_fails_for_the_workers():
    r = judge("rayjob_good.yaml", judge_storage, {"""                  - mountPath: /mnt/cluster_storage
                    name: cluster-storage
                  - mountPath: /dev/shm""": """                  - mountPath: /dev/shm"""})
    assert r.status is Status.FAIL and "inside the pods of gpu-group" in r.summary


def test_a_pod_local_path_without_shutdown_warns_at_the_first_checkpoint():
    r = judge("rayjob_loses_checkpoints.yaml", judge_storage,
              {"shutdownAfterJobFinishes: true": "shutdownAfterJobFinishes: false"})
    assert r.status is Status.WARN and "Unable to set up cluster storage" in r.summary
    assert "rayjob_loses_checkpoints.yaml:10: RayJob pytorch-lora-*: storage_path ~/ray_results" in r.summary


def test_a_hostpath_outlives_the_pods_but_warns_that_each_node_has_its_own():
    r = judge("rayjob_idle_gpus.yaml", judge_storage)
    assert r.status is Status.WARN
    assert "storage_path /data/ray_results (entrypoint RunConfig(storage_path=...)) is a hostPath on head, gpu-group" \
        in r.summary


def test_an_entrypoint_that_names_no_storage_path_is_not_guessed():
    r = judge("rayjob_script_sets.yaml", judge_storage)
    assert r.status is Status.SKIP
    assert "the entrypoint names no storage path" in r.summary and "the script sets it" in r.summary


def test_a_raycluster_has_no_entrypoint_to_judge():
    r = judge("raycluster_8gpu.yaml", judge_storage)
    assert r.status is Status.SKIP and "a RayCluster runs no entrypoint" in r.summary
