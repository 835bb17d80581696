"""Shared by the cluster judges' tests (test_cluster_units.py and the per-check files test_cluster_<check>.py):
node facts recorded from real Ray nodes in network namespaces (tests/data/cluster/netns_three_nodes.json) and
every cluster judge run on one recorded scenario."""
from __future__ import annotations

import json

import pytest

from dsv3_preflight.checks.cluster_env_consistency import env_consistency
from dsv3_preflight.checks.cluster_master_node import master_node
from dsv3_preflight.checks.cluster_node_count import node_count
from dsv3_preflight.checks.cluster_node_rank import node_rank
from dsv3_preflight.checks.net_mtu import mtu
from dsv3_preflight.profile import resolve_profile


@pytest.fixture(scope="module")
def recorded(data_dir_module):
    return json.loads((data_dir_module / "cluster" / "netns_three_nodes.json").read_text())["scenarios"]


@pytest.fixture(scope="module")
def data_dir_module():
    from conftest import DATA

    return DATA


def facts(scenario: dict, name: str) -> dict:
    return {n: f[name] for n, f in scenario["facts"].items()}


def profile_of(scenario: dict, **more):
    values = {**scenario["profile"], **more}
    return resolve_profile(values, {})


def judge_all(scenario: dict, **profile_values):
    p = profile_of(scenario, **profile_values)
    return {
        "cluster.node_rank": node_rank(facts(scenario, "env"), scenario["node_ranks"], p),
        "cluster.master_node": master_node(facts(scenario, "host"), facts(scenario, "nic_route"), scenario["node_ranks"],
                                           scenario["node_states"], p),
        "net.mtu": mtu(facts(scenario, "nic_route"), scenario["node_states"], p),
        "cluster.node_count": node_count(scenario["node_ranks"], scenario["node_states"], p),
        "cluster.env_consistency": env_consistency(facts(scenario, "env"), scenario["node_ranks"], p),
    }
