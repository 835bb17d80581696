"""`run --all-nodes` on a machine with no Ray running: an embedded local Ray, said so, green; and an
unreachable --ray-address: an ERROR row, quickly, not a hang."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.slow]


def _env(ray_tmp: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RAY_", "MASTER_", "NCCL_", "DSV3_PREFLIGHT")) and k not in ("NNODES", "NODE_RANK", "WORLD_SIZE")}
    # a private Ray temp dir: `auto` cannot find anybody else's cluster on this shared machine
    env.update({"RAY_TMPDIR": ray_tmp, "RAY_DISABLE_USAGE_STATS": "1"})
    return env


def _other_ray_running() -> bool:
    # `auto` finds a cluster through /tmp/ray and by scanning this host's processes for gcs_server
    return bool(subprocess.run(["pgrep", "-f", "gcs_server"], capture_output=True, text=True, timeout=10).stdout.split())


@pytest.mark.parametrize("address", ["auto", "local"])
def test_no_ray_running_starts_an_embedded_local_ray_says_so_and_is_green(tmp_path: Path, address: str):
    if address == "auto" and _other_ray_running():
        pytest.skip("another Ray cluster runs on this shared machine; `auto` would rightly connect to it")
    ray_tmp = tempfile.mkdtemp(prefix="d3e", dir="/tmp")
    out = tmp_path / "embedded.json"
    proc = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--all-nodes", "--profile", "cpu",
                           "--ray-address", address,
                           "--only", "env.*,host.*,net.*,cluster.*", "--json", str(out), "--no-report", "--no-color"],
                          env=_env(ray_tmp), cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "started an embedded local Ray for this machine only" in proc.stderr
    doc = json.loads(out.read_text())
    assert doc["cluster"]["embedded"] is True and doc["verdict"] == "GO"
    assert [n["node_rank"] for n in doc["nodes"]] == [0] and doc["nodes"][0]["state"] == "ok"
    count = next(r for r in doc["results"] if r["name"] == "cluster.node_count")
    assert count["status"] == "pass"
    # the embedded Ray stopped with the command: nothing of it is left running under our temp dir
    time.sleep(1)
    left = subprocess.run(["pgrep", "-f", ray_tmp], capture_output=True, text=True, timeout=10).stdout.split()
    assert not left, f"embedded Ray processes still running: {left}"


def test_unreachable_ray_address_is_an_error_row_within_seconds(tmp_path: Path):
    ray_tmp = tempfile.mkdtemp(prefix="d3e", dir="/tmp")
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
