"""The capture's probes on real processes: two "ranks" (RANK/LOCAL_RANK in their environment, as torchrun starts
them) under one parent, one sleeping at a known line, one blocked reading a FIFO; py-spy, /proc and the culprit rules."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from dsv3_preflight.stall import culprit
from dsv3_preflight.stall.probes import capture, procs

pytestmark = pytest.mark.slow

RANK_SRC = """import os, sys, time
open(sys.argv[1] + '.ready', 'w').close()
if os.environ['RANK'] == '0':
    time.sleep(120)   # SLEEP_LINE
else:
    open(sys.argv[1]).read()   # FIFO_LINE
"""
PARENT_SRC = """import os, subprocess, sys
kids = [subprocess.Popen([sys.executable, sys.argv[1], sys.argv[2] + str(r)], env={**os.environ, 'RANK': str(r),
        'LOCAL_RANK': str(r), 'GROUP_RANK': '0', 'WORLD_SIZE': '2'}) for r in (0, 1)]
[k.wait() for k in kids]
"""


@pytest.fixture
def two_ranks():
    with tempfile.TemporaryDirectory(prefix="dsv3-stall-") as tmp:
        script = Path(tmp) / "rank.py"
        script.write_text(RANK_SRC)
        base = str(Path(tmp) / "in")
        os.mkfifo(base + "1")
        parent = subprocess.Popen([sys.executable, "-c", PARENT_SRC, str(script), base], start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while not all(os.path.exists(f"{base}{r}.ready") for r in (0, 1)):
                assert time.monotonic() < deadline, "the ranks did not start"
                time.sleep(0.1)
            time.sleep(0.5)   # past the marker file: in the sleep and the FIFO's open
            yield parent.pid, script
        finally:
            os.killpg(parent.pid, 9)
            parent.wait()


def test_capture_names_the_sleeping_and_the_fifo_rank_with_their_lines(two_ranks):
    root, script = two_ranks
    assert [(p["rank"], p["local_rank"], p["node_rank"]) for p in procs.rank_processes(root)] == [(0, 0, 0), (1, 1, 0)]
    node = capture.capture_node(root, "here", 0)
    by_rank = {r["rank"]: r for r in node["ranks"]}
    assert by_rank[0]["stacks"]["ok"], by_rank[0]["stacks"]["error"]
    sites = {r: culprit.site_of(c) for r, c in by_rank.items()}
    assert (sites[0].kind, sites[0].where) == ("python", f"{script}:4")
    assert (sites[1].kind, sites[1].where) == ("io", f"{script}:6")
    assert by_rank[1]["flight_recorder"]["available"] is False   # no pipe: recorded as not available, not healthy
    assert node["gpus"]["available"] is False or node["gpus"]["gpus"]


def test_a_sample_holds_cpu_time_and_the_python_stack(two_ranks):
    root, script = two_ranks
    sample = capture.sample_node(root)
    cpu, stacks, _at = sample[0]
    assert cpu is not None and len(stacks) == capture.SAMPLE_DUMPS and stacks[0][0].startswith(f"{script}:4 ")
    assert "<string>:4 <listcomp>" in sample[capture.AGENT][1][0], sample[capture.AGENT]   # the parent, waiting for its children


def test_the_store_probe_names_the_node_ranks_whose_agent_key_is_missing():
    import datetime

    from torch.distributed import PrefixStore, TCPStore

    from dsv3_preflight.stall.probes.store import agents_joined

    server = TCPStore("127.0.0.1", 0, is_master=True, timeout=datetime.timedelta(seconds=10), wait_for_workers=False)
    PrefixStore("none", server).set("torchelastic/role_info/0", b"agent 0")   # as node rank 0's agent writes it
    found = agents_joined("127.0.0.1", server.port, 3)
    assert (found["available"], found["joined"], found["missing"]) == (True, [0], [1, 2])
    assert agents_joined("127.0.0.1", 1, 2, timeout=1.0)["available"] is False   # nothing there: said, not raised
