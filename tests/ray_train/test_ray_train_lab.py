"""The Ray Train gate on real parts: TorchTrainer (Train V2, gloo, CPU) on two Ray nodes in network namespaces, each
in its own mount namespace (tests/ray_train_lab.py), driven by examples/ray_train/train_lora.py as a user runs it.

- a head-local storage_path is refused before any training function starts, naming the nodes that cannot see it,
  and the run ends with the gate's error (one report: Train did not retry the start); the same refusal names the
  workers' runtime env pinning Gloo on an interface that is not their route to the rank-0 node;
- the same run with shared storage trains to its end (the gate in code, RunConfig(callbacks=...));
- a ScalingConfig the two one-CPU nodes cannot place is refused before the placement group, with its numbers.
"""
from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("ray.train")
from cluster_lab import LabUnavailable  # noqa: E402
from ray_train_lab import RayTrainLab  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.netns, pytest.mark.ray]


@pytest.fixture(scope="module")
def lab():
    try:
        with RayTrainLab() as running:
            yield running
    except LabUnavailable as exc:
        pytest.skip(f"netns lab unavailable: {exc}")


def report(fit) -> dict:
    assert len(fit.reports) == 1, (fit.reports, fit.stderr[-3000:])
    return json.loads(fit.reports[0].read_text())


def by_name(doc: dict) -> dict[str, dict]:
    return {r["name"]: r for r in doc["results"] if r["node"] == "cluster"}


def test_the_lab_nodes_do_not_share_their_local_dir(lab):
    marker = os.path.join(lab.local_dir, "only-on-node0")
    assert lab.in_node("lab-node0", ["touch", marker]).returncode == 0
    try:
        assert lab.node_sees("lab-node0", marker)
        assert not lab.node_sees("lab-node1", marker)
        assert not os.path.exists(marker)
    finally:
        lab.in_node("lab-node0", ["rm", "-f", marker])


def test_head_local_storage_path_is_refused_before_training_naming_the_nodes(lab):
    started = os.path.join(lab.shared_dir, "started-head-local")
    # no collective gang here (DSV3_PREFLIGHT_RAY_TRAIN_PROBE=0): the storage verdict needs none, and two cores.
    # The workers' runtime env pins Gloo on eth1: no interface of node 0, and not node 1's route to the rank-0 node
    fit = lab.fit(os.path.join(lab.local_dir, "ray_results"), "--started-marker", started,
                  "--env", "GLOO_SOCKET_IFNAME=eth1", DSV3_PREFLIGHT_RAY_TRAIN_PROBE="0")
    assert fit.code == 1, fit.stderr[-3000:]
    assert fit.last_line.startswith("REFUSED"), fit.stdout
    assert "dsv3-preflight refused this Ray Train run before training (NO-GO)" in fit.stderr
    assert "Nodes that cannot see it: lab-node0, lab-node1" in fit.stderr
    assert "who acts: the job's configuration" in fit.stderr
    assert not [n for n in os.listdir(lab.shared_dir) if n.startswith("started-head-local")]   # no rank started
    doc = report(fit)   # one report: the gate ran once, Train did not retry the worker group's start
    storage = by_name(doc)["ray_train.storage"]
    assert storage["status"] == "fail"
    assert storage["evidence"]["unseen_by"] == {"lab-node0": ["lab-node1"], "lab-node1": ["lab-node0"]}
    assert doc["ray_train"]["master_addr"] in ("10.77.0.10", "10.77.0.11")
    assert str(fit.reports[0]).replace(".json", ".html") in fit.stderr
    # the NIC judged in the workers' own runtime env, against each node's route to the rank-0 node's IP
    nic = {r["node"]: r for r in doc["results"] if r["name"] == "net.nic_route"}
    assert sorted(nic) == ["lab-node0", "lab-node1"]
    for node, result in nic.items():
        assert result["status"] == "fail" and "GLOO_SOCKET_IFNAME='eth1'" in result["summary"], (node, result["summary"])
        assert result["evidence"]["master_addr"] == doc["ray_train"]["master_addr"]


def test_shared_storage_trains_to_its_end_with_the_gate_in_code(lab):
    fit = lab.fit(os.path.join(lab.shared_dir, "ray_results"), gate="code")
    assert fit.code == 0, fit.stderr[-4000:]
    assert fit.last_line.startswith("TRAINED loss="), fit.stdout
    doc = report(fit)
    assert doc["verdict"] == "GO", [(r["name"], r["node"], r["summary"]) for r in doc["results"]
                                    if r["status"] in ("fail", "error", "warn")]
    checks = by_name(doc)
    assert checks["ray_train.storage"]["summary"].startswith(
        f"storage_path {os.path.join(lab.shared_dir, 'ray_results')} is one storage for lab-node")
    gang = checks["dist.allreduce_cluster"]
    assert gang["status"] == "pass" and "over 2 ranks correct" in gang["summary"], gang["summary"]
    assert doc["ray_train"]["backend"] == "gloo"
    assert sorted(doc["ray_train"]["nodes"]) == ["lab-node0", "lab-node1"]


def test_a_scaling_config_the_nodes_cannot_place_is_refused_in_seconds_with_its_numbers(lab):
    fit = lab.fit(os.path.join(lab.shared_dir, "ray_results"), "--num-workers", "3", timeout=240.0)
    assert fit.code == 1, fit.stderr[-3000:]
    assert ("ScalingConfig asks for 3 workers × {CPU 1} (PACK) and the 2 live nodes can place 2: "
            "lab-node0 10.77.0.10 (head): CPU 1 → 1 worker; lab-node1 10.77.0.11: CPU 1 → 1 worker. "
            "Cluster totals: CPU 2 of CPU 3") in " ".join(fit.stderr.split())
    assert float(fit.last_line.split(" s:")[0].split()[-1]) < 60, fit.last_line   # not Train's endless retry
    assert by_name(report(fit))["ray_train.scaling"]["status"] == "fail"
