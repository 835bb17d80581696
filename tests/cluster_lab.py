"""Real Ray nodes in network namespaces, for the cluster tests: the quick start's path on one machine.

``RayLab`` builds ``tests/netns_lab.NetnsLab`` (three namespaced nodes on a bridge, addresses
10.77.0.10-12, names lab-node0..2 in each namespace's own /etc/hosts) and starts Ray in it the way
docs/cluster.md says: the job's environment exported before `ray start` (MASTER_ADDR, MASTER_PORT,
NNODES, NODE_RANK, CUDA_DEVICE_ORDER, OMP_NUM_THREADS, DSV3_PREFLIGHT_NODE_NAME), `ray start --head`
in node 0 on a non-default GCS port, `ray start --address` in the others (without the log monitor: ``LEAN_NODE``), each on its namespace's
address and in a UTS namespace of its own whose host name is the node's name (``set_hostname`` renames it). More nodes can share a namespace (a second raylet on the same address, named apart).

Isolation and cleanup (issue 16.10): Ray listens only on the namespaces' addresses; each node and each
CLI run has its own RAY_TMPDIR under one temp dir (prefix ``d3ray-``) removed at close; every process
is stopped by PID or by its process group, then whatever is left in the lab's namespaces is killed
and the namespaces are deleted. Nothing calls `ray stop`.

Nodes misbehave through files in ``control_dir`` read by the test plugin
(tests/data/cluster/site_checks/cluster_test_hooks.py), so a test changes one node's behaviour
without restarting it: ``lab.control("lab-node2", slow_s=60)``.

The lab's GCS marks a lost node dead after about 3 s (RAY_health_check_* on the head); Ray's
defaults take about 15 s, the same path only slower.
"""
from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netns_lab import NETNS_ETC, LabUnavailable, NetnsLab, stop_group, unavailable_reason  # noqa: F401 - re-exported

REPO = Path(__file__).resolve().parent.parent
SITE_CHECKS = Path(__file__).resolve().parent / "data" / "cluster" / "site_checks"
GCS_PORT = 6390            # not Ray's default 6379: every fix must name the real address (issue 19.4)
MASTER_PORT = 39500        # inside the lab's own namespaces: no other run shares it
OBJECT_STORE = str(80 * 1024 * 1024)
TMP_PREFIX = "d3ray-"
#: the lab's GCS gives up on a silent raylet after 3 missed health checks, one a second
FAST_HEALTH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "1000",
               "RAY_health_check_failure_threshold": "3", "RAY_health_check_initial_delay_ms": "1000"}
#: what the lab's `ray start` adds to docs/cluster.md's: no log monitor. It only streams the workers' log files to
#: drivers that ask for them (``log_to_driver``), which neither the preflight nor the examples do (both connect with
#: log_to_driver=False), and it cost 1.3 CPU-s per node over a lab's life (22-25 lab nodes per suite run)
LEAN_NODE = ("--include-log-monitor=false",)
#: and on the head: no worker started ahead for the first driver, which in a lab is a probe that runs no task (the
#: controller below, pairs_lab's node count); a job's tasks start their workers when they come (1.1 CPU-s per lab)
LEAN_HEAD = {"RAY_prestart_worker_first_driver": "0"}
#: checks cheap enough for three raylets on two cores (no GPU, no collective probe unless a test asks)
ONLY = "env.*,host.*,net.nic_route,net.mtu,net.port_reach,cluster.*"
#: the command the quick start types: the console script of this environment
CLI = os.path.join(os.path.dirname(sys.executable), "dsv3-preflight")


def ray_cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from ray.scripts.scripts import main; main()", *args]


@dataclass
class RayNode:
    """One `ray start --block` the lab runs: its namespace, name, environment and process."""

    ns: int
    name: str
    env: dict[str, str]
    tmp: str
    proc: subprocess.Popen | None = None
    node_id: str | None = None
    output: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None


