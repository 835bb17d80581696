"""Ranks out of step under TORCH_DISTRIBUTED_DEBUG=DETAIL, from real gloo processes: every rank logs the fingerprint
of each collective it enters (ProcessGroupWrapper); a log that stops with one rank a collective behind names it.

Two ranks on 127.0.0.1 run the same collectives, except that rank 1 stops before the last one (stuck in "data
loading"). Both are killed by PID once rank 0 has entered that collective, as a user kills a hung job."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from ports import free_port

from dsv3_preflight.doctor import triage

WORKER = textwrap.dedent(r'''
    import datetime, sys, time, torch, torch.distributed as dist
    rank, port, stall = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "stall"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    t = torch.ones(4)
    dist.all_reduce(t)
    dist.broadcast(t, 0)
    if stall and rank == 1:
        time.sleep(120)   # stuck outside the collectives
    dist.broadcast(torch.ones(73), 0)
    dist.destroy_process_group()
''')


def _run(tmp_path, stall: bool) -> list[str]:
    port = free_port()
    env = {**os.environ, "TORCH_DISTRIBUTED_DEBUG": "DETAIL", "TORCH_CPP_LOG_LEVEL": "INFO"}
    logs = [tmp_path / f"rank{r}.log" for r in (0, 1)]
    procs = []
    for r, log in enumerate(logs):
        with open(log, "wb") as out:
            procs.append(subprocess.Popen([sys.executable, "-c", WORKER, str(r), str(port), "stall" if stall else "run"],
                                          stdout=out, stderr=subprocess.STDOUT, env=env, cwd=str(tmp_path)))
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if stall and "SequenceNumber=2" in logs[0].read_text(errors="replace"):
                time.sleep(0.5)   # rank 0 waits in the collective rank 1 never enters
                break
            if not stall and all(p.poll() is not None for p in procs):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the ranks did not reach the expected state: " + logs[0].read_text(errors="replace")[-2000:])
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait(timeout=30)
    if not stall:
        assert [p.returncode for p in procs] == [0, 0], logs[1].read_text(errors="replace")[-2000:]
    return [str(x) for x in logs]


def test_a_log_that_stops_with_a_rank_behind_names_that_rank(tmp_path):
    doc = triage(_run(tmp_path, stall=True))
    assert doc["verdict"] == "failure" and doc["exit_code"] == 1 and doc["stalled"], doc["summary"]
    top = doc["findings"][0]
    assert (top["id"], doc["cause_class"]) == ("c10d.fingerprints_diverge", "nccl_hang"), doc["summary"]
    assert "rank(s) 1 last entered collective #1 (BROADCAST [4]), rank(s) 0 #2 (BROADCAST [73])" in top["title"]
    assert top["check"] is None   # the program's own collectives: no preflight check sees them
    # the store client's INFO retries while rank 0's server starts ("... Connection refused), will retry") are not errors
    assert not doc["error_lines"], doc["error_lines"]


def test_ranks_in_step_are_not_a_suspect(tmp_path):
    doc = triage(_run(tmp_path, stall=False))
    ids = {f["id"] for f in doc["findings"]} | {w["id"] for w in doc.get("warnings") or []}
    assert "c10d.fingerprints_diverge" not in ids, doc["summary"]
    assert doc["exit_code"] != 1 and not doc["error_lines"], (doc["summary"], doc["error_lines"])
