"""Benchmark: for each stuck case, the time from the stall to the named culprit, beside the job's own timeouts.

Cases (tests/stall/train_stall.py's gloo ranks, started by the real CLI):

* ``local-sleep``: plain ``launch``, 2 ranks on this node; rank 1 sleeps before its all_reduce of step 2;
* ``local-fifo``: the same, rank 1 reads a FIFO no one writes;
* ``ray-rank``: ``launch --all-nodes`` on 2 Ray nodes in network namespaces (tests/cluster_lab.py), 1 rank each; the
  rank of node 1 sleeps before its all_reduce;
* ``ray-link``: the same job, with rank 1's connections to node 0 dropped (iptables, in node 1's namespace) after
  step 2;
* ``ray-never-joined``: node 1's torchrun (a wrapper) never starts;
* ``ray-slow-healthy``: no stuck rank: a model load of 1.5 × ``--stall-after`` of CPU work, then steps of
  ``--stall-after`` / 6 seconds; it must run to its end (exit 0) with no stall named.

Each case writes the launch's JSON document and HTML report (``--json``, ``--html``); the table says whether the
stall's first cause is in each (the console's is the ``named`` column).

The stall begins at the last progress line the launch printed (for ``ray-never-joined``: when torchrun started on
node 0); the culprit is named when the ``stall: 1.`` line appears on the launch's stderr. The job's own timeouts:
the script's Gloo timeout (1800 s), NCCL's default watchdog (``TORCH_NCCL_TIMEOUT_MS``: 600 s; the field's 5400 s),
torchrun's static rendezvous (600 s). Each case runs with ``--on-stall=stop``.

Usage: .venv/bin/python benchmarks/bench_stall.py [--stall-after 60] [--cases local-sleep,local-fifo,ray-rank,...]
(the Ray cases need root for network namespaces). Timings on a loaded machine are not the watch's: read them on an
idle one.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
TRAIN = ROOT / "tests" / "stall" / "train_stall.py"
CASES = ("local-sleep", "local-fifo", "ray-rank", "ray-link", "ray-never-joined", "ray-slow-healthy")
#: what the job itself would have waited: (what, seconds)
OWN_TIMEOUTS = {"local-sleep": ("Gloo timeout of the script", 1800), "local-fifo": ("Gloo timeout of the script", 1800),
                "ray-rank": ("Gloo timeout of the script", 1800), "ray-link": ("Gloo timeout of the script", 1800),
                "ray-never-joined": ("torchrun's static rendezvous timeout", 600),
                "ray-slow-healthy": ("(healthy: runs to its end)", 0)}
EXPECTED = {"local-sleep": "stall.rank_in_python: rank 1", "local-fifo": "stall.rank_blocked_io: rank 1",
            "ray-rank": "stall.rank_in_python: rank 1", "ray-link": "stall.link_stuck",
            "ray-never-joined": "stall.node_never_joined: node 1", "ray-slow-healthy": None}


class Timed:
    """A launch whose stdout and stderr lines are read with the time each arrived."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.lines: list[tuple[float, str, str]] = []
        self.threads = [threading.Thread(target=self._read, args=(s, n), daemon=True)
                        for s, n in ((proc.stdout, "out"), (proc.stderr, "err"))]
        for t in self.threads:
            t.start()

    def _read(self, stream, name: str) -> None:
        for line in stream:
            self.lines.append((time.monotonic(), name, line.rstrip("\n")))

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            for t in self.threads:
                t.join(timeout=10)

    def first(self, pattern: str, stream: str | None = None) -> float | None:
        return next((t for t, s, line in self.lines if (stream is None or s == stream) and re.search(pattern, line)), None)

    def last(self, pattern: str, stream: str | None = None) -> float | None:
        found = [t for t, s, line in self.lines if (stream is None or s == stream) and re.search(pattern, line)]
        return found[-1] if found else None

    def text(self, pattern: str) -> str:
        return next((line for _t, _s, line in self.lines if re.search(pattern, line)), "")


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "dsv3_preflight", "launch", *args]


def local_case(case: str, stall_after: float, tmp: Path) -> Timed:
    from ports import free_port

    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTER_", "RANK", "WORLD_SIZE", "LOCAL_RANK"))}
    env["DSV3_PREFLIGHT_NODE_NAME"] = "benchnode"
    argv = _cli("--profile", "cpu", "--master-port", str(free_port()), "--skip", "dist.*", "--reports-dir", str(tmp / "r"),
                "--json", str(tmp / "report.json"), "--html", str(tmp / "report.html"),
                "--stall-after", str(stall_after), "--on-stall", "stop", "--", str(TRAIN), "--steps", "6", "--stuck-rank", "1",
                "--stuck-at", "2", "--stuck-how", case.split("-")[1], "--fifo", str(fifo))
    return Timed(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp))


def ray_case(case: str, stall_after: float, tmp: Path, lab) -> Timed:
    extra: list[str] = []
    train = ["--steps", "5", "--stuck-rank", "1", "--stuck-at", "2"]
    if case == "ray-link":
        train = ["--steps", "400", "--step-s", "0.2", "--payload", "4000000"]
    if case == "ray-never-joined":
        wrapper = tmp / "torchrun"
        wrapper.write_text(f"#!{sys.executable}\nimport sys, time\nif '--node_rank=1' in sys.argv:\n    time.sleep(3600)\n"
                           "from torch.distributed.run import main\nmain()\n")
        wrapper.chmod(0o755)
        extra, train = ["--torchrun", str(wrapper)], ["--steps", "2"]
    if case == "ray-slow-healthy":
        train = ["--steps", "3", "--load-s", f"{1.5 * stall_after:g}", "--step-s", f"{stall_after / 6:g}"]
    argv = _cli("--all-nodes", "--ray-address", lab.gcs, "--profile", "cpu", "--nnodes", "2", "--nproc-per-node", "1",
                "--only", "env.*,net.nic_route,cluster.*", "--no-color", "--no-report", "--reports-dir", str(tmp / "logs"),
                "--json", str(tmp / "report.json"), "--html", str(tmp / "report.html"),
                "--stop-grace", "5", "--stall-after", str(stall_after), "--on-stall", "stop", *extra, "--", str(TRAIN), *train)
    timed = Timed(lab.net.popen(0, argv, env=lab.cli_env(), cwd=str(tmp)))
    if case == "ray-link":
        _block_link(timed, lab)
    return timed


