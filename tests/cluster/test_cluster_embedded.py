"""`run --all-nodes` on a machine with no Ray running: an embedded local Ray on 127.0.0.1, said so, green; and
an unreachable --ray-address: an ERROR row, quickly, not a hang.

Every test has its own Ray temp dir and HOME (should Ray write ~/.ray/auth_token, it lands there: a token left in
the real HOME turns on token authentication for every later `ray start` on the machine), both removed afterwards."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from harness_env import env_without
from ports import free_port

pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _env(ray_tmp: str) -> dict[str, str]:
    env = env_without(("RAY_", "MASTER_", "NCCL_", "DSV3_PREFLIGHT"), ("NNODES", "NODE_RANK", "WORLD_SIZE"))
    # a private Ray temp dir: `auto` cannot find anybody else's cluster on this shared machine; a private HOME:
    # no ~/.ray/auth_token of another run turns token authentication on
    home = os.path.join(ray_tmp, "home")
    os.makedirs(home, exist_ok=True)
    # no RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER: the embedded Ray must keep to 127.0.0.1 by itself
    env.update({"RAY_TMPDIR": ray_tmp, "RAY_DISABLE_USAGE_STATS": "1", "HOME": home})
    # a free MASTER_PORT of its own: these runs use this host's namespace, where another test (on the other
    # xdist worker) may hold the default 39500 at that moment, and net.port_free would rightly say so
    env["MASTER_PORT"] = str(free_port())
    return env


@pytest.fixture
def ray_tmp():
    """A Ray temp dir (and HOME) for one test, removed with everything in it."""
    path = tempfile.mkdtemp(prefix="d3ray-emb-", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _gcs_servers(port: str) -> list[str]:
    """The PIDs of GCS servers on ``port`` (the embedded Ray's), by their command line."""
    found = subprocess.run(["pgrep", "-af", "gcs_server"], capture_output=True, text=True, timeout=10).stdout.splitlines()
    return [line.split()[0] for line in found if f"--gcs_server_port={port}" in line]


def _other_ray_running(grace: float = 30.0) -> str:
    """`auto` finds a cluster through /tmp/ray and by scanning this host's processes for gcs_server. Ray
    tests run one at a time (conftest's xdist group), but the previous one's Ray may still be exiting:
    give it `grace` seconds before calling it somebody else's cluster. Returns what was found ("pid command",
    for the skip's reason: a CI run skipped once here and did not say whose Ray it saw), "" for none."""
    deadline = time.monotonic() + grace
    while True:
        found = subprocess.run(["pgrep", "-a", "-f", "gcs_server"], capture_output=True, text=True, timeout=10).stdout
        if not found.strip() or time.monotonic() > deadline:
            return found.strip()[:300]
        time.sleep(0.5)


def test_local_starts_an_embedded_ray_on_loopback_says_so_and_is_green(tmp_path: Path, ray_tmp):
    # `auto` with no cluster takes the same path: test_a_dead_clusters_leftover_address_file_does_not_block_auto
    address = "local"
    out = tmp_path / "embedded.json"
    proc = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--all-nodes", "--profile", "cpu",
                           "--ray-address", address,
                           "--only", "env.*,host.*,net.*,cluster.*", "--json", str(out), "--no-report", "--no-color"],
                          env=_env(ray_tmp), cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "started an embedded local Ray for this machine only" in proc.stderr
    doc = json.loads(out.read_text())
    assert doc["cluster"]["embedded"] is True and doc["verdict"] == "GO"
    gcs = doc["cluster"]["ray"]["gcs_address"]
    assert gcs.startswith("127.0.0.1:")  # for this machine only: never on the host's own interface address
    assert [n["node_rank"] for n in doc["nodes"]] == [0] and doc["nodes"][0]["state"] == "ok"
    count = next(r for r in doc["results"] if r["name"] == "cluster.node_count")
    assert count["status"] == "pass"
    # the embedded Ray stopped with the command: no GCS of it is left running
    deadline = time.monotonic() + 20
    while _gcs_servers(gcs.rsplit(":", 1)[1]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _gcs_servers(gcs.rsplit(":", 1)[1]) == [], "the embedded Ray is still running"


def test_unreachable_ray_address_is_an_error_row_within_seconds(tmp_path: Path, ray_tmp):
    out = tmp_path / "unreachable.json"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--all-nodes", "--ray-address", "127.0.0.1:1",
                           "--profile", "cpu", "--json", str(out), "--no-report", "--no-color"],
                          env=_env(ray_tmp), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert time.monotonic() - started < 30
    assert proc.returncode == 1, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    row = next(r for r in doc["results"] if r["name"] == "cluster.connect")
    assert row["status"] == "error" and "cannot reach the Ray cluster at 127.0.0.1:1" in row["summary"]


