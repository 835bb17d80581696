"""The stall report's renderers: console lines (causes, who acts, the fix flush left, one stack per group), the HTML
section (escaped, before </main>), and the launch log line the doctor follows."""
from __future__ import annotations

import json

from dsv3_preflight.reports.stall_html import render_stall_section, with_stall_section
from dsv3_preflight.stall import report

STALL = {"stalled": True, "phase": "work", "quiet_for_s": 61.0, "threshold_s": 60.0, "stall_after_s": 60.0,
         "last_progress": "[rank0]: step 9 loss=0.1", "action": "report",
         "causes": [{"id": "stall.rank_in_python", "title": "a rank is in Python", "summary": "rank 1 <script>",
                     "actor": "job", "actor_label": "the job's owner", "fix": "py-spy dump --pid 12\nkill -TERM 12",
                     "evidence": ["rank 1: in Python at t.py:4"]}],
         "groups": [{"site": "in all_reduce at t.py:9", "ranks": [0, 2], "example_rank": 0, "stack": ["all_reduce (c10d.py:1)"]},
                    {"site": "in Python at t.py:4 (sleep)", "ranks": [1], "example_rank": 1, "stack": ["sleep (t.py:4)"]}]}


def test_console_lines_carry_the_cause_who_acts_the_fix_flush_left_and_one_stack_per_group():
    lines = report.console_lines(STALL)
    assert lines[0] == ("dsv3-preflight launch: stall: no progress for 61 s (work phase; threshold 60 s); last progress: "
                        "[rank0]: step 9 loss=0.1")
    assert lines[1] == "dsv3-preflight launch: stall: 1. stall.rank_in_python: rank 1 <script>"
    assert "dsv3-preflight launch: stall:    who acts: the job's owner" in lines
    fix = lines.index("   fix: (paste as is)")
    assert lines[fix + 1:fix + 3] == ["py-spy dump --pid 12", "kill -TERM 12"]
    assert "dsv3-preflight launch: stall: ranks 0, 2: in all_reduce at t.py:9 (stack of rank 0):" in lines
    assert "      sleep (t.py:4)" in lines


def test_the_html_section_is_escaped_and_goes_before_main_ends():
    section = render_stall_section(STALL)
    assert "rank 1 &lt;script&gt;" in section and "<script>" not in section
    page = with_stall_section("<html><main>report</main></html>", {"stall": STALL})
    assert page.index('<section id="stall">') < page.index("</main>")
    assert with_stall_section("<main></main>", {}) == "<main></main>"


def test_the_doctor_follows_the_launch_logs_stall_report_line(tmp_path):
    path = report.write(STALL, tmp_path, "20260101-000000")
    log = tmp_path / "launch-20260101-000000-node.log"
    log.write_text(f"# GO: start torchrun\n{report.LOG_LINE}{path}\n")
    found = report.from_launch_logs([str(tmp_path / "other.log"), str(log)])
    assert found["stall"]["causes"] == STALL["causes"] and found["stall"]["report"] == str(path)
    assert report.from_launch_logs([str(tmp_path / "train.log")]) == {}
    assert json.loads(path.read_text())["groups"] == STALL["groups"]
