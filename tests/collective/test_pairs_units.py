"""The pairwise probe's pure parts: the round-robin schedule and the renderers of the matrix. The registered check
`dist.pairs` replaying recorded runs and the localisation rules: test_dist_pairs.py."""
from __future__ import annotations

import itertools

import pytest
from pairs_judge_lab import _doc, _judge, _recorded

from dsv3_preflight.collective.schedule import pair_port, partners, round_robin, sample_rounds, total_pairs


# -- the schedule -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", range(2, 10))
def test_round_robin_meets_every_pair_once_in_disjoint_rounds(n):
    rounds = round_robin(n)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    pairs = [p for r in rounds for p in r]
    assert sorted(pairs) == list(itertools.combinations(range(n), 2)) and len(pairs) == total_pairs(n)
    for r in rounds:
        nodes = [x for p in r for x in p]
        assert len(nodes) == len(set(nodes)) and len(r) == n // 2   # disjoint, and as full as n allows
    assert all(len(partners(rounds, node)) == n - 1 for node in range(n))


def test_a_sample_takes_whole_rounds_first_so_every_node_meets_partners():
    rounds = round_robin(6)
    sample = sample_rounds(rounds, 7)
    assert [len(r) for r in sample] == [3, 3, 1] and sum(map(len, sample)) == 7
    assert all(len(partners(sample[:2], node)) == 2 for node in range(6))
    assert sample_rounds(rounds, None) == rounds and sample_rounds(rounds, 100) == rounds
    with pytest.raises(ValueError):
        sample_rounds(rounds, 0)


def test_pair_ports_differ_within_a_round_and_from_the_round_before():
    n, base = 6, 39501
    for r in range(5):
        ports = [pair_port(base, r, slot, n) for slot in range(3)]
        before = {pair_port(base, r - 1, slot, n) for slot in range(3)} if r else set()
        assert len(set(ports)) == 3 and not set(ports) & before


# -- the renderers -------------------------------------------------------------------------------------------


def test_the_console_text_shows_both_matrices_the_culprit_and_the_coverage():
    from dsv3_preflight.reports.probe_text import render_pairs_text

    text = render_pairs_text(_doc(_judge(_recorded("pairs_6nodes_node"))))
    assert text.startswith("pairs: 15 of 15 pairs tested (* = the culprit node)")
    assert "p50 latency of a 4 KiB all_reduce (ms)" in text and "busbw at 262144 B (GB/s)" in text
    assert "*lab-node5" in text and "FAIL dist.pairs: node lab-node5 is slow with every partner" in text
    assert render_pairs_text({"results": []}) == ""


def test_the_html_view_marks_the_culprit_node_and_the_failed_pair():
    from dsv3_preflight.reports.pairs_view import pairs_view

    node = pairs_view(_doc(_judge(_recorded("pairs_6nodes_node"))))
    assert node["culprit_nodes"] == ["lab-node5"] and node["coverage"].startswith("15 of 15")
    lat, bw = node["maps"]
    assert bw["rows"][5]["culprit"] and bw["rows"][5]["cells"][0]["culprit"]
    assert bw["rows"][0]["cells"][0]["self"] and 0 <= bw["rows"][0]["cells"][1]["shade"] <= 1
    drop = pairs_view(_doc(_judge(_recorded("pairs_3nodes_drop"))))
    cell = drop["maps"][1]["rows"][1]["cells"][2]
    assert cell["failed"] and cell["culprit"] and "could not connect" in cell["title"]
    assert pairs_view({"results": []}) is None


def test_the_heat_map_template_renders_the_culprit_escaped_in_the_reports_environment():
    from dsv3_preflight.reports.html import _environment
    from dsv3_preflight.reports.pairs_view import pairs_view

    env = _environment()
    assert env.globals["pairs_view"] is pairs_view       # registered for report.html.j2's include
    rec = _recorded("pairs_6nodes_node")
    doc = _doc(_judge(rec))
    html = env.get_template("pairs.html.j2").render(doc=doc)
    assert '<section id="pairs">' in html and "Bad node: lab-node5." in html
    assert html.count('<th scope="row" class="culprit">✘ lab-node5</th>') == 2      # both maps mark it
    assert "15 of 15 pairs tested" in html and "hsl(" in html
    doc["results"][0]["evidence"]["matrix"]["nodes"][0] = "<script>x</script>"
    assert "<script>x</script>" not in env.get_template("pairs.html.j2").render(doc=doc)
    assert env.get_template("pairs.html.j2").render(doc={"results": []}).strip() == ""


def test_the_whole_html_report_of_a_pairs_run_shows_the_heat_maps_after_the_cluster_section():
    from dsv3_preflight.reports import render

    doc = _doc(_judge(_recorded("pairs_6nodes_node")))
    html = render(doc, "html")
    assert html.index('<section id="cluster">') < html.index('<section id="pairs">') < html.index('id="failures"')
    assert html.count('<th scope="row" class="culprit">✘ lab-node5</th>') == 2
    assert '<section id="pairs">' not in render({**doc, "results": [r for r in doc["results"] if r["name"] != "dist.pairs"]}, "html")


def test_the_console_report_of_a_pairs_run_shows_the_matrix_before_the_causes():
    from dsv3_preflight.reports import render

    doc = _doc(_judge(_recorded("pairs_6nodes_node")))
    text = render({**doc, "verdict": "NO-GO"}, "console")
    assert "pairs: 15 of 15 pairs tested" in text and "*lab-node5" in text
    assert text.index("pairs: 15 of 15") < text.index("Why NO-GO")
    assert "pairs: 15 of 15" not in render({**doc, "verdict": "NO-GO"}, "console", quiet=True)