def test_a_dead_clusters_leftover_address_file_does_not_block_auto(tmp_path: Path, ray_tmp):
    """A Ray head killed without `ray stop` leaves ray_current_cluster behind; `auto` must not wait on
    that dead address (it did, for the whole connect timeout, then gave up without the embedded Ray)."""
    if other := _other_ray_running():
        pytest.skip(f"another Ray cluster runs on this shared machine; `auto` would rightly connect to it: {other}")
    os.makedirs(os.path.join(ray_tmp, "ray"))
    import socket

    with socket.socket() as s:  # a port nobody listens on: the dead head's
        s.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{s.getsockname()[1]}"
    Path(ray_tmp, "ray", "ray_current_cluster").write_text(dead)
    out = tmp_path / "stale.json"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--all-nodes", "--profile", "cpu",
                           "--only", "env.*,cluster.*", "--json", str(out), "--no-report", "--no-color", "--timeout", "120"],
                          env=_env(ray_tmp), cwd=tmp_path, capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"no Ray cluster found (auto: {dead}, the last `ray start`'s address, does not answer" in proc.stderr
    assert json.loads(out.read_text())["cluster"]["embedded"] is True
    assert time.monotonic() - started < 60


def test_a_cluster_with_token_auth_says_to_export_ray_auth_mode(tmp_path: Path, ray_tmp):
    """Ray sends no token to an explicit address unless RAY_AUTH_MODE=token: the row says so, at once,
    instead of 'Failed to connect' after twenty seconds of gcs_client retries."""
    head_home = os.path.join(ray_tmp, "head-home")  # the token Ray generates goes here, not to the real HOME
    os.makedirs(head_home)
    head = subprocess.Popen(
        [sys.executable, "-c", "import ray, sys, time; ctx = ray.init(include_dashboard=False, num_cpus=1, "
         "object_store_memory=80 * 2**20, _node_ip_address='127.0.0.1'); print(ctx.address_info['gcs_address'], "
         "flush=True); time.sleep(600)"],
        env={**_env(ray_tmp), "RAY_AUTH_MODE": "token", "HOME": head_home, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        address = head.stdout.readline().strip()
        assert address, "the token-auth Ray did not start"
        out = tmp_path / "auth.json"
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--all-nodes", "--ray-address", address,
                               "--profile", "cpu", "--json", str(out), "--no-report", "--no-color"],
                              env=_env(ray_tmp), cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert time.monotonic() - started < 15
        assert proc.returncode == 1, proc.stdout + proc.stderr
        row = next(r for r in json.loads(out.read_text())["results"] if r["name"] == "cluster.connect")
        assert row["status"] == "error" and "requires token authentication" in row["summary"]
        assert "export RAY_AUTH_MODE=token" in row["summary"] and row["remediation"].startswith("export RAY_AUTH_MODE=token")
    finally:
        from netns_lab import stop_group

        stop_group(head, grace=20.0)


def test_launch_all_nodes_against_a_silent_address_is_one_bounded_connect_error(tmp_path: Path, ray_tmp):
    """`launch --all-nodes` connects once, within --timeout's share: it used to wait a fixed 60 s, then
    let the preflight connect again (a second wait, or an internal error from the first ray.init still
    running in the background)."""
    import socket

    out = tmp_path / "silent.json"
    with socket.socket() as silent:  # accepts the TCP connection, never speaks gRPC
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "dsv3_preflight", "launch", "--all-nodes", "--ray-address", address,
                               "--profile", "cpu", "--timeout", "12", "--json", str(out), "--no-report", "--no-color",
                               "--", "train.py"],
                              env=_env(ray_tmp), cwd=tmp_path, capture_output=True, text=True, timeout=180)
        elapsed = time.monotonic() - started
    assert proc.returncode == 1, proc.stdout + proc.stderr[-3000:]
    assert elapsed < 22, f"took {elapsed:.0f} s"
    rows = [r for r in json.loads(out.read_text())["results"] if r["name"] == "cluster.connect"]
    assert len(rows) == 1 and rows[0]["status"] == "error"
    assert proc.stderr.strip().splitlines()[-1].startswith("dsv3-preflight launch: NO-GO (1 ERROR): torchrun not started")


