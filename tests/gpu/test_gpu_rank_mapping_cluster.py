"""gpu.rank_mapping_cluster (checks/gpu_rank_mapping_cluster.py): the cluster-wide rank to GPU map on recorded
nodes (tests/data/gpu/), the field notes' duplicate GPU error first."""
from __future__ import annotations

import json

import pytest
from gpu_lab import DATA, cpu_profile, profile
from gpu_rankmap_lab import NO_NVML, host, nvml

from dsv3_preflight.checks.gpu_rank_mapping_cluster import rank_mapping_cluster
from dsv3_preflight.gpu.rankmap import (
    cluster_problems,
)
from dsv3_preflight.result import Status


def field_notes_cluster():
    doc = json.loads((DATA / "cluster_two_node_ranks_one_host.json").read_text())
    nodes = list(doc["node_ranks"])
    env = {n: {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"} for n in nodes}
    return doc, {n: {"available": True, "gpus": doc["gpus"]} for n in nodes}, env


def test_cluster_mapping_reproduces_the_field_notes_duplicate_gpu_error():
    doc, nv, env = field_notes_cluster()
    r = rank_mapping_cluster(nvml=nv, env=env, host=doc["hosts"], node_ranks=doc["node_ranks"],
                             profile=profile(nnodes=4))
    assert r.status is Status.FAIL
    messages = [d["message"] for d in r.evidence["duplicates"]]
    assert "Duplicate GPU detected : rank 27 and rank 19 both on CUDA device 53000" in messages
    assert "Duplicate GPU detected : rank 29 and rank 21 both on CUDA device 91000" in messages
    assert "nodes n2, n3 share the host name gpu-c" in r.summary
    assert "NODE_RANK" in r.remediation


def test_cluster_mapping_passes_three_distinct_nodes_and_shows_the_table():
    doc, nv, env = field_notes_cluster()
    ranks = {"n0": 0, "n1": 1, "n2": 2}
    r = rank_mapping_cluster(nvml={n: nv[n] for n in ranks}, env=env, host={n: doc["hosts"][n] for n in ranks},
                             node_ranks=ranks, profile=profile())
    assert r.status is Status.PASS, r.summary
    assert r.evidence["table"].splitlines()[2].startswith("node 2 (gpu-c): ranks 16–23 → GPUs 0–7 (18:00.0")


@pytest.mark.parametrize("ranks, world, text", [
    ({"n0": 0, "n1": 1, "n2": 1}, None, "node rank 1 is used by 2 nodes: n1, n2"),
    ({"n0": 0, "n1": 1, "n2": 2}, 16, "world size does not add up: the nodes launch 24 ranks (8 + 8 + 8), WORLD_SIZE is 16"),
    ({"n0": 0, "n1": 2}, None, "no node has node rank 1"),
])
def test_cluster_problems_name_node_rank_and_world_size_errors(ranks, world, text):
    hosts = {n: host(n) for n in ranks}
    problems = cluster_problems(ranks, hosts, 3, 8, world or 24)
    assert any(text in p for p in problems), problems


def test_cluster_mapping_fails_when_nodes_disagree_on_device_order():
    doc, nv, env = field_notes_cluster()
    ranks = {"n0": 0, "n1": 1, "n2": 2}
    env["n1"] = {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    r = rank_mapping_cluster(nvml=nv, env=env, host=doc["hosts"], node_ranks=ranks, profile=profile())
    assert r.status is Status.FAIL
    assert "CUDA_DEVICE_ORDER differs across nodes: n0=PCI_BUS_ID, n1=FASTEST_FIRST (unset), n2=PCI_BUS_ID" in [
        f.message for f in r.findings]


def test_cluster_mapping_is_skipped_under_the_cpu_profile():
    doc, nv, env = field_notes_cluster()
    r = rank_mapping_cluster(nvml=nv, env=env, host=doc["hosts"], node_ranks=doc["node_ranks"], profile=cpu_profile())
    assert r.status is Status.SKIP


def test_the_cluster_check_names_a_driverless_nodes_duplicate_too():
    profile_ = profile(nnodes=2)
    r = rank_mapping_cluster(nvml={"a": NO_NVML, "b": nvml()},
                             env={"a": {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,6"},
                                  "b": {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}},
                             host={"a": host("a"), "b": host("b")}, profile=profile_, node_ranks={"a": 0, "b": 1})
    assert {f.cause for f in r.findings} >= {"gpu.no_driver", "gpu.visible_devices"}
    assert any(f.message.startswith("a: CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,6 lists 6 twice") for f in r.findings)
