"""env.torchrun_python: the Python a torchrun command runs, against the one the checks ran in.

Real interpreters and environments: this one, the system's Python (no torch), virtual environments made here
that share this environment's site-packages through a .pth file (the same torch, other prefix), one with another
peft installed by pip from the package index, torchrun scripts as pip writes them, and a real launch through
another environment's torchrun.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from harness_env import env_without
from paste_lint import paste_problems
from ports import free_port

from dsv3_preflight.host.probes.python_env import run_report
from dsv3_preflight.host.pyenv import shebang_interpreter

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "tests" / "data" / "launch" / "train_allreduce.py"
SYSTEM_PYTHON = "/usr/bin/python3"
OTHER_PEFT = "0.13.0"


def make_env(root: Path, base: str = sys.executable) -> Path:
    """A virtual environment (no pip) of ``base`` that sees this one's site-packages after its own: the same
    libraries, another prefix. Returns its python."""
    subprocess.run([base, "-m", "venv", "--without-pip", str(root)], check=True, timeout=60, capture_output=True)
    [site] = root.glob("lib/python*/site-packages")
    (site / "share_preflight_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return root / "bin" / "python"


def write_torchrun(env_root: Path) -> Path:
    """The torchrun console script as pip writes it into that environment (this one's, with its #! line)."""
    ours = Path(shutil.which("torchrun", path=str(Path(sys.executable).parent)))
    body = ours.read_text().split("\n", 1)[1]
    script = env_root / "bin" / "torchrun"
    script.write_text(f"#!{env_root / 'bin' / 'python'}\n{body}")
    script.chmod(0o755)
    return script


def run_check(tmp_path: Path, *args: str, path: str | None = None) -> dict:
    env = env_without(("MASTER_", "DSV3_PREFLIGHT"), ())
    env["PATH"] = path if path is not None else "/usr/bin:/bin"
    out = tmp_path / f"doc-{time.monotonic_ns()}.json"
    proc = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--profile", "cpu", "--only",
                           "env.torchrun_python", "--no-report", "--json", str(out), *args],
                          env=env, capture_output=True, text=True, timeout=120)
    doc = json.loads(out.read_text())
    [result] = doc["results"]
    result["exit_code"] = proc.returncode
    return result


# -- the command's interpreter, from its words and its #! line ---------------------------------------------------
@pytest.mark.parametrize("head,expected", [
    ("#!/opt/conda/envs/train/bin/python3.10\nimport sys\n", ("/opt/conda/envs/train/bin/python3.10", False, None)),
    ("#!/usr/bin/env python3\n", ("python3", True, None)),
    ("#!/usr/bin/env -S python3 -u\n", ("python3", True, None)),
    # distlib (pip) when the interpreter's path is too long for a #! line or holds a space
    ("#!/bin/sh\n'''exec' \"/long path/venv/bin/python\" \"$0\" \"$@\"\n' '''\n", ("/long path/venv/bin/python", False, None)),
    ("#!/bin/sh\n'''exec' /p/venv/bin/python \"$0\" \"$@\"\n' '''\n", ("/p/venv/bin/python", False, None)),
])
def test_the_interpreter_is_read_from_the_scripts_first_lines(head, expected):
    assert shebang_interpreter(head) == expected


@pytest.mark.parametrize("head,why", [
    ("\x7fELF\x02\x01\x01", "no #! line"),
    ("#!/bin/bash\nexec srun torchrun \"$@\"\n", "runs /bin/bash, not Python"),
    ("#!/usr/bin/env bash\n", "runs bash, not Python"),
])
def test_a_script_that_is_not_python_says_why(head, why):
    interp, _, reason = shebang_interpreter(head)
    assert interp is None and why in reason


# -- judged through the CLI on real interpreters -----------------------------------------------------------------
def test_without_a_torchrun_command_the_launch_runs_this_interpreter(tmp_path):
    result = run_check(tmp_path)
    assert result["status"] == "pass", result
    assert sys.executable in result["summary"] and "-m torch.distributed.run" in result["summary"]


