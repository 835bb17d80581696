"""`run --logs`: the console says what the attached logs show, and names the logs it could not read."""
from __future__ import annotations

import os
import subprocess

from conftest import DATA, python_cli


def test_run_with_logs_prints_the_doctor_verdict_and_the_unread_log(tmp_path, clean_env):
    missing = tmp_path / "gpu-node-3.log"
    proc = subprocess.run(python_cli("run", "--profile", "cpu", "--only", "env.launch_vars", "--no-color", "--no-report",
                                     "--logs", str(DATA / "doctor" / "nodes"), "--logs", str(missing)),
                          capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "400"})
    assert proc.returncode == 0, proc.stderr  # earlier logs do not gate this run
    assert "attached logs (doctor): FAILURE — root cause: CUDA error 802" in proc.stdout
    assert f"attached log not read: {missing}: no such file or directory" in proc.stdout
