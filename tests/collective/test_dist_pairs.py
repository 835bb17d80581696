"""dist.pairs (checks/dist_pairs.py): the registered check replaying facts recorded from real runs over Ray nodes
in network namespaces (tests/data/collective/pairs_*.json, recorded by benchmarks/bench_pairs.py --record), the
localisation rules on their own (dsv3_preflight/collective/localise.py, pairs_judge.py) and a slow link that is not
a dead one (issue 46.1). The runs themselves: test_pairs_netns.py."""
from __future__ import annotations

import copy
import json

import pytest
from pairs_judge_lab import DATA, _doc, _judge, _recorded
from paste_lint import paste_problems

from dsv3_preflight.collective.localise import FAILED, OK, PairRecord, Thresholds, localise, matrix, pair_records
from dsv3_preflight.collective.pairs_judge import (
    judge_pairs,
    rule_bad_nodes,
    rule_failed_pairs,
    rule_slow_links,
    rule_untested,
)
from dsv3_preflight.collective.schedule import round_robin, sample_rounds, total_pairs
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Actor, Status

SCENARIOS = sorted(DATA.glob("pairs_*.json"))


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_recorded_runs_name_the_culprit_they_were_recorded_with(path):
    rec = json.loads(path.read_text())
    scenario = path.stem.split("_")[-1]
    n = len(rec["node_ranks"])
    r = _judge(rec)
    expected = {"healthy": {"nodes": [], "links": [], "failed": []},
                "node": {"nodes": [f"lab-node{n - 1}"], "links": [], "failed": []},
                "path": {"nodes": [], "links": [["lab-node1", "lab-node2"]], "failed": []},
                "drop": {"nodes": [], "links": [], "failed": [["lab-node1", "lab-node2"]]}}[scenario]
    assert r.evidence["culprits"] == expected == rec["judged"]
    assert r.status is (Status.PASS if scenario == "healthy" else Status.FAIL)
    assert f"{total_pairs(n)} of {total_pairs(n)} pairs tested" in r.summary
    for text in [r.remediation] + [f.fix for f in r.findings]:
        assert paste_problems(text) == [], text
    assert all(f.actor in (Actor.NODE, Actor.NETWORK) and f.cause for f in r.findings)


def test_a_shaped_node_is_named_with_its_pairs_its_address_and_its_interface():
    r = _judge(_recorded("pairs_6nodes_node"))
    assert r.summary.startswith("node lab-node5 is slow with every partner (5 of 5 pairs: with lab-node0: slow link: p50 ")
    assert "against a median of" in r.summary and ", bandwidth 0.0" in r.summary
    assert r.actor is Actor.NODE and r.cause == "collective.bad_node"
    assert "# lab-node5 (10.77.0.15) is slow with every partner" in r.remediation
    assert "ip -s link show dev eth0   # on lab-node5" in r.remediation


def test_a_dropped_pair_names_both_sides_and_the_one_that_could_not_connect():
    r = _judge(_recorded("pairs_3nodes_drop"))
    [f] = r.findings
    assert f.message.startswith("pair lab-node1↔lab-node2 timed out: lab-node2 could not connect to lab-node1's "
                                "rendezvous at 10.77.0.11:")
    assert f.actor is Actor.NETWORK and "on lab-node1 and on lab-node2" in f.fix


def test_the_healthy_summary_states_the_medians_and_the_worst_pairs():
    r = _judge(_recorded("pairs_6nodes_healthy"))
    assert r.status is Status.PASS
    assert r.summary.startswith("15 of 15 pairs tested: no slow node or link; p50 latency median ")
    assert "(worst lab-node" in r.summary and "(lowest lab-node" in r.summary and "at 256 KiB" in r.summary
    assert len(r.evidence["worst"]) >= 3 and r.evidence["coverage"]["tested"] == 15


def test_the_thresholds_are_the_profiles():
    rec = _recorded("pairs_6nodes_healthy")
    assert _judge(rec).status is Status.PASS
    strict = _judge(rec, pairs_busbw_ratio=0.99)          # every pair below 99% of its reference: noise flagged
    assert strict.status is Status.FAIL and strict.evidence["thresholds"]["pairs_busbw_ratio"] == 0.99


