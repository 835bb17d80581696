"""The fast schedule of `--probe=pairs` (issue 47): round 1 pairs every node, then only the suspects against nodes
already proven good. Pure: the schedule (`collective.schedule.next_round`), the node states and the localisation
(`collective.localise`) over pair records built from a ground truth, for every N from 2 to 64 and some up to 512.
The driver's wave loop is driven through the benchmark's simulated dispatch at the end (benchmarks/pairs_sim.py)."""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest
from paste_lint import paste_problems

from dsv3_preflight.cli import build_parser
from dsv3_preflight.cluster.nodes import NodeInfo
from dsv3_preflight.cluster.pairs import PAIRS_FACT, Rounds, run_pairs
from dsv3_preflight.collective.localise import OK, PairRecord, Thresholds, localise, node_states, partners_met
from dsv3_preflight.collective.pairs_judge import judge_pairs
from dsv3_preflight.collective.schedule import (
    FAST_MIN_NODES,
    first_round,
    max_fast_rounds,
    next_round,
    round_robin,
    uses_fast,
)
from dsv3_preflight.commands.run import options_from_args
from dsv3_preflight.profile import Profile

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from pairs_sim import Quiet, SimCluster, payload  # noqa: E402

DATA = Path(__file__).parents[1] / "data" / "collective"
TH = Thresholds()
NS = list(range(2, 65)) + [96, 127, 128, 255, 256, 257, 511, 512]


def _names(n):
    return [f"n{i:03d}" for i in range(n)]


def _run(n, bad_node=None, bad_link=None):
    """Run the fast schedule over a ground truth (the 4th pair of healthy values repeats: exact medians); returns
    (rounds, localisation, states, records)."""
    names = _names(n)
    records: list[PairRecord] = []
    index, count = 0, 0
    while True:
        states = node_states(names, records, TH) if index else {}
        pairs = next_round(names, states, partners_met(records), index)
        if not pairs:
            break
        for a, b in pairs:
            count += 1
            lat, bw = 100.0 * (1 + (count % 4) / 10), 10.0 * (1 + (count % 3) / 10)
            if bad_node in (a, b) or {a, b} == set(bad_link or ()):
                lat, bw = lat * 4, bw * 0.1
            records.append(PairRecord(a, b, round=index + 1, status=OK, latency_us=lat, busbw_gbps=bw))
        index += 1
    states = node_states(names, records, TH)
    return index, localise(names, records, TH, resolve_links=True), states, records


@pytest.mark.parametrize("n", [n for n in NS if n >= FAST_MIN_NODES])
def test_a_healthy_cluster_is_done_after_round_1_and_an_odd_node_after_its_one_pair(n):
    rounds, loc, states, records = _run(n)
    assert rounds == (1 if n % 2 == 0 else 2)
    assert len(records) == (n + 1) // 2
    assert set(states.values()) == {"good"}
    assert loc.culprits() == {"nodes": [], "links": [], "failed": []}


