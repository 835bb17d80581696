"""`pytest checks/`: every registered check is a test item; statuses map to pytest outcomes."""
import json
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest
from conftest import REPO

STATUS_SITE = textwrap.dedent("""
    from dsv3_preflight import Result, check

    @check("site.green", needs=[])
    def green():
        "passes"
        return Result.passed("all good")

    @check("site.yellow", needs=[])
    def yellow():
        "warns"
        return Result.warned("a bit off", remediation="export X=1")

    @check("site.grey", needs=[])
    def grey():
        "skips"
        return Result.skipped("not applicable on this node")

    @check("site.red", needs=[])
    def red():
        "fails"
        return Result.failed("broken thing", evidence={"thing": "<b>"}, remediation="fix --the thing")

    @check("site.boom", needs=[])
    def boom():
        "raises"
        raise RuntimeError("judge crashed")
""")


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("site")
    (d / "statuses.py").write_text(STATUS_SITE)
    return d


def pytest_checks(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "pytest", "checks/", "-p", "no:cacheprovider", *args],
                          cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_statuses_map_to_pytest_outcomes_with_junit_xml(site_dir, tmp_path):
    junit, doc_path = tmp_path / "junit.xml", tmp_path / "doc.json"
    proc = pytest_checks("--preflight-profile", "cpu", "--checks-dir", str(site_dir), "-k", "site",
                         f"--junitxml={junit}", f"--preflight-json={doc_path}", "-rA")
    out = proc.stdout
    assert proc.returncode == 1
    assert "2 failed, 2 passed, 1 skipped" in out, out[-2000:]
    assert "PreflightWarning: site.yellow: a bit off" in out
    assert "not applicable on this node" in out
    assert "FAIL site.red" in out and "fix --the thing" in out
    assert "ERROR site.boom" in out and "RuntimeError: judge crashed" in out
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    assert set(cases) >= {"site.green", "site.yellow", "site.grey", "site.red", "site.boom"}
    assert cases["site.red"].find("failure") is not None
    assert cases["site.grey"].find("skipped") is not None
    doc = json.loads(doc_path.read_text())
    assert doc["mode"] == "pytest" and doc["verdict"] == "NO-GO"
    assert {r["name"]: r["status"] for r in doc["results"]} == {
        "site.green": "pass", "site.yellow": "warn", "site.grey": "skip", "site.red": "fail", "site.boom": "error"}


@pytest.mark.slow
def test_builtin_checks_collect_and_pass_under_the_cpu_profile_with_xdist(tmp_path):
    proc = pytest_checks("--preflight-profile", "cpu", "-n", "2", "-q")
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


def test_collect_only_lists_every_registered_check():
    from dsv3_preflight.registry import load_registry

    proc = pytest_checks("--preflight-profile", "cpu", "--collect-only", "-q")
    assert proc.returncode == 0, proc.stdout[-2000:]
    for name in load_registry(entry_points=False).checks:
        assert name in proc.stdout
