"""The manifest reader (the probe `kuberay_manifest`): RayJobs and RayClusters of a multi-document YAML, with lines."""
import pytest
from kuberay_lab import KUBERAY, facts

from dsv3_preflight.inputs import InputError
from dsv3_preflight.kuberay.manifest import gpus_per_pod, pods
from dsv3_preflight.kuberay.probes.manifest import kuberay_manifest, read_manifest
from dsv3_preflight.profile import resolve_profile


def test_multi_document_file_keeps_the_rayjob_and_names_the_other_documents():
    read = facts("rayjob_good.yaml")
    (job,) = read["manifests"]
    assert (job["kind"], job["name"], job["document"], job["line"]) == ("RayJob", "lora-finetune", 1, 13)
    assert read["others"] == [{"document": 0, "kind": "PersistentVolumeClaim", "name": "cluster-storage", "line": 2}]


def test_the_lines_are_the_lines_of_the_file():
    read = facts("rayjob_good.yaml")
    job = read["manifests"][0]
    lines = (KUBERAY / "rayjob_good.yaml").read_text().splitlines()
    assert lines[job["job"]["lines"]["shutdownAfterJobFinishes"] - 1].strip() == "shutdownAfterJobFinishes: true"
    assert lines[job["job"]["lines"]["entrypoint"] - 1].lstrip().startswith("entrypoint: python")
    worker = job["groups"][1]
    assert lines[worker["line"] - 1].strip() == "- replicas: 2"
    assert [lines[m["line"] - 1].strip() for m in worker["containers"][0]["mounts"]] == [
        "- mountPath: /mnt/cluster_storage", "- mountPath: /dev/shm"]


def test_groups_containers_volumes_and_the_runtime_env_are_typed():
    job = facts("rayjob_good.yaml")["manifests"][0]
    head, worker = job["groups"]
    assert (head["role"], head["yq"]) == ("head", ".spec.rayClusterSpec.headGroupSpec")
    assert (worker["name"], worker["yq"], worker["replicas"]) == ("gpu-group", ".spec.rayClusterSpec.workerGroupSpecs[0]", 2)
    assert worker["containers"][0]["gpu_limit"] == 2 and gpus_per_pod(worker) == 2 and gpus_per_pod(head) == 0
    assert {v["name"]: (v["source"], v["medium"], v["size_limit"]) for v in worker["volumes"]} == {
        "cluster-storage": ("persistentVolumeClaim", None, None), "dshm": ("emptyDir", "Memory", "32Gi")}
    assert job["job"]["runtime_env_vars"] == {"NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": "WARN"}
    assert (job["job"]["active_deadline_seconds"], job["job"]["backoff_limit"]) == (86400, 0)


def test_a_raycluster_has_no_job_and_the_autoscaler_counts_max_replicas():
    cluster = facts("raycluster_8gpu.yaml")["manifests"][0]
    assert cluster["kind"] == "RayCluster" and cluster["job"] is None and cluster["autoscaling"] is True
    worker = cluster["groups"][1]
    assert worker["yq"] == ".spec.workerGroupSpecs[0]"
    assert pods(worker, autoscaling=True) == 4 and pods(worker, autoscaling=False) == 1
    assert worker["containers"][0]["env_from"] == ["nccl-settings"]


def test_generate_name_stands_for_the_name():
    assert facts("rayjob_loses_checkpoints.yaml")["manifests"][0]["name"] == "pytorch-lora-*"


@pytest.mark.parametrize("body, reason", [
    ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n", "no RayJob or RayCluster"),
    ("kind: RayJob\nspec: [unclosed\n", "invalid YAML"),
    ("- a\n- b\n", "is a YAML list, not a Kubernetes object"),
    ("apiVersion: v1alpha1\nkind: RayJob\n", "no RayJob or RayCluster"),
])
def test_a_file_that_is_no_ray_manifest_is_an_input_error_naming_why(tmp_path, body, reason):
    path = tmp_path / "m.yaml"
    path.write_text(body)
    with pytest.raises(InputError) as caught:
        read_manifest(str(path))
    assert reason in str(caught.value) and str(path) in str(caught.value)


def test_the_probe_says_not_given_without_a_manifest_and_carries_a_read_error(tmp_path):
    assert kuberay_manifest.gather(resolve_profile(environ={})) == {"given": False}
    missing = tmp_path / "absent.yaml"
    fact = kuberay_manifest.gather(resolve_profile(cli={"kuberay_manifest": str(missing)}, environ={}))
    assert fact["given"] is True and fact["path"] == str(missing) and fact["error"] == "no such file"
