"""lora watch: a save is judged once it is finished (the trainer says so, or the file proves itself whole);
a half-written, stalled or preallocated file is never a finding."""
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

from dsv3_preflight.lora.completeness import decide_save
from dsv3_preflight.lora.probes.watch import Watcher, observe

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def good_and_empty(tmp_path_factory):
    root = tmp_path_factory.mktemp("watch-src")
    good = lab.write_adapter(root / "good", "llama", lab.QKVO)
    return good, lab.empty_header(good, root / "empty")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _write_slowly(src: Path, ck: Path, stall: float, started: threading.Event | None = None,
                  config_first: bool = False) -> None:
    """A slow save: half the weights, a stall, the rest; then the config (or before the weights, as a save into
    a directory that already holds it); then trainer_state.json."""
    ck.mkdir(parents=True)
    if config_first:
        shutil.copy(src / "adapter_config.json", ck / "adapter_config.json")
    data = (src / "adapter_model.safetensors").read_bytes()
    with open(ck / "adapter_model.safetensors", "wb") as fh:
        fh.write(data[: len(data) // 2])
        fh.flush()
        if started:
            started.set()
        time.sleep(stall)  # the writer stalls: this is the behaviour under test, not a synchronisation
        fh.write(data[len(data) // 2:])
    shutil.copy(src / "adapter_config.json", ck / "adapter_config.json")
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": int(ck.name.split("-")[1])}))


# ----------------------------------------------------------------------------------------- the decision
@pytest.mark.parametrize("obs, stable, ready", [
    ({"trainer_state": True, "config": True}, 5, True),
    ({"trainer_state": True, "config": True}, 1, False),                 # still changing: settle first
    ({"next_checkpoint": True, "config": False}, 5, True),               # the trainer moved on: judge what is there
    ({"file_complete": True, "config": True}, 5, True),
    ({"file_complete": True, "config": False}, 5, False),               # peft writes the config after the weights
    ({"file_complete": False, "config": True}, 500, False),             # stalled or preallocated: never judged
    ({"missing_weights": True, "config": True}, 500, False),
])
def test_a_save_is_judged_only_when_the_trainer_or_the_file_says_it_is_finished(obs, stable, ready):
    assert decide_save(obs, stable_for=stable, settle=2).ready is ready


# ----------------------------------------------------------------------------------------- the watcher
def test_half_written_checkpoint_is_not_judged_until_complete(tmp_path, good_and_empty):
    good, _ = good_and_empty
    clock = Clock()
    w = Watcher(tmp_path, settle=1.0, clock=clock)
    ck = tmp_path / "checkpoint-50"
    ck.mkdir()
    data = (good / "adapter_model.safetensors").read_bytes()
    (ck / "adapter_model.safetensors").write_bytes(data[: len(data) // 2])
    assert w.poll() == []  # first sight: not settled
    clock.now += 5
    assert w.poll() == []  # settled, but the header's byte ranges are not all there
    (ck / "adapter_model.safetensors").write_bytes(data)  # the rest arrives: the clock restarts
    clock.now += 0.9
    assert w.poll() == []
    shutil.copy(good / "adapter_config.json", ck / "adapter_config.json")
    clock.now += 1.0
    assert w.poll() == []  # the config just changed
    clock.now += 1.0
    reports = w.poll()
    assert [(r["step"], r["status"]) for r in reports] == [(50, "pass")]
    clock.now += 5
    assert w.poll() == []  # judged once


def test_a_truncated_file_the_trainer_calls_finished_is_a_finding(tmp_path, good_and_empty):
    good, _ = good_and_empty
    clock = Clock()
    w = Watcher(tmp_path, settle=1.0, clock=clock)
    ck = lab.truncated(good, tmp_path / "checkpoint-50")
    assert w.poll() == []
    clock.now += 30
    assert w.poll() == []  # without the trainer's word a short file may still be growing
    assert w.pending() == [{"path": str(ck / "adapter_model.safetensors"),
                            "why": "the weights are not completely written yet"}]
    (ck / "trainer_state.json").write_text('{"global_step": 50}')
    clock.now += 1.5
    (r,) = w.poll()
    assert r["status"] == "fail" and "truncated" in r["summary"]


def test_a_preallocated_file_is_not_judged_before_its_data_is_written(tmp_path, good_and_empty):
    """Issue 21.7: a preallocated file was judged 'ok' three times before its data was written."""
    good, _ = good_and_empty
    clock = Clock()
    w = Watcher(tmp_path, settle=1.0, clock=clock)
    ck = tmp_path / "checkpoint-50"
    ck.mkdir()
    data = (good / "adapter_model.safetensors").read_bytes()
    n = int.from_bytes(data[:8], "little")
    with open(ck / "adapter_model.safetensors", "wb") as fh:
        fh.write(data[: 8 + n])  # the header first, as a preallocating writer does
        os.posix_fallocate(fh.fileno(), 0, len(data))  # full size now; the data is not written yet
    shutil.copy(good / "adapter_config.json", ck / "adapter_config.json")
    assert observe(ck / "adapter_model.safetensors")["file_complete"] is False
    for _ in range(3):
        clock.now += 5
        assert w.poll() == []
    with open(ck / "adapter_model.safetensors", "r+b") as fh:
        fh.seek(8 + n)
        fh.write(data[8 + n:])
    assert observe(ck / "adapter_model.safetensors")["file_complete"] is True
    clock.now += 0.1
    assert w.poll() == []  # it just changed
    clock.now += 1.5
    assert [r["status"] for r in w.poll()] == ["pass"]


def test_a_later_checkpoint_finishes_the_earlier_save(tmp_path, good_and_empty):
    good, _ = good_and_empty
    clock = Clock()
    w = Watcher(tmp_path, settle=1.0, clock=clock)
    early = lab.truncated(good, tmp_path / "checkpoint-50")  # no trainer_state.json: the trainer was killed mid-save
    clock.now += 5
    assert w.poll() == []
    lab.write_checkpoint(tmp_path, 100, good)
    clock.now += 0.1
    assert w.poll() == []
    clock.now += 1.5
    verdicts = {r["step"]: r["status"] for r in w.poll()}
    assert verdicts == {50: "fail", 100: "pass"}, early


def test_fifos_in_the_tree_never_hang_the_watch(tmp_path, good_and_empty):
    """A FIFO named adapter_model.safetensors, adapter_config.json or trainer_state.json, or a link to one, hung it."""
    good, _ = good_and_empty
    clock = Clock()
    a = lab.write_checkpoint(tmp_path, 10, good)
    os.unlink(a / "adapter_model.safetensors")
    os.mkfifo(a / "adapter_model.safetensors")
    b = lab.write_checkpoint(tmp_path, 20, good)
    os.unlink(b / "adapter_config.json")
    os.mkfifo(b / "adapter_config.json")
    c = lab.write_checkpoint(tmp_path, 30, good)
    os.unlink(c / "trainer_state.json")
    os.mkfifo(c / "trainer_state.json")
    d = lab.write_checkpoint(tmp_path, 40, good)
    os.mkfifo(tmp_path / "target.fifo")
    os.unlink(d / "adapter_model.safetensors")
    os.symlink(tmp_path / "target.fifo", d / "adapter_model.safetensors")
    w = Watcher(tmp_path, settle=1.0, clock=clock, deep=True)
    done = threading.Event()
    out: list = []
    worker = threading.Thread(target=lambda: (out.extend(w.poll()), clock.__setattr__("now", 5), out.extend(w.poll()),
                                              done.set()), daemon=True)
    worker.start()
    assert done.wait(30), "the watch blocked on a FIFO"
    by_step = {r["step"]: r for r in out}
    assert "FIFO" in by_step[10]["summary"] and "FIFO" in by_step[20]["summary"] and "FIFO" in by_step[40]["summary"]
    assert by_step[30]["status"] == "pass"


def test_a_fifo_in_place_of_the_weights_is_named_a_fifo_not_an_unfinished_save(tmp_path, good_and_empty):
    """Issue 46.5: without trainer_state.json the watch said 'the weights are not completely written yet' of a FIFO,
    where `lora scan` says it is a FIFO. Both say what it is; the FIFO is never opened for reading."""
    good, _ = good_and_empty
    ck = tmp_path / "checkpoint-10"
    ck.mkdir()
    shutil.copy(good / "adapter_config.json", ck / "adapter_config.json")
    os.mkfifo(ck / "adapter_model.safetensors")
    obs = observe(ck / "adapter_model.safetensors")
    assert obs["not_regular"] == "a FIFO (named pipe)"
    assert decide_save(obs, stable_for=0, settle=2) == decide_save(obs, stable_for=9, settle=2)
    assert decide_save(obs, stable_for=0, settle=2).ready
    clock = Clock()
    w = Watcher(tmp_path, settle=1.0, clock=clock)
    done = threading.Event()
    out: list = []
    worker = threading.Thread(target=lambda: (out.extend(w.poll()), done.set()), daemon=True)
    worker.start()
    assert done.wait(30), "the watch blocked on the FIFO"
    [verdict] = out
    assert verdict["status"] == "fail" and "FIFO" in verdict["summary"], verdict
    assert w.pending() == []
    assert "not completely written" not in json.dumps(verdict)


# ----------------------------------------------------------------------------------------- the CLI
def _watch(tmp_path: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dsv3_preflight", "lora", "watch", str(tmp_path), *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _first_line(proc: subprocess.Popen, timeout: float = 60) -> str:
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert got, "the watch printed nothing"
    return got[0]


@pytest.mark.slow
def test_cli_watch_reports_the_first_bad_checkpoint_as_it_lands_and_fails_fast(tmp_path, good_and_empty):
    good, empty = good_and_empty
    proc = _watch(tmp_path, "--interval", "0.2", "--settle", "0.5", "--fail-fast", "--max-seconds", "90")
    try:
        assert _first_line(proc).startswith("watching ")  # the watcher is up before the first save lands
        _write_slowly(good, tmp_path / "checkpoint-50", 1.0)
        written = time.monotonic()
        _write_slowly(empty, tmp_path / "checkpoint-100", 0.3)
        out, err = proc.communicate(timeout=90)
        latency = time.monotonic() - written
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 1, out + err
    lines = [ln for ln in out.splitlines() if "checkpoint-" in ln]
    assert lines[0].startswith("✔ step 50:") and lines[1].startswith("✘ step 100:") and "empty adapter" in lines[1]
    assert not any("truncated" in ln for ln in lines)  # the half-written file was never reported
    assert latency < 30  # caught at the save, not at the end of the run


@pytest.mark.slow
def test_cli_watch_fail_fast_survives_a_healthy_save_that_stalls(tmp_path, good_and_empty):
    """Issue 21.7: --interval 1 --settle 2 and a writer stalling 3.5 s gave three 'truncated' FAILs and exit 1."""
    good, _ = good_and_empty
    proc = _watch(tmp_path, "--interval", "1", "--settle", "2", "--fail-fast", "--max-seconds", "12")
    try:
        assert _first_line(proc).startswith("watching ")
        _write_slowly(good, tmp_path / "checkpoint-50", 3.5, config_first=True)  # the code before: exit 1, 'truncated'
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, out + err
    lines = [ln for ln in out.splitlines() if "checkpoint-" in ln]
    assert len(lines) == 1 and lines[0].startswith("✔ step 50:"), out
    assert "1 adapters judged, 0 bad" in out


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
    assert json.loads(line)["status"] == "pass" and json.loads(line)["step"] == 50


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
