"""The Ray Train gate's pure rules, as tables over recorded facts (tests/data/ray_train/, see its README)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from paste_lint import paste_problems

from dsv3_preflight.ray_train import checks, rules
from dsv3_preflight.ray_train.facts import node_resources_from_table
from dsv3_preflight.result import Status

DATA = Path(__file__).resolve().parents[1] / "data" / "ray_train"
GIB = 1 << 30


def nodes():
    return node_resources_from_table(json.loads((DATA / "nodes_2x8_h100.json").read_text()))


def scaling(num_workers, per_worker, strategy="PACK", accelerator=None):
    return {"num_workers": num_workers, "resources_per_worker": per_worker, "placement_strategy": strategy,
            "accelerator_type": accelerator}


def assert_pasteable(result):
    for finding in result.findings:
        assert paste_problems(finding.fix) == [], finding.fix


# -- ScalingConfig against the live nodes ---------------------------------------------------------------------
def test_dead_nodes_do_not_count_and_the_head_is_marked():
    table = nodes()
    assert [n["hostname"] for n in table] == ["head-0", "gpu-1", "gpu-2"]
    assert [n["is_head"] for n in table] == [True, False, False]


@pytest.mark.parametrize("asked, strategy, want", [
    (scaling(16, {"GPU": 1}), "PACK", Status.PASS),
    (scaling(17, {"GPU": 1}), "PACK", Status.FAIL),
    (scaling(2, {"GPU": 8}), "STRICT_SPREAD", Status.PASS),
    (scaling(3, {"GPU": 1}), "STRICT_SPREAD", Status.FAIL),     # the head has no GPU: two nodes hold GPU workers
    (scaling(9, {"GPU": 1}), "STRICT_PACK", Status.FAIL),
    (scaling(8, {"GPU": 1, "CPU": 12}), "PACK", Status.PASS),    # 96 CPUs: 8 workers per GPU node
    (scaling(16, {"GPU": 1, "CPU": 13}), "PACK", Status.FAIL),   # 96 / 13 = 7 per node: CPU is the bound
    (scaling(4, {"CPU": 1, "memory": 600 * GIB}), "PACK", Status.PASS),
    (scaling(5, {"CPU": 1, "memory": 600 * GIB}), "PACK", Status.FAIL),
])
def test_scaling_fits_the_live_nodes(asked, strategy, want):
    asked["placement_strategy"] = strategy
    result = checks.scaling(asked, nodes())
    assert result.status is want, result.summary
    assert_pasteable(result)


def test_an_infeasible_scaling_config_shows_its_numbers_node_by_node():
    result = checks.scaling(scaling(24, {"GPU": 1}), nodes())
    assert result.status is Status.FAIL
    assert "asks for 24 workers × {GPU 1} (PACK) and the 3 live nodes can place 16" in result.summary
    assert "head-0 10.0.0.1 (head): GPU 0 → 0 workers" in result.summary
    assert "gpu-1 10.0.0.2: GPU 8 → 8 workers" in result.summary
    assert "Cluster totals: GPU 16 of GPU 24" in result.summary
    assert "pend forever" in result.summary
    assert result.findings[0].actor.value == "job"
    assert "ScalingConfig(num_workers=16" in result.remediation
    assert result.evidence["placeable"] == 16


def test_the_table_shows_the_head_first_then_nodes_by_address_whatever_ray_nodes_order():
    table = json.loads((DATA / "nodes_2x8_h100.json").read_text())
    result = checks.scaling(scaling(24, {"GPU": 1}), node_resources_from_table(table[::-1]))
    assert result.summary.index("head-0 10.0.0.1") < result.summary.index("gpu-1 10.0.0.2") < result.summary.index(
        "gpu-2 10.0.0.3")


def test_memory_is_shown_in_gib():
    result = checks.scaling(scaling(5, {"CPU": 1, "memory": 600 * GIB}), nodes())
    assert "memory 600.0 GiB" in result.summary


def test_an_accelerator_no_node_has_is_named_with_those_present():
    asked = scaling(2, {"GPU": 1, "accelerator_type:A100": 0.001}, accelerator="A100")
    result = checks.scaling(asked, nodes())
    assert result.status is Status.FAIL
    assert "ScalingConfig(accelerator_type='A100') but no live node has that accelerator (nodes have: H100)" in result.summary
    assert_pasteable(result)
    assert checks.scaling(scaling(2, {"GPU": 1, "accelerator_type:H100": 0.001}, accelerator="H100"),
                          nodes()).status is Status.PASS


def test_bundles_on_a_node_take_the_tightest_resource():
    assert rules.bundles_on({"CPU": 8, "GPU": 2}, {"CPU": 2, "GPU": 1}) == 2
    assert rules.bundles_on({"CPU": 8}, {"CPU": 2, "GPU": 1}) == 0
    assert rules.bundles_on({"CPU": 1.0}, {"CPU": 0.1}) == 10   # float error does not lose a bundle


# -- storage_path ----------------------------------------------------------------------------------------------
def storage(reads, writes=None, path="/home/ray/ray_results", remote=False):
    writes = writes or [{"node": n, "path": path, "wrote": True, "error": None, "free_bytes": 50 * GIB} for n in reads]
    return {"storage_path": path, "remote": remote, "writes": writes, "reads": reads}


def test_shared_storage_passes():
    fact = storage({"head": {"head": "ok", "w1": "ok"}, "w1": {"head": "ok", "w1": "ok"}})
    result = checks.storage(fact)
    assert result.status is Status.PASS, result.summary
    assert "one storage for head, w1" in result.summary


def test_head_local_storage_fails_naming_the_nodes_that_cannot_see_it():
    fact = storage({"head": {"head": "ok", "w1": "missing", "w2": "missing"},
                    "w1": {"head": "missing", "w1": "ok", "w2": "missing"},
                    "w2": {"head": "missing", "w1": "missing", "w2": "ok"}})
    result = checks.storage(fact)
    assert result.status is Status.FAIL
    assert "Nodes that cannot see it: head, w1, w2" in result.summary
    assert "w1 cannot see what head, w2 wrote" in result.summary
    assert "Unable to set up cluster storage" in result.summary
    assert result.cause == rules.STORAGE_CAUSE
    assert result.evidence["unseen_by"]["w2"] == ["head", "w1"]
    assert_pasteable(result)


def test_a_node_that_cannot_write_is_named_with_its_error_and_not_counted_as_unseen():
    writes = [{"node": "head", "path": "/data", "wrote": True, "error": None, "free_bytes": 50 * GIB},
              {"node": "w1", "path": "/data", "wrote": False, "error": "[Errno 13] Permission denied: '/data'",
               "free_bytes": None}]
    result = checks.storage(storage({"head": {"head": "ok", "w1": "missing"}, "w1": {"head": "ok"}}, writes, "/data"))
    assert result.status is Status.FAIL
    assert result.summary.startswith("w1 cannot write under storage_path /data: [Errno 13] Permission denied")
    assert "not shared" not in result.summary
    assert_pasteable(result)


def test_too_little_room_under_storage_path_fails():
    writes = [{"node": "head", "path": "/nfs/r", "wrote": True, "error": None, "free_bytes": GIB // 4}]
    result = checks.storage(storage({"head": {"head": "ok"}}, writes, "/nfs/r"))
    assert result.status is Status.FAIL
    assert "has 0.25 GiB free as head sees it, below 1 GiB" in result.summary
    assert_pasteable(result)


def test_cloud_storage_is_skipped_with_the_reason():
    result = checks.storage(storage({}, [], "s3://bucket/runs", remote=True))
    assert result.status is Status.SKIP
    assert "cloud storage" in result.summary


# -- the rank -> GPU map ------------------------------------------------------------------------------------------
def test_rank_map_sorts_by_node_then_gpu_and_widens_cuda_visible_devices():
    a, b = "node-a", "node-b"
    workers = [{"node_id": b, "node_ip": "10.0.0.3", "hostname": "gpu-2", "pid": 1, "gpu_ids": ["1"]},
               {"node_id": a, "node_ip": "10.0.0.2", "hostname": "gpu-1", "pid": 2, "gpu_ids": ["3"]},
               {"node_id": b, "node_ip": "10.0.0.3", "hostname": "gpu-2", "pid": 3, "gpu_ids": ["0"]},
               {"node_id": a, "node_ip": "10.0.0.2", "hostname": "gpu-1", "pid": 4, "gpu_ids": ["2"]}]
    rows = rules.predict_rank_map(workers)
    assert [(r["hostname"], r["gpu_ids"], r["local_rank"], r["node_rank"]) for r in rows] == [
        ("gpu-2", ["0"], 0, 0), ("gpu-2", ["1"], 1, 0), ("gpu-1", ["2"], 0, 1), ("gpu-1", ["3"], 1, 1)]
    assert [r["cuda_visible_devices"] for r in rows] == ["0,1", "0,1", "2,3", "2,3"]
    assert [r["cuda_index"] for r in rows] == [0, 1, 0, 1]
    result = checks.rank_map(workers, {})
    assert result.status is Status.PASS, result.summary
    assert result.evidence["table"][0] == ("rank 0: gpu-2 (10.0.0.3) node_rank 0 local_rank 0 GPU 0 "
                                           "(CUDA_VISIBLE_DEVICES=0,1, cuda:0)")


def test_fractional_gpus_put_two_ranks_on_one_gpu():
    workers = json.loads((DATA / "workers_fractional.json").read_text())
    result = checks.rank_map(workers, {})
    assert result.status is Status.FAIL
    assert result.summary == ("ranks 0 and 1 both drive Ray GPU 0 of gpu-1 (a fractional GPU per worker): NCCL aborts "
                              "with 'Duplicate GPU detected'")
    assert result.cause == rules.DUPLICATE_GPU
    assert_pasteable(result)


def test_two_raylets_on_one_host_sharing_gpus_are_caught_by_pci_bus_id_with_nccl_words():
    workers = [{"node_id": "ray-a", "node_ip": "10.0.0.2", "hostname": "gpu-1", "pid": 1, "gpu_ids": ["0"]},
               {"node_id": "ray-b", "node_ip": "10.0.0.9", "hostname": "gpu-1", "pid": 2, "gpu_ids": ["0"]}]
    nvml = {n: {"available": True, "gpus": [{"index": 0, "pci_bus_id": "00000000:53:00.0"}]} for n in ("ray-a", "ray-b")}
    result = checks.rank_map(workers, nvml)
    assert result.status is Status.FAIL
    assert result.summary == ("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 53000 (host gpu-1, "
                              "PCI 0000:53:00.0)")


def test_two_ray_nodes_on_one_ip_are_one_local_world():
    workers = [{"node_id": "ray-a-0000", "node_ip": "10.0.0.2", "hostname": "h", "pid": 1, "gpu_ids": []},
               {"node_id": "ray-b-0000", "node_ip": "10.0.0.2", "hostname": "h", "pid": 2, "gpu_ids": []}]
    rows = rules.predict_rank_map(workers)
    assert [r["local_rank"] for r in rows] == [0, 1]
    result = checks.rank_map(workers, {})
    assert result.status is Status.FAIL
    assert "2 Ray nodes share the IP 10.0.0.2 (ray-a-00, ray-b-00)" in result.summary
    assert_pasteable(result)


# -- Ray's node IP against the NIC toward rank 0 ------------------------------------------------------------------
def test_node_ip_off_the_route_interface_warns_with_the_address_to_use():
    route = {"ifname": "ib0", "ipv4": ["192.168.10.2"], "ipv6": [], "target": "192.168.10.1", "local": False,
             "route_error": None}
    result = checks.nic({"w1": "10.0.0.2"}, {"w1": route})
    assert result.status is Status.WARN
    assert "w1: Ray's node IP 10.0.0.2 is not on ib0, the interface toward the rank-0 node 192.168.10.1" in result.summary
    assert result.remediation.startswith("ray start --node-ip-address=192.168.10.2")
    assert_pasteable(result)
    assert checks.nic({"w1": "192.168.10.2"}, {"w1": route}).status is Status.PASS
    assert checks.nic({"w0": "10.0.0.1"}, {"w0": dict(route, local=True)}).status is Status.PASS


def test_the_heads_own_gpus_count_when_it_advertises_them():
    table = json.loads((DATA / "nodes_2x8_h100.json").read_text())
    table[0]["Resources"]["GPU"] = 8.0   # a head started with its GPUs (not --num-gpus=0)
    with_head = node_resources_from_table(table)
    assert checks.scaling(scaling(24, {"GPU": 1}), with_head).status is Status.PASS
    result = checks.scaling(scaling(25, {"GPU": 1}), with_head)
    assert "head-0 10.0.0.1 (head): GPU 8 → 8 workers" in result.summary
