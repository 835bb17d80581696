"""`dsv3-preflight report` and `run`'s HTML output, run as a user would."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
from conftest import python_cli
from report_lab import GREEN, PYTEST_A, PYTEST_B, RED, Page, documents  # noqa: F401 - a fixture


def cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(python_cli(*args), capture_output=True, text=True, timeout=120, cwd=cwd)


def test_report_rerenders_one_document(tmp_path, documents):
    out = tmp_path / "report.html"
    proc = cli("report", str(documents / RED), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "NO-GO: 2 fail, 1 warn, 2 pass, 33 skip (rendered 1 document)" in proc.stdout
    assert f"wrote {out}" in proc.stdout
    assert "✘ NO-GO" in Page(out.read_text()).text


def test_report_merges_several_documents_and_can_write_the_merged_json(tmp_path, documents):
    out, merged = tmp_path / "merged.html", tmp_path / "merged.json"
    proc = cli("report", str(documents / PYTEST_A), str(documents / PYTEST_B),
               "-o", str(out), "--json", str(merged))
    assert proc.returncode == 0, proc.stderr
    assert "NO-GO: 1 fail, 5 pass (merged 2 documents)" in proc.stdout
    doc = json.loads(merged.read_text())
    assert doc["mode"] == "merged" and doc["command"][:2] == ["dsv3-preflight", "report"]
    assert "Merged from 2 documents" in Page(out.read_text()).text


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("{not json", "not a readable JSON document"),
    ('{"format": "something-else"}', "not a dsv3-preflight result document"),
    ('{"format": "dsv3-preflight/result", "schema_version": 1, "results": []}', "not a valid result document"),
])
def test_report_rejects_unreadable_or_invalid_input_with_exit_4(tmp_path, content, message, documents):
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    out = tmp_path / "out.html"
    proc = cli("report", str(documents / GREEN), str(bad), "-o", str(out))
    assert proc.returncode == 4
    assert message in proc.stderr and str(bad) in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not out.exists()


def test_report_refuses_to_overwrite_its_input(tmp_path, documents):
    doc = tmp_path / "r.json"
    doc.write_text((documents / GREEN).read_text())
    proc = cli("report", str(doc), "-o", str(doc))
    assert proc.returncode == 4 and "would overwrite an input document" in proc.stderr
    assert json.loads(doc.read_text())["verdict"] == "GO"


@pytest.mark.slow
def test_run_writes_a_timestamped_json_and_html_into_the_reports_dir_by_default(tmp_path, clean_env):
    proc = cli("run", "--profile", "cpu", "--no-color", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    reports = sorted((tmp_path / "preflight-reports").iterdir())
    assert [p.suffix for p in reports] == [".html", ".json"]
    assert reports[0].stem == reports[1].stem and reports[0].stem.startswith("preflight-")
    doc = json.loads(reports[1].read_text())
    page = Page(reports[0].read_text())
    assert f"{'✔' if doc['verdict'] == 'GO' else '✘'} {doc['verdict']}" in page.text
    assert f"wrote {reports[0].relative_to(tmp_path)}" in proc.stdout or f"wrote {reports[0]}" in proc.stdout


@pytest.mark.slow
def test_run_html_option_writes_the_report_where_asked(tmp_path, clean_env):
    out = tmp_path / "deep" / "r.html"
    proc = cli("run", "--profile", "cpu", "--no-report", "--html", str(out), cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    assert out.exists() and not (tmp_path / "preflight-reports").exists()
    assert "Node × check" in Page(out.read_text()).text


@pytest.mark.slow
def test_run_prints_each_written_path_on_one_line_however_narrow_the_terminal(tmp_path, clean_env):
    deep = tmp_path / ("reports-" + "x" * 120) / "[brackets]"
    proc = subprocess.run(python_cli("run", "--profile", "cpu", "--no-color", "-q", "--only", "host.*", "--reports-dir", str(deep)),
                          env={**os.environ, "COLUMNS": "40"}, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    written = sorted(deep.iterdir())
    assert len(written) == 2, proc.stdout + proc.stderr
    for path in written:  # scripts and tests read these lines: a wrapped or markup-eaten path is a lost report
        assert f"\nwrote {path}\n" in "\n" + proc.stdout, proc.stdout
