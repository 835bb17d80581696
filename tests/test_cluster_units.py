"""Pure parts of cluster mode: node ranks, node names, the cluster judges on recorded facts."""
from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from dsv3_preflight.checks.cluster_env_consistency import env_consistency
from dsv3_preflight.checks.cluster_node_count import master_node, node_count
from dsv3_preflight.cluster import NodeInfo, assign_node_ranks, unique_names
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Status


def node(node_id, ip, hostname, **kw):
    return NodeInfo(node_id=node_id, ip=ip, hostname=hostname, **kw)


NODES = [node("cc" * 14, "10.0.0.12", "gpu-c"), node("aa" * 14, "10.0.0.9", "gpu-a", is_head=True),
         node("bb" * 14, "10.0.0.130", "gpu-b")]


def test_node_holding_master_addr_is_rank_0_and_the_others_follow_by_ip_numerically():
    ranked = assign_node_ranks(unique_names(NODES), "10.0.0.130", addresses={"10.0.0.130"})
    assert [(n.hostname, n.node_rank) for n in ranked] == [("gpu-b", 0), ("gpu-a", 1), ("gpu-c", 2)]


def test_node_ranks_do_not_depend_on_the_order_ray_lists_nodes():
    for order in (NODES, NODES[::-1], NODES[1:] + NODES[:1]):
        assert [n.hostname for n in assign_node_ranks(order, "10.0.0.12", addresses={"10.0.0.12"})] == ["gpu-c", "gpu-a", "gpu-b"]


def test_master_addr_given_as_host_name_picks_that_node():
    ranked = assign_node_ranks(NODES, "gpu-c", addresses={"gpu-c"})
    assert ranked[0].hostname == "gpu-c"


def test_no_node_holding_master_addr_makes_the_ray_head_node_0():
    ranked = assign_node_ranks(NODES, "10.9.9.9", addresses={"10.9.9.9"})
    assert ranked[0].hostname == "gpu-a" and ranked[0].is_head


def test_loopback_master_addr_means_the_drivers_node():
    nodes = [NODES[0], NodeInfo("dd" * 14, "10.0.0.200", "driver-host", is_driver=True)]
    assert assign_node_ranks(nodes, "127.0.0.1")[0].hostname == "driver-host"


def test_co_hosted_ray_nodes_holding_master_addr_prefer_the_drivers_node_then_the_head():
    same = [node("01" * 14, "10.0.0.5", "box"), node("02" * 14, "10.0.0.5", "box", is_head=True),
            node("03" * 14, "10.0.0.5", "box", is_driver=True)]
    assert assign_node_ranks(same, "10.0.0.5", {"10.0.0.5"})[0].node_id == "03" * 14
    no_driver = [n if not n.is_driver else node(n.node_id, n.ip, n.hostname) for n in same]
    assert assign_node_ranks(no_driver, "10.0.0.5", {"10.0.0.5"})[0].node_id == "02" * 14


def test_names_shared_by_ray_nodes_on_one_host_get_the_short_node_id_and_reported_names_win():
    same = [node("0a1b2c" + "0" * 22, "10.0.0.5", "box"), node("ffeedd" + "0" * 22, "10.0.0.5", "box"),
            node("123456" + "0" * 22, "10.0.0.6", "other")]
    assert [n.name for n in unique_names(same)] == ["box-0a1b2c", "box-ffeedd", "other"]
    reported = {same[0].node_id: "head", same[1].node_id: "w1"}
    assert [n.name for n in unique_names(same, reported)] == ["head", "w1", "other"]


@pytest.fixture
def profile3():
    return resolve_profile({"nnodes": 3, "master_addr": "10.0.0.1"}, {})


@pytest.fixture
def env3(data_dir):
    return json.loads((data_dir / "cluster" / "env_three_nodes.json").read_text())["good"]


def test_identical_launch_variables_pass_and_per_node_variables_are_ignored(env3, profile3):
    result = env_consistency(env3, {"node-a": 0, "node-b": 1, "node-c": 2}, profile3)
    assert result.status is Status.PASS, result.summary
    assert "NODE_RANK" not in result.evidence["compared"] and "HOME" not in result.evidence["compared"]


@pytest.mark.parametrize("var,value,expect", [
    ("OMP_NUM_THREADS", "4", "OMP_NUM_THREADS differs between nodes: node-a=8, node-b=8, node-c=4"),
    ("NCCL_IB_DISABLE", None, "NCCL_IB_DISABLE differs between nodes: node-a=1, node-b=1, node-c=<unset>"),
    ("MASTER_PORT", "29500", "MASTER_PORT differs between nodes"),
    ("CUDA_DEVICE_ORDER", "FASTEST_FIRST", "CUDA_DEVICE_ORDER differs between nodes"),
])
def test_a_launch_variable_differing_on_one_node_fails_with_the_export_for_that_node(env3, profile3, var, value, expect):
    env = copy.deepcopy(env3)
    if value is None:
        del env["node-c"][var]
    else:
        env["node-c"][var] = value
    result = env_consistency(env, {"node-a": 0, "node-b": 1, "node-c": 2}, profile3)
    assert result.status is Status.FAIL and result.summary.startswith(expect), result.summary
    assert f"{var}=" in result.remediation and "# on node-c" in result.remediation


def test_socket_interface_names_differing_per_host_only_warn(env3, profile3):
    env = copy.deepcopy(env3)
    env["node-b"]["NCCL_SOCKET_IFNAME"] = "eth0"
    result = env_consistency(env, {"node-a": 0, "node-b": 1, "node-c": 2}, profile3)
    assert result.status is Status.WARN and "NCCL_SOCKET_IFNAME" in result.summary


def test_node_count_fails_naming_expected_and_present(profile3):
    result = node_count({"node-a": 0, "node-b": 1}, profile3)
    assert result.status is Status.FAIL
    assert result.summary.startswith("1 node(s) missing: the profile expects 3 nodes") and "node-a, node-b" in result.summary
    assert node_count({"a": 0, "b": 1, "c": 2}, profile3).status is Status.PASS
    assert node_count({"a": 0, "b": 1, "c": 2, "d": 3}, profile3).status is Status.WARN


def test_master_node_fails_when_node_0_does_not_hold_master_addr(profile3):
    host = {"node-a": {"hostname": "a", "addresses": {"ens5": ["10.0.0.2"]}},
            "node-b": {"hostname": "b", "addresses": {"ens5": ["10.0.0.1"]}}}
    bad = master_node(host, {"node-a": 0, "node-b": 1}, profile3)
    assert bad.status is Status.FAIL and "belongs to node-b, but node 0 is node-a" in bad.summary
    good = master_node(host, {"node-b": 0, "node-a": 1}, profile3)
    assert good.status is Status.PASS


def test_help_does_not_import_ray():
    code = "import sys; from dsv3_preflight.cli import main\ntry:\n main(['run','--help'])\nexcept SystemExit: pass\nimport dsv3_preflight.cluster\nprint('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout + out.stderr
