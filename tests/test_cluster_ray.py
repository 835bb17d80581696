"""`run --all-nodes` against a real Ray cluster on this machine (head + 2 workers, ray.cluster_utils).

Nodes differ through their own environment (Cluster.add_node(env_vars=...)), as real nodes do.
One Cluster per module; nodes added by a test are removed by it.
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from cluster_lab import SITE_CHECKS, Lab, assert_schema_valid, by_node_id, nodes_by_name, results_by, start_cluster, stop_process_group  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]
BASE = ["head", "w1", "w2"]


@pytest.fixture(scope="module")
def lab():
    saved = {k: os.environ.get(k) for k in ("RAY_TMPDIR", "RAY_ADDRESS", "RAY_DISABLE_USAGE_STATS")}
    lab = start_cluster(BASE)
    try:
        yield lab
    finally:
        lab.cluster.shutdown()  # stops the processes it started, by PID
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_three_nodes_all_green_with_every_nodes_results_facts_and_ranks(lab: Lab, tmp_path: Path):
    proc, doc = lab.run(tmp_path / "green.json", 3)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert doc["mode"] == "cluster" and doc["verdict"] == "GO"
    nodes = nodes_by_name(doc)
    assert set(nodes) == set(BASE)
    assert all(n["state"] == "ok" for n in nodes.values())
    assert sorted(n["node_rank"] for n in nodes.values()) == [0, 1, 2]
    for name, entry in nodes.items():  # facts came back from each node's own process environment
        assert entry["facts"]["env"]["DSV3_PREFLIGHT_NODE_NAME"] == name
        assert entry["identity"]["ray"]["node_id"]
    rank0 = next(n for n in nodes.values() if n["node_rank"] == 0)
    assert rank0["identity"]["ray"]["is_driver"]  # all share MASTER_ADDR's IP: the driver's node is node 0
    assert doc["cluster"]["node_ranks"] == {n: e["node_rank"] for n, e in nodes.items()}
    assert doc["cluster"]["embedded"] is False
    assert set(results_by(doc, "env.launch_vars")) == set(BASE)
    for check in ("cluster.node_count", "cluster.env_consistency", "cluster.master_node", "gpu.versions", "net.mtu"):
        assert results_by(doc, check)["cluster"]["status"] == "pass", check
    assert "3 of 3 expected nodes present" in results_by(doc, "cluster.node_count")["cluster"]["summary"]
    for name in BASE:  # live progress per node, under the name the node reported
        assert re.search(rf"node {nodes[name]['node_rank']} {name} \(\w+\): checks done in", proc.stderr), proc.stderr
    assert "nodes: " in proc.stdout and "=node 0" in proc.stdout


def test_missing_node_fails_naming_expected_count_and_present_nodes(lab: Lab, tmp_path: Path):
    proc, doc = lab.run(tmp_path / "missing.json", 5)
    assert proc.returncode == 1
    count = results_by(doc, "cluster.node_count")["cluster"]
    assert count["status"] == "fail"
    assert "2 node(s) missing: the profile expects 5 nodes" in count["summary"]
    for name in BASE:
        assert name in count["summary"]
    missing = [n for n in doc["nodes"] if n["state"] == "missing"]
    assert len(missing) == 2 and doc["cluster"]["missing_nodes"] == 2
    assert_schema_valid(doc)


def test_node_with_a_bad_environment_fails_there_and_in_env_consistency(lab: Lab, tmp_path: Path):
    node = lab.add_node("w3", OMP_NUM_THREADS="zero")
    try:
        lab.wait_alive(4)
        proc, doc = lab.run(tmp_path / "bad.json", 4)
    finally:
        lab.cluster.remove_node(node)
        lab.wait_alive(len(BASE))  # the GCS has seen it go before the next test counts nodes
    assert proc.returncode == 1
    launch = results_by(doc, "env.launch_vars")
    assert launch["w3"]["status"] == "fail" and "OMP_NUM_THREADS='zero'" in launch["w3"]["summary"]
    assert all(launch[n]["status"] == "pass" for n in BASE)
    consistency = results_by(doc, "cluster.env_consistency")["cluster"]
    assert consistency["status"] == "fail"
    assert consistency["summary"].startswith("OMP_NUM_THREADS differs between nodes") and "w3=zero" in consistency["summary"]
    assert "export OMP_NUM_THREADS=2   # on w3" in consistency["remediation"]
    assert doc["results"][0]["status"] == "fail"  # failures first


def test_hung_node_is_an_error_and_the_others_are_reported_within_the_timeout(lab: Lab, tmp_path: Path):
    node = lab.add_node("stuck", DSV3_TEST_HANG_ON_LOAD="1")
    try:
        lab.wait_alive(4)
        started = time.monotonic()
        proc, doc = lab.run(tmp_path / "hung.json", 4, "--checks-dir", str(SITE_CHECKS), "--only", "testhook.*", "--timeout", "30")
        wall = time.monotonic() - started
    finally:
        lab.cluster.remove_node(node)
        lab.wait_alive(len(BASE))  # the GCS has seen it go before the next test counts nodes
    assert proc.returncode == 1
    assert wall < 30 + 20, wall  # the timeout plus connecting and Ray's shutdown, never a hang
    nodes = nodes_by_name(doc)
    stuck = by_node_id(doc, node.node_id)  # it never answered: named after its host (+ Ray node id if shared)
    assert stuck["node"].startswith(socket.gethostname())
    assert stuck["state"] == "error" and "no answer within the overall timeout" in stuck["error"]
    err = results_by(doc, "cluster.node_run")[stuck["node"]]
    assert err["status"] == "error" and err["evidence"]["kind"] == "timeout"
    assert_schema_valid(doc)
    slow = results_by(doc, "testhook.slow_probe")
    assert all(slow[n]["status"] == "pass" for n in BASE)
    assert all(nodes[n]["state"] == "ok" for n in BASE)


def test_node_killed_mid_run_is_an_error_and_the_others_are_reported(lab: Lab, tmp_path: Path):
    marker = tmp_path / "doomed.started"
    node = lab.add_node("doomed", DSV3_TEST_SLOW_S="90", DSV3_TEST_MARKER=str(marker))
    out = tmp_path / "killed.json"
    proc = None
    try:
        lab.wait_alive(4)
        proc = subprocess.Popen(lab.argv(out, 4, "--checks-dir", str(SITE_CHECKS), "--only", "testhook.*", "--timeout", "120"),
                                env=lab.cli_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        end = time.monotonic() + 90
        while not marker.exists() and time.monotonic() < end and proc.poll() is None:
            time.sleep(0.2)
        assert marker.exists(), "the doomed node never started its checks"
        killed_at = time.monotonic()
        lab.cluster.remove_node(node, allow_graceful=False)
        stdout, stderr = proc.communicate(timeout=120)
        after_kill = time.monotonic() - killed_at
    finally:
        if proc is not None:
            stop_process_group(proc)
        lab.wait_alive(len(BASE))
    assert proc.returncode == 1, stdout + stderr
    assert after_kill < 80, after_kill  # well before the 90 s the doomed probe would have slept
    doc = json.loads(out.read_text())
    nodes = nodes_by_name(doc)
    doomed = by_node_id(doc, node.node_id)
    assert doomed["state"] == "error"
    err = results_by(doc, "cluster.node_run")[doomed["node"]]
    assert err["status"] == "error" and err["evidence"]["kind"] in ("died", "crashed"), err
    assert all(nodes[n]["state"] == "ok" for n in BASE)
    assert all(r["status"] == "pass" for n, r in results_by(doc, "testhook.slow_probe").items() if n in BASE)


def _bare_venv(path: Path) -> Path:
    """A Python environment with Ray but without dsv3-preflight: the .venv's site-packages added as a
    plain path (its .pth files, among them the editable install of dsv3-preflight, are not processed)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    site = next(path.glob("lib/python3*/site-packages"))
    import ray as _ray

    (site / "ray_only.pth").write_text(str(Path(_ray.__file__).resolve().parent.parent) + "\n")
    python = path / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import ray, importlib.util as u; print(u.find_spec('dsv3_preflight'))"],
                           capture_output=True, text=True, timeout=120, cwd="/")
    assert probe.stdout.strip() == "None", probe.stdout + probe.stderr
    return python