def test_a_sample_states_its_coverage_honestly():
    rec = _recorded("pairs_6nodes_healthy")
    sampled = [[f"lab-node{a}", f"lab-node{b}"] for a, b in sample_rounds(round_robin(6), 4)[0] +
               sample_rounds(round_robin(6), 4)[1][:1]]
    facts = copy.deepcopy(rec["collective_pairs"])
    for fact in facts.values():   # what the nodes would have reported under --pairs-sample 4
        fact["pairs"] = [m for m in fact["pairs"] if m["pair"] in sampled]
        fact["planned"] = [p for p in fact["planned"] if p in sampled]
        fact["sample"], fact["rounds"] = 4, 2
    r = _judge(rec, facts)
    assert r.summary.startswith("4 of 15 pairs tested (--pairs-sample 4: 4 sampled in 2 round(s); 11 pair(s) not tested; "
                                "4 node(s) met fewer than 2 partners")
    assert r.evidence["coverage"]["tested"] == 4 and r.evidence["coverage"]["total"] == 15


def test_a_planned_pair_nobody_reported_is_a_warning_not_a_pass():
    rec = _recorded("pairs_3nodes_healthy")
    facts = copy.deepcopy(rec["collective_pairs"])
    for fact in facts.values():
        fact["pairs"] = [m for m in fact["pairs"] if m["pair"] != ["lab-node0", "lab-node1"]]
    r = _judge(rec, facts)
    assert r.status is Status.WARN and "1 planned pair(s) were not measured: lab-node0↔lab-node1" in r.summary
    assert r.summary.endswith("2 of 3 pairs tested (3 planned)")


def _still_starting(outcome: dict, phase: str | None, killed: str | None, error: str | None = None) -> None:
    """The pair side's rank as probe_node reports one stopped before it was up: run here with a sitecustomize that
    sleeps (3 s timeout + 2 s start-up), the rank had no phase, exit -9, "killed at the hard deadline"."""
    for rank in outcome["ranks"]:
        rank.update(last_phase=phase, killed=killed, exit_code=-9 if killed else 3, sum_ok=None, sweep=None,
                    error={"exc_type": error, "phase": phase} if error else None, phases={}, never_joined=None)
    outcome.update(ok=False, sweep=None, deadline_hit=bool(killed))


def test_a_pair_whose_side_was_still_starting_names_that_node_not_the_link():
    # under load (CI: two pytest workers on 2 cores) a rank may still be starting Python/torch when the pair's time
    # runs out: that pair says nothing of the link, and "neither reached the rendezvous" blamed the network
    rec = _recorded("pairs_3nodes_healthy")
    facts = copy.deepcopy(rec["collective_pairs"])
    for _node, fact in facts.items():
        for m in fact["pairs"]:
            if m["pair"] == ["lab-node0", "lab-node2"]:
                m["startup_s"] = 20.0
                if m["role"] == 0:
                    _still_starting(m["outcome"], None, "killed at the hard deadline (30 s + up to 20 s of start-up)")
                else:   # its partner found no store to connect to; its own watchdog ended it
                    _still_starting(m["outcome"], "imported", None, "DeadlineExceeded")
    r = _judge(rec, facts)
    assert r.status is Status.WARN and r.cause == "collective.pair_slow_start" and r.actor is Actor.NODE
    assert r.summary.startswith("1 pair(s) not measured, a side still starting: lab-node0↔lab-node2: lab-node0 had "
                                "not finished starting (Python, importing torch) within 30 s after a 20 s start-up "
                                "allowance: the link between lab-node0 and lab-node2 was not measured")
    assert r.summary.endswith("2 of 3 pairs tested (3 planned)")
    assert r.evidence["culprits"] == {"nodes": [], "links": [], "failed": []}   # no link or node judged bad on it
    [pair] = [p for p in r.evidence["pairs"] if (p["a"], p["b"]) == ("lab-node0", "lab-node2")]
    assert pair["status"] == "not started" and pair["slow_start"] == ["lab-node0"]
    assert "# on lab-node0" in r.remediation and "--pairs-timeout 60" in r.remediation
    assert "on lab-node2" not in r.remediation and paste_problems(r.remediation) == []
    # the console's matrix tells the unmeasured pair from an unplanned one ("-") and from a failed one
    from dsv3_preflight.reports.probe_text import render_pairs_text
    text = render_pairs_text(_doc(r))
    assert "late = a side still starting when the pair's time ran out, not measured" in text.splitlines()[0]
    row = next(line for line in text.splitlines() if line.split()[:2] == ["lab-node0", "·"])   # the latency row
    assert row.split() == ["lab-node0", "·", row.split()[2], "late"] and "FAIL" not in text.split("WARN")[0]
    # a rank that crashed while starting (no deadline) is not a slow start: the pair failed
    for fact in facts.values():
        for m in fact["pairs"]:
            if m["pair"] == ["lab-node0", "lab-node2"] and m["role"] == 0:
                _still_starting(m["outcome"], "started", None, "ModuleNotFoundError")
    assert _judge(rec, facts).evidence["culprits"]["failed"] == [["lab-node0", "lab-node2"]]