class RayLab:
    """Three namespaced Ray nodes (a context manager); see the module docstring."""

    def __init__(self, nodes: int = 3, *, master_addr: str = "lab-node0", node_tmpdir: bool = False) -> None:
        """``node_tmpdir``: each node gets its own TMPDIR inside the lab's temp dir (removed at close), for labs that
        start torchrun, which leaves a ``$TMPDIR/torchelastic_*`` dir behind when it gets no --log-dir."""
        self.net = NetnsLab(nodes)
        self.node_tmpdir = node_tmpdir
        self.count = nodes
        self.master_addr = master_addr
        self.tmp = tempfile.mkdtemp(prefix=TMP_PREFIX, dir="/tmp")
        self.control_dir = os.path.join(self.tmp, "control")
        os.makedirs(self.control_dir)
        self.nodes: dict[str, RayNode] = {}
        self._ctl: subprocess.Popen | None = None
        self._ctl_lock = threading.Lock()
        self._runs = 0

    # -- names, addresses, environments ----------------------------------------------------------
    @property
    def gcs(self) -> str:
        return f"{self.net.addr(0)}:{GCS_PORT}"

    def addr(self, ns: int) -> str:
        return self.net.addr(ns)

    def job_env(self, rank: int, name: str, **more: str) -> dict[str, str]:
        """What docs/cluster.md exports before `ray start` on node ``rank``, plus the lab's own settings."""
        if self.node_tmpdir:
            tmpdir = os.path.join(self.tmp, f"tmpdir-{name}")
            os.makedirs(tmpdir, exist_ok=True)
            more = {"TMPDIR": tmpdir, **more}
        return {"MASTER_ADDR": self.master_addr, "MASTER_PORT": str(MASTER_PORT), "NNODES": str(self.count),
                "NODE_RANK": str(rank), "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "OMP_NUM_THREADS": "2",
                "DSV3_PREFLIGHT_NODE_NAME": name, "DSV3_TEST_CONTROL": self.control_dir,
                "DSV3_PREFLIGHT_REACH_TIMEOUT": "3", "RAY_AUTH_MODE": "disabled", "RAY_DISABLE_USAGE_STATS": "1",
                "PYTHONPATH": str(REPO), **more}

    def hosts(self, ns: int) -> Path:
        """This namespace's /etc/hosts (`ip netns exec` bind-mounts it over /etc/hosts in there)."""
        return Path(NETNS_ETC) / self.net.ns(ns) / "hosts"

    # -- start and stop ----------------------------------------------------------------------------
    def __enter__(self) -> RayLab:
        self.net.start()
        _LIVE.add(self)
        try:
            for n in range(self.count):  # each node's host name resolves to its own address, as on a configured node
                with self.hosts(n).open("a") as fh:
                    fh.write(f"{self.addr(n)} {socket.gethostname()}\n")
            for n in range(self.count):
                self.start_node(n, f"lab-node{n}", self.job_env(n, f"lab-node{n}"))
            self.wait_alive([f"lab-node{n}" for n in range(self.count)])
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def start_node(self, ns: int, name: str, env: dict[str, str], python: str | None = None,
                   hostname: str | None = None) -> RayNode:
        """`ray start` (head in namespace 0 the first time, else joining the head) for one more node, in a UTS
        namespace of its own whose host name is ``hostname`` (default: the node's name)."""
        tmp = os.path.join(self.tmp, f"{name}-{len(self.nodes)}-{time.monotonic_ns() % 10**6}")
        env = {**env, "RAY_TMPDIR": tmp}
        common = ["--node-ip-address", self.addr(ns), "--num-cpus", "1", "--object-store-memory", OBJECT_STORE,
                  *LEAN_NODE, "--disable-usage-stats", "--block"]
        head = not self.nodes
        if head:
            argv = ray_cli("start", "--head", "--port", str(GCS_PORT), "--include-dashboard=false", *common)
            env.update(FAST_HEALTH, **LEAN_HEAD)
        else:
            argv = ray_cli("start", "--address", self.gcs, *common)
        if python:
            argv[0] = python
        node = RayNode(ns, name, env, tmp)
        node.proc = self.net.popen(ns, self.node_argv(argv, hostname or name), env=env, stderr=subprocess.STDOUT, cwd="/")
        self.nodes[name] = node
        self._wait_started(node)
        if head:
            self._start_controller()
        return node

    def node_argv(self, argv: list[str], hostname: str) -> list[str]:
        """``ray start``'s argv wrapped in what makes the namespace a node: a UTS namespace of its own whose host name
        is ``hostname``, as separate machines have (tests/ray_train_lab.py adds a mount namespace)."""
        return ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', hostname, *argv]

    def _wait_started(self, node: RayNode, timeout: float = 120.0) -> None:
        """Until `ray start` says the runtime is up; a thread keeps draining its output (a full pipe would stall it)."""
        lines: queue.Queue = queue.Queue()

        def drain() -> None:
            for line in node.proc.stdout:
                node.output.append(line)
                lines.put(line)

        threading.Thread(target=drain, daemon=True).start()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = lines.get(timeout=max(0.0, min(1.0, end - time.monotonic())))
            except queue.Empty:
                if node.proc.poll() is not None:
                    break
                continue
            if "Ray runtime started" in line:
                return
        raise RuntimeError(f"ray start for {node.name} did not come up: {''.join(node.output)[-2000:]}")

    def _start_controller(self) -> None:
        """A Ray driver in namespace 0 that answers 'nodes' with Ray's node table (one connection for the lab)."""
        code = ("import json, sys, ray\n"
                "ray.init(address=sys.argv[1], include_dashboard=False, logging_level='error', log_to_driver=False)\n"
                "print('ready', flush=True)\n"
                "for _ in sys.stdin:\n"
                "    print('NODES ' + json.dumps(ray.nodes()), flush=True)\n")
        self._ctl = self.net.popen(0, [sys.executable, "-c", code, self.gcs], stdin=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, cwd="/",
                                   env={"RAY_TMPDIR": os.path.join(self.tmp, "controller"), "RAY_AUTH_MODE": "disabled"})
        line = self._ctl.stdout.readline()
        while line and line.strip() != "ready" and not line.startswith("Traceback"):
            line = self._ctl.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"the lab's Ray controller did not connect: {line!r}")

    def table(self) -> list[dict[str, Any]]:
        """Ray's node table (ray.nodes()), dead nodes included."""
        with self._ctl_lock:
            self._ctl.stdin.write("nodes\n")
            self._ctl.stdin.flush()
            while True:  # Ray prints its own notes (a raylet's death) on the driver's stdout too
                line = self._ctl.stdout.readline()
                if not line:
                    raise RuntimeError("the lab's Ray controller exited")
                if line.startswith("NODES "):
                    return json.loads(line[len("NODES "):])

    def entry(self, name: str) -> dict[str, Any] | None:
        """The node-table entry of the lab node ``name``."""
        node_id = self.node_id(name)
        return next((e for e in self.table() if e["NodeID"] == node_id), None)

    def node_id(self, name: str) -> str:
        """Ray's id of the lab node ``name`` (from its raylet's command line: joining nodes share the head's temp dir)."""
        node = self.nodes[name]
        if node.node_id is None:
            import psutil

            cmdline = psutil.Process(self.raylet_pid(name)).cmdline()
            node.node_id = next(a.split("=", 1)[1] for a in cmdline if a.startswith("--node_id="))
        return node.node_id

    def wait_alive(self, names: Sequence[str], timeout: float = 120.0) -> None:
        """Until exactly these lab nodes are alive in Ray's node table (and no other node is)."""
        want = {self.node_id(n) for n in names}
        end = time.monotonic() + timeout
        alive: set[str] = set()
        while time.monotonic() < end:
            alive = {e["NodeID"] for e in self.table() if e.get("Alive")}
            if alive == want:
                return
            time.sleep(0.3)
        raise AssertionError(f"alive: {sorted(alive)}, wanted: {sorted(want)}; table: "
                             + json.dumps([{k: e.get(k) for k in ("NodeID", "Alive", "NodeManagerAddress",
                                                                  "DeathReasonMessage")} for e in self.table()]))

    def raylet_pid(self, name: str) -> int:
        """The PID of the raylet of lab node ``name`` (a child of its `ray start --block`)."""
        import psutil

        proc = psutil.Process(self.nodes[name].pid)
        for child in proc.children(recursive=True):
            try:
                if child.name() == "raylet":
                    return child.pid
            except psutil.NoSuchProcess:
                continue
        raise AssertionError(f"{name} has no raylet")

    def kill_raylet(self, name: str) -> int:
        """SIGKILL the node's raylet, by PID, as a node dies; returns the PID."""
        pid = self.raylet_pid(name)
        os.kill(pid, signal.SIGKILL)
        return pid

    def set_hostname(self, name: str, hostname: str) -> None:
        """Change the host name lab node ``name`` answers (its UTS namespace's), for the processes it runs from now on."""
        subprocess.run(["nsenter", "--uts", "--target", str(self.nodes[name].pid), "hostname", hostname],
                       check=True, capture_output=True, timeout=10)

    def stop_node(self, name: str) -> None:
        """Stop a node and everything `ray start` started for it, by its process group."""
        node = self.nodes.pop(name)
        stop_group(node.proc, grace=3.0)

    def restart_node(self, name: str, **env: str) -> RayNode:
        """Stop the node (whatever is left of it) and `ray start` it again, with ``env`` over its environment."""
        old = self.nodes[name]
        stop_group(self.nodes.pop(name).proc, grace=1.0)
        node = self.start_node(old.ns, name, {**{k: v for k, v in old.env.items() if k != "RAY_TMPDIR"}, **env})
        return node

    def close(self) -> None:
        if self._ctl is not None:
            stop_group(self._ctl, grace=2.0)
            self._ctl = None
        for node in list(self.nodes.values()):
            stop_group(node.proc, grace=2.0)
        self.nodes.clear()
        self.net.close()  # kills whatever is left in the namespaces, deletes them
        shutil.rmtree(self.tmp, ignore_errors=True)
        _LIVE.discard(self)

    # -- the test plugin's controls ------------------------------------------------------------------
    def control(self, name: str, **settings: Any) -> None:
        """Tell node ``name`` how to misbehave (see the test plugin); no settings: behave."""
        path = Path(self.control_dir) / f"{name}.json"
        if settings:
            path.write_text(json.dumps(settings))
        else:
            path.unlink(missing_ok=True)

    def marker(self, name: str, what: str) -> Path:
        return Path(self.control_dir) / f"{name}.{what}.started"

    def clear_controls(self) -> None:
        for path in Path(self.control_dir).iterdir():
            path.unlink()

    # -- the CLI, as a user runs it on the head ------------------------------------------------------
    def argv(self, out: Path, *extra: str, command: str = "run", nnodes: int | None = None,
             config: Path | None = None) -> list[str]:
        """The CLI's argv. With ``config``: the quick start's own command (docs/cluster.md), `dsv3-preflight run
        --all-nodes --config preflight.toml`, finding the cluster as `auto` does on the head; else the lab's
        address, the cpu profile and the lab's node count."""
        if config is not None:
            return [CLI, command, "--all-nodes", "--config", str(config), "--json", str(out), "--no-report", "--no-color",
                    *extra]
        return [CLI, command, "--all-nodes", "--ray-address", self.gcs, "--profile", "cpu", "--nnodes",
                str(nnodes or self.count), "--json", str(out), "--no-report", "--no-color", *extra]

    def cli_env(self, head_tmp: bool = False, **more: str) -> dict[str, str]:
        """Node 0's environment for a CLI run: its own Ray temp dir, or with ``head_tmp`` the head's (as on a real
        head, where `auto` finds the cluster `ray start --head` recorded there)."""
        self._runs += 1
        tmp = self.nodes["lab-node0"].tmp if head_tmp else os.path.join(self.tmp, f"driver-{self._runs}")
        return {**self.job_env(0, "lab-node0"), "RAY_TMPDIR": tmp, **more}

    def run(self, out: Path, *extra: str, timeout: float = 240.0, env: dict[str, str] | None = None,
            cwd: str | None = None, **kw: Any) -> tuple[subprocess.CompletedProcess, dict]:
        """The CLI in namespace 0; (the process, the document it wrote)."""
        env = self.cli_env(head_tmp=kw.get("config") is not None, **(env or {}))
        argv = self.argv(out, *extra, **kw)
        proc = self.net.popen(0, argv, env=env, cwd=cwd or str(out.parent))
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        finally:
            stop_group(proc, grace=5.0)
        done = subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
        return done, (json.loads(out.read_text()) if out.exists() else {})

    def popen(self, out: Path, *extra: str, env: dict[str, str] | None = None, **kw: Any) -> Running:
        """The CLI in namespace 0, in the background, its stderr read line by line."""
        env = self.cli_env(head_tmp=kw.get("config") is not None, **(env or {}))
        proc = self.net.popen(0, self.argv(out, *extra, **kw), env=env, cwd=str(out.parent))
        return Running(proc, out)


