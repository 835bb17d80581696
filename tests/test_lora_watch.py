"""lora watch: a checkpoint is judged once completely written; a half-written file is not a finding."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import test_lora_lab as lab
from dsv3_preflight.lora.watch import Watcher

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def good_and_empty(tmp_path_factory):
    root = tmp_path_factory.mktemp("watch-src")
    good = lab.write_adapter(root / "good", "llama", lab.QKVO)
    return good, lab.empty_header(good, root / "empty")


def _write_slowly(src: Path, ck: Path, pause: float) -> None:
    """Write a checkpoint the way a slow save does: the weights in two halves, then the config."""
    ck.mkdir(parents=True)
    data = (src / "adapter_model.safetensors").read_bytes()
    with open(ck / "adapter_model.safetensors", "wb") as fh:
        fh.write(data[: len(data) // 2])
        fh.flush()
        time.sleep(pause)
        fh.write(data[len(data) // 2:])
    shutil.copy(src / "adapter_config.json", ck / "adapter_config.json")
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": int(ck.name.split("-")[1])}))


def test_half_written_checkpoint_is_not_judged_until_complete(tmp_path, good_and_empty):
    good, _ = good_and_empty
    now = [0.0]
    w = Watcher(tmp_path, settle=1.0, clock=lambda: now[0])
    ck = tmp_path / "checkpoint-50"
    ck.mkdir()
    data = (good / "adapter_model.safetensors").read_bytes()
    (ck / "adapter_model.safetensors").write_bytes(data[: len(data) // 2])
    assert w.poll() == []  # first sight: not settled
    now[0] += 0.5
    assert w.poll() == []
    (ck / "adapter_model.safetensors").write_bytes(data)  # the rest arrives: the clock restarts
    now[0] += 0.9
    assert w.poll() == []
    shutil.copy(good / "adapter_config.json", ck / "adapter_config.json")
    now[0] += 1.0
    reports = w.poll()
    assert [(r.step, r.status) for r in reports] == [(50, "ok")]
    now[0] += 5
    assert w.poll() == []  # judged once


def test_truncated_file_that_stays_truncated_is_a_finding(tmp_path, good_and_empty):
    good, _ = good_and_empty
    now = [0.0]
    w = Watcher(tmp_path, settle=1.0, clock=lambda: now[0])
    lab.truncated(good, tmp_path / "checkpoint-50")
    assert w.poll() == []
    now[0] += 1.5
    (r,) = w.poll()
    assert r.status == "fail" and "truncated" in r.summary


@pytest.mark.slow
def test_cli_watch_reports_the_first_bad_checkpoint_as_it_lands_and_fails_fast(tmp_path, good_and_empty):
    good, empty = good_and_empty
    proc = subprocess.Popen([sys.executable, "-m", "dsv3_preflight", "lora", "watch", str(tmp_path), "--interval", "0.2",
                             "--settle", "0.5", "--fail-fast", "--max-seconds", "90"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        writer = threading.Thread(target=_write_slowly, args=(good, tmp_path / "checkpoint-50", 1.0))
        writer.start()
        writer.join()
        time.sleep(2.5)
        written = time.monotonic()
        _write_slowly(empty, tmp_path / "checkpoint-100", 0.3)
        out, err = proc.communicate(timeout=90)
        latency = time.monotonic() - written
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 1, out + err
    lines = [l for l in out.splitlines() if "checkpoint-" in l]
    assert lines[0].startswith("✔ step 50:") and lines[1].startswith("✘ step 100:") and "empty adapter" in lines[1]
    assert not any("truncated" in l for l in lines)  # the half-written file was never reported
    assert latency < 30  # caught at the save, not at the end of the run


def test_cli_watch_on_a_missing_dir_is_a_usage_error(tmp_path):
    p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "lora", "watch", str(tmp_path / "nope")],
                       capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.returncode == 4 and "not a directory" in p.stderr


@pytest.mark.slow
def test_cli_watch_json_lines_and_nothing_seen_is_exit_5(tmp_path, good_and_empty):
    p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "lora", "watch", str(tmp_path), "--max-seconds", "0.5",
                        "--interval", "0.2", "--json"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.returncode == 5 and p.stdout == ""
    lab.write_checkpoint(tmp_path, 50, good_and_empty[0])
    p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "lora", "watch", str(tmp_path), "--max-seconds", "0.5",
                        "--interval", "0.2", "--settle", "0", "--json"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.returncode == 0, p.stderr
    (line,) = p.stdout.splitlines()
    assert json.loads(line)["status"] == "ok" and json.loads(line)["step"] == 50


@pytest.mark.parametrize("args", [["watch", "DIR", "--interval", "-1"], ["watch", "DIR", "--interval", "0"],
                                  ["watch", "DIR", "--settle", "-2"], ["watch", "DIR", "--max-seconds", "nan"],
                                  ["scan", "DIR", "--header-cap-mib", "0"], ["scan", "DIR", "--header-cap-mib", "abc"]])
def test_cli_odd_numbers_are_usage_errors_not_internal_errors(tmp_path, args):
    """--interval -1 used to reach time.sleep and exit 3 ('internal error'); 0 polled in a busy loop."""
    argv = [str(tmp_path) if a == "DIR" else a for a in args]
    p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "lora", *argv], capture_output=True, text=True,
                       timeout=60, cwd=REPO)
    assert p.returncode == 4, p.stderr
    assert f"argument {args[2]}: expected" in p.stderr and "internal error" not in p.stderr
