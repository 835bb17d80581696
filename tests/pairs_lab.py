"""A real Ray cluster in network namespaces, for the pairwise probe's tests and benchmark.

``RayNetnsLab(n)`` builds ``tests/netns_lab.NetnsLab(n)`` (n namespaced nodes on a bridge), starts
`ray start --head` in node 0 and `ray start --address` in the others (one after the other: raylets
registering at once overload a 2-core box), each with one CPU and a small object store, only on the
namespaces' own addresses. It runs the CLI from node 0 as a user would, and shapes the network:

- ``shape_node(i, rate)``: `tc tbf` (rate, small queue) as the root qdisc of node i's eth0: every pair of i slow;
- ``shape_path(i, j, rate)``: on node i's eth0 an HTB root whose default class is unshaped, a class with a
  `tc tbf` leaf, and a `u32` filter by destination (node j's address) into it: only the path i→j is slow
  (this kernel has no sch_netem, sch_prio or cls_flower; HTB, TBF and u32 work);
- ``drop_pair(i, j)``: an iptables DROP in node j's namespace of everything from node i (nodes other than
  the head, so Ray itself keeps working).

Teardown stops each `ray start --block` by its process group (never `ray stop`), kills whatever is left in
the lab's namespaces, deletes them, and removes the lab's temp dirs: nothing is left behind.
"""
from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from cluster_lab import LEAN_HEAD, LEAN_NODE
from netns_lab import NetnsLab, stop_group, unavailable_reason  # noqa: F401 - re-exported for the tests

REPO = Path(__file__).resolve().parent.parent
RAY_PORT = 6379
MASTER_PORT = 39500      # inside the lab's own namespaces: no other run shares it
OBJECT_STORE = str(80 * 1024 * 1024)
#: the pairs' settings in the lab: a small message (a 20 mbit node still finishes its pairs well within the default
#: 30 s timeout) and loose thresholds, because the lab's nodes share 2 cores and the pairs of a round compete for
#: them. Measured over 6 lab nodes: the healthy pairs' best-iteration busbw went as low as 0.18x its reference
#: (the average iteration's spread 6x, the p50's 12x), their p50 latency spread 13x, while a 20 mbit token bucket
#: puts a pair at 0.004-0.01x the reference busbw
LAB_PAIRS = ("--pairs-timeout", "30", "--pairs-iters", "20", "--pairs-busbw-bytes", str(256 * 1024),
             "--pairs-busbw-ratio", "0.1", "--pairs-latency-ratio", "20")


def _ray_cli(*args: str) -> list[str]:
    return [sys.executable, "-c", "from ray.scripts.scripts import main; main()", *args]


