"""Merging result documents: one per node from `pytest checks/`, or the same node over time."""
from __future__ import annotations

import jsonschema
from report_lab import Page, load

from dsv3_preflight.document import load_schema
from dsv3_preflight.reports.html import render_html
from dsv3_preflight.reports.merge import merge_documents


def merged(*names: str) -> dict:
    return merge_documents([(n, load(n)) for n in names], command=["dsv3-preflight", "report", *names])


def test_merging_per_node_documents_gives_one_column_per_node_and_recounts():
    doc = merged("pytest_gpu-a.json", "pytest_gpu-b.json")
    assert doc["mode"] == "merged"
    assert [n["node"] for n in doc["nodes"]] == ["gpu-a", "gpu-b"]
    assert doc["counts"] == {"pass": 5, "warn": 0, "fail": 1, "skip": 0, "error": 0}
    assert doc["verdict"] == "NO-GO" and doc["exit_code"] == 1 and doc["worst"] == "fail"
    assert doc["results"][0]["name"] == "host.resources" and doc["results"][0]["node"] == "gpu-b"
    assert [m["file"] for m in doc["merged_from"]] == ["pytest_gpu-a.json", "pytest_gpu-b.json"]
    assert doc["created"] < doc["finished"]


def test_merged_document_is_a_valid_result_document():
    for names in (("pytest_gpu-a.json", "pytest_gpu-b.json"),
                  ("red_single_node.json", "green_single_node.json", "cluster_dead_node_duplicate_rank.json")):
        jsonschema.validate(merged(*names), load_schema())


def test_the_same_node_started_at_the_same_second_is_told_apart_by_file():
    doc = merged("red_single_node.json", "green_single_node.json")
    names = [n["node"] for n in doc["nodes"]]
    assert names == ["gpu-a @ red_single_node.json", "gpu-a @ green_single_node.json"]
    assert {r["node"] for r in doc["results"]} == set(names)
    assert doc["verdict"] == "NO-GO"


def test_runs_over_time_are_labelled_by_their_start():
    a, b = load("pytest_gpu-a.json"), load("pytest_gpu-a.json")
    b["created"] = "2026-11-22T01:00:00+00:00"
    doc = merge_documents([("a.json", a), ("b.json", b)])
    assert [n["node"] for n in doc["nodes"]] == ["gpu-a @ 2026-11-21T23:40:12+00:00", "gpu-a @ 2026-11-22T01:00:00+00:00"]
    page = Page(render_html(doc))
    columns = [attrs["data-node"] for t, attrs in page.elements if t == "th" and "data-node" in attrs]
    assert columns == ["gpu-a @ 2026-11-21T23:40:12+00:00", "gpu-a @ 2026-11-22T01:00:00+00:00"]


def test_merging_keeps_a_dead_node_and_the_doctor_findings():
    doc = merged("cluster_dead_node_duplicate_rank.json", "pytest_gpu-b.json")
    states = {n["node"]: n["state"] for n in doc["nodes"]}
    assert states["gpu-c"] == "error"
    assert doc["doctor"]["findings"][0]["title"] == "Two nodes claim node rank 0"
    assert "NODE ERROR" in Page(render_html(doc)).text


def test_merging_masks_secrets_again():
    a, b = load("pytest_gpu-a.json"), load("pytest_gpu-b.json")
    a["nodes"][0]["facts"]["env"]["AWS_SECRET_ACCESS_KEY"] = "plain-aws-secret"
    b["command"] = ["pytest", "--token=plain-token"]
    doc = merge_documents([("a", a), ("b", b)])
    text = repr(doc)
    assert "plain-aws-secret" not in text and "plain-token" not in text


def test_a_single_document_passes_through_unchanged_in_meaning():
    doc = merged("green_single_node.json")
    assert doc == load("green_single_node.json")


def test_merged_documents_from_different_profiles_say_so_with_each_rendezvous():
    a, b = load("pytest_gpu-a.json"), load("green_single_node.json")
    a["profile"]["name"], a["profile"]["values"]["master_addr"] = "cpu", "127.0.0.1"
    text = Page(render_html(merge_documents([("run/a.json", a), ("run/b.json", b)]))).text
    assert "the merged documents ran under different profiles: cpu (a.json) / dsv3 (b.json)" in text
    assert "rendezvous 127.0.0.1:39500 (a.json) / 10.10.0.11:39500 (b.json)" in text
