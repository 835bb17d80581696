"""`dsv3-preflight report`: where it may write (never over an input, a directory is a usage error) and odd sweeps."""
from __future__ import annotations

import json
import shutil
import subprocess

from conftest import python_cli
from report_lab import GREEN, PYTEST_A, SWEEP, documents, load  # noqa: F401 - fixtures

from dsv3_preflight.reports import write_html


def cli(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(python_cli(*args), capture_output=True, text=True, timeout=120, cwd=cwd)


def test_output_naming_an_input_by_another_spelling_is_refused_and_the_input_kept(tmp_path, documents):
    doc = tmp_path / "gpu-a.json"
    shutil.copy(documents / PYTEST_A, doc)
    before = doc.read_bytes()
    (tmp_path / "sub").mkdir()
    for extra in (["-o", "./gpu-a.json"], ["-o", "sub/../gpu-a.json"], ["-o", "r.html", "--json", "./gpu-a.json"]):
        proc = cli("report", "gpu-a.json", *extra, cwd=tmp_path)
        assert proc.returncode == 4, (extra, proc.stdout, proc.stderr)
        assert "would overwrite an input document" in proc.stderr
        assert doc.read_bytes() == before


def test_output_that_is_a_directory_is_a_usage_error_not_an_internal_error(tmp_path, documents):
    proc = cli("report", str(documents / GREEN), "-o", str(tmp_path))
    assert proc.returncode == 4, proc.stderr
    assert "cannot write the report" in proc.stderr and "internal error" not in proc.stderr


def test_a_sweep_with_absurd_values_still_renders(tmp_path, load):
    doc = load(SWEEP)
    (r,) = [r for r in doc["results"] if "sweep" in (r.get("evidence") or {})]
    r["evidence"]["sweep"] += [{"size_bytes": 2048, "algbw_gbps": 1e308, "busbw_gbps": 7.0},
                               {"size_bytes": 4096, "algbw_gbps": True, "busbw_gbps": -1}]
    path = tmp_path / "in.json"
    path.write_text(json.dumps(doc))
    proc = cli("report", str(path), "-o", str(tmp_path / "r.html"))
    assert proc.returncode == 0, proc.stderr
    assert "<svg" in (tmp_path / "r.html").read_text()


def test_a_document_holding_nan_is_refused_naming_the_file(tmp_path, load):
    """The tool never writes NaN (JSON has none); a document that holds it was edited or forged: exit 4, no page."""
    doc = load(SWEEP)
    doc["counts"]["pass"] = float("nan")
    path = tmp_path / "in.json"
    path.write_text(json.dumps(doc))
    proc = cli("report", str(path), "-o", str(tmp_path / "r.html"))
    assert proc.returncode == 4 and str(path) in proc.stderr and "NaN" in proc.stderr, proc.stderr
    assert not (tmp_path / "r.html").exists()


def test_attached_log_failure_and_unreadable_log_are_shown_at_the_top_and_in_the_doctor_section(tmp_path, load):
    doc = load(GREEN)
    doc["doctor"] = {"verdict": "failure", "summary": "root cause: CUDA error 802: system not yet initialized",
                     "findings": [], "warnings": [], "unreadable": [{"path": "/logs/gpu-c.log", "error": "Permission denied"}]}
    html = write_html(doc, tmp_path / "r.html").read_text()
    why = html[html.index('<ul class="why">'):html.index("</ul>", html.index('<ul class="why">'))]
    assert "attached logs (doctor, see below): root cause: CUDA error 802" in why
    assert "/logs/gpu-c.log</code>: Permission denied" in html
