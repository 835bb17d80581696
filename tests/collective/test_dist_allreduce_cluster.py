"""dist.allreduce_cluster (checks/dist_allreduce_cluster.py): the gang's `collective_gang` facts judged exactly as
the node check dist.allreduce, every rule, through the registered checks. The gang over real Ray nodes runs in
test_pairs_netns.py."""
from __future__ import annotations

from collective_judge_lab import _dup_ranks, _fact, _outcome, _profile, _rank
from paste_lint import paste_problems

from dsv3_preflight.collective.judge import judge_gang
from dsv3_preflight.registry import load_registry
from dsv3_preflight.result import Actor, Status


def _gang_facts(outcomes, world):
    """`collective_gang` facts of the shape the probe writes (collective/probes/gang.py), one per node."""
    return {f"n{o['node_rank']}": {"requested": True, "mode": "gang", "world": world, "node_rank": o["node_rank"],
                                   "master_addr": "10.0.0.1", "master_port": 39500, "backend": "gloo",
                                   "timeout_s": 60.0, "outcome": o} for o in outcomes}


CHECKS = load_registry().checks


def test_a_duplicate_gpu_in_gang_facts_fails_the_cluster_check_exactly_as_dist_allreduce():
    ranks = _dup_ranks()
    node = CHECKS["dist.allreduce"](collective=_fact([_outcome(0, ranks)], 2), profile=_profile(), nic_route=None,
                                     port_reach=None)
    one_per_node = [_outcome(0, [ranks[0]]), _outcome(1, [dict(ranks[1], host="n0")])]
    gang = CHECKS["dist.allreduce_cluster"](collective_gang=_gang_facts(one_per_node, 2), profile=_profile(),
                                            node_ranks={"n0": 0, "n1": 1}, node_states={})
    assert node.status is Status.FAIL and gang.status is Status.FAIL
    assert gang.summary == node.summary and "Duplicate GPU detected" in gang.summary
    assert gang.remediation == node.remediation and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in gang.remediation
    assert gang.actor is node.actor is Actor.JOB and gang.cause == node.cause == "gpu.duplicate_gpu"


def test_a_busbw_below_min_busbw_gbps_in_gang_facts_fails_the_cluster_check_exactly_as_dist_allreduce():
    sweep = [{"size_bytes": 1 << 20, "busbw_gbps": 0.2, "algbw_gbps": 0.2, "time_us": 5000.0}]
    profile = _profile(min_busbw_gbps=5)
    node = CHECKS["dist.allreduce"](collective=_fact([_outcome(0, [_rank(0), _rank(1)], sweep=sweep)], 2),
                                     profile=profile, nic_route=None, port_reach=None)
    gang = CHECKS["dist.allreduce_cluster"](
        collective_gang=_gang_facts([_outcome(0, [_rank(0)], sweep=sweep), _outcome(1, [_rank(1, host="n1")])], 2),
        profile=profile, node_ranks={"n0": 0, "n1": 1}, node_states={"n0": {"state": "alive"}, "n1": {"state": "alive"}})
    assert node.status is gang.status is Status.FAIL
    assert gang.summary == node.summary == "all_reduce bus bandwidth peaks at 0.2 GB/s, below min_busbw_gbps=5 (2 ranks, gloo)"
    assert gang.remediation == node.remediation


def test_the_gang_check_names_the_node_whose_rank_never_joined():
    facts = _gang_facts([_outcome(0, [_rank(0, "store_connected", missing=[2])]), _outcome(1, [_rank(1, host="n1")])], 3)
    facts["n2"] = {"requested": False, "reason": "not requested"}   # its gang task never ran
    r = judge_gang(facts, _profile(), {"n0": 0, "n1": 1, "n2": 2})
    assert r.status is Status.FAIL and r.summary.startswith("rank(s) 2 of 3 never joined the rendezvous (node n2)")
    assert r.evidence["not_reported"] == ["n2"]


def test_a_node_lost_during_the_gang_is_that_nodes_cause_never_the_networks():
    facts = _gang_facts([_outcome(0, [_rank(0, "store_connected", missing=[2])]), _outcome(1, [_rank(1, host="n1")])], 3)
    facts["n2"] = {"requested": False, "reason": "its task died with the node"}
    states = {"n0": {"state": "alive"}, "n1": {"state": "alive"}, "n2": {"state": "dead", "reason": "raylet died"}}
    r = CHECKS["dist.allreduce_cluster"](collective_gang=facts, profile=_profile(), node_ranks={"n0": 0, "n1": 1, "n2": 2},
                                         node_states=states)
    assert r.status is Status.FAIL and r.cause == "cluster.node_lost" and r.actor is Actor.NODE
    assert "n2 lost during the run" in r.summary and "not judged" in r.summary
    assert paste_problems(r.remediation) == []
    alive = dict(states, n2={"state": "alive"})   # the same facts with n2 alive: its rank never joined, judged as such
    r = CHECKS["dist.allreduce_cluster"](collective_gang=facts, profile=_profile(), node_ranks={"n0": 0, "n1": 1, "n2": 2},
                                         node_states=alive)
    assert r.status is Status.FAIL and r.cause != "cluster.node_lost" and "never joined" in r.summary


def test_the_gang_check_skips_when_no_node_was_asked_to_run_it():
    r = judge_gang({"n0": {"requested": False, "reason": "not requested"}}, _profile(), {"n0": 0})
    assert r.status is Status.SKIP and "--all-nodes --probe" in r.summary
