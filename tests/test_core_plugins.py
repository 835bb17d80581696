"""Third-party checks: an installed entry-point distribution and a --checks-dir, under the CLI and pytest."""
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, python_cli

SITE_DIR = REPO / "examples" / "site_checks"
PLUGIN_DIST = REPO / "examples" / "plugin_dist"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    """The example distribution really installed (pip) into a directory put on PYTHONPATH."""
    target = tmp_path_factory.mktemp("plugin-site")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--target", str(target), str(PLUGIN_DIST)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert list(target.glob("preflight_site_example-*.dist-info/entry_points.txt"))
    return target


def _env(extra_path=None):
    env = dict(os.environ)
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_path), env.get("PYTHONPATH")]))
    return env


def test_entry_point_plugin_runs_under_the_cli(plugin_site, tmp_path):
    out = tmp_path / "r.json"
    listing = subprocess.run(python_cli("list", "--json"), capture_output=True, text=True, timeout=120, env=_env(plugin_site))
    origins = {c["name"]: c["origin"] for c in json.loads(listing.stdout)["checks"]}
    assert origins["site.ulimit_nofile"].startswith("entry point site_example")
    proc = subprocess.run(python_cli("run", "--profile", "cpu", "--only", "site.*", "--json", str(out), "--no-report"),
                          capture_output=True, text=True, timeout=120, env=_env(plugin_site))
    doc = json.loads(out.read_text())
    [result] = doc["results"]
    assert result["name"] == "site.ulimit_nofile" and result["status"] in ("pass", "warn")
    assert "soft" in result["evidence"]
    assert proc.returncode == 0, proc.stderr


def test_entry_point_plugin_runs_under_pytest(plugin_site):
    proc = subprocess.run([sys.executable, "-m", "pytest", "checks/", "-p", "no:cacheprovider", "--preflight-profile", "cpu",
                           "-k", "site", "-q", "-rA"], cwd=REPO, capture_output=True, text=True, timeout=180, env=_env(plugin_site))
    assert "site.ulimit_nofile" in proc.stdout
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_checks_dir_plugin_runs_under_the_cli_and_fails_with_its_remediation(tmp_path):
    out = tmp_path / "r.json"
    ok = subprocess.run(python_cli("run", "--profile", "cpu", "--checks-dir", str(SITE_DIR), "--only", "site.scratch_space",
                                   "--json", str(out), "--no-report"), capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(out.read_text())["results"][0]["status"] == "pass"
    bad = subprocess.run(python_cli("run", "--profile", "cpu", "--checks-dir", str(SITE_DIR), "--only", "site.scratch_space",
                                    "--no-report", "--no-color"),
                         capture_output=True, text=True, timeout=120, env={**os.environ, "SITE_SCRATCH_DIR": str(tmp_path / "missing")})
    assert bad.returncode == 1
    assert "export SITE_SCRATCH_DIR=/path/to/local/scratch" in bad.stdout


def test_checks_dir_plugin_runs_under_pytest_and_a_failure_shows_summary_evidence_and_remediation(tmp_path):
    env = {**os.environ, "SITE_SCRATCH_DIR": str(tmp_path / "missing")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "checks/", "-p", "no:cacheprovider", "--preflight-profile", "cpu",
                           "--checks-dir", str(SITE_DIR), "-k", "scratch", "-q"],
                          cwd=REPO, capture_output=True, text=True, timeout=180, env=env)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "FAIL site.scratch_space" in proc.stdout
    assert "evidence:" in proc.stdout and "remediation:" in proc.stdout
    assert "export SITE_SCRATCH_DIR=/path/to/local/scratch" in proc.stdout