def test_node_without_the_package_is_reported_for_that_node(lab: Lab, tmp_path: Path):
    python = _bare_venv(tmp_path / "bare")
    env = {**os.environ, **lab.node_env("bare"), "RAY_TMPDIR": lab.tmpdir, "PYTHONPATH": ""}
    starter = subprocess.Popen(
        [str(python), "-c", "from ray.scripts.scripts import main; main()", "start", "--address", lab.address,
         "--num-cpus", "1", "--object-store-memory", str(80 * 1024 * 1024), "--block", "--disable-usage-stats"],
        env=env, cwd="/", stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        lab.wait_alive(4, timeout=90)
        proc, doc = lab.run(tmp_path / "bare.json", 4)
        # where the user allows it, the job's runtime_env ships the package to that node
        shipped, shipped_doc = lab.run(tmp_path / "shipped.json", 4, env={"DSV3_PREFLIGHT_SHIP_PACKAGE": "1"})
    finally:
        stop_process_group(starter)
        lab.wait_alive(3, timeout=90)
    assert proc.returncode == 1
    nodes = nodes_by_name(doc)
    assert "bare" in nodes, [(n["node"], n["state"], n["error"]) for n in doc["nodes"]]
    assert nodes["bare"]["state"] == "error"
    assert "dsv3-preflight is not importable" in nodes["bare"]["error"] and str(python) in nodes["bare"]["error"]
    err = results_by(doc, "cluster.node_run")["bare"]
    assert err["evidence"]["kind"] == "package_missing"
    assert "DSV3_PREFLIGHT_SHIP_PACKAGE=1" in err["remediation"]
    assert all(nodes[n]["state"] == "ok" for n in BASE)
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    shipped_nodes = nodes_by_name(shipped_doc)
    assert shipped_nodes["bare"]["state"] == "ok" and shipped_nodes["bare"]["identity"]["python"] == str(python)
    assert results_by(shipped_doc, "env.launch_vars")["bare"]["status"] == "pass"
    assert shipped_doc["cluster"]["ray"]["runtime_env"]["py_modules"]


def test_probe_runs_the_collective_as_a_strict_spread_gang_over_every_node(lab: Lab, tmp_path: Path):
    pytest.importorskip("torch")
    proc, doc = lab.run(tmp_path / "gang.json", 3, "--only", "net.port_reach", "--probe", "--timeout", "150",
                        timeout=240)
    gang = results_by(doc, "cluster.collective_gang")["cluster"]
    assert gang["status"] == "pass", (gang, proc.stderr)
    assert gang["summary"].startswith("3-node gang:")
    assert doc["cluster"]["probe"]["strategy"] == "STRICT_SPREAD" and doc["cluster"]["probe"]["nodes"] == 3
    assert doc["cluster"]["probe"]["master_addr"] == lab.ip
    # the head's temporary listener ran for the port-reach wave, on MASTER_PORT, and was stopped
    listener = doc["cluster"]["listener"]
    assert listener["ok"] is True and listener["port"] == lab.port and "token" not in listener
    assert proc.returncode == 0, proc.stdout + proc.stderr
