"""The stall watch under `launch --all-nodes`: real Ray nodes in two network namespaces (tests/cluster_lab.py), torchrun
on each started by the actors, 1 gloo rank per node (tests/stall/train_stall.py). The capture runs in the actors,
on each node's own /proc."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from dsv3_preflight.stall.probes import procs

pytest.importorskip("ray")
from cluster_lab import LabUnavailable, RayLab  # noqa: E402
from netns_lab import stop_group  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.netns, pytest.mark.ray]
ONLY = "env.*,net.nic_route,cluster.*"
TRAIN = Path(__file__).with_name("train_stall.py")
LINES = {name: i for i, line in enumerate(TRAIN.read_text().splitlines(), 1) for name in ("STUCK_SLEEP", "ALL_REDUCE")
         if f"# {name}" in line}
NNODES = 2


@pytest.fixture(scope="module")
def lab():
    try:
        lab = RayLab(NNODES, node_tmpdir=True).__enter__()
    except LabUnavailable as exc:
        pytest.skip(f"netns lab unavailable: {exc}")
    try:
        yield lab
    finally:
        lab.close()


def start(lab: RayLab, tmp_path: Path, *train: str, watch: tuple = ()) -> subprocess.Popen:
    argv = [sys.executable, "-m", "dsv3_preflight", "launch", "--all-nodes", "--ray-address", lab.gcs,
            "--profile", "cpu", "--nnodes", str(NNODES), "--nproc-per-node", "1", "--only", ONLY, "--no-color",
            "--no-report", "--json", str(tmp_path / "report.json"), "--launch-log", str(tmp_path / "launch.log"),
            "--reports-dir", str(tmp_path / "logs"), "--stop-grace", "5", *watch, "--", str(TRAIN), *train]
    return lab.net.popen(0, argv, env=lab.cli_env(), cwd=str(tmp_path))


def finish(proc: subprocess.Popen, timeout: float = 300.0) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        stop_group(proc, grace=5.0)
    return proc.returncode, out, err


def test_a_rank_stuck_on_one_node_is_named_with_its_node_and_line(lab: RayLab, tmp_path: Path):
    proc = start(lab, tmp_path, "--steps", "5", "--stuck-rank", "1", "--stuck-at", "1",
                 watch=("--stall-after", "8", "--on-stall", "stop"))
    code, out, err = finish(proc)
    doc = json.loads((tmp_path / "report.json").read_text())
    name = {r: n for n, r in doc["cluster"]["node_ranks"].items()}[1]
    assert code == 11, err[-4000:]
    head = next(line for line in err.splitlines() if line.startswith("dsv3-preflight launch: stall: 1. "))
    assert head.startswith(f"dsv3-preflight launch: stall: 1. stall.rank_in_python: rank 1 (node 1 {name}, local rank 0) ")
    assert f"{TRAIN}:{LINES['STUCK_SLEEP']}" in head and f"all_reduce at {TRAIN}:{LINES['ALL_REDUCE']}" in head
    assert "NIC eth0" in head   # joined with the preflight's facts of that node
    assert doc["stall"]["causes"][0]["node"] == name
    assert err.strip().splitlines()[-1].startswith(f"dsv3-preflight launch: [node 1 {name}] failed first (stalled: "
                                                   "stall.rank_in_python")


def test_a_slow_healthy_run_on_two_nodes_runs_to_its_end_unflagged(lab: RayLab, tmp_path: Path):
    proc = start(lab, tmp_path, "--steps", "3", "--load-s", "12", "--step-s", "1",
                 watch=("--stall-after", "5", "--on-stall", "stop"))
    code, out, err = finish(proc)
    assert code == 0, err[-4000:]
    assert "[rank1]: step 2 loss=" in out
    assert "stall:" not in err and "slow, not stuck; watching on" in err   # suspected, and told apart
    assert "stall" not in json.loads((tmp_path / "report.json").read_text())


def test_a_node_whose_torchrun_never_joins_is_named_by_its_node_rank(lab: RayLab, tmp_path: Path):
    # torchrun as the users' own wrapper script (#! this interpreter): on node rank 1 it hangs before torchrun starts
    wrapper = tmp_path / "bin" / "torchrun"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!{sys.executable}\nimport sys, time\n"
                       "if '--node_rank=1' in sys.argv:\n    time.sleep(3600)   # never joins\n"
                       "from torch.distributed.run import main\nmain()\n")
    wrapper.chmod(0o755)
    proc = start(lab, tmp_path, "--steps", "2", watch=("--stall-after", "8", "--on-stall", "stop", "--torchrun", str(wrapper)))
    code, _out, err = finish(proc)
    doc = json.loads((tmp_path / "report.json").read_text())
    name = {r: n for n, r in doc["cluster"]["node_ranks"].items()}[1]
    assert code == 11, err[-4000:]
    head = next(line for line in err.splitlines() if line.startswith("dsv3-preflight launch: stall: 1. "))
    assert head.startswith(f"dsv3-preflight launch: stall: 1. stall.node_never_joined: node 1 {name} never joined"), head
    assert "node 0 lab-node0: torchrun's agent waits for the other nodes in the rendezvous" in err
    assert f"node 1 {name}: torchrun runs, no rank process; it is at <module> ({tmp_path / 'bin' / 'torchrun'}:4)" in err


def test_a_link_blocked_after_the_first_steps_is_named(lab: RayLab, tmp_path: Path):
    proc = start(lab, tmp_path, "--steps", "400", "--step-s", "0.2", "--payload", "4000000",
                 watch=("--stall-after", "8", "--on-stall", "stop"))
    seen: list[str] = []

    def read() -> None:
        for line in proc.stdout:
            seen.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 240
    while not any("step 2 loss" in line for line in seen):
        assert proc.poll() is None and time.monotonic() < deadline, "no step before the link was blocked"
        time.sleep(0.2)
    # only the ranks' own connections toward node 0 are dropped (Ray's between the nodes go on): the ports of rank
    # 1's sockets to node 0, read with the watch's own probe
    rank1 = next(p for p in psutil.process_iter(["cmdline"]) if str(TRAIN) in " ".join(p.info["cmdline"] or [])
                 and procs.environ(p.pid).get("RANK") == "1" and procs.environ(p.pid).get("LOCAL_RANK") == "0")
    ports = sorted({c["local"].rsplit(":", 1)[1] for c in procs.tcp_connections(rank1.pid)
                    if c["state"] == "ESTABLISHED" and c["peer"].startswith(lab.addr(0) + ":")})
    assert ports, "rank 1 has no connection to node 0"
    rules = [r for port in ports for r in (["INPUT", "-p", "tcp", "--dport", port, "-j", "DROP"],
                                           ["OUTPUT", "-p", "tcp", "--sport", port, "-j", "DROP"])]
    for rule in rules:
        lab.net.add_rule(1, ["-I", *rule])
    try:
        proc.stdout = None   # the reader thread owns it
        code, _out, err = finish(proc)
    finally:
        for rule in rules:
            lab.net.add_rule(1, ["-D", *rule])
    head = next((line for line in err.splitlines() if line.startswith("dsv3-preflight launch: stall: 1. ")), err[-4000:])
    assert "stall.link_stuck" in head and "lab-node0" in head and "lab-node1" in head, head
    assert code in (10, 11), err[-3000:]
