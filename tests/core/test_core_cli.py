"""The CLI as a user runs it: exit codes, the result document, replay of saved facts, secret masking."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import jsonschema
import pytest
from conftest import python_cli

from dsv3_preflight.document import load_schema

CORE = ["--only", "env.launch_vars", "--only", "host.resources"]


def run_cli(*args, env=None, timeout=120):
    return subprocess.run(python_cli(*args), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})


def test_cpu_profile_core_checks_are_green_and_the_document_is_schema_valid(tmp_path, clean_env):
    out = tmp_path / "r.json"
    proc = run_cli("run", "--profile", "cpu", *CORE, "--json", str(out), "--no-report")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, load_schema())
    assert doc["verdict"] == "GO" and doc["mode"] == "node"
    assert {r["name"] for r in doc["results"]} == {"env.launch_vars", "host.resources"}
    assert doc["profile"]["sources"]["backend"] == "profile cpu"
    assert doc["nodes"][0]["facts"]["host"]["hostname"]
    assert "GO" in proc.stdout


def test_default_profile_fails_without_pci_bus_order_and_prints_the_export(tmp_path, clean_env):
    proc = run_cli("run", "--only", "env.launch_vars", "--no-report", "--no-color")
    assert proc.returncode == 1
    assert "CUDA_DEVICE_ORDER is unset" in proc.stdout
    assert "export CUDA_DEVICE_ORDER=PCI_BUS_ID" in proc.stdout
    assert "NO-GO" in proc.stdout


def test_warn_passes_unless_strict(clean_env):
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    args = ("run", "--nnodes", "1", "--only", "env.launch_vars", "--no-report")
    assert run_cli(*args, env=env).returncode == 0
    assert run_cli(*args, "--strict", env=env).returncode == 1


@pytest.mark.parametrize("args, code, text", [
    (("run", "--profile", "cpu", "--tags", "no-such-tag", "--no-report"), 5, "NOTHING SELECTED: no check matches --tags 'no-such-tag'"),
    (("run", "--only", "nope.check", "--no-report"), 5, "NOTHING SELECTED: no check matches --only 'nope.check'"),
    (("run", "--profile", "cpu", "--only", "gpu.*", "--skip", "gpu.*", "--no-report"), 5,
     "NOTHING SELECTED: every matching check was deselected by --skip"),
    (("run", "--checks-dir", "/nonexistent-dir", "--no-report"), 4, "not a directory"),
    (("run", "--config", "/nonexistent.toml", "--no-report"), 4, "no such file"),
    (("run", "--facts-in", "/nonexistent.json", "--no-report"), 4, "no such file"),
    (("run", "--bogus-flag"), 4, "unrecognized arguments"),
    (("run", "--profile", "cpu", *CORE, "--json", "/proc/forbidden/r.json", "--no-report"), 4, "cannot write the report"),
])
def test_exit_codes_and_one_line_errors(args, code, text, clean_env):
    proc = run_cli(*args)
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert text in (proc.stdout if code == 5 else proc.stderr)  # nothing selected is a verdict, printed like one
    assert "GO:" not in proc.stdout
    assert "Traceback" not in proc.stderr


def test_saved_facts_replay_to_the_same_verdicts_and_edited_facts_change_them(tmp_path, clean_env):
    facts = tmp_path / "facts.json"
    first = tmp_path / "first.json"
    proc = run_cli("run", "--profile", "cpu", *CORE, "--facts-out", str(facts), "--json", str(first), "--no-report")
    assert proc.returncode == 0, proc.stderr
    replay = tmp_path / "replay.json"
    proc = run_cli("run", "--profile", "cpu", *CORE, "--facts-in", str(facts), "--json", str(replay), "--no-report")
    assert proc.returncode == 0, proc.stderr
    a, b = json.loads(first.read_text()), json.loads(replay.read_text())
    assert b["mode"] == "replay" and b["nodes"][0]["state"] == "replayed"
    assert [(r["name"], r["status"], r["summary"]) for r in a["results"]] == [(r["name"], r["status"], r["summary"]) for r in b["results"]]

    # A bug report: the same node with a 64 MiB /dev/shm, replayed anywhere.
    recorded = json.loads(facts.read_text())
    recorded["facts"]["shm"]["total_bytes"] = 64 << 20
    facts.write_text(json.dumps(recorded))
    proc = run_cli("run", "--profile", "dsv3", "--nnodes", "1", *CORE, "--facts-in", str(facts), "--json", str(replay), "--no-report")
    by = {r["name"]: r for r in json.loads(replay.read_text())["results"]}
    assert proc.returncode == 1
    assert by["host.resources"]["status"] == "fail" and "/dev/shm is 0.1 GiB" in by["host.resources"]["summary"]

    # A recording without a fact (an older version did not gather it): not judged, and says why; never a pass.
    del recorded["facts"]["port_holders"]
    facts.write_text(json.dumps(recorded))
    run_cli("run", "--profile", "cpu", *CORE, "--facts-in", str(facts), "--json", str(replay), "--no-report")
    by = {r["name"]: r for r in json.loads(replay.read_text())["results"]}
    assert by["host.resources"]["status"] == "skip"
    assert by["host.resources"]["summary"].startswith("not judged: the replayed facts do not hold 'port_holders'")


def test_replay_resolves_the_profile_from_the_recorded_environment(tmp_path, clean_env):
    facts = tmp_path / "facts.json"
    run_cli("run", "--profile", "cpu", *CORE, "--facts-out", str(facts), "--no-report", env={"MASTER_PORT": "41234"})
    out = tmp_path / "r.json"
    run_cli("run", "--profile", "cpu", *CORE, "--facts-in", str(facts), "--json", str(out), "--no-report")
    doc = json.loads(out.read_text())
    assert doc["profile"]["values"]["master_port"] == 41234
    assert doc["profile"]["sources"]["master_port"] == "env MASTER_PORT"


def test_secrets_in_the_environment_are_masked_in_json_and_saved_facts(tmp_path, clean_env):
    out, facts = tmp_path / "r.json", tmp_path / "f.json"
    secret = "hf_s3cr3tV4lue"
    proc = run_cli("run", "--profile", "cpu", *CORE, "--json", str(out), "--facts-out", str(facts), "--no-report",
                   env={"HF_TOKEN": secret, "WANDB_API_KEY": secret, "DB_PASSWORD": secret})
    assert proc.returncode == 0
    for path in (out, facts):
        text = path.read_text()
        assert secret not in text
    env = json.loads(out.read_text())["nodes"][0]["facts"]["env"]
    assert env["HF_TOKEN"] == env["WANDB_API_KEY"] == env["DB_PASSWORD"] == "***"
    assert env["PATH"] == os.environ["PATH"]


def test_default_run_writes_timestamped_documents_into_the_reports_dir(tmp_path, clean_env):
    proc = subprocess.run(python_cli("run", "--profile", "cpu", *CORE, "--reports-dir", "out"), cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert any(n.startswith("preflight-") and n.endswith(".json") for n in written)
    assert any(n.endswith(".html") for n in written)


HEAVY = ("torch", "ray", "deepspeed", "peft", "transformers")


@pytest.mark.parametrize("args", [["--help"], ["list"], ["run", "--help"], ["version"]])
def test_help_and_list_import_no_heavy_library(args):
    code = textwrap.dedent(f"""
        import sys
        from dsv3_preflight.cli import main
        try:
            main({args!r})
        except SystemExit:
            pass
        heavy = sorted(m for m in {HEAVY!r} if m in sys.modules)
        print("HEAVY=" + ",".join(heavy))
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "HEAVY=\n" in proc.stdout or proc.stdout.rstrip().endswith("HEAVY="), proc.stdout[-2000:]