def test_without_the_probe_the_check_skips_with_the_command():
    r = judge_pairs({"n0": {"requested": False, "reason": "not requested", "pairs": []}},
                    Profile.from_dict(_recorded("pairs_3nodes_healthy")["profile"]), {"n0": 0})
    assert r.status is Status.SKIP and "--probe=pairs" in r.summary


def _ok(a, b, lat=100.0, bw=1.0):
    return PairRecord(a, b, status=OK, latency_us=lat, busbw_gbps=bw, size_bytes=1 << 20, store=f"{a}:1")


def _failed(a, b, who=None):
    return PairRecord(a, b, status=FAILED, failure=f"{who or b} could not connect", could_not_connect=who or b,
                      timed_out=True, store=f"{a}:1")


TH = Thresholds(latency_ratio=3.0, busbw_ratio=0.5)


def test_one_failed_pair_and_one_noisy_pair_never_condemn_a_node():
    # 3 nodes, 1↔2 cut, 0↔1 a little slow: a failed link, not a bad node 1
    recs = [_failed("n1", "n2"), _ok("n0", "n1", bw=0.4), _ok("n0", "n2")]
    loc = localise(["n0", "n1", "n2"], recs, TH)
    assert loc.bad_nodes == {} and [r.key for r in loc.failed_links] == [("n1", "n2")]


def test_a_node_no_partner_can_reach_is_the_bad_node():
    recs = [_failed("n0", "n3"), _failed("n1", "n3"), _failed("n2", "n3"), _ok("n0", "n1"), _ok("n0", "n2"), _ok("n1", "n2")]
    loc = localise(["n0", "n1", "n2", "n3"], recs, TH)
    assert list(loc.bad_nodes) == ["n3"] and loc.failed_links == []
    [f] = rule_bad_nodes(loc, TH, {"n3": "10.0.0.3"}, {})
    assert f.message.startswith("node n3 could not complete a pair with any partner (3 of 3 pairs")
    assert '"${IFACE:?the node interface toward its peers}"' in f.fix and paste_problems(f.fix) == []


def test_a_slow_latency_alone_marks_a_link():
    recs = [_ok("n0", "n1", lat=900.0), _ok("n0", "n2"), _ok("n1", "n2"), _ok("n0", "n3"), _ok("n1", "n3"), _ok("n2", "n3")]
    loc = localise(["n0", "n1", "n2", "n3"], recs, TH)
    [f] = rule_slow_links(loc, TH, {"n1": "10.0.0.1"})
    assert f.message.startswith("link n0↔n1 is slow (p50 0.9 ms against a median of 0.1 ms (9×), "
                                "bandwidth 1 GB/s against 1 GB/s)")
    assert "ping -c 20 -i 0.2 10.0.0.1   # on n0" in f.fix and paste_problems(f.fix) == []


