"""`run --all-nodes` over real Ray nodes in three network namespaces (tests/netns_lab.py): the head's
`ray start --head` in node 0, `ray start --address` in nodes 1 and 2, the CLI driven from node 0.

The cluster checks cross a real network: node ranks by address, port reach from each worker to the
head's temporary listener, MTU; then a DROP rule on the master port makes port reach fail as filtered.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")
from netns_lab import NetnsLab, unavailable_reason  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.netns, pytest.mark.ray]
RAY_PORT = 6379
MASTER_PORT = 39500      # inside the lab's own namespaces: no other run shares it
MB80 = str(80 * 1024 * 1024)


def _ray_cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from ray.scripts.scripts import main; main()", *args]


def _node_env(lab, n: int, tmp: str) -> dict[str, str]:
    return {"DSV3_PREFLIGHT_NODE_NAME": f"lab-node{n}", "MASTER_ADDR": lab.addr(0), "MASTER_PORT": str(MASTER_PORT),
            "NCCL_SOCKET_IFNAME": lab.PRIMARY_IF if hasattr(lab, "PRIMARY_IF") else "eth0",
            "GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "2", "RAY_TMPDIR": tmp, "RAY_DISABLE_USAGE_STATS": "1", "RAY_AUTH_MODE": "disabled",
            "DSV3_PREFLIGHT_REACH_TIMEOUT": "3"}


def _stop(procs: list[subprocess.Popen], lab) -> None:
    for p in procs:  # each `ray start --block` leads its own session: stop the whole group, by its id
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in procs:
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for n in range(3):  # anything we started that is still in our namespaces
        pids = subprocess.run(["ip", "netns", "pids", lab.ns(n)], capture_output=True, text=True, timeout=10).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass


@pytest.fixture(scope="module")
def ray_lab():
    why = unavailable_reason()
    if why:
        pytest.skip(why)
    tmp = tempfile.mkdtemp(prefix="d3n", dir="/tmp")
    with NetnsLab() as lab:
        procs = []
        try:
            head = lab.popen(0, _ray_cli("start", "--head", "--node-ip-address", lab.addr(0), "--port", str(RAY_PORT),
                                         "--num-cpus", "1", "--object-store-memory", MB80, "--include-dashboard=false",
                                         "--disable-usage-stats", "--block"),
                             env=_node_env(lab, 0, os.path.join(tmp, "n0")), stderr=subprocess.STDOUT)
            procs.append(head)
            _wait_port(lab, 0, RAY_PORT)
            lab.tmp = tmp
            for n in (1, 2):  # one after the other: two raylets registering at once overload a 2-core box
                procs.append(lab.popen(n, _ray_cli("start", "--address", f"{lab.addr(0)}:{RAY_PORT}", "--node-ip-address",
                                                   lab.addr(n), "--num-cpus", "1", "--object-store-memory", MB80,
                                                   "--disable-usage-stats", "--block"),
                                       env=_node_env(lab, n, os.path.join(tmp, f"n{n}")), stderr=subprocess.STDOUT))
                _wait_nodes(lab, n + 1, procs)
            yield lab
        finally:
            _stop(procs, lab)


def _wait_port(lab, n: int, port: int, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    code = f"import socket; socket.create_connection(('{lab.addr(n)}', {port}), timeout=1)"
    while time.monotonic() < end:
        if lab.exec(n, [sys.executable, "-c", code], timeout=10).returncode == 0:
            return
        time.sleep(1)
    raise AssertionError(f"ray head did not listen on {port}")


def _wait_nodes(lab, count: int, procs, timeout: float = 120.0) -> None:
    code = ("import ray, sys; ray.init(address=sys.argv[1], include_dashboard=False, logging_level='error'); "
            "print(sum(1 for n in ray.nodes() if n['Alive'])); ray.shutdown()")
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        out = lab.exec(0, [sys.executable, "-c", code, f"{lab.addr(0)}:{RAY_PORT}"], timeout=60,
                       env={"RAY_TMPDIR": os.path.join(lab.tmp, "drv"), "RAY_AUTH_MODE": "disabled"})
        if out.stdout.strip().splitlines()[-1:] == [str(count)]:
            return
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(2)
    outs = [p.stdout.read()[-1500:] if p.poll() is not None and p.stdout else "(running)" for p in procs]
    raise AssertionError(f"{count} Ray nodes never came up in the lab: {out.stdout[-300:]} {out.stderr[-600:]} {outs}")


def _run(lab, tmp_path: Path, name: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / f"{name}.json"
    argv = [sys.executable, "-m", "dsv3_preflight", "run", "--all-nodes", "--ray-address", f"{lab.addr(0)}:{RAY_PORT}",
            "--profile", "cpu", "--nnodes", "3", "--only", "env.*,net.*,cluster.*", "--json", str(out), "--no-report",
            "--no-color", "--timeout", "120"]
    proc = lab.exec(0, argv, timeout=200, env={**_node_env(lab, 0, os.path.join(lab.tmp, "drv")), "PYTHONPATH": str(Path(__file__).parent.parent)})
    return proc, (json.loads(out.read_text()) if out.exists() else {})


def _by(doc: dict, check: str) -> dict[str, dict]:
    return {r["node"]: r for r in doc.get("results", []) if r["name"] == check}


def test_namespaced_ray_nodes_get_ranks_by_address_and_reach_the_heads_listener(ray_lab, tmp_path):
    proc, doc = _run(ray_lab, tmp_path, "green")
    assert doc, proc.stdout + proc.stderr
    ranks = doc["cluster"]["node_ranks"]
    assert ranks == {"lab-node0": 0, "lab-node1": 1, "lab-node2": 2}, proc.stderr
    reach = _by(doc, "net.port_reach")
    for worker in ("lab-node1", "lab-node2"):
        assert reach[worker]["status"] == "pass", (reach[worker], proc.stderr)
        assert "reached the dsv3-preflight listener" in reach[worker]["summary"]
    assert reach["lab-node0"]["status"] == "skip"
    listener = doc["cluster"]["listener"]
    assert listener["ok"] is True and {s["peer"] for s in listener["served"]} >= {ray_lab.addr(1), ray_lab.addr(2)}
    assert _by(doc, "net.mtu")["cluster"]["status"] == "pass"
    assert _by(doc, "cluster.master_node")["cluster"]["status"] == "pass"
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_drop_rule_on_the_master_port_fails_port_reach_as_filtered_on_every_worker(ray_lab, tmp_path):
    ray_lab.add_rule(0, ["-A", "INPUT", "-p", "tcp", "--dport", str(MASTER_PORT), "!", "-i", "lo", "-j", "DROP"])
    proc, doc = _run(ray_lab, tmp_path, "drop")
    assert proc.returncode == 1
    reach = _by(doc, "net.port_reach")
    for worker in ("lab-node1", "lab-node2"):
        assert reach[worker]["status"] == "fail", reach[worker]
        assert reach[worker]["evidence"]["outcome"] == "filtered"
    assert all(n["state"] == "ok" for n in doc["nodes"])  # Ray itself still works: only the master port is dropped
