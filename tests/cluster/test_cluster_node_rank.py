"""cluster.node_rank (checks/cluster_node_rank.py): the NODE_RANK each node exports against the rank the launcher
assigns, rule by rule (dsv3_preflight/host/node_rank_rules.py) and on recorded node facts."""
from __future__ import annotations

from cluster_judges_lab import data_dir_module, facts, profile_of, recorded  # noqa: F401 - the fixtures
from paste_lint import paste_problems

from dsv3_preflight.checks.cluster_node_rank import node_rank
from dsv3_preflight.host.node_rank_rules import (
    exported_ranks,
    rule_differs_from_assigned,
    rule_duplicates,
    rule_gaps,
    rule_not_a_number,
    rule_out_of_range,
    rule_partial,
    rule_rank0_off_master,
    rule_training_command,
)
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Actor, Status

ASSIGNED = {"lab-node0": 0, "lab-node1": 1, "lab-node2": 2}


def test_two_nodes_exporting_the_same_node_rank_fail_naming_both_with_the_export_per_node(recorded):
    scenario = recorded["duplicate_rank_and_mtu"]
    result = node_rank(facts(scenario, "env"), scenario["node_ranks"], profile_of(scenario))
    assert result.status is Status.FAIL and result.actor is Actor.JOB and result.cause == "cluster.node_rank"
    assert result.summary.startswith("2 nodes export NODE_RANK=1: lab-node1, lab-node2")
    assert "no node exports NODE_RANK=2" in result.summary
    assert result.remediation.splitlines()[0] == "export NODE_RANK=2   # on lab-node2"
    assert paste_problems(result.remediation) == []


def test_rule_duplicates_names_every_node_claiming_the_rank_and_fixes_the_ones_off_their_rank():
    found = rule_duplicates({"lab-node0": "0", "lab-node1": "1", "lab-node2": "1"}, ASSIGNED)
    assert len(found) == 1 and "lab-node1, lab-node2" in found[0].message
    assert found[0].fix.startswith("export NODE_RANK=2   # on lab-node2\n")
    assert rule_duplicates({"lab-node0": "0", "lab-node1": "1", "lab-node2": "2"}, ASSIGNED) == []


def test_rule_out_of_range_fails_a_rank_at_or_above_nnodes():
    found = rule_out_of_range({"lab-node0": "0", "lab-node1": "1", "lab-node2": "3"}, ASSIGNED, 3)
    assert found.status is Status.FAIL and "lab-node2 exports 3" in found.message and "0..2" in found.message
    assert found.fix.startswith("export NODE_RANK=2   # on lab-node2")
    assert rule_out_of_range({"lab-node0": "0", "lab-node1": "1", "lab-node2": "2"}, ASSIGNED, 3) is None


def test_rule_gaps_names_the_rank_nobody_exports_only_when_every_node_exports_one():
    found = rule_gaps({"lab-node0": "0", "lab-node1": "1", "lab-node2": "3"}, ASSIGNED, 3)
    assert found.message.startswith("no node exports NODE_RANK=2")
    assert rule_gaps({"lab-node0": "0", "lab-node1": "1", "lab-node2": None}, ASSIGNED, 3) is None


def test_rule_not_a_number_names_the_value():
    found = rule_not_a_number({"lab-node0": "0", "lab-node1": "one", "lab-node2": "2"}, ASSIGNED)
    assert "lab-node1='one'" in found.message and found.fix.startswith("export NODE_RANK=1   # on lab-node1")


def test_rule_rank0_off_master_fails_a_worker_exporting_0():
    found = rule_rank0_off_master({"lab-node0": "1", "lab-node1": "0", "lab-node2": "2"}, ASSIGNED)
    assert "lab-node1 exports NODE_RANK=0, but node 0 is lab-node0" in found.message
    assert found.fix.splitlines()[:2] == ["export NODE_RANK=1   # on lab-node1", "export NODE_RANK=0   # on lab-node0"]


def test_rule_partial_warns_for_the_nodes_exporting_none():
    found = rule_partial({"lab-node0": None, "lab-node1": "1", "lab-node2": "2"}, ASSIGNED)
    assert found.status is Status.WARN and "not on lab-node0" in found.message
    assert found.fix.startswith("export NODE_RANK=0   # on lab-node0")


def test_rule_differs_from_assigned_warns_for_a_consistent_other_order():
    found = rule_differs_from_assigned({"lab-node0": "0", "lab-node1": "2", "lab-node2": "1"}, ASSIGNED)
    assert found.status is Status.WARN and "lab-node1 exports 2, gets 1" in found.message


def test_rule_training_command_fails_a_node_rank_every_node_would_get():
    p = resolve_profile({"nnodes": 3}, {}, training={"node_rank": (1, "--node_rank")})
    found = rule_training_command(p, ASSIGNED)
    assert found.status is Status.FAIL and "--node_rank 1 (training command --node_rank)" in found.message
    assert paste_problems(found.fix) == [] and "lab-node2=2" in found.fix
    assert rule_training_command(resolve_profile({"nnodes": 3}, {"NODE_RANK": "1"}), ASSIGNED) is None


def test_node_rank_passes_when_no_node_exports_one_naming_the_ranks_the_launcher_gives():
    env = {n: {"MASTER_ADDR": "lab-node0"} for n in ASSIGNED}
    result = node_rank(env, ASSIGNED, resolve_profile({"nnodes": 3}, {}))
    assert result.status is Status.PASS and "lab-node0=0, lab-node1=1, lab-node2=2" in result.summary
    assert exported_ranks(env) == dict.fromkeys(ASSIGNED)
