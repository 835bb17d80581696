"""The doctor reads Ray Train's start-up failures as causes: a ScalingConfig the cluster cannot place (the worker
group's start timing out and retried without end, a placement group that stays pending) and a storage path a worker
cannot see. Two of the logs are recorded runs of Ray 2.60 (tests/data/doctor/SOURCES.md)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import python_cli
from paste_lint import paste_problems

from dsv3_preflight.doctor import triage

DATA = Path(__file__).resolve().parents[1] / "data" / "doctor"


def _log(tmp_path, lines):
    path = tmp_path / "driver.log"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_start_up_retried_without_end_is_the_scalingconfig_the_cluster_cannot_place():
    doc = triage([str(DATA / "ray_train_startup_retry.log")])
    assert (doc["verdict"], doc["exit_code"], doc["cause_class"]) == ("failure", 1, "ray_train")
    top = doc["findings"][0]
    assert (top["id"], top["check"], top["actor"]) == ("raytrain.worker_group_startup_timeout", "kuberay.gpu_limits", "job")
    assert top["title"] == ("Ray Train could not place its 4 workers within 3.0 s: the ScalingConfig waits for "
                            "resources")
    assert "controller_failure_limit" in top["root_cause"] and paste_problems(top["fix"]) == []


def test_a_worker_that_cannot_see_the_storage_path_is_named():
    doc = triage([str(DATA / "ray_train_storage_head_local.log")])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "ray_train")
    top = doc["findings"][0]
    assert (top["id"], top["check"]) == ("raytrain.storage_unreachable", "kuberay.storage")
    assert "~/ray_results" in top["root_cause"] and paste_problems(top["fix"]) == []


def test_the_retry_line_is_a_consequence_of_the_failure_it_retries(tmp_path):
    doc = triage([_log(tmp_path, [
        "(TrainController pid=2211) Retrying the launch of the training worker group. The previous launch attempt "
        "encountered the following failure:",
        "(TrainController pid=2211) The worker group startup timed out after 30.0 seconds waiting for 16 workers. "
        "Potential causes include: (1) temporary insufficient cluster resources while waiting for autoscaling"])])
    assert [f["id"] for f in doc["findings"]][:1] == ["raytrain.worker_group_startup_timeout"]


def test_the_retry_line_alone_still_names_ray_train(tmp_path):
    doc = triage([_log(tmp_path, [
        "2025-10-28 14:50:18.369\t[FailurePolicy] Decision: FailureDecision.RETRY, Error source: controller, Error count "
        "/ maximum errors allowed: 1/inf, Error: Training failed due to controller error:"])])
    assert (doc["cause_class"], doc["findings"][0]["id"]) == ("ray_train", "raytrain.worker_group_start_retry")


def test_a_timeout_the_autoscaler_then_resolves_is_not_the_cause(tmp_path):
    doc = triage([_log(tmp_path, [
        "(TrainController pid=2211) The worker group startup timed out after 30.0 seconds waiting for 16 workers. "
        "Potential causes include: (1) temporary insufficient cluster resources while waiting for autoscaling",
        "Training finished iteration 1 at 2025-10-28 15:02:11. Total running time: 12min 3s"])])
    assert doc["exit_code"] == 0, doc["summary"]


@pytest.mark.parametrize("line, sid", [
    ("TimeoutError: Placement group creation timed out. Make sure your cluster either has enough resources or use an "
     "autoscaling cluster.", "raytrain.placement_group_timeout"),
    ("(autoscaler +1m2s) Warning: No available node types can fulfill placement group requests (detail=): "
     "{'GPU': 8.0}*2. Add suitable node types to this cluster to resolve this issue.",
     "raytrain.placement_group_infeasible"),
])
def test_a_placement_group_that_stays_pending_is_named(tmp_path, line, sid):
    doc = triage([_log(tmp_path, [line])])
    assert (doc["cause_class"], doc["findings"][0]["id"]) == ("ray_train", sid)


def test_the_cli_names_the_cause_from_the_recorded_log():
    proc = subprocess.run(python_cli("doctor", str(DATA / "ray_train_startup_retry.log")), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1
    assert "root cause: Ray Train could not place its 4 workers within 3.0 s" in proc.stdout
