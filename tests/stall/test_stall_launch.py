"""The stall watch under plain `launch` (one node): the real CLI, its preflight, a real torchrun with 2 gloo ranks
(tests/stall/train_stall.py). A rank stuck before its all_reduce (sleeping, or reading a FIFO) is named with its
node and its file:line in the console, the launch log, the JSON document and the HTML report; a healthy run with a
long CPU-bound load and slow steps runs to its end unflagged."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ports import free_port

pytestmark = pytest.mark.slow

TRAIN = Path(__file__).with_name("train_stall.py")
LINES = {name: i for i, line in enumerate(TRAIN.read_text().splitlines(), 1) for name in ("STUCK_SLEEP", "STUCK_FIFO",
                                                                                         "ALL_REDUCE") if f"# {name}" in line}


@pytest.fixture
def user_env(clean_env, tmp_path_factory):
    env = dict(os.environ)
    env["DSV3_PREFLIGHT_NODE_NAME"] = "stallnode"
    env["TMPDIR"] = str(tmp_path_factory.mktemp("tmpdir"))
    return env


def launch(tmp_path: Path, env: dict, watch: list[str], training: list[str], timeout: float = 240.0):
    argv = [sys.executable, "-m", "dsv3_preflight", "launch", "--profile", "cpu", "--master-port", str(free_port()),
            "--skip", "dist.*", "--reports-dir", str(tmp_path / "reports"), *watch, "--", str(TRAIN), *training]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("how", ["sleep", "fifo"])
def test_a_rank_stuck_before_its_all_reduce_is_named_with_its_node_and_line(tmp_path, user_env, how):
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)
    code, out, err = launch(tmp_path, user_env, ["--stall-after", "5", "--on-stall", "stop"],
                            ["--steps", "6", "--stuck-rank", "1", "--stuck-at", "2", "--stuck-how", how, "--fifo", str(fifo)])
    assert code == 1, err[-4000:]
    assert "[rank1]: step 1 loss=" in out and "step 2 loss" not in out
    where = f"{TRAIN}:{LINES['STUCK_SLEEP' if how == 'sleep' else 'STUCK_FIFO']}"
    cause_id = "stall.rank_in_python" if how == "sleep" else "stall.rank_blocked_io"
    head = next(line for line in err.splitlines() if line.startswith("dsv3-preflight launch: stall: 1. "))
    assert head.startswith(f"dsv3-preflight launch: stall: 1. {cause_id}: rank 1 (node 0 stallnode, local rank 1) ")
    assert where in head and f"wait in all_reduce at {TRAIN}:{LINES['ALL_REDUCE']}" in head
    reports = tmp_path / "reports"
    [log] = reports.glob("launch-*-stallnode.log")
    text = log.read_text()
    assert f"# {head}" in text
    stall_file = Path(next(line for line in text.splitlines() if line.startswith("# stall report: ")).split(": ", 1)[1])
    stall = json.loads(stall_file.read_text())
    [doc_path] = [p for p in reports.glob("*.json") if p != stall_file]
    doc = json.loads(doc_path.read_text())
    assert doc["stall"]["causes"][0]["where"] == where == stall["causes"][0]["where"]
    assert [g["ranks"] for g in doc["stall"]["groups"]] == [[0], [1]]
    [html] = reports.glob("*.html")
    page = html.read_text()
    assert '<section id="stall">' in page and cause_id in page
    fr = doc["stall"]["nodes"][0]["ranks"][0]["flight_recorder"]
    assert fr["available"] is False and "no NCCL process group" in fr["why"]   # gloo: said, not taken as healthy
    if how == "sleep":   # the doctor, given the reports directory, reads the stall report the launch log names
        doctor = subprocess.run([sys.executable, "-m", "dsv3_preflight", "doctor", "--json", str(reports)],
                                capture_output=True, text=True, timeout=120)
        found = json.loads(doctor.stdout)
        assert found["stall"]["causes"][0]["where"] == where and found["stall"]["report"] == str(stall_file)



def test_a_slow_healthy_run_runs_to_its_end_unflagged(tmp_path, user_env):
    code, out, err = launch(tmp_path, user_env, ["--stall-after", "5", "--on-stall", "stop"],
                            ["--steps", "3", "--load-s", "12", "--step-s", "1"])
    assert code == 0, err[-4000:]
    assert "[rank0]: step 2 loss=" in out
    assert "stall:" not in err
    assert "work (their stacks change, or in set-up their CPU time advances): slow, not stuck; watching on" in err   # it was suspected
    assert not list((tmp_path / "reports").glob("stall-*.json"))