@pytest.mark.parametrize("n", [n for n in NS if n >= FAST_MIN_NODES])
def test_one_bad_node_is_named_within_2_plus_log2_n_rounds_wherever_it_sits(n):
    limit = 2 + math.ceil(math.log2(n))
    for i in sorted({0, 1, n // 2, n - 2, n - 1}):
        bad = _names(n)[i]
        rounds, loc, states, _ = _run(n, bad_node=bad)
        assert rounds <= limit, (n, bad, rounds)
        assert loc.culprits() == {"nodes": [bad], "links": [], "failed": []}, (n, bad)
        assert [k for k, v in states.items() if v != "good"] == [bad]


@pytest.mark.parametrize("n", [n for n in NS if n >= FAST_MIN_NODES])
def test_one_bad_link_of_round_1_clears_both_ends_and_is_named_within_the_limit(n):
    limit = 2 + math.ceil(math.log2(n))
    names = _names(n)
    for a, b in sorted({first_round(n)[0], first_round(n)[-1], first_round(n)[len(first_round(n)) // 2]}):
        rounds, loc, states, _ = _run(n, bad_link=(names[a], names[b]))
        assert rounds <= min(limit, 3), (n, a, b, rounds)   # 3: a small odd N, whose odd node waits for a partner
        assert loc.culprits() == {"nodes": [], "links": [[names[a], names[b]]], "failed": []}, (n, a, b)
        assert set(states.values()) == {"good"}


@pytest.mark.parametrize("n", [5, 7, 9, 33, 257])
def test_a_bad_link_of_the_odd_node_is_named_within_the_limit(n):
    names = _names(n)
    rounds, loc, _, _ = _run(n, bad_link=(names[0], names[n - 1]))   # the odd node meets node 0 in round 2
    assert rounds <= max_fast_rounds(n)
    assert loc.culprits()["links"] == [[names[0], names[n - 1]]]


def test_round_1_covers_every_node_with_disjoint_pairs_and_the_limit_is_2_plus_log2():
    for n in range(2, 70):
        nodes = [x for p in first_round(n) for x in p]
        assert len(nodes) == len(set(nodes)) == n - n % 2
    assert [max_fast_rounds(n) for n in (2, 3, 4, 5, 8, 9, 64, 65, 512)] == [3, 4, 4, 5, 5, 6, 8, 9, 11]


def test_suspects_meet_distinct_proven_good_nodes_they_have_not_met():
    names = _names(8)
    states = {n: "good" for n in names} | {"n002": "suspect", "n003": "suspect", "n007": "untested"}
    met = {"n002": {"n003"}, "n003": {"n002"}}
    pairs = next_round(names, states, met, 1)
    assert pairs == [("n000", "n002"), ("n001", "n003"), ("n004", "n007")]
    partners = [x for p in pairs for x in p]
    assert len(partners) == len(set(partners))


def test_with_more_suspects_than_good_nodes_the_cleared_ones_become_partners():
    names = _names(16)
    states = {n: "suspect" for n in names} | {"n000": "good", "n001": "good"}
    pairs = next_round(names, states, {}, 1)
    assert pairs == [("n000", "n002"), ("n001", "n003")]   # as many as there are free good partners
    assert next_round(names, states, {}, max_fast_rounds(16)) == []   # the round limit holds


def test_below_4_nodes_and_with_a_sample_the_round_robin_is_used():
    assert not uses_fast(3, "fast", None) and uses_fast(4, "fast", None)
    assert not uses_fast(64, "all", None) and not uses_fast(64, "fast", 10)


def _profile():
    rec = json.loads((DATA / "pairs_6nodes_healthy.json").read_text())
    return Profile.from_dict(rec["profile"]).with_values("test", pairs_latency_ratio=3.0, pairs_busbw_ratio=0.5)


def _nodes(n):
    return [NodeInfo(node_id=f"{i:056x}", ip=f"10.88.0.{i + 2}", hostname=f"h{i}", name=f"n{i}", node_rank=i)
            for i in range(n)]


def test_the_default_is_the_fast_schedule_and_pairs_all_keeps_the_round_robin():
    parser = build_parser()
    fast = options_from_args(parser.parse_args(["run", "--all-nodes", "--probe=pairs"]))
    full = options_from_args(parser.parse_args(["run", "--all-nodes", "--probe=pairs", "--pairs=all"]))
    assert fast.pairs_schedule == "fast" and full.pairs_schedule == "all"
    ranked, profile = _nodes(8), _profile()
    quick = Rounds(ranked, profile, None, fast.pairs_schedule)
    assert quick.kind == "fast" and quick.limit == 5
    assert [(a.name, b.name) for a, b in quick.next(0, {}, {})] == [("n0", "n1"), ("n2", "n3"), ("n4", "n5"), ("n6", "n7")]
    every = Rounds(ranked, profile, None, full.pairs_schedule)
    assert every.kind == "all" and every.limit == 7
    assert [[(a.name, b.name) for a, b in r] for r in every.fixed] == \
        [[(f"n{a}", f"n{b}") for a, b in r] for r in round_robin(8)]


@pytest.mark.parametrize("n,case", [(9, "node"), (16, "link"), (64, "node"), (64, "healthy")])
def test_the_driver_wave_loop_names_the_culprit_with_simulated_pairs(n, case):
    """cluster.pairs.run_pairs with the benchmark's simulated dispatch in place of Ray's: the facts it records are
    judged by dist.pairs, which names the ground truth and states the coverage."""
    sim = SimCluster(n, case, seed=3)
    ranked, node_facts = sim.ranked(), {}
    errors, info = run_pairs(ranked, _profile(), float("inf"), node_facts, payload, Quiet(), dispatch=sim.dispatch)
    assert errors == [] and info["schedule"] == "fast" and sim.rounds <= max_fast_rounds(n)
    result = judge_pairs({k: v["facts"][PAIRS_FACT] for k, v in node_facts.items()}, _profile(),
                         {x.name: x.node_rank for x in ranked})
    assert sim.named_right(result.evidence["culprits"]), result.summary
    cover = result.evidence["coverage"]
    assert cover["schedule"] == "fast" and cover["tested"] == sim.pairs_run
    assert f"{sim.pairs_run} of {n * (n - 1) // 2} pairs tested (fast schedule" in result.summary + cover["text"]
    assert cover["nodes_good"] == n - (case == "node")


def test_a_large_clusters_report_folds_the_healthy_nodes_and_shows_the_suspects_rows(tmp_path):
    """64 simulated nodes, one bad: the document holds no node × node matrix, the HTML and the console show the
    bad node's column and rows and fold the 63 healthy nodes into one column; `report DOC.json` reads it back."""
    from bench_scale import one

    import dsv3_preflight.document as document
    from dsv3_preflight.document import read_document
    from reports import render

    captured = {}

    row = one(64, "node", "fast", 2, tmp_path / "row.json", keep=captured)
    assert row["named_right"] and row["rounds"] == 2 and row["render_s"] is not None
    doc = read_document(captured["path"])
    pairs = next(r for r in doc["results"] if r["name"] == "dist.pairs")
    bad = pairs["evidence"]["culprits"]["nodes"]
    assert pairs["evidence"]["matrix"] is None and [r["node"] for r in pairs["evidence"]["suspect_rows"]] == bad
    page = render(doc, "html")
    assert "63 healthy nodes, folded" in page and f"✘ {bad[0]}" in page and "node000 ↔" not in page
    assert page.count('<details class="node">') == 1   # the bad node's facts; the others stay in the document
    text = render(doc, "console")
    assert "63 healthy" in text and f"  {bad[0]} (bad)" in text and "p50 latency of a 4 KiB" not in text
    assert document.MAX_DOCUMENT_BYTES > row["report_bytes"]


def test_a_slow_pair_the_schedule_could_not_resolve_is_named_as_such_never_as_a_link():
    """Round 1 only (the limit reached, say): the slow pair's two nodes met no one else, so it may be either node
    or the link; the judge says that, with --pairs=all to tell which."""
    from dsv3_preflight.collective.pairs_judge import rule_unresolved

    recs = [PairRecord(f"n{i}", f"n{i + 1}", round=1, status=OK, latency_us=100.0, busbw_gbps=10.0) for i in (0, 2, 4)]
    recs.append(PairRecord("n6", "n7", round=1, status=OK, latency_us=100.0, busbw_gbps=0.5))
    names = [f"n{i}" for i in range(8)]
    assert node_states(names, recs, TH) == {**{n: "good" for n in names[:6]}, "n6": "suspect", "n7": "suspect"}
    loc = localise(names, recs, TH, resolve_links=True)
    assert loc.culprits() == {"nodes": [], "links": [], "failed": [], "unresolved": [["n6", "n7"]]}
    [finding] = rule_unresolved(loc, TH, {}, 5)
    assert finding.cause == "collective.pair_unresolved" and "--pairs=all" in finding.fix
    assert paste_problems(finding.fix) == [], finding.fix
    assert finding.message.startswith("pair n6↔n7 is slow (p50 0.1 ms against a median of 0.1 ms, bandwidth 0.5 GB/s "
                                      "against 10 GB/s (0.05×)); not resolved to a node or the link within 5 round(s)")
    # the round-robin's judgement of the same pairs is unchanged: a slow pair of two nodes is a link
    assert localise(names, recs, TH).culprits()["links"] == [["n6", "n7"]]
