"""Merging result documents: one per node from `pytest checks/`, or the same node over time."""
from __future__ import annotations

import jsonschema
import pytest
from report_lab import (  # noqa: F401 - documents and load are fixtures
    CLUSTER,
    GREEN,
    PYTEST_A,
    PYTEST_B,
    RED,
    SWEEP,
    Page,
    documents,
    load,
)

from dsv3_preflight.document import load_schema
from dsv3_preflight.reports.html import render_html
from dsv3_preflight.reports.merge import merge_documents


@pytest.fixture
def merged(load):
    def merge(*names: str, docs: dict | None = None) -> dict:
        return merge_documents([(n, (docs or {}).get(n) or load(n)) for n in names],
                               command=["dsv3-preflight", "report", *names])
    return merge


def test_merging_per_node_documents_gives_one_column_per_node_and_recounts(merged):
    doc = merged(PYTEST_A, PYTEST_B)
    assert doc["mode"] == "merged"
    assert [n["node"] for n in doc["nodes"]] == ["gpu-a", "gpu-b"]
    assert doc["counts"] == {"pass": 5, "warn": 0, "fail": 1, "skip": 0, "error": 0}
    assert doc["verdict"] == "NO-GO" and doc["exit_code"] == 1 and doc["worst"] == "fail"
    assert doc["results"][0]["name"] == "host.resources" and doc["results"][0]["node"] == "gpu-b"
    assert [m["file"] for m in doc["merged_from"]] == [PYTEST_A, PYTEST_B]
    assert doc["created"] < doc["finished"]


def test_merged_document_is_a_valid_result_document(merged):
    for names in ((PYTEST_A, PYTEST_B), (RED, GREEN, CLUSTER, SWEEP)):
        jsonschema.validate(merged(*names), load_schema())


def test_the_same_node_started_at_the_same_second_is_told_apart_by_file(merged, load):
    first, second = load(GREEN), load(GREEN)   # the same node, run twice within one second
    second["results"][0].update(status="fail", summary="failed the second time")
    second.update(verdict="NO-GO", exit_code=1)
    doc = merged("first.json", "second.json", docs={"first.json": first, "second.json": second})
    names = [n["node"] for n in doc["nodes"]]
    assert names == ["lab-node0 @ first.json", "lab-node0 @ second.json"]
    # each run's cluster-scope rows (skipped on one node) keep their own column, told apart by file as well
    assert {r["node"] for r in doc["results"]} == {*names, "cluster (lab-node0) @ first.json",
                                                   "cluster (lab-node0) @ second.json"}
    assert doc["verdict"] == "NO-GO"


def test_runs_over_time_are_labelled_by_their_start(load):
    a, b = load(PYTEST_A), load(PYTEST_A)
    b["created"] = "2099-11-22T01:00:00+00:00"
    doc = merge_documents([("a.json", a), ("b.json", b)])
    assert [n["node"] for n in doc["nodes"]] == [f"gpu-a @ {a['created']}", "gpu-a @ 2099-11-22T01:00:00+00:00"]
    page = Page(render_html(doc))
    columns = [attrs["data-node"] for t, attrs in page.elements if t == "th" and "data-node" in attrs]
    assert columns == [f"gpu-a @ {a['created']}", "gpu-a @ 2099-11-22T01:00:00+00:00"]


def test_merging_keeps_a_dead_node_and_the_doctor_findings(load):
    from conftest import DATA

    from dsv3_preflight.doctor import triage

    cluster = load(CLUSTER)
    cluster["doctor"] = triage([str(DATA / "doctor" / "rendezvous_timeout.log")])
    doc = merge_documents([(CLUSTER, cluster), (PYTEST_B, load(PYTEST_B))])
    states = {n["node"]: n["state"] for n in doc["nodes"]}
    assert states["lab-node3"] == "error"
    assert doc["doctor"]["findings"][0]["title"] == cluster["doctor"]["findings"][0]["title"]
    assert "NODE ERROR" in Page(render_html(doc)).text


def test_merging_masks_secrets_again(load):
    a, b = load(PYTEST_A), load(PYTEST_B)
    a["nodes"][0]["facts"].setdefault("env", {})["AWS_SECRET_ACCESS_KEY"] = "plain-aws-secret"
    b["command"] = ["pytest", "--token=plain-token"]
    doc = merge_documents([("a", a), ("b", b)])
    text = repr(doc)
    assert "plain-aws-secret" not in text and "plain-token" not in text


def test_a_single_document_passes_through_unchanged_in_meaning(merged, load):
    doc = merged(GREEN)
    assert doc == load(GREEN)


def test_merged_documents_from_different_profiles_say_so_with_each_rendezvous(load):
    a, b = load(PYTEST_A), load(RED)
    assert (a["profile"]["name"], b["profile"]["name"]) == ("cpu", "dsv3")
    a["profile"]["values"]["master_addr"] = "127.0.0.1"
    b["profile"]["values"].update(master_addr="10.10.0.11", master_port=39500)
    port = a["profile"]["values"]["master_port"]
    text = Page(render_html(merge_documents([("run/a.json", a), ("run/b.json", b)]))).text
    assert "the merged documents ran under different profiles: cpu (a.json) / dsv3 (b.json)" in text
    assert f"rendezvous 127.0.0.1:{port} (a.json) / 10.10.0.11:39500 (b.json)" in text


def test_the_doctor_verdicts_merge_in_the_one_verdict_order(load):
    # result.verdict_rank: a failure ranks as NO-GO, a log that shows nothing as NOTHING SELECTED (never as GO)
    from dsv3_preflight.result import LOG_VERDICTS, verdict_exit_code, verdict_rank

    def with_doctor(verdict: str) -> dict:
        doc = load(PYTEST_A)
        doc["doctor"] = {"verdict": verdict, "summary": verdict, "findings": [], "warnings": []}
        return doc

    for verdicts, worst in ((("healthy", "unknown"), "unknown"), (("healthy", "failure", "unknown"), "failure"),
                            (("healthy", "healthy"), "healthy"), (("GO", "failure"), "failure")):
        doc = merge_documents([(f"{i}.json", with_doctor(v)) for i, v in enumerate(verdicts)])
        assert doc["doctor"]["verdict"] == worst, verdicts
        assert doc["doctor"]["summary"] == "; ".join(verdicts)
    assert [verdict_exit_code(v) for v in ("failure", "healthy", "unknown")] == [1, 0, 5]
    assert sorted(LOG_VERDICTS, key=verdict_rank) == ["healthy", "unknown", "failure"]
    assert verdict_rank("NO-GO") == verdict_rank("failure") > verdict_rank("unknown") > verdict_rank("GO") > verdict_rank("")
