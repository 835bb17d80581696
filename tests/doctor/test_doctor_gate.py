"""The doctor reads our own preflight's verdict back: the console's causes of a NO-GO, the launch log, the JSON
report (its fixes with the node's values) and the HTML report (through its JSON twin). The documents here are built
with the real result types and rendered with the real console and HTML renderers; tests/launch/test_launch_gate.py and
tests/launch/test_launch_ray.py run the whole launch."""
from __future__ import annotations

import json
import subprocess

import pytest
from conftest import python_cli

from dsv3_preflight.doctor import triage
from dsv3_preflight.doctor.signatures import CHECK_CLASS, GATE_CLASS, GATE_SIGNATURES
from dsv3_preflight.document import build_document
from dsv3_preflight.reports import write_html
from dsv3_preflight.reports.console import render_console
from dsv3_preflight.result import Actor, Result

FIX_A = "# on this node: the rule that drops the port\nnft list ruleset | grep -n 39500"
FIX_B = "nc -vz -w 3 10.0.0.1 39500"


def _doc(results, nodes=("gpu-a",)) -> dict:
    entries = [{"node": n, "node_rank": i, "state": "ok", "error": None, "facts": {}, "fact_errors": {}}
               for i, n in enumerate(nodes)]
    return build_document(mode="cluster" if len(nodes) > 1 else "node",
                          profile={"name": "dsv3", "values": {}, "sources": {}}, nodes=entries, results=results)