def test_readme_command_1_runs_the_suite_on_an_embedded_ray_that_listens_on_loopback_only(tmp_path: Path, ray_tmp):
    """`bash scripts/preflight.sh` as the README says (its .venv exists here: CI made it), with a reports dir of
    the test's: GO, an embedded Ray on 127.0.0.1 (not on this host's interfaces), nothing left running."""
    repo = Path(__file__).resolve().parents[2]
    env = _env(ray_tmp)
    proc = subprocess.run(["bash", str(repo / "scripts" / "preflight.sh"), "--profile=cpu", "--reports-dir", str(tmp_path),
                           "--no-color", "-q"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "2/2 running: dsv3-preflight run --all-nodes --ray-address local --profile=cpu" in proc.stderr
    doc = json.loads(next(tmp_path.glob("preflight-*-cluster.json")).read_text())
    assert doc["verdict"] == "GO" and doc["cluster"]["embedded"] is True
    gcs = doc["cluster"]["ray"]["gcs_address"]
    assert gcs.startswith("127.0.0.1:"), gcs
    deadline = time.monotonic() + 20
    while _gcs_servers(gcs.rsplit(":", 1)[1]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _gcs_servers(gcs.rsplit(":", 1)[1]) == []


_LISTENERS = r"""
import json, sys, psutil
from dsv3_preflight.cluster.connect import connect, disconnect
info = connect("auto", timeout=90, runtime_env={})
try:
    pids = {p.pid for p in psutil.Process().children(recursive=True)}
    listening = sorted({(c.laddr.ip, p) for p in pids for c in psutil.Process(p).net_connections("inet")
                        if c.status == psutil.CONN_LISTEN} if pids else set())
    print(json.dumps({"embedded": info.embedded, "gcs": info.gcs_address, "processes": len(pids),
                      "listening": [ip for ip, _ in listening]}))
finally:
    disconnect(info)
import os
print(json.dumps({"left_in_env": sorted(k for k in os.environ if k.startswith("RAY_AUTH"))}))
"""


def test_the_embedded_ray_listens_on_loopback_only(ray_tmp):
    """`auto` with no cluster starts the embedded Ray, with no Ray setting in the environment: every socket its
    GCS, raylet, agents and workers listen on is a loopback one (on Linux Ray listens on every interface unless
    it is started as a one-machine Ray)."""
    if other := _other_ray_running():
        pytest.skip(f"another Ray cluster runs on this shared machine; `auto` would rightly connect to it: {other}")
    env = _env(ray_tmp)
    assert not any(k.startswith("RAY_ENABLE") for k in env)
    proc = subprocess.run([sys.executable, "-c", _LISTENERS], env=env, cwd=ray_tmp, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-2])
    assert got["embedded"] is True and got["gcs"].startswith("127.0.0.1:"), got
    assert got["processes"] >= 2 and len(got["listening"]) >= 3, got   # GCS, raylet, agents at least
    assert all(ip in ("127.0.0.1", "::ffff:127.0.0.1") for ip in got["listening"]), got
    # its token lived in the environment: nothing written to HOME (a ~/.ray/auth_token would turn token
    # authentication on for every later `ray start` here), and nothing of it left in the environment afterwards
    assert not (Path(env["HOME"]) / ".ray").exists()
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"left_in_env": []}


def test_the_users_own_ray_token_is_used_as_it_is(ray_tmp):
    if other := _other_ray_running():
        pytest.skip(f"another Ray cluster runs on this shared machine; `auto` would rightly connect to it: {other}")
    env = _env(ray_tmp)
    token = Path(env["HOME"]) / ".ray" / "auth_token"
    token.parent.mkdir()
    token.write_text("0123456789abcdef" * 4)
    proc = subprocess.run([sys.executable, "-c", _LISTENERS], env=env, cwd=ray_tmp, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-2])["embedded"] is True
    assert token.read_text() == "0123456789abcdef" * 4 and [p.name for p in token.parent.iterdir()] == ["auth_token"]
