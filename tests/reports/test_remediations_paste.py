"""Fixes that paste: every remediation the suite's red scenarios produce is shell a person can paste.

Each scenario is a facts document recorded from a real run (`run --facts-out`; its provenance is in the
file) under tests/data/scenarios/. The test replays it through the CLI as a user would (`run --facts-in`),
then holds every remediation and every finding's fix to the paste rule (tests/paste_lint.py): `bash -n`
accepts it, and no `<placeholder>` or `...` stands outside a `#` comment. A scenario that is not red is a
broken scenario, not a pass.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from paste_lint import paste_problems

SCENARIOS = sorted((REPO / "tests" / "data" / "scenarios").glob("*.facts.json"))


def _replay(scenario: Path, tmp_path: Path) -> dict:
    out = tmp_path / "doc.json"
    proc = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--facts-in", str(scenario), "--json", str(out),
                           "--no-report", "--no-color", "-q"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(out.read_text())


def test_every_scenario_carries_its_provenance():
    assert SCENARIOS, "no red scenarios recorded"
    for scenario in SCENARIOS:
        assert json.loads(scenario.read_text()).get("provenance"), scenario.name


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name.removesuffix(".facts.json") for s in SCENARIOS])
def test_every_fix_of_a_red_scenario_pastes_into_bash(scenario, tmp_path):
    doc = _replay(scenario, tmp_path)
    assert doc["verdict"] == "NO-GO", f"{scenario.name} is no red scenario"
    bad = {}
    for r in doc["results"]:
        texts = [("remediation", r.get("remediation"))] + [(f"finding {f['message'][:60]!r}", f.get("fix"))
                                                             for f in r.get("findings") or []]
        for where, text in texts:
            problems = paste_problems(text)
            if problems:
                bad[f"{r['name']} {where}"] = (text, problems)
    assert not bad, "\n\n".join(f"{k}:\n{text}\n-> {problems}" for k, (text, problems) in bad.items())


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name.removesuffix(".facts.json") for s in SCENARIOS])
def test_every_red_result_of_a_scenario_says_who_must_act(scenario, tmp_path):
    doc = _replay(scenario, tmp_path)
    silent = [r["name"] for r in doc["results"] if r["status"] in ("fail", "warn") and not r.get("actor")]
    assert not silent, f"no actor on: {silent}"
