"""Nodes that die, hang or lack the package during `run --all-nodes`, on real Ray nodes in network namespaces
(tests/cluster_lab.py's RayLab). A raylet is killed by PID at several moments (issue 19.3): during the node
checks, after its checks but before the port-reach wave, during that wave, and during the collective gang.

Each time the node is an ERROR under its own name (DSV3_PREFLIGHT_NODE_NAME, although all three share one
host name) with the moment it was lost and `ray logs` for it; the wait ends when Ray reports the node dead,
not at a timeout; the other nodes' results stay; and the death is the `node_states` fact the cluster checks
see. The lab's GCS marks a silent raylet dead after about 3 s; Ray's default is about 15 s.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")
from cluster_lab import (  # noqa: E402
    ONLY,
    SITE_CHECKS,
    RayLab,
    assert_schema_valid,
    close_shared,
    nodes_by_name,
    results_by,
    shared_lab,
    wait_for,
)
from paste_lint import paste_problems  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.netns, pytest.mark.ray, pytest.mark.shared_ray_lab]
ALL = ["lab-node0", "lab-node1", "lab-node2"]
HOOKS = ("--checks-dir", str(SITE_CHECKS), "--only", ONLY + ",testhook.*")
SLEEP_S = 90  # what a misbehaving node sleeps: a run that waited for it would take this long


@pytest.fixture(scope="module")
def lab(request) -> RayLab:
    """The lab test_cluster_netns.py started (or a new one), closed after this module: no Ray of ours stays up
    while other modules run (Ray's `auto` would find its GCS among this machine's processes)."""
    yield shared_lab(request.config)
    close_shared()


@pytest.fixture
def victim(lab):
    """lab-node2, to be killed; afterwards it is started again (same environment) and the controls are cleared."""
    node_id = lab.node_id("lab-node2")
    yield node_id
    lab.clear_controls()
    lab.restart_node("lab-node2")
    lab.wait_alive(ALL)


def _lost(doc: dict, name: str = "lab-node2") -> tuple[dict, dict, dict]:
    """(its node entry, its cluster.node_run row, its node_states entry)."""
    return (nodes_by_name(doc)[name], results_by(doc, "cluster.node_run")[name], doc["cluster"]["node_states"][name])


def _assert_lost_well(doc: dict, node_id: str, phase: str) -> None:
    entry, row, state = _lost(doc)
    assert socket.gethostname() not in entry["node"]  # its own name, not the host name the three nodes share
    assert entry["state"] == "error" and doc["cluster"]["failed_nodes"]["lab-node2"] == "died"
    assert row["status"] == "error" and row["actor"] == "node" and row["evidence"]["phase"] == phase
    assert row["summary"].startswith(f"lab-node2 was lost {phase}, ") and "s into the run (" in row["summary"]
    assert row["remediation"].splitlines()[0] == f"ray logs raylet.out --node-id {node_id} --tail 100   # on the head: " \
                                                 "Ray's log of lab-node2 (10.77.0.12)"
    assert "ray start --address=10.77.0.10:6390   # on lab-node2" in row["remediation"]
    assert paste_problems(row["remediation"]) == []
    assert state == {**state, "state": "dead", "phase": phase, "node_id": node_id}
    assert {n: s["state"] for n, s in doc["cluster"]["node_states"].items() if n != "lab-node2"} == \
        {"lab-node0": "alive", "lab-node1": "alive"}
    assert all(nodes_by_name(doc)[n]["state"] == "ok" for n in ("lab-node0", "lab-node1"))
    count = results_by(doc, "cluster.node_count")["cluster"]
    assert count["status"] == "fail" and f"lab-node2 {phase}" in count["summary"]
    assert_schema_valid(doc)


def test_a_raylet_killed_during_the_node_checks_ends_the_wait_at_once_and_is_an_error_under_its_name(lab, victim, tmp_path):
    lab.control("lab-node2", slow_s=SLEEP_S)
    run = lab.popen(tmp_path / "killed.json", *HOOKS, "--timeout", "150")
    wait_for(lambda: lab.marker("lab-node2", "checks").exists(), 120, "lab-node2's checks to start")
    killed = time.monotonic()
    lab.kill_raylet("lab-node2")
    code, doc = run.finish(timeout=150)
    assert time.monotonic() - killed < 45, run.err  # not the 90 s the node's probe sleeps, nor the run's 150 s
    assert code == 1, run.err
    _assert_lost_well(doc, victim, "during its node checks")
    slow = results_by(doc, "testhook.slow_probe")
    assert {n: slow[n]["status"] for n in ("lab-node0", "lab-node1")} == {"lab-node0": "pass", "lab-node1": "pass"}


def test_a_raylet_killed_after_its_checks_before_the_reach_wave_makes_the_node_an_error(lab, victim, tmp_path):
    # issue 19.3: the node stayed `state: "ok"` with no remediation, and failed_nodes was empty
    lab.control("lab-node0", slow_s=12)  # the head is still at its checks when lab-node2 is done with its own
    run = lab.popen(tmp_path / "between.json", *HOOKS, "--timeout", "150")
    while "lab-node2 (" not in run.wait_line("checks done", 120):   # its checks done (its start line names it too now
        pass                                                          # that each lab node has a host name of its own)
    lab.kill_raylet("lab-node2")
    code, doc = run.finish(timeout=150)
    assert code == 1, run.err
    _assert_lost_well(doc, victim, "after its node checks, before the port-reach wave")
    assert results_by(doc, "env.launch_vars")["lab-node2"]["status"] == "pass"  # what it did before stays
    assert results_by(doc, "net.port_reach")["lab-node1"]["status"] == "pass"


def test_a_raylet_killed_during_the_reach_wave_keeps_the_other_workers_results(lab, victim, tmp_path):
    lab.control("lab-node2", reach_slow_s=SLEEP_S)
    run = lab.popen(tmp_path / "reach.json", *HOOKS, "--timeout", "150")
    wait_for(lambda: lab.marker("lab-node2", "reach").exists(), 120, "lab-node2's port-reach wave to start")
    killed = time.monotonic()
    lab.kill_raylet("lab-node2")
    code, doc = run.finish(timeout=150)
    assert time.monotonic() - killed < 45, run.err
    assert code == 1, run.err
    _assert_lost_well(doc, victim, "during the port-reach wave")
    assert results_by(doc, "net.port_reach")["lab-node1"]["status"] == "pass"
    assert "testhook.slow_reach" not in {r["name"] for r in doc["results"] if r["node"] == "lab-node2"}


def _collective_worker_in(lab: RayLab, ns: int) -> bool:
    pids = subprocess.run(["ip", "netns", "pids", lab.net.ns(ns)], capture_output=True, text=True, timeout=10).stdout.split()
    for pid in pids:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "dsv3_preflight.collective" in cmdline:
            return True
    return False


def test_a_raylet_killed_during_the_gang_ends_it_and_the_collective_does_not_blame_the_network(lab, victim, tmp_path):
    run = lab.popen(tmp_path / "gang.json", "--only", "net.port_reach,cluster.node_count", "--probe", "--timeout", "150")
    wait_for(lambda: _collective_worker_in(lab, 2), 120, "lab-node2's rank of the gang", step=0.2)
    killed = time.monotonic()
    lab.kill_raylet("lab-node2")
    code, doc = run.finish(timeout=150)
    assert time.monotonic() - killed < 30, run.err  # the gang's own timeout is 60 s
    assert code == 1, run.err
    _assert_lost_well(doc, victim, "during the collective gang (--probe)")
    gang = results_by(doc, "dist.allreduce_cluster")["cluster"]
    assert gang["status"] in ("error", "skip", "fail") and gang["actor"] != "network", gang
    assert results_by(doc, "net.port_reach")["lab-node1"]["status"] == "pass"
    wait_for(lambda: not any(_collective_worker_in(lab, n) for n in (0, 1)), 20, "the gang's ranks to end")


def test_a_hung_node_is_an_error_and_the_others_are_reported_within_the_timeout(lab, tmp_path):
    lab.control("lab-node1", hang_on_load=True)
    try:
        started = time.monotonic()
        proc, doc = lab.run(tmp_path / "hung.json", "--checks-dir", str(SITE_CHECKS), "--only", "testhook.slow_probe,env.*",
                            "--timeout", "15", timeout=120)
        wall = time.monotonic() - started
    finally:
        lab.clear_controls()
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert wall < 15 + 20, wall  # the timeout plus connecting and Ray's shutdown, never a hang
    hung = nodes_by_name(doc)["lab-node1"]  # named by what it said when its task started: it never answered
    assert hung["state"] == "error" and "no answer within the overall timeout" in hung["error"]
    row = results_by(doc, "cluster.node_run")["lab-node1"]
    assert row["evidence"]["kind"] == "timeout" and paste_problems(row["remediation"]) == []
    assert doc["cluster"]["node_states"]["lab-node1"]["state"] == "alive"  # hung, not dead: Ray still has it
    slow = results_by(doc, "testhook.slow_probe")
    assert slow["lab-node0"]["status"] == "pass" and slow["lab-node2"]["status"] == "pass"
    assert_schema_valid(doc)


def _bare_venv(path: Path) -> Path:
    """A Python environment with Ray but without dsv3-preflight: the .venv's site-packages added as a
    plain path (its .pth files, among them the editable install of dsv3-preflight, are not processed)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120)
    site = next(path.glob("lib/python3*/site-packages"))
    import ray as _ray

    (site / "ray_only.pth").write_text(str(Path(_ray.__file__).resolve().parent.parent) + "\n")
    python = path / "bin" / "python"
    probe = subprocess.run([str(python), "-c", "import ray, importlib.util as u; print(u.find_spec('dsv3_preflight'))"],
                           capture_output=True, text=True, timeout=120, cwd="/", env={"PATH": os.environ.get("PATH", "")})
    assert probe.stdout.strip() == "None", probe.stdout + probe.stderr
    return python


