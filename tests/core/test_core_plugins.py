"""Third-party checks: an installed entry-point distribution and a --checks-dir, under the CLI and pytest."""
import json
import os
import subprocess
import sys
import time

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


# -- a plugin that hangs, exits or prints: an ERROR for that plugin, the run goes on, stdout stays clean ----------
GOOD_PLUGIN = '''
from dsv3_preflight import Result, check

@check("site.good", needs=["profile"])
def good(profile):
    return Result.passed("the site's own check ran")
'''


def _plugin_dir(tmp_path, **files: str):
    d = tmp_path / "site"
    d.mkdir()
    (d / "good.py").write_text(GOOD_PLUGIN)
    for name, text in files.items():
        (d / f"{name}.py").write_text(text)
    return d


def _run_with(plugins, tmp_path, *extra, timeout=120):
    out = tmp_path / "r.json"
    env = {**os.environ, "DSV3_PREFLIGHT_PLUGIN_IMPORT_TIMEOUT": "2"}
    proc = subprocess.run(python_cli("run", "--profile", "cpu", "--checks-dir", str(plugins), "--only", "site.*,env.*",
                                     "--json", str(out), "--no-report", "--no-color", *extra),
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp_path)
    doc = json.loads(out.read_text()) if out.exists() else None
    return proc, doc


def _by_name(doc):
    return {r["name"]: r for r in doc["results"]}


def test_a_plugin_that_hangs_at_import_is_an_error_for_it_and_the_run_goes_on(tmp_path):
    plugins = _plugin_dir(tmp_path, hang="import time\ntime.sleep(3600)\n")
    started = time.monotonic()
    proc, doc = _run_with(plugins, tmp_path)
    assert time.monotonic() - started < 60
    results = _by_name(doc)
    assert results["plugin.hang"]["status"] == "error"
    assert "did not finish importing within 2 s" in results["plugin.hang"]["summary"]
    assert results["site.good"]["status"] == "pass" and results["env.launch_vars"]["status"] == "pass"
    assert proc.returncode == 1 and doc["verdict"] == "NO-GO"


@pytest.mark.parametrize("code, said", [
    ("import sys\nsys.exit(0)\n", "called sys.exit(0) while it was imported"),
    ("import os\nos._exit(0)\n", "called os._exit(0) while it was imported"),
    ("raise RuntimeError('site config missing')\n", "RuntimeError: site config missing"),
])
def test_a_plugin_that_exits_or_raises_at_import_never_ends_the_run_as_go(tmp_path, code, said):
    proc, doc = _run_with(_plugin_dir(tmp_path, bad=code), tmp_path)
    assert doc is not None, f"no report written: {proc.returncode} {proc.stderr[-2000:]}"
    assert said in _by_name(doc)["plugin.bad"]["summary"]
    assert _by_name(doc)["site.good"]["status"] == "pass"
    assert proc.returncode == 1 and "NO-GO" in proc.stdout


EXIT_IN_JUDGE = '''
import os
from dsv3_preflight import Result, check

@check("site.quitter", needs=["profile"])
def quitter(profile):
    print("PLUGIN SAYS HELLO")
    os._exit(0)
'''


def test_os_exit_inside_a_judge_is_an_error_of_that_check_not_a_silent_exit_0(tmp_path):
    proc, doc = _run_with(_plugin_dir(tmp_path, quitter=EXIT_IN_JUDGE), tmp_path)
    assert doc is not None, f"no report: exit {proc.returncode}, stdout {proc.stdout[-500:]!r}"
    quitter = _by_name(doc)["site.quitter"]
    assert quitter["status"] == "error" and "called os._exit(0)" in quitter["summary"]
    assert proc.returncode == 1


def test_launch_never_starts_torchrun_after_a_plugin_exits_and_its_prints_stay_off_stdout(tmp_path):
    plugins = _plugin_dir(tmp_path, quitter=EXIT_IN_JUDGE, noisy="print('NOISE AT IMPORT')\n")
    (tmp_path / "train.py").write_text("print('training')\n")
    env = {**os.environ, "DSV3_PREFLIGHT_PLUGIN_IMPORT_TIMEOUT": "5"}
    base = ("launch", "--profile", "cpu", "--checks-dir", str(plugins), "--no-report", "--no-color", "--dry-run")
    red = subprocess.run(python_cli(*base, "--only", "site.*", "--", "train.py"), capture_output=True, text=True,
                         timeout=120, env=env, cwd=tmp_path)
    assert red.returncode == 1 and red.stdout == "", (red.stdout, red.stderr[-2000:])
    assert "NOISE AT IMPORT" in red.stderr and "PLUGIN SAYS HELLO" in red.stderr
    green = subprocess.run(python_cli(*base, "--only", "site.good", "--", "train.py"), capture_output=True, text=True,
                           timeout=120, env=env, cwd=tmp_path)
    assert green.returncode == 0, green.stderr[-2000:]
    assert "NOISE" not in green.stdout and "train.py" in green.stdout  # stdout: only the command to paste


def test_a_fifo_named_like_a_plugin_is_refused_at_once(tmp_path):
    plugins = _plugin_dir(tmp_path)
    os.mkfifo(plugins / "pipe.py")
    started = time.monotonic()
    proc, doc = _run_with(plugins, tmp_path)
    assert time.monotonic() - started < 60
    assert _by_name(doc)["plugin.pipe"]["summary"].endswith("is a FIFO (named pipe), not a regular file")
