"""render_text is a pure function of the diagnosis: it returns the text (cause, fix, check, first failure,
consequences; "cause not recognised" with the error lines; the exit-5 explanation) and prints nothing."""
from pathlib import Path

from dsv3_preflight.doctor import triage
from dsv3_preflight.reports.doctor_text import render_text

DATA = Path(__file__).resolve().parents[1] / "data" / "doctor"


def test_render_is_pure_and_shows_cause_fix_check_and_consequences(capsys):
    doc = triage([str(DATA / "multirank_interleaved.log")])
    before = repr(doc)
    text = render_text(doc)
    assert capsys.readouterr() == ("", "")
    assert repr(doc) == before, "render_text changed the diagnosis"
    assert text.startswith("doctor: FAILURE (exit 1) — root cause: GPU out of memory")
    assert "first failure: node gpu-node-1, rank 13" in text
    assert "   fix:\n" in text and "caught before launch by: dsv3-preflight run --only gpu.inventory" in text
    assert "consequence of cuda.out_of_memory" in text


def test_render_of_an_unrecognised_failure_lists_the_lines_and_nearest_causes():
    text = render_text(triage([str(DATA / "unrecognised_error.log")]))
    assert "cause not recognised. The error lines:" in text and "TensorBoardCallback" in text
    assert "nearest known causes" in text


def test_render_of_unknown_and_healthy():
    assert "exit 5, not 0" in render_text(triage([str(DATA / "no_known_failure.log")]))
    healthy = render_text(triage([str(DATA / "healthy_run.log")]))
    assert healthy.startswith("doctor: HEALTHY (exit 0)") and "signs of progress:" in healthy


def test_render_copes_with_a_minimal_document():
    assert render_text({"verdict": "unknown", "summary": "s"}).startswith("doctor: UNKNOWN — s")


def test_a_log_that_only_stops_is_rendered_as_a_suspected_cause(tmp_path):
    lines = [f"gpu-{h}:4101:4101 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>" for h in "ab"]
    (tmp_path / "n.log").write_text("\n".join(lines) + "\n")
    text = render_text(triage([str(tmp_path / "n.log")]))
    assert text.startswith("doctor: FAILURE (exit 1) — suspected cause: NCCL selected interface lo (127.0.0.1): "
                           "the log stops there")
    assert "\n   suspected cause: NCCL uses lo," in text and "\n   cause:" not in text


def test_the_root_cause_says_who_acts_and_names_the_node_to_repair(tmp_path):
    (tmp_path / "fm.log").write_text("node2: [rank9]: RuntimeError: CUDA error: system not yet initialized\n")
    doc = triage([str(tmp_path / "fm.log")])
    head = doc["findings"][0]
    assert (head["actor"], head["nodes"]) == ("node", ["node2"])
    assert "\n   who acts: the node's administrator (repair or drain the node) — on node2\n" in render_text(doc)
    doc = triage([str(DATA / "multirank_interleaved.log")])   # a rank out of GPU memory: the job's to change
    assert doc["findings"][0]["actor"] == "job"
    assert all(f["actor"] is None for f in doc["findings"] if f["role"] == "consequence")
    assert "\n   who acts: the job's configuration (paste the fix)\n" in render_text(doc)
