"""NO-GO leads with the root cause: results sharing a cause collapse under it, each distinct problem has its
own line, every cause says who must act, and with several nodes the matrix comes before the cards."""
from __future__ import annotations

import pytest
from harness_env import env_without

from dsv3_preflight.document import build_document
from dsv3_preflight.reports.console import render_console
from dsv3_preflight.reports.html import render_html
from dsv3_preflight.reports.rootcause import root_causes
from dsv3_preflight.result import Actor, Findings, Result, failure, warning

DRIVER_FIX = "# install the NVIDIA datacenter driver 550.90.07 on this node, then:\nnvidia-smi -L"


def _no_driver(node: str) -> list[Result]:
    """One missing driver, as four GPU checks report it: one cause key, one fix each."""
    cause = "gpu.no_driver"
    return [
        Result.failed("no NVIDIA driver: cannot load libcuda.so.1", {}, DRIVER_FIX, actor=Actor.NODE, cause=cause)
        .stamped(name="gpu.cuda_init", node=node, duration_s=0),
        Result.failed("no NVIDIA driver/NVML", {}, "nvidia-smi", actor=Actor.NODE, cause=cause)
        .stamped(name="gpu.inventory", node=node, duration_s=0),
        Result.failed("cannot tell whether Fabric Manager is needed", {}, None, actor=Actor.NODE, cause=cause)
        .stamped(name="gpu.fabric_manager", node=node, duration_s=0),
        Result.failed("cannot map ranks to GPUs", {}, "nvidia-smi -L", actor=Actor.NODE, cause=cause)
        .stamped(name="gpu.rank_mapping", node=node, duration_s=0),
    ]


def _env_problems(node: str) -> Result:
    found = Findings()
    found.add(failure("CUDA_DEVICE_ORDER is unset", "export CUDA_DEVICE_ORDER=PCI_BUS_ID", actor=Actor.JOB))
    found.add(failure("WORLD_SIZE=16 but NNODES x NPROC_PER_NODE = 24", "export WORLD_SIZE=24", actor=Actor.JOB))
    found.add(warning("OMP_NUM_THREADS is not set", "export OMP_NUM_THREADS=8", actor=Actor.JOB))
    return found.result("fine").stamped(name="env.launch_vars", node=node, duration_s=0)


def _doc(results, nodes=("gpu-a",)) -> dict:
    entries = [{"node": n, "node_rank": i, "state": "ok", "error": None, "facts": {}, "fact_errors": {}}
               for i, n in enumerate(nodes)]
    return build_document(mode="cluster" if len(nodes) > 1 else "node", profile={"name": "dsv3", "values": {}, "sources": {}},
                          nodes=entries, results=results)


def test_one_missing_driver_is_one_cause_blocking_four_checks_with_one_fix():
    doc = _doc(_no_driver("gpu-a") + [_env_problems("gpu-a")])
    causes = root_causes(doc["results"])
    driver = next(c for c in causes if c.key == "gpu.no_driver")
    assert driver.checks[0] == "gpu.cuda_init" and sorted(driver.checks[1:]) == [
        "gpu.fabric_manager", "gpu.inventory", "gpu.rank_mapping"]
    assert driver.fixes == [(DRIVER_FIX, ["gpu-a"])]
    assert driver.actor == "node"
    text = render_console(doc)
    assert text.count("no NVIDIA driver: cannot load libcuda.so.1") == 2  # the table row and the one cause
    assert "also blocks: gpu.fabric_manager, gpu.inventory, gpu.rank_mapping (same cause)" in text.replace("\n", " ")
    assert "who acts: the node's administrator (repair or drain the node)" in text


def test_each_distinct_problem_has_its_own_line_and_none_hides_behind_more():
    text = render_console(_doc([_env_problems("gpu-a")]), quiet=True)
    for message in ("CUDA_DEVICE_ORDER is unset", "WORLD_SIZE=16 but NNODES x NPROC_PER_NODE = 24",
                    "OMP_NUM_THREADS is not set"):
        assert f"env.launch_vars: {message}" in text
    assert "more)" not in text
    assert "who acts: the job's configuration (paste the fix)" in text
    assert text.rstrip().endswith("NO-GO: 1 fail")


def test_the_same_cause_on_several_nodes_is_one_cause_with_each_nodes_fix():
    a = _no_driver("gpu-a")
    b = [r.__class__(**{**r.__dict__, "remediation": r.remediation.replace("550.90.07", "535.129.03")
                        if r.remediation else None}).stamped(name=r.name, node="gpu-b", duration_s=0) for r in _no_driver("gpu-b")]
    doc = _doc(a + b, nodes=("gpu-a", "gpu-b"))
    [cause] = root_causes(doc["results"])
    assert cause.nodes == ["gpu-a", "gpu-b"]
    assert [nodes for _, nodes in cause.fixes] == [["gpu-a"], ["gpu-b"]]
    text = render_console(doc)
    assert "fix on gpu-a:" in text and "fix on gpu-b:" in text