def test_pips_torchrun_of_this_environment_on_path_runs_this_interpreter(tmp_path):
    result = run_check(tmp_path, path=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    assert result["status"] == "pass", result
    assert f"runs this interpreter ({sys.executable}" in result["summary"]


@pytest.mark.skipif(not os.path.exists(SYSTEM_PYTHON), reason=f"no {SYSTEM_PYTHON} on this machine")
def test_a_named_python_without_torch_fails_with_the_pip_line_for_it(tmp_path):
    if subprocess.run([SYSTEM_PYTHON, "-c", "import torch"], capture_output=True, timeout=60).returncode == 0:
        pytest.skip(f"{SYSTEM_PYTHON} has torch on this machine")
    result = run_check(tmp_path, "--torchrun", f"{SYSTEM_PYTHON} -m torch.distributed.run")
    assert result["status"] == "fail" and result["exit_code"] == 1
    assert result["summary"].endswith(f"runs {SYSTEM_PYTHON}, which has no torch: torchrun cannot start there")
    import torch

    assert f"{SYSTEM_PYTHON} -m pip install torch=={torch.__version__}" in result["remediation"]
    assert paste_problems(result["remediation"]) == []


def test_a_named_torchrun_not_on_path_fails(tmp_path):
    result = run_check(tmp_path, "--torchrun", "torchrun-of-no-such-env --nnodes 3")
    assert result["status"] == "fail"
    assert "torchrun-of-no-such-env is not found on this node's PATH" in result["summary"]
    assert paste_problems(result["remediation"]) == []


def test_a_wrapper_that_is_not_python_is_skipped_not_passed(tmp_path):
    wrapper = tmp_path / "torchrun-wrapper"
    wrapper.write_text("#!/bin/bash\nexec torchrun \"$@\"\n")
    wrapper.chmod(0o755)
    result = run_check(tmp_path, "--torchrun", str(wrapper))
    assert result["status"] == "skip"
    assert f"cannot tell which Python torchrun command {str(wrapper)!r} runs" in result["summary"]


def test_another_environment_with_the_same_libraries_passes_and_names_it(tmp_path):
    python = make_env(tmp_path / "train-env")
    result = run_check(tmp_path, "--torchrun", f"{python} -m torch.distributed.run")
    assert result["status"] == "pass", result
    assert "another environment with the same versions" in result["summary"]
    assert result["evidence"]["theirs"]["prefix"] == str(tmp_path / "train-env")


def test_another_python_with_the_same_libraries_is_a_warning_that_does_not_block(tmp_path):
    import platform

    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import platform, venv; print(platform.python_version())"],
                           capture_output=True, text=True, timeout=60) if os.path.exists(SYSTEM_PYTHON) else None
    if probe is None or probe.returncode != 0 or probe.stdout.strip() == platform.python_version():
        pytest.skip(f"no {SYSTEM_PYTHON} with venv and another version than this interpreter's")
    python = make_env(tmp_path / "py-env", base=SYSTEM_PYTHON)
    result = run_check(tmp_path, "--torchrun", f"{python} -m torch.distributed.run")
    assert result["status"] == "warn" and result["exit_code"] == 0, result
    assert f"it differs in python {probe.stdout.strip()} (checked: {platform.python_version()})" in result["summary"]


def test_an_interpreter_that_hangs_is_a_finding_within_the_timeout(tmp_path):
    hanging = tmp_path / "bin" / "python3"
    hanging.parent.mkdir()
    hanging.write_text("#!/bin/sh\nexec sleep 60\n")
    hanging.chmod(0o755)
    start = time.monotonic()
    got = run_report(str(hanging), dict(os.environ), timeout=1.0)
    assert got["timed_out"] and got["report"] is None and time.monotonic() - start < 10
    assert got["error"] == "it did not answer within 1 s"


# -- another peft: installed by pip from the package index ---------------------------------------------------------
@pytest.fixture(scope="module")
def peft_env(tmp_path_factory):
    """An environment whose own site-packages holds peft OTHER_PEFT in front of this environment's libraries."""
    root = tmp_path_factory.mktemp("other-peft") / "env"
    python = make_env(root)
    [site] = root.glob("lib/python*/site-packages")
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           "--no-deps", "--target", str(site), f"peft=={OTHER_PEFT}"],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        pytest.skip(f"pip could not install peft=={OTHER_PEFT} from the package index: {proc.stderr.strip()[-300:]}")
    return root, python