def _bash_n(fix: str) -> None:
    p = subprocess.run(["bash", "-n"], input=fix, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, (p.stderr, fix)


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_every_built_in_check_has_a_class_decision():
    p = subprocess.run(python_cli("list", "--json"), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    names = {c["name"] for c in json.loads(p.stdout)["checks"]}
    assert set(CHECK_CLASS) == names   # a new check comes with a decision: its corpus class, or GATE_CLASS
    assert {s.check for s in GATE_SIGNATURES} == names


def test_an_error_on_two_nodes_is_one_cause_with_both_nodes_and_each_nodes_own_fix(tmp_path):
    results = [Result._engine_error("the port probe timed out after 5 s", {}, FIX_A, actor=Actor.NETWORK, cause="reach")
               .stamped(name="net.port_reach", node=n, duration_s=5) for n in ("gpu-b",)]
    results += [Result._engine_error("the port probe timed out after 5 s", {}, FIX_B, actor=Actor.NETWORK, cause="reach")
                .stamped(name="net.port_reach", node="gpu-c", duration_s=5)]
    doc = _doc(results, nodes=("gpu-a", "gpu-b", "gpu-c"))
    console = _write(tmp_path, "console.txt", render_console(doc))
    report = _write(tmp_path, "report.json", json.dumps(doc))
    for path in (console, report):
        d = triage([path])
        head = d["findings"][0]
        assert d["exit_code"] == 1 and d["cause_recognised"] and d["cause_class"] == "port_rendezvous", path
        assert head["id"] == "preflight.net.port_reach" and head["check"] == "net.port_reach"
        assert head["nodes"] == ["gpu-b", "gpu-c"] and "ERROR on gpu-b, gpu-c" in head["title"]
        assert "could not run" in head["root_cause"] and "the network" in head["root_cause"]
        assert not d["error_lines"], d["error_lines"]
        assert head["actor"] == "network", path   # the preflight's own "who acts", not a guess from the check's class
        _bash_n(head["fix"])
    fix = triage([report])["findings"][0]["fix"]
    assert "# on gpu-b:\n" + FIX_A in fix and "# on gpu-c:\n" + FIX_B in fix   # each node's own values


def test_a_plugin_check_is_read_as_any_other_with_a_fix_that_pastes(tmp_path):
    results = [Result.failed("the scratch volume is read-only", {}, None, actor=Actor.NODE)
               .stamped(name="site.scratch-rw", node="gpu-a", duration_s=0)]
    doc = _doc(results)
    for path in (_write(tmp_path, "console.txt", render_console(doc, quiet=True)),
                 _write(tmp_path, "report.json", json.dumps(doc))):
        head = triage([path])["findings"][0]
        assert (head["id"], head["class"], head["check"]) == ("preflight.site.scratch-rw", GATE_CLASS, "site.scratch-rw")
        assert "dsv3-preflight run --only site.scratch-rw" in head["fix"]
        assert "could not run" not in head["root_cause"]   # FAIL, not ERROR
        _bash_n(head["fix"])


def test_the_gates_closing_line_alone_says_no_go_and_points_at_the_report(tmp_path):
    line = "dsv3-preflight launch: NO-GO (1 FAIL): torchrun not started; report: reports/preflight-1-a.json\n"
    d = triage([_write(tmp_path, "tail.txt", line)])
    head = d["findings"][0]
    assert d["exit_code"] == 1 and head["id"] == "preflight.no_go" and head["class"] == GATE_CLASS
    assert head["fix"].startswith("dsv3-preflight doctor reports/preflight-1-a.json")
    _bash_n(head["fix"])
    d = triage([_write(tmp_path, "tail2.txt", "dsv3-preflight launch: NO-GO (1 ERROR): torchrun not started; "
                                              "report: not written (--no-report); the results are above\n")])
    assert d["findings"][0]["fix"].startswith("dsv3-preflight run ")


def test_a_green_preflight_with_a_warning_is_no_failure(tmp_path):
    results = [Result.passed("MTU 9000 on eth0", {}).stamped(name="net.mtu", node="gpu-a", duration_s=0),
               Result.warned("OMP_NUM_THREADS is not set", {}, "export OMP_NUM_THREADS=8", actor=Actor.JOB)
               .stamped(name="env.launch_vars", node="gpu-a", duration_s=0)]
    doc = _doc(results)
    assert doc["verdict"] == "GO"
    for path in (_write(tmp_path, "console.txt", render_console(doc)), _write(tmp_path, "report.json", json.dumps(doc))):
        d = triage([path])
        assert d["verdict"] == "unknown" and d["findings"] == [], path   # nothing ran: no progress, and no failure


def test_an_html_report_is_read_through_its_json_twin_and_refused_without_one(tmp_path):
    doc = _doc([Result.failed("port 39500 is held by pid 4242 (torchrun)", {}, "kill 4242", actor=Actor.NODE)
                .stamped(name="net.port_free", node="gpu-a", duration_s=0)])
    (tmp_path / "preflight-1-gpu-a.json").write_text(json.dumps(doc))
    write_html(doc, tmp_path / "preflight-1-gpu-a.html")
    d = triage([str(tmp_path / "preflight-1-gpu-a.html")])
    assert d["findings"][0]["fix"].startswith("kill 4242") and d["exit_code"] == 1
    assert [s["path"] for s in d["skipped"]] == [str(tmp_path / "preflight-1-gpu-a.html")]
    assert [f["path"] for f in d["files"]] == [str(tmp_path / "preflight-1-gpu-a.json")]
    (tmp_path / "preflight-1-gpu-a.json").unlink()
    d = triage([str(tmp_path / "preflight-1-gpu-a.html")])
    assert d["exit_code"] == 4 and "JSON result document" in d["unreadable"][0]["error"]


@pytest.mark.parametrize("check", sorted(CHECK_CLASS))
def test_each_checks_finding_names_its_class_and_a_fix_that_pastes(check, tmp_path):
    line = f"1. \u2718 FAIL {check}: something the check found\n   who acts: the job's configuration\n"
    head = triage([_write(tmp_path, "c.txt", line)])["findings"][0]
    assert head["class"] == CHECK_CLASS[check] and head["check"] == check
    assert "who must act: the job's configuration" in head["root_cause"]
    _bash_n(head["fix"])


def test_the_lines_of_the_preflights_fixes_are_not_read_as_errors_of_a_run(tmp_path):
    fix = ("# 'Connection refused' here means nothing listens; 'timed out' means a firewall drops it\n"
           "nc -vz -w 3 10.0.0.1 39500 || echo 'RuntimeError: failed, see above'")
    doc = _doc([Result.failed("39500 on 10.0.0.1 is not reachable from gpu-a", {}, fix, actor=Actor.NETWORK)
                .stamped(name="net.port_reach", node="gpu-a", duration_s=0),
                Result.warned("OMP_NUM_THREADS is not set", {}, "# a Traceback would say: Error\nexport OMP_NUM_THREADS=8",
                              actor=Actor.JOB).stamped(name="env.launch_vars", node="gpu-a", duration_s=0)])
    text = render_console(doc)
    assert "RuntimeError: failed" in text and "a Traceback would say: Error" in text
    d = triage([_write(tmp_path, "console.txt", text + "after the console: RuntimeError: a run's own error\n")])
    assert [f["id"] for f in d["findings"]] == ["preflight.net.port_reach"]
    assert [e["text"] for e in d["error_lines"]] == ["after the console: RuntimeError: a run's own error"]


def test_a_ray_cluster_that_changed_after_the_preflight_is_named(tmp_path):
    from dsv3_preflight.launch.ray_launch import cluster_changed_line

    line = cluster_changed_line({"5f1e9a": 0, "c07d44": 1, "9ab310": 2}, {"5f1e9a": 0, "9ab310": 1})
    d = triage([_write(tmp_path, "console.txt", line + "\n")])
    head = d["findings"][0]
    assert (head["id"], head["class"], head["check"]) == ("launch.cluster_changed", "port_rendezvous", "cluster.node_count")
    assert "'c07d44': 1" in head["title"] and d["exit_code"] == 1
    _bash_n(head["fix"])


def test_only_the_launchers_own_lines_say_torchrun_was_not_started(tmp_path):
    # a plain `dsv3-preflight run` says nothing of a launch: the doctor must not claim that none ran
    from pathlib import Path

    from dsv3_preflight.launch.gate import red_line
    from dsv3_preflight.reports.doctor_text import render_text

    doc = _doc([Result.failed("39500 is held by pid 2056 (python)", {}, "kill 2056", actor=Actor.JOB)
                .stamped(name="host.resources", node="gpu-a", duration_s=0)])
    run_console = render_console(doc, quiet=True)
    launch_console = run_console + red_line(doc, 1, [Path(tmp_path / "report.json")]) + "\n"
    for text, launched in ((run_console, False), (launch_console, True)):
        d = triage([_write(tmp_path, "console.txt", text)])
        head = d["findings"][0]
        assert head["id"] == "preflight.host.resources" and head["detail"]["launched"] is launched
        assert ("this launch did not start it, so no training ran" in head["root_cause"]) is launched
        assert ("found by the preflight check host.resources: torchrun was not started" in render_text(d)) is launched
        assert "found by the preflight check host.resources" in render_text(d)
    d = triage([_write(tmp_path, "report.json", json.dumps(doc))])   # a report: run or launch, it does not say
    assert d["findings"][0]["detail"]["launched"] is False