def test_with_several_nodes_the_matrix_comes_before_the_cards_in_console_and_html():
    doc = _doc(_no_driver("gpu-b") + [Result.passed("ok").stamped(name="gpu.cuda_init", node="gpu-a", duration_s=0)],
               nodes=("gpu-a", "gpu-b"))
    text = render_console(doc)
    assert text.index("node × check") < text.index("Why NO-GO")
    html = render_html(doc)
    assert html.index('id="matrix"') < html.index('id="failures"')
    single = render_html(_doc(_no_driver("gpu-a")))
    assert single.index('id="failures"') < single.index('id="matrix"')


def test_html_shows_one_card_per_cause_with_who_acts_and_the_blocked_checks():
    html = render_html(_doc(_no_driver("gpu-a") + [_env_problems("gpu-a")]))
    cards = html[html.index('id="failures"'):]
    assert cards.count('class="card cause') == 4  # the driver, and the three env problems each on its own
    assert 'data-cause="gpu.no_driver"' in cards
    assert "also blocks <code>gpu.fabric_manager</code>, <code>gpu.inventory</code>, <code>gpu.rank_mapping</code>" in cards
    assert "who acts: <b>the node&#39;s administrator (repair or drain the node)</b>" in cards
    why = html[html.index('<ul class="why">'):html.index("</ul>", html.index('<ul class="why">'))]
    assert why.count("<li>") == 3  # driver + the two env FAILs (the WARN is a card, not a reason for NO-GO)


def test_control_sequences_in_a_document_never_reach_the_terminal():
    hostile = Result.failed("bad \x1b]0;pwned\x07 line\x1b[2J", {}, "echo \x1b[31mred", actor=Actor.JOB)
    text = render_console(_doc([hostile.stamped(name="x.check", node="gpu-a\x1b[1A", duration_s=0)]), color=False)
    assert "\x1b" not in text and "\x07" not in text
    assert "bad \\e]0;pwned\\x07 line\\e[2J" in text


def test_two_leftovers_under_one_cause_keep_both_kill_lines():
    found = Findings()
    for pid in (4242, 4343):
        found.add(failure(f"/dev/nvidia0 held by pid {pid}", f"kill {pid}   # after checking it is a leftover",
                          actor=Actor.NODE, cause="host.gpu_held"))
    doc = _doc([found.result("ok").stamped(name="host.resources", node="gpu-a", duration_s=0)])
    [cause] = root_causes(doc["results"])
    assert cause.fixes == [("kill 4242   # after checking it is a leftover\nkill 4343   # after checking it is a leftover",
                            ["gpu-a"])]


def test_a_wait_for_another_run_is_a_note_naming_it():
    doc = _doc([Result.passed("ok").stamped(name="net.port_free", node="gpu-a", duration_s=0)])
    doc["nodes"][0]["fact_waits"] = {"port_bind": "waited 2.0 s for port 39500: it was in use by dsv3-preflight run pid 4242"}
    assert "note: gpu-a: port_bind waited 2.0 s for port 39500: it was in use by dsv3-preflight run pid 4242" in render_console(doc)


def test_fixes_are_printed_flush_left_so_a_pasted_heredoc_ends():
    fix = "python3 - <<'EOF'\nprint('fixed')\nEOF"
    doc = _doc([Result.failed("bad config", {}, fix, actor=Actor.JOB).stamped(name="x.config", node="gpu-a", duration_s=0)])
    lines = render_console(doc, quiet=True).splitlines()
    assert lines[lines.index("python3 - <<'EOF'") + 2] == "EOF"


def test_a_bidi_override_in_a_document_is_escaped_in_the_console():
    """Issue 46.6: U+202E in a node name or a check's text reached the console raw (the terminal reorders it)."""
    hostile = Result.failed("bad \u202egnp.exe line", {}, "echo \u2067x", actor=Actor.JOB)
    text = render_console(_doc([hostile.stamped(name="x.check", node="gpu-\u202ea", duration_s=0)]), color=False)
    assert not any(ord(c) in (0x202E, 0x2067) for c in text)
    assert "bad \\u202egnp.exe line" in text


@pytest.mark.slow
def test_a_bidi_override_never_reaches_the_console_of_run_doctor_report_or_launch(tmp_path):
    """A node name, a log line and the report's strings holding U+202E, through the real commands."""
    import subprocess
    import sys

    env = env_without(("MASTER_", "NCCL_", "DSV3_PREFLIGHT"), ())
    env.update(DSV3_PREFLIGHT_NODE_NAME="node\u202eevil", COLUMNS="250")
    log = tmp_path / "train.log"
    log.write_text("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB \u202eevil\n",
                   encoding="utf-8")
    (tmp_path / "train.py").write_text("print('training')\n")

    def cli(*args):
        p = subprocess.run([sys.executable, "-m", "dsv3_preflight", *args], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=300, encoding="utf-8")
        return p.stdout + p.stderr

    consoles = {
        "run": cli("run", "--profile", "cpu", "--only", "env.*", "--no-color", "--json", "r.json", "--no-report",
                   "--logs", str(log)),
        "doctor": cli("doctor", str(log)),
        "report": cli("report", "r.json", "-o", "r.html"),
        "launch": cli("launch", "--profile", "cpu", "--only", "env.*", "--no-color", "--dry-run", "--no-report",
                      "--", "train.py"),
    }
    for name, text in consoles.items():
        assert "\u202e" not in text, (name, text[-2000:])
    assert "\\u202eevil" in consoles["doctor"]   # shown escaped, not dropped
