"""JUnit XML from a result document: statuses map to JUnit outcomes, with the fix in the failure body."""
import subprocess
import xml.etree.ElementTree as ET

from conftest import python_cli

from dsv3_preflight.document import build_document
from dsv3_preflight.reports import render
from dsv3_preflight.result import Actor, Result


def test_statuses_map_to_junit_outcomes_and_deselected_checks_are_skipped_cases():
    results = [Result.passed("ok").stamped(name="a.pass", node="n0", duration_s=0.5),
               Result.warned("meh", remediation="export X=1").stamped(name="a.warn", node="n0", duration_s=0),
               Result.failed("broken <thing> & co", remediation="kill 4242", actor=Actor.NODE).stamped(name="a.fail", node="n1", duration_s=0),
               Result.skipped("not here").stamped(name="a.skip", node="n0", duration_s=0),
               Result._engine_error("probe raised \x1b[31mboom").stamped(name="a.error", node="n1", duration_s=0)]
    doc = build_document(mode="cluster", profile={"name": "cpu", "values": {}, "sources": {}}, nodes=[],
                         results=results, deselected={"a.off": "skipped on request (--skip)"})
    suite = ET.fromstring(render(doc, "junit"))
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("6", "1", "1", "2")
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert cases["a.fail"].find("failure").get("message") == "broken <thing> & co"
    assert cases["a.fail"].find("failure").text.endswith("fix:\nkill 4242")
    assert cases["a.fail"].get("classname") == "n1"
    assert cases["a.error"].find("error").get("message") == "probe raised \\e[31mboom"
    assert cases["a.skip"].find("skipped").get("message") == "not here"
    assert cases["a.warn"].find("system-out").text.startswith("WARN: meh")
    assert cases["a.pass"].find("failure") is None and cases["a.off"].find("skipped") is not None


def test_run_writes_junit_beside_the_document(tmp_path, clean_env):
    proc = subprocess.run(python_cli("run", "--profile", "cpu", "--only", "env.*", "--no-report", "--junit", str(tmp_path / "j.xml")),
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    suite = ET.parse(tmp_path / "j.xml").getroot()
    assert [c.get("name") for c in suite.iter("testcase")] == ["env.launch_vars", "env.torchrun_python"]
