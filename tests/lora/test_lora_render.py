"""`lora scan` / `lora watch` text: rendered from the document by the pure reports/lora_text.py, with every
control character, line break and bidi override in file names or adapter text escaped."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import test_lora_lab as lab
from paste_lint import paste_problems

from dsv3_preflight.lora.probes.scan import scan_paths
from dsv3_preflight.reports.lora_text import render_scan, render_watch_event, render_watch_summary

REPO = Path(__file__).resolve().parents[2]
HOSTILE = "ck\x1b]0;pwned\x07\x1b[2J\rfake ✔ line\nnext\u202egnp.exe"


@pytest.fixture(scope="module")
def hostile_tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    good = lab.write_adapter(root / "src", "llama", lab.QKVO)
    out = root / "out"
    bad = out / HOSTILE / "checkpoint-100"
    shutil.copytree(good, bad)
    lab.edit_config(bad, r=None, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "\x1b[31mred"])
    lab.write_checkpoint(out, 50, good)
    return out


def _no_raw_controls(text: str) -> None:
    for ch in ("\x1b", "\x07", "\r", "\u202e"):
        assert ch not in text, repr(ch)


def test_a_hostile_directory_name_cannot_reach_the_terminal_raw(hostile_tree):
    doc, _ = scan_paths([hostile_tree])
    text = render_scan(doc, width=200)
    _no_raw_controls(text)
    assert "\\e]0;pwned\\x07\\e[2J\\rfake ✔ line\\nnext\\u202egnp.exe" in text
    # the name's newline did not start a line of its own: no line begins with the text after it
    assert not any(line.startswith("next") for line in text.splitlines())
    assert "\\e[31mred" in text  # a config value in a message, escaped too


def test_watch_lines_escape_names_and_messages(hostile_tree):
    doc, _ = scan_paths([hostile_tree])
    bad = next(a for a in doc["adapters"] if a["status"] == "fail")
    line = render_watch_event(bad)
    _no_raw_controls(line)
    assert "\n" not in line and line.startswith("✘ step 100: ")
    summary = render_watch_summary({"adapters": doc["adapters"], "pending": [{"path": HOSTILE, "why": "x\x1b[2J"}]})
    _no_raw_controls(summary)
    assert summary.splitlines()[0] == "2 adapters judged, 1 bad"


def test_colour_is_only_on_the_status_symbols(hostile_tree):
    doc, _ = scan_paths([hostile_tree])
    import re

    text = render_scan(doc, color=True, width=200)
    assert "\x1b[31m✘\x1b[0m" in text and "\x1b[32m✔\x1b[0m" in text
    painted = re.compile("\x1b\\[(3[0-9]|2)m(✔|✘|!|–|‼|pass|warn|fail|skip|error)\x1b\\[0m")
    assert "\x1b" not in painted.sub("", text)


def test_each_distinct_fix_is_shown_once_unindented_as_it_pastes(tmp_path):
    good = lab.write_adapter(tmp_path / "src", "llama", lab.QKVO)
    zero = lab.zero3_unGathered(good, tmp_path / "zero")
    for step in (10, 20, 30):
        lab.write_checkpoint(tmp_path / "out", step, zero)
    doc, _ = scan_paths([tmp_path / "out"])
    text = render_scan(doc, width=160)
    assert text.count("fix for ") == 1 and "and 2 more adapters" in text
    block = text.split("fix for ", 1)[1].split("\n", 1)[1].split("\n3 adapters")[0].strip("\n")
    assert block == doc["adapters"][0]["findings"][0]["fix"] and paste_problems(block) == []
    assert text.rstrip().endswith("3 adapters: 3 bad, 0 with warnings, 0 ok")


def test_the_command_prints_only_what_the_renderer_returns(hostile_tree):
    p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "lora", "scan", str(hostile_tree), "--no-color"],
                       capture_output=True, text=True, timeout=120, cwd=REPO, env={**os.environ, "COLUMNS": "200"})
    assert p.returncode == 1
    _no_raw_controls(p.stdout + p.stderr)
    doc, _ = scan_paths([str(hostile_tree)])
    assert p.stdout == render_scan(doc, width=200)