class Running:
    """A CLI run in the background: wait for a line of its progress, then for its end."""

    def __init__(self, proc: subprocess.Popen, out: Path) -> None:
        self.proc, self.out = proc, out
        self.lines: queue.Queue = queue.Queue()
        self.stderr: list[str] = []
        self.stdout = ""
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def wait_line(self, text: str, timeout: float) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = self.lines.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            if text in line:
                return line
        raise AssertionError(f"never printed {text!r}: {''.join(self.stderr)[-3000:]}")

    def finish(self, timeout: float) -> tuple[int, dict]:
        self.stdout = self.proc.stdout.read() if self.proc.stdout else ""
        code = self.proc.wait(timeout=timeout)
        return code, (json.loads(self.out.read_text()) if self.out.exists() else {})

    @property
    def err(self) -> str:
        return "".join(self.stderr)


def wait_for(predicate, timeout: float, what: str, step: float = 0.1):
    """Poll ``predicate`` until it returns something truthy, at most ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


_LIVE: set[RayLab] = set()
_SHARED: dict[str, RayLab] = {}


def shared_lab(config: Any = None) -> RayLab:
    """One lab for every Ray test module of a session (three raylets take a while to start on two cores).

    Each module takes it as it is and leaves it so (all three nodes alive, no control files, hosts as built).
    It is closed after the last test in a row marked ``shared_ray_lab`` (tests/conftest.py), when the pytest session
    ends (``config.add_cleanup``), and at exit as a last resort; a later module asking again gets a new one.
    """
    lab = _SHARED.get("lab")
    if lab is None:
        try:
            lab = RayLab().__enter__()
        except LabUnavailable as exc:
            import pytest

            pytest.skip(f"netns lab unavailable: {exc}")
        _SHARED["lab"] = lab
        if config is not None:
            config.add_cleanup(close_shared)
    return lab


def close_shared() -> None:
    lab = _SHARED.pop("lab", None)
    if lab is not None:
        lab.close()


def _close_all() -> None:
    close_shared()
    for lab in list(_LIVE):
        lab.close()


import atexit  # noqa: E402

atexit.register(_close_all)


# -- reading documents --------------------------------------------------------------------------------
def results_by(doc: dict, name: str) -> dict[str, dict]:
    return {r["node"]: r for r in doc.get("results", []) if r["name"] == name}


def nodes_by_name(doc: dict) -> dict[str, dict]:
    return {n["node"]: n for n in doc.get("nodes", [])}


def assert_schema_valid(doc: dict) -> None:
    """The document (with missing/error node entries and the cluster section) matches the result schema."""
    import jsonschema

    from dsv3_preflight.document import load_schema

    jsonschema.validate(doc, load_schema())


def leftovers(tmp_prefix: str = TMP_PREFIX) -> Iterator[str]:
    """Temp dirs of labs that are not open any more (a test asserts there are none of its own)."""
    open_dirs = {lab.tmp for lab in _LIVE}
    for path in Path("/tmp").glob(f"{tmp_prefix}*"):
        if str(path) not in open_dirs:
            yield str(path)