def test_a_node_without_the_package_is_reported_for_that_node_and_shipping_it_helps(lab, tmp_path):
    python = _bare_venv(tmp_path / "bare")
    env = {**lab.job_env(3, "bare"), "PYTHONPATH": ""}
    lab.start_node(2, "bare", env, python=str(python))  # a fourth raylet, beside lab-node2
    try:
        lab.wait_alive([*ALL, "bare"])
        proc, doc = lab.run(tmp_path / "bare.json", "--only", "env.*", nnodes=4)
        shipped, shipped_doc = lab.run(tmp_path / "shipped.json", "--only", "env.*", nnodes=4,
                                       env={"DSV3_PREFLIGHT_SHIP_PACKAGE": "1"})
    finally:
        lab.stop_node("bare")
        lab.wait_alive(ALL)
    assert proc.returncode == 1
    bare = nodes_by_name(doc)["bare"]
    assert bare["state"] == "error" and "dsv3-preflight is not importable" in bare["error"] and str(python) in bare["error"]
    err = results_by(doc, "cluster.node_run")["bare"]
    assert err["evidence"]["kind"] == "package_missing" and "DSV3_PREFLIGHT_SHIP_PACKAGE=1" in err["remediation"]
    assert paste_problems(err["remediation"]) == []
    assert all(nodes_by_name(doc)[n]["state"] == "ok" for n in ALL)
    assert shipped.returncode == 0, shipped.stdout[-2000:] + shipped.stderr[-3000:]
    assert nodes_by_name(shipped_doc)["bare"]["identity"]["python"] == str(python)
    assert results_by(shipped_doc, "env.launch_vars")["bare"]["status"] == "pass"
