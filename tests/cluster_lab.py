"""Fixture helpers for the cluster tests: a real Ray cluster on this machine, and the CLI against it.

Isolation: RAY_TMPDIR points at a private directory so the cluster's address file and sessions do
not meet other engineers' Ray; every Ray process is stopped by the Cluster object (by PID) or by
killing the process group of a `ray start --block` we spawned; nothing calls `ray stop`.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SITE_CHECKS = Path(__file__).resolve().parent / "data" / "cluster" / "site_checks"
OBJECT_STORE = 80 * 1024 * 1024
#: checks cheap enough to run on three co-hosted nodes on two cores; net.port_free is left out because
#: co-hosted nodes bind the same port concurrently (one host, three "nodes").
ONLY = "env.*,host.*,net.nic_route,net.mtu,cluster.*,gpu.versions"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def interface_of(ip: str) -> str:
    """The interface carrying ``ip`` on this machine (the nodes' NCCL/Gloo interface)."""
    import psutil

    for name, addrs in psutil.net_if_addrs().items():
        if any(a.address == ip for a in addrs):
            return name
    return "lo"


@dataclass
class Lab:
    cluster: Any
    ip: str
    port: int
    tmpdir: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return self.cluster.address

    def node_env(self, name: str, **more: str) -> dict[str, str]:
        iface = interface_of(self.ip)
        return {"DSV3_PREFLIGHT_NODE_NAME": name, "MASTER_ADDR": self.ip, "MASTER_PORT": str(self.port),
                "OMP_NUM_THREADS": "2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "NCCL_SOCKET_TIMEOUT": "600",
                "NCCL_SOCKET_IFNAME": iface, "GLOO_SOCKET_IFNAME": iface, **more}

    def add_node(self, name: str, **env: str):
        return self.cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE, env_vars=self.node_env(name, **env))

    def alive(self) -> int:
        return sum(1 for n in self.cluster.global_state.node_table() if n.get("Alive", n.get("alive")))

    def wait_alive(self, count: int, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.alive() == count:
                return
            time.sleep(0.5)
        raise AssertionError(f"{self.alive()} nodes alive, expected {count}")

    def cli_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "NNODES", "NODE_RANK", "WORLD_SIZE")}
        env.update({"RAY_TMPDIR": self.tmpdir, "RAY_DISABLE_USAGE_STATS": "1", "MASTER_ADDR": self.ip,
                    "MASTER_PORT": str(self.port), "PYTHONPATH": str(REPO)})
        return env

    def argv(self, out: Path, nnodes: int, *extra: str) -> list[str]:
        return [sys.executable, "-m", "dsv3_preflight", "run", "--all-nodes", "--ray-address", self.address,
                "--profile", "cpu", "--nnodes", str(nnodes), "--only", ONLY, "--json", str(out), "--no-report",
                "--no-color", *extra]

    def run(self, out: Path, nnodes: int, *extra: str, timeout: float = 180.0,
            env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, dict]:
        # cwd is not the repo: a Ray worker may add the driver's cwd to sys.path (that would hide a missing package)
        proc = subprocess.run(self.argv(out, nnodes, *extra), env={**self.cli_env(), **(env or {})}, cwd=out.parent, capture_output=True,
                              text=True, timeout=timeout)
        doc = json.loads(out.read_text()) if out.exists() else {}
        return proc, doc


def start_cluster(names: list[str]) -> Lab:
    tmpdir = tempfile.mkdtemp(prefix="d3c", dir="/tmp")
    os.environ["RAY_TMPDIR"] = tmpdir
    os.environ["RAY_DISABLE_USAGE_STATS"] = "1"
    os.environ.pop("RAY_ADDRESS", None)
    from ray._private.services import get_node_ip_address
    from ray.cluster_utils import Cluster

    ip = get_node_ip_address()
    port = free_port()
    lab = Lab(None, ip, port, tmpdir)
    lab.cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": OBJECT_STORE, "include_dashboard": False,
        "env_vars": lab.node_env(names[0])})
    for name in names[1:]:
        lab.add_node(name)
    lab.wait_alive(len(names))
    return lab


def stop_process_group(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    """Stop a process we started in its own session, and everything in that session, by its group id."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=timeout)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def results_by(doc: dict, name: str) -> dict[str, dict]:
    return {r["node"]: r for r in doc.get("results", []) if r["name"] == name}


def nodes_by_name(doc: dict) -> dict[str, dict]:
    return {n["node"]: n for n in doc.get("nodes", [])}


def by_node_id(doc: dict, node_id: str) -> dict:
    return next(n for n in doc.get("nodes", []) if n.get("identity", {}).get("ray", {}).get("node_id") == node_id)


def assert_schema_valid(doc: dict) -> None:
    """The document (with missing/error node entries and the cluster section) matches the result schema."""
    import jsonschema

    from dsv3_preflight.document import load_schema

    jsonschema.validate(doc, load_schema())