def test_quiet_prints_only_the_red_and_yellow_results_and_the_verdict(tmp_path, clean_env):
    (tmp_path / "site.py").write_text(textwrap.dedent("""
        from dsv3_preflight import Result, check

        @check("site.ok", needs=[])
        def ok():
            "passes"
            return Result.passed("all fine here")

        @check("site.warns", needs=[])
        def warns():
            "warns without a fix"
            return Result.warned("a little odd")

        @check("site.raises", needs=[])
        def raises():
            "raises"
            raise KeyError("boom")
    """))
    proc = subprocess.run(python_cli("run", "--profile", "cpu", "--checks-dir", str(tmp_path), "--only", "site.*",
                                     "--no-report", "--quiet", "--no-color"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert "ERROR site.raises: " in out and "KeyError" in out
    assert "WARN site.warns: a little odd" in out
    assert "all fine here" not in out and "┏" not in out  # no table, no green lines
    assert out.rstrip().endswith("NO-GO: 1 error, 1 warn, 1 pass")


@pytest.mark.parametrize("columns", ["60", "80", "200"])
def test_list_prints_every_check_name_whole_in_a_narrow_pipe(columns):
    import os

    from dsv3_preflight.registry import load_registry

    names = [c.name for c in load_registry().checks.values()]
    env = {**os.environ, "COLUMNS": columns}
    proc = subprocess.run(python_cli("list", "--no-color", "--probes"), capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0, proc.stderr
    cells = {cell.strip() for line in proc.stdout.splitlines() for cell in line.split("│")}
    assert set(names) <= cells, sorted(set(names) - cells)
    assert "nvml" in cells and "nic_route" in cells  # probe facts too


def test_list_probes_shows_the_order_between_probes():
    proc = subprocess.run(python_cli("list", "--probes", "--json"), capture_output=True, text=True, timeout=60)
    probes = {p["fact"]: p for p in json.loads(proc.stdout)["probes"]}
    assert probes["collective"]["after"] == ["port_bind", "port_holders"] and probes["nvml"]["after"] == []
    proc = subprocess.run(python_cli("list", "--no-color", "--probes"), capture_output=True, text=True, timeout=60,
                          env={**os.environ, "COLUMNS": "200"})
    assert "after: port_bind, port_holders" in proc.stdout


@pytest.mark.slow
def test_sigint_interrupts_a_run_with_exit_2(tmp_path, clean_env):
    (tmp_path / "slow.py").write_text(textwrap.dedent("""
        import time
        from dsv3_preflight import Result, check, probe

        @probe("forever", timeout=60)
        def forever():
            time.sleep(60)

        @check("site.forever", needs=["forever"], timeout=60)
        def judge(forever):
            "waits"
            return Result.passed("never")
    """))
    proc = subprocess.Popen(python_cli("run", "--profile", "cpu", "--checks-dir", str(tmp_path), "--only", "site.forever", "--no-report"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 2, err
    assert "interrupted" in err


def test_logs_attached_to_a_run_put_the_doctor_findings_in_the_document_and_report(tmp_path, clean_env):
    from conftest import DATA

    out, html = tmp_path / "r.json", tmp_path / "r.html"
    proc = run_cli("run", "--profile", "cpu", *CORE, "--logs", str(DATA / "doctor" / "nodes"), "--json", str(out), "--html", str(html))
    assert proc.returncode == 0, proc.stderr  # the attached logs explain an earlier run; they do not gate this one
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, load_schema())
    assert doc["doctor"]["verdict"] == "failure"
    assert doc["doctor"]["findings"][0]["check"] == "gpu.cuda_init"
    assert "system not yet initialized" in html.read_text()
    bad = run_cli("run", "--profile", "cpu", *CORE, "--logs", str(tmp_path / "missing.log"), "--no-report")
    assert bad.returncode == 4 and "--logs" in bad.stderr


@pytest.mark.parametrize("args", [("doctor", "--list-signatures"), ("list", "--json")])
def test_a_reader_that_stops_early_is_no_internal_error(args):
    """`dsv3-preflight doctor --list-signatures | head -1`: the reader closes the pipe; the command stops quietly
    with 141 (what a shell reports for SIGPIPE), not "internal error" and a traceback on stderr."""
    r, w = os.pipe()
    os.close(r)   # a reader that already stopped
    try:
        p = subprocess.run(python_cli(*args), stdout=w, stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(w)
    assert p.returncode == 141 and p.stderr == "", (p.returncode, p.stderr)