class RayNetnsLab:
    """n Ray nodes in n namespaces (a context manager); see the module docstring."""

    def __init__(self, nodes: int = 3) -> None:
        self.nodes = nodes
        self.net = NetnsLab(nodes)
        self.tmp = tempfile.mkdtemp(prefix="d3p", dir="/tmp")
        self.procs: list[subprocess.Popen] = []
        self.started_s: float | None = None

    # -- addresses and names ------------------------------------------------------------------
    def addr(self, n: int) -> str:
        return self.net.addr(n)

    def name(self, n: int) -> str:
        return f"lab-node{n}"

    def _node_env(self, n: int) -> dict[str, str]:
        return {"DSV3_PREFLIGHT_NODE_NAME": self.name(n), "MASTER_ADDR": self.addr(0), "MASTER_PORT": str(MASTER_PORT),
                "GLOO_SOCKET_IFNAME": "eth0", "NCCL_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1",
                "RAY_TMPDIR": os.path.join(self.tmp, f"n{n}"), "RAY_DISABLE_USAGE_STATS": "1",
                "RAY_AUTH_MODE": "disabled", "PYTHONPATH": str(REPO)}

    # -- start and stop -------------------------------------------------------------------------
    def __enter__(self) -> RayNetnsLab:
        t0 = time.monotonic()
        self.net.start()
        try:
            self._start_ray()
        except BaseException:
            self.close()
            raise
        self.started_s = time.monotonic() - t0
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start_ray(self) -> None:
        common = ["--num-cpus", "1", "--object-store-memory", OBJECT_STORE, *LEAN_NODE, "--disable-usage-stats", "--block"]
        head = self.net.popen(0, _ray_cli("start", "--head", "--node-ip-address", self.addr(0), "--port", str(RAY_PORT),
                                          "--include-dashboard=false", *common),
                              env={**self._node_env(0), **LEAN_HEAD}, stderr=subprocess.STDOUT)
        self.procs.append(head)
        self._wait_started(head, "head")
        for n in range(1, self.nodes):
            proc = self.net.popen(n, _ray_cli("start", "--address", f"{self.addr(0)}:{RAY_PORT}", "--node-ip-address",
                                              self.addr(n), *common), env=self._node_env(n), stderr=subprocess.STDOUT)
            self.procs.append(proc)
            self._wait_started(proc, self.name(n))
        self._wait_alive(self.nodes)

    def _wait_started(self, proc: subprocess.Popen, who: str, timeout: float = 120.0) -> None:
        """Until `ray start` says the runtime is up (it prints that before blocking), with a deadline. A reader
        thread keeps draining its output afterwards, so a full pipe never stalls it."""
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout] and None, daemon=True).start()
        seen, end = [], time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                line = lines.get(timeout=max(0.0, min(1.0, end - time.monotonic())))
            except queue.Empty:
                if proc.poll() is not None:
                    break
                continue
            seen.append(line)
            if "Ray runtime started" in line:
                return
        raise RuntimeError(f"ray start on {who} did not come up: {''.join(seen)[-2000:]}")

    def _wait_alive(self, count: int, timeout: float = 120.0) -> None:
        code = ("import ray, sys; ray.init(address=sys.argv[1], include_dashboard=False, logging_level='error'); "
                "print(sum(1 for n in ray.nodes() if n['Alive'])); ray.shutdown()")
        end, out = time.monotonic() + timeout, None
        while time.monotonic() < end:
            out = self.net.exec(0, [sys.executable, "-c", code, f"{self.addr(0)}:{RAY_PORT}"], timeout=60,
                                env={"RAY_TMPDIR": os.path.join(self.tmp, "probe"), "RAY_AUTH_MODE": "disabled"})
            if out.stdout.strip().splitlines()[-1:] == [str(count)]:
                return
            time.sleep(1)
        raise RuntimeError(f"{count} Ray nodes never came up: {out.stdout[-300:] if out else ''} {out.stderr[-600:] if out else ''}")

    def close(self) -> None:
        """Stop each `ray start --block` by its process group (a short grace, then SIGKILL), kill whatever is
        left in the lab's namespaces, delete them, remove the temp dirs."""
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        end = time.monotonic() + 5.0
        for p in self.procs:
            stop_group(p, grace=max(0.1, end - time.monotonic()))
        self.procs.clear()
        self.net.close()   # kills what is still in the namespaces, deletes them (veths, qdiscs, rules with them)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- the network's faults --------------------------------------------------------------------
    def _tc(self, n: int, *args: str) -> None:
        self.net.exec(n, ["tc", *args], check=True)

    def shape_node(self, n: int, rate: str = "20mbit") -> None:
        """Every packet node n sends leaves through a token bucket: `rate`, a burst of 32 kbit, a 20 ms queue."""
        self._tc(n, "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", rate, "burst", "32kbit", "latency", "20ms")

    def shape_slow_link(self, n: int) -> None:
        """The field's slow-but-alive link (issue 46.1): node n's eth0 through `tc tbf rate 8mbit burst 16kb latency
        300ms` (1 MB/s; a bulk transfer fills the 300 ms queue)."""
        self._tc(n, "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", "8mbit", "burst", "16kb", "latency", "300ms")

    def shape_path(self, n: int, to: int, rate: str = "20mbit") -> None:
        """Only what node n sends to node ``to`` goes through the token bucket (HTB + u32 filter by destination)."""
        self._tc(n, "qdisc", "replace", "dev", "eth0", "root", "handle", "1:", "htb", "default", "10")
        self._tc(n, "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit")
        self._tc(n, "class", "add", "dev", "eth0", "parent", "1:", "classid", "1:30", "htb", "rate", "10gbit")
        self._tc(n, "qdisc", "add", "dev", "eth0", "parent", "1:30", "handle", "30:", "tbf", "rate", rate,
                 "burst", "32kbit", "latency", "20ms")
        self._tc(n, "filter", "add", "dev", "eth0", "parent", "1:", "protocol", "ip", "prio", "1", "u32", "match", "ip",
                 "dst", f"{self.addr(to)}/32", "flowid", "1:30")

    def clear_shaping(self, n: int) -> None:
        self.net.exec(n, ["tc", "qdisc", "del", "dev", "eth0", "root"])

    def drop_pair(self, a: int, b: int) -> None:
        """Node b drops everything node a sends it (TCP between them cannot be set up either way)."""
        if 0 in (a, b):
            raise ValueError("the head carries Ray itself: drop between two other nodes")
        self.net.add_rule(b, ["-A", "INPUT", "-s", self.addr(a), "-j", "DROP"])

    def undrop_pair(self, a: int, b: int) -> None:
        self.net.exec(b, [shutil.which("iptables") or "iptables", "-D", "INPUT", "-s", self.addr(a), "-j", "DROP"])

    # -- the CLI, as a user runs it on the head -----------------------------------------------------
    def run(self, out: Path, *extra: str, probe: str = "pairs", timeout: float = 600.0
            ) -> tuple[subprocess.CompletedProcess, dict, float]:
        """`run --all-nodes --probe=<probe>` from node 0; (the process, the document, wall seconds)."""
        argv = [sys.executable, "-m", "dsv3_preflight", "run", "--all-nodes", "--ray-address", f"{self.addr(0)}:{RAY_PORT}",
                "--profile", "cpu", "--nnodes", str(self.nodes), f"--probe={probe}", "--json", str(out),
                "--no-report", "--no-color", *extra]
        t0 = time.monotonic()
        proc = self.net.exec(0, argv, timeout=timeout, env={**self._node_env(0),
                                                            "RAY_TMPDIR": os.path.join(self.tmp, "driver")})
        wall = time.monotonic() - t0
        return proc, (json.loads(out.read_text()) if out.exists() else {}), wall


def pairs_result(doc: dict) -> dict:
    return next(r for r in doc.get("results", []) if r["name"] == "dist.pairs")