def _block_link(timed: Timed, lab) -> None:
    """After step 2, drop rank 1's connections to node 0 (its ports, read with the watch's own probe)."""
    import psutil

    from dsv3_preflight.stall.probes import procs

    deadline = time.monotonic() + 300
    while timed.first(r"step 2 loss") is None and time.monotonic() < deadline and timed.proc.poll() is None:
        time.sleep(0.2)
    rank1 = next(p for p in psutil.process_iter(["cmdline"]) if str(TRAIN) in " ".join(p.info["cmdline"] or [])
                 and procs.environ(p.pid).get("RANK") == "1" and procs.environ(p.pid).get("LOCAL_RANK") == "0")
    ports = {c["local"].rsplit(":", 1)[1] for c in procs.tcp_connections(rank1.pid)
             if c["state"] == "ESTABLISHED" and c["peer"].startswith(lab.addr(0) + ":")}
    for port in ports:
        lab.net.add_rule(1, ["-I", "INPUT", "-p", "tcp", "--dport", port, "-j", "DROP"])
        lab.net.add_rule(1, ["-I", "OUTPUT", "-p", "tcp", "--sport", port, "-j", "DROP"])


def in_reports(tmp: Path, expected: str | None) -> tuple[bool, bool]:
    """Whether the launch's JSON document and HTML report hold the stall's first cause (``expected``, its id and what
    it names), or, for a healthy case (None), no stall at all."""
    import json
    from html import unescape

    doc_path, html_path = tmp / "report.json", tmp / "report.html"
    doc = json.loads(doc_path.read_text()) if doc_path.exists() else {}
    html = unescape(html_path.read_text()) if html_path.exists() else ""
    if expected is None:
        return "stall" not in doc and bool(doc), 'id="stall"' not in html and bool(html)
    cause_id, _, named = expected.partition(": ")
    first = ((doc.get("stall") or {}).get("causes") or [{}])[0]
    in_json = first.get("id") == cause_id and named in str(first.get("summary", ""))
    return in_json, 'id="stall"' in html and cause_id in html and named in html


def measure(case: str, timed: Timed, timeout: float, tmp: Path) -> dict:
    code = timed.wait(timeout)
    named = timed.first(r"dsv3-preflight launch: stall: 1\. ", "err")
    stall = (timed.first(r"\[node 0 [^\]]+\] torchrun pid", "err") if case == "ray-never-joined"
             else timed.last(r"step \d+ loss=", "out"))
    head = timed.text(r"dsv3-preflight launch: stall: 1\. ")
    if os.environ.get("BENCH_STALL_DEBUG"):
        t0 = timed.lines[0][0] if timed.lines else 0.0
        for t, s, line in timed.lines:
            print(f"{t - t0:8.2f} {s} {line[:100]}", file=sys.stderr)
    expected = EXPECTED[case]
    in_json, in_html = in_reports(tmp, expected)
    right = (code == 0 and not head) if expected is None else expected in head
    return {"case": case, "exit": code, "stall_to_named_s": None if named is None or stall is None else round(named - stall, 1),
            "right": right, "json": in_json, "html": in_html,
            "named": head[len("dsv3-preflight launch: stall: 1. "):][:110] if head else "(nothing named)"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stall-after", type=float, default=60.0)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one case may take")
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; known: {', '.join(CASES)}")
    rows = []
    lab = None
    try:
        for case in cases:
            with tempfile.TemporaryDirectory(prefix="dsv3-bench-stall-") as tmp:
                if case.startswith("ray-") and lab is None:
                    from cluster_lab import RayLab

                    lab = RayLab(2, node_tmpdir=True).__enter__()
                timed = local_case(case, args.stall_after, Path(tmp)) if case.startswith("local-") else \
                    ray_case(case, args.stall_after, Path(tmp), lab)
                try:
                    rows.append(measure(case, timed, args.timeout, Path(tmp)))
                finally:
                    if timed.proc.poll() is None:
                        timed.proc.kill()
                        timed.proc.wait()
    finally:
        if lab is not None:
            lab.close()
    print(f"--stall-after {args.stall_after:g} s, --on-stall=stop")
    print(f"{'case':<18} {'exit':>4} {'stall->named':>12} {'right':>5} {'json':>4} {'html':>4}  {'own timeout':<44} named")
    yes = {True: "yes", False: "NO"}
    for r in rows:
        what, secs = OWN_TIMEOUTS[r["case"]]
        took = "-" if r["stall_to_named_s"] is None else f"{r['stall_to_named_s']:g} s"
        own = f"{what}: {secs} s" if secs else what
        print(f"{r['case']:<18} {r['exit']:>4} {took:>12} {yes[r['right']]:>5} {yes[r['json']]:>4} {yes[r['html']]:>4}  "
              f"{own:<44} {r['named']}")
    return 0 if all(r["right"] and r["json"] and r["html"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
