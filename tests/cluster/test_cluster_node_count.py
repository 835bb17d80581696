"""cluster.node_count (checks/cluster_node_count.py): the nodes present against the profile's, on recorded node
facts, with the join command of a missing or lost node."""
from __future__ import annotations

import copy

from cluster_judges_lab import data_dir_module, profile_of, recorded  # noqa: F401 - the fixtures
from paste_lint import paste_problems

from dsv3_preflight.checks.cluster_node_count import node_count
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Status


def test_missing_node_fix_names_the_clusters_real_gcs_address(recorded):
    scenario = recorded["green"]
    result = node_count(scenario["node_ranks"], scenario["node_states"], profile_of(scenario, nnodes=4))
    assert result.status is Status.FAIL and result.summary.startswith("1 node(s) missing: the profile expects 4 nodes")
    assert "ray start --address=10.77.0.10:6390   # on each node that never joined" in result.remediation
    assert "6379" not in result.remediation and paste_problems(result.remediation) == []


def test_a_node_lost_during_the_run_is_missing_with_its_phase_and_the_join_command(recorded):
    scenario = copy.deepcopy(recorded["green"])
    scenario["node_states"]["lab-node2"].update({"state": "dead", "phase": "during the port-reach wave"})
    result = node_count(scenario["node_ranks"], scenario["node_states"], profile_of(scenario))
    assert result.summary.endswith("2 present: lab-node0, lab-node1 (lost during the run: lab-node2 during the port-reach wave)")
    assert "ray start --address=10.77.0.10:6390   # on lab-node2 once it is repaired" in result.remediation
    assert result.cause == "cluster.node_lost"


def test_without_a_known_gcs_address_the_join_command_has_a_placeholder_that_pastes():
    result = node_count({"a": 0}, {"a": {"state": "alive"}}, resolve_profile({"nnodes": 2}, {}))
    assert 'ray start --address="${RAY_HEAD:?' in result.remediation and paste_problems(result.remediation) == []
