"""cluster.env_consistency (checks/cluster_env_consistency.py): the launch variables every node must agree on
(tests/data/cluster/env_three_nodes.json), with the values a node's /etc/nccl.conf sets."""
from __future__ import annotations

import copy
import json

import pytest
from paste_lint import paste_problems

from dsv3_preflight.checks.cluster_env_consistency import env_consistency
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Actor, Status


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
    assert result.actor is Actor.JOB and paste_problems(result.remediation) == []


def test_every_differing_variable_is_its_own_finding_with_its_own_fix(env3, profile3):
    env = copy.deepcopy(env3)
    env["node-c"]["OMP_NUM_THREADS"] = "4"
    env["node-b"]["MASTER_PORT"] = "29500"
    result = env_consistency(env, {"node-a": 0, "node-b": 1, "node-c": 2}, profile3)
    assert len(result.findings) == 2 and "+1 more" not in result.summary
    assert "export MASTER_PORT=" in result.remediation and "export OMP_NUM_THREADS=8" in result.remediation


def test_socket_interface_names_differing_per_host_only_warn(env3, profile3):
    env = copy.deepcopy(env3)
    env["node-b"]["NCCL_SOCKET_IFNAME"] = "eth0"
    result = env_consistency(env, {"node-a": 0, "node-b": 1, "node-c": 2}, profile3)
    assert result.status is Status.WARN and "NCCL_SOCKET_IFNAME" in result.summary


def test_an_nccl_variable_one_nodes_nccl_conf_sets_is_that_nodes_value_named_with_its_file(env3, profile3):
    """NCCL reads NCCL_* from /etc/nccl.conf where the environment leaves them unset: a node whose site file disables
    InfiniBand runs its NCCL on sockets while the others use IB, and the environments alone looked identical."""
    ranks = {"node-a": 0, "node-b": 1, "node-c": 2}
    env = copy.deepcopy(env3)
    for n in env:
        env[n].pop("NCCL_IB_DISABLE", None)
    conf = {"path": "/etc/nccl.conf", "exists": True, "values": {"NCCL_IB_DISABLE": "1"}}
    routes = {"node-a": [], "node-b": [], "node-c": [conf]}   # each node's nccl_conf fact
    assert env_consistency(env, ranks, profile3).status is Status.PASS   # the environments agree
    result = env_consistency(env, ranks, profile3, routes)
    assert result.status is Status.FAIL and result.summary.startswith(
        "NCCL_IB_DISABLE differs between nodes: node-a=<unset>, node-b=<unset>, node-c=1 (/etc/nccl.conf)"), result.summary
    assert result.remediation == ("sed -i '/^NCCL_IB_DISABLE=/d' /etc/nccl.conf   # on node-c: NCCL reads "
                                  "NCCL_IB_DISABLE from this file (node 0 node-a has none)")
    assert paste_problems(result.remediation) == [] and result.evidence["nccl_conf"] == {
        "NCCL_IB_DISABLE": {"node-c": "/etc/nccl.conf"}}
    # the environment wins over the file: an export on node-c of node 0's value (here: set everywhere) agrees
    for n in env:
        env[n]["NCCL_IB_DISABLE"] = "0"
    assert env_consistency(env, ranks, profile3, routes).status is Status.PASS
