"""The tests' own environment rules (tests/harness_env.py, tests/conftest.py): a cleaned environment keeps the run's
fact cache, and a CI run whose processes wrote the user's fact cache fails as a leftover."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from harness_env import FACT_CACHE_VAR, env_without

TESTS = Path(__file__).resolve().parents[1]

LEAKY = textwrap.dedent("""
    import os, subprocess, sys

    def test_a_cli_run_with_an_environment_built_from_scratch(tmp_path):
        env = {k: os.environ[k] for k in ("PATH", "HOME", "XDG_CACHE_HOME")}   # the run's cache variable lost
        subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--only", "host.resources", "--no-report", "-q"],
                       env=env, cwd=tmp_path, timeout=120, check=True)
""")
CAREFUL = LEAKY.replace('env = {k: os.environ[k] for k in ("PATH", "HOME", "XDG_CACHE_HOME")}',
                        'from harness_env import env_without; env = env_without()')


def test_a_cleaned_environment_keeps_the_runs_fact_cache_and_drops_the_launch_variables():
    base = {FACT_CACHE_VAR: "/tmp/run-cache", "DSV3_PREFLIGHT_NODE_NAME": "n1", "MASTER_ADDR": "10.0.0.1",
            "NODE_RANK": "1", "RANKING": "kept: a name, not a prefix", "PATH": "/usr/bin"}
    assert env_without(base=base) == {FACT_CACHE_VAR: "/tmp/run-cache", "RANKING": "kept: a name, not a prefix",
                                      "PATH": "/usr/bin"}
    assert env_without(("DSV3_PREFLIGHT", "RANK"), (), base=base) == {
        FACT_CACHE_VAR: "/tmp/run-cache", "MASTER_ADDR": "10.0.0.1", "NODE_RANK": "1", "PATH": "/usr/bin"}


def _nested_pytest(tmp_path: Path, test_source: str) -> tuple[subprocess.CompletedProcess, Path]:
    """tests/conftest.py's hooks over one test file in tmp_path, as CI runs them (CI=1), with the user's cache in a
    temporary XDG_CACHE_HOME."""
    (tmp_path / "test_nested.py").write_text(test_source)
    xdg = tmp_path / "xdg"
    xdg.mkdir()
    env = env_without(("DSV3_PREFLIGHT", "PYTEST_"), ())
    env.pop(FACT_CACHE_VAR)   # the nested run makes its own, as a whole run does
    env.update(CI="1", XDG_CACHE_HOME=str(xdg), PYTHONPATH=os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest", "-c", os.devnull,
                           "--rootdir", str(tmp_path), "-n", "0", str(tmp_path / "test_nested.py")],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    return proc, xdg / "dsv3-preflight" / "facts"


# The nested run's leftovers check also sees the processes and /tmp entries of the tests running beside it (the
# suite's other xdist workers), so these tests hold its words about the fact cache, not only its exit code.
def test_a_ci_run_whose_process_wrote_the_users_fact_cache_fails_naming_the_entry(tmp_path):
    proc, user_cache = _nested_pytest(tmp_path, LEAKY)
    written = sorted(p.name for p in user_cache.iterdir())
    assert written, proc.stdout + proc.stderr   # the lost variable sent the CLI to the user's cache
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
    assert f"written to the user's fact cache {user_cache} instead of the run's: {written[0]}" in proc.stdout


def test_a_ci_run_whose_processes_kept_the_runs_cache_leaves_the_users_alone(tmp_path):
    proc, user_cache = _nested_pytest(tmp_path, CAREFUL)
    assert "1 passed" in proc.stdout, proc.stdout + proc.stderr
    assert "written to the user's fact cache" not in proc.stdout
    assert not user_cache.exists()
