"""cluster.unique_hostnames on facts from real node runs: the lab's recorded three nodes shared the host name
of the machine their namespaces ran on, which is what cloned VM images and containers started with one
--hostname look like (issue 46.10)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from paste_lint import paste_problems

from dsv3_preflight.checks.cluster_hostnames import unique_hostnames
from dsv3_preflight.host.identity import rule_shared_hostname
from dsv3_preflight.result import Actor, Status

DATA = Path(__file__).resolve().parents[1] / "data" / "cluster" / "netns_three_nodes.json"


@pytest.fixture(scope="module")
def green():
    return json.loads(DATA.read_text())["scenarios"]["green"]


def hosts(scenario):
    return {n: f["host"] for n, f in scenario["facts"].items()}


def test_nodes_at_different_addresses_answering_one_host_name_fail_naming_each_by_address(green):
    result = unique_hostnames(hosts(green), green["node_states"])
    assert result.status is Status.FAIL, result.summary
    assert result.actor is Actor.NODE and result.cause == "host.duplicate_hostname"
    for node, ip in (("lab-node0", "10.77.0.10"), ("lab-node1", "10.77.0.11"), ("lab-node2", "10.77.0.12")):
        assert f"{node} ({ip})" in result.summary, result.summary
    assert "'vm'" in result.summary
    fix = result.remediation
    assert paste_problems(fix) == [], fix
    assert fix.count("hostnamectl set-hostname") == 2, fix   # lab-node0 keeps the name, the two others rename
    assert "on lab-node1 (10.77.0.11)" in fix and "on lab-node2 (10.77.0.12)" in fix


def test_two_workers_sharing_a_name_fail_and_the_node_with_its_own_name_is_left_out(green):
    facts = copy.deepcopy(hosts(green))
    facts["lab-node0"]["hostname"] = "head"
    result = unique_hostnames(facts, green["node_states"])
    assert result.status is Status.FAIL
    assert "2 nodes answer the host name 'vm'" in result.summary and "lab-node0" not in result.summary


def test_distinct_host_names_pass(green):
    facts = copy.deepcopy(hosts(green))
    for i, node in enumerate(facts):
        facts[node]["hostname"] = f"gpu-{i}"
    result = unique_hostnames(facts, green["node_states"])
    assert result.status is Status.PASS, result.summary


def test_ray_nodes_sharing_one_address_are_one_machine_and_may_share_its_name(green):
    facts = hosts(green)
    states = {n: {**s, "ip": "10.77.0.10"} for n, s in green["node_states"].items()}
    assert unique_hostnames(facts, states).status is Status.PASS


def test_without_ray_addresses_the_nodes_own_addresses_tell_machines_apart(green):
    facts = hosts(green)
    found = rule_shared_hostname(facts, {})
    assert len(found) == 1 and "lab-node1 (10.77.0.11)" in found[0].message
    same = {n: {**f, "addresses": facts["lab-node0"]["addresses"]} for n, f in facts.items()}
    assert rule_shared_hostname(same, {}) == []