def test_rule_failed_pairs_says_who_could_not_connect_and_where_to_look():
    loc = localise(["n0", "n1", "n2"], [_failed("n1", "n2"), _ok("n0", "n1"), _ok("n0", "n2")], TH)
    [f] = rule_failed_pairs(loc, {"n1": "10.0.0.1", "n2": "10.0.0.2"})
    assert f.message == "pair n1↔n2 timed out: n2 could not connect" and f.actor is Actor.NETWORK
    assert "ping -c 3 -W 1 10.0.0.1   # on n2" in f.fix and paste_problems(f.fix) == []


def test_rule_untested_warns_on_pairs_nobody_reported():
    f = rule_untested([PairRecord("n0", "n1"), _ok("n0", "n2")])
    assert f.status is Status.WARN and "n0↔n1" in f.message and paste_problems(f.fix) == []
    assert rule_untested([_ok("n0", "n1")]) is None


def test_the_matrix_is_symmetric_with_the_status_of_every_cell():
    _, recs = pair_records(_recorded("pairs_3nodes_drop")["collective_pairs"])
    m = matrix(["lab-node0", "lab-node1", "lab-node2"], recs)
    assert m["status"] == [["self", "ok", "ok"], ["ok", "self", "failed"], ["ok", "failed", "self"]]
    assert m["busbw_gbps"][0][1] == m["busbw_gbps"][1][0] > 0 and m["busbw_gbps"][1][2] is None


def _stalled_in_the_bandwidth_phase(rec: dict, a: str, b: str, ops: int) -> dict:
    """The recorded facts with the pair a↔b's ranks stopped at the hard deadline in the bandwidth phase, after their
    steady-state all_reduces, having finished ``ops`` ops of it (as a worker's sweep_progress events record)."""
    facts = copy.deepcopy(rec["collective_pairs"])
    for fact in facts.values():
        for m in fact["pairs"]:
            if m["pair"] != [a, b]:
                continue
            out = m["outcome"]
            out.update(ok=False, sweep=None, deadline_hit=True)
            for r in out["ranks"]:
                r.update(last_phase="steady_state", killed="killed at the hard deadline (12 s)", sweep=None,
                         phases={k: v for k, v in r["phases"].items() if k not in ("sweep_done", "done")},
                         sweep_progress={"size_bytes": 262144, "ops": ops, "seconds": 0.5 * ops, "waited_s": 9.0})
                r["timings"]["total_s"] = None
    return facts


def test_a_pair_stalled_in_the_bandwidth_phase_keeps_its_latency_and_the_bandwidth_of_the_ops_done():
    rec = _recorded("pairs_3nodes_healthy")
    _, records = pair_records(_stalled_in_the_bandwidth_phase(rec, "lab-node1", "lab-node2", ops=2))
    [stalled] = [r for r in records if r.key == ("lab-node1", "lab-node2")]
    assert stalled.status == OK and stalled.latency_us and stalled.cut_short and not stalled.busbw_bound
    assert stalled.busbw_gbps == pytest.approx(262144 / 0.5 / 1e9) and stalled.busbw_iters == 2


def test_a_pair_stalled_before_any_op_of_the_bandwidth_phase_has_an_upper_bound_and_reads_slow():
    rec = _recorded("pairs_3nodes_healthy")
    facts = _stalled_in_the_bandwidth_phase(rec, "lab-node1", "lab-node2", ops=0)
    _, records = pair_records(facts)
    [stalled] = [r for r in records if r.key == ("lab-node1", "lab-node2")]
    assert stalled.status == OK and stalled.busbw_bound and stalled.busbw_gbps == pytest.approx(262144 / 9.0 / 1e9)
    r = _judge(rec, facts)
    assert r.evidence["culprits"]["failed"] == [] and "could not complete" not in r.summary
    assert "below " in r.summary and "(no all_reduce of 256 KiB finished)" in r.summary, r.summary


def test_a_pair_that_never_connected_is_still_failed():
    rec = _recorded("pairs_3nodes_drop")
    _, records = pair_records(rec["collective_pairs"])
    [cut] = [r for r in records if r.key == ("lab-node1", "lab-node2")]
    assert cut.status == FAILED and cut.latency_us is None and cut.cut_short is None