@pytest.mark.slow
def test_a_torchrun_of_an_environment_with_another_peft_fails_and_says_what_to_paste(tmp_path, peft_env):
    import peft

    root, python = peft_env
    assert peft.__version__ != OTHER_PEFT
    torchrun = write_torchrun(root)
    result = run_check(tmp_path, "--torchrun", f"{torchrun} --nnodes=1")
    assert result["status"] == "fail", result
    assert f"runs {python}, not the Python the checks ran in: peft {OTHER_PEFT} (checked: {peft.__version__})" in \
        result["summary"]
    assert [d["name"] for d in result["evidence"]["differences"]] == ["peft"]
    fix = result["remediation"]
    assert f"{python} -m dsv3_preflight launch" in fix and f"{sys.executable} -m pip install peft=={OTHER_PEFT}" in fix
    assert paste_problems(fix) == []


@pytest.mark.slow
def test_the_torchrun_on_path_of_another_environment_is_a_warning_when_none_is_named(tmp_path, peft_env):
    root, python = peft_env
    write_torchrun(root)
    result = run_check(tmp_path, path=f"{root / 'bin'}:/usr/bin:/bin")
    assert result["status"] == "warn", result
    assert result["summary"].startswith(f"the torchrun on PATH ({root / 'bin' / 'torchrun'}) runs {python}")
    assert "launch runs this interpreter's torchrun" in result["summary"]


@pytest.mark.slow
def test_launch_refuses_a_torchrun_whose_peft_was_not_checked(tmp_path, peft_env):
    root, _ = peft_env
    torchrun = write_torchrun(root)
    out = tmp_path / "result.json"
    env = env_without(("MASTER_", "DSV3_PREFLIGHT", "NCCL_", "GLOO_"), ())
    proc = subprocess.run([sys.executable, "-m", "dsv3_preflight", "launch", "--profile", "cpu", "--only", "env.*",
                           "--master-port", str(free_port()), "--no-report", "--torchrun", str(torchrun),
                           "--", str(TRAIN), "--out", str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "NO-GO" in proc.stderr and "torchrun not started" in proc.stderr
    assert "env.torchrun_python" in proc.stderr and not out.exists()


@pytest.mark.slow
def test_launch_runs_the_named_torchrun_of_another_environment_when_its_libraries_match(tmp_path):
    root = tmp_path / "train-env"
    python = make_env(root)
    torchrun = write_torchrun(root)
    out = tmp_path / "result.json"
    env = env_without(("MASTER_", "DSV3_PREFLIGHT", "NCCL_", "GLOO_"), ())
    env["TMPDIR"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "dsv3_preflight", "launch", "--profile", "cpu", "--only", "env.*",
                           "--master-port", str(free_port()), "--no-report", "--launch-log", str(tmp_path / "launch.log"),
                           "--json", str(tmp_path / "report.json"),
                           "--torchrun", str(torchrun), "--", str(TRAIN), "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(out.read_text())["sum"] == 3.0
    log = (tmp_path / "launch.log").read_text()
    assert f"# GO: start {torchrun} " in log   # the torchrun named, whose Python the check compared
    [judged] = [r for r in json.loads((tmp_path / "report.json").read_text())["results"]
                if r["name"] == "env.torchrun_python"]
    assert f"runs {python}, another environment with the same versions" in judged["summary"]


@pytest.mark.skipif(not os.path.exists(SYSTEM_PYTHON), reason=f"no {SYSTEM_PYTHON} on this machine")
def test_the_doctor_names_a_torchrun_of_a_python_without_torch_and_the_check_that_catches_it(tmp_path):
    if subprocess.run([SYSTEM_PYTHON, "-c", "import torch"], capture_output=True, timeout=60).returncode == 0:
        pytest.skip(f"{SYSTEM_PYTHON} has torch on this machine")
    # what torchrun of that Python prints: its console script's first import fails
    run = subprocess.run([SYSTEM_PYTHON, "-c", "from torch.distributed.run import main; main()"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    log = tmp_path / "node0.log"
    log.write_text(run.stderr)
    doctor = subprocess.run([sys.executable, "-m", "dsv3_preflight", "doctor", "--json", str(log)],
                            capture_output=True, text=True, timeout=120)
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    found = json.loads(doctor.stdout)
    head = found["findings"][0]
    assert (head["id"], head["class"], head["check"]) == ("python.stack_module_missing", "version_drift",
                                                         "env.torchrun_python")
    assert head["title"] == "The Python that ran this has no torch"
