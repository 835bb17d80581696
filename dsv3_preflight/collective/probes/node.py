"""Running this node's ranks of the collective probe as child processes the tool owns.

:func:`probe_node` starts one ``python -m dsv3_preflight.collective.probes.worker`` per local rank, each in
its own session with its output in a log file, waits for them under a hard deadline, and ends
exactly those processes (by PID, with any children they made) when the deadline passes or when a
sibling rank has failed. It never raises for a failure of the probe: everything is data.
"""
from __future__ import annotations

import atexit
import ipaddress
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ... import signals
from ..decode import decode, nccl_interfaces, phase_finding
from ..phases import PHASES
from . import zygote

#: a rank: a fresh interpreter (exec) or a fork of the zygote, both with Popen's pid, poll(), wait() and returncode
Rank = subprocess.Popen | zygote.ForkedRank
WORKER_MODULE = "dsv3_preflight.collective.probes.worker"

LOG_TAIL_LINES = 40
#: after a local rank failed, how long its siblings get to report their own error before being ended
SIBLING_GRACE_S = 2.0
#: default message sizes of the sweep (bytes): 4 KiB … 16 MiB, ×4
DEFAULT_SWEEP_SIZES = tuple(4096 * 4 ** i for i in range(7))
#: environment variables worth showing in evidence
_ENV_SHOWN = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_DISABLE", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE",
              "NCCL_SOCKET_FAMILY", "NCCL_PORT_RANGE", "NCCL_DEBUG", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


# -- nothing left behind: the runs in progress, ended at interpreter exit ------------------------------------
# A run whose caller stops waiting (`run --timeout 1` returns while this probe's thread still works) must not
# leave its ranks or its temp dir (/tmp/dsv3pf-collective-*) behind when the process exits.
_ACTIVE: dict[int, tuple[list[Rank], Path | None]] = {}
_ACTIVE_LOCK = threading.Lock()
_IDS = itertools.count()
_EXITING = False


class ProbeShutdown(RuntimeError):
    """The process is exiting: no rank is started any more."""


@atexit.register
def end_active_runs() -> None:
    """End every rank still running (by PID, with its children) and remove the runs' temp dirs."""
    global _EXITING
    with _ACTIVE_LOCK:
        _EXITING = True
        runs = list(_ACTIVE.values())
        _ACTIVE.clear()
    for procs, workdir in runs:
        for proc in list(procs):
            if proc.poll() is None:
                _kill(proc)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    zygote.shutdown()


def _spawn(run_id: int, argv: list[str], **kwargs: Any) -> subprocess.Popen:
    """Start a rank, registered for :func:`end_active_runs` (refused once the process is exiting)."""
    with _ACTIVE_LOCK:
        if _EXITING or run_id not in _ACTIVE:
            raise ProbeShutdown("the process is exiting")
        proc = subprocess.Popen(argv, **kwargs)
        _ACTIVE[run_id][0].append(proc)
        return proc


def _fork(run_id: int, args: list[str], env: Mapping[str, str], log: Path,
          deadline: float) -> tuple[zygote.ForkedRank, zygote.Zygote]:
    """Fork a rank from this process's zygote (zygote.py), registered as :func:`_spawn` registers it;
    ZygoteUnavailable when it cannot."""
    with _ACTIVE_LOCK:
        if _EXITING or run_id not in _ACTIVE:
            raise ProbeShutdown("the process is exiting")
    log.write_bytes(b"")
    proc, parent = zygote.spawn(args, env, str(log), os.getcwd(), deadline)
    with _ACTIVE_LOCK:
        if _EXITING or run_id not in _ACTIVE:   # the process began to exit while the zygote forked it
            _kill(proc)
            raise ProbeShutdown("the process is exiting")
        _ACTIVE[run_id][0].append(proc)
    return proc, parent


def _grace(timeout_s: float) -> float:
    """How long before the hard deadline the workers give up on their own (so they can report why)."""
    return min(max(0.15 * timeout_s, 1.0), 5.0)


def route_interface(master_addr: str, master_port: int) -> dict[str, Any]:
    """The interface the kernel would use to reach the master (a UDP connect sends nothing)."""
    import psutil

    try:
        infos = socket.getaddrinfo(master_addr, master_port, type=socket.SOCK_DGRAM)
        family, _, _, _, sockaddr = infos[0]
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect(sockaddr)
            source = s.getsockname()[0]
    except (OSError, IndexError) as exc:
        return {"ifname": None, "source": None, "error": str(exc)}
    for ifname, addrs in psutil.net_if_addrs().items():
        if any(a.address.split("%")[0] == source for a in addrs):
            return {"ifname": ifname, "source": source, "error": None}
    return {"ifname": None, "source": source, "error": "no interface holds the source address"}


def remediation_interface(route: Mapping[str, Any], *, spans_nodes: bool) -> str | None:
    """The interface a remediation may tell this node to pin (None: unknown, or loopback while the
    world spans several nodes, where pinning it would cut the node off: MASTER_ADDR itself is wrong)."""
    ifname, source = route.get("ifname"), route.get("source")
    if not ifname:
        return None
    try:
        loopback = ifname == "lo" or (source is not None and ipaddress.ip_address(source.split("%")[0]).is_loopback)
    except ValueError:
        loopback = ifname == "lo"
    return None if loopback and spans_nodes else ifname


def _read_events(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # a line cut by a kill
    return events


def _tail(path: Path, n: int = LOG_TAIL_LINES) -> tuple[str, list[str]]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "", []
    return text, text.splitlines()[-n:]


def _descendants(pid: int) -> list[int]:
    try:
        import psutil

        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except Exception:  # noqa: BLE001 - already gone
        return []


def _kill(proc: Rank) -> list[int]:
    """SIGKILL the worker and whatever it started, by PID; returns the PIDs signalled."""
    pids = [proc.pid, *_descendants(proc.pid)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    return pids


@dataclass
class _Events:
    """What a rank's status file says: its phases, what it reported with them, its error, who never joined."""

    phases: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    missing: Any = None
    started_wall: float | None = None
    progress: dict[str, Any] | None = None
    mesh: dict[str, Any] | None = None

    @classmethod
    def read(cls, status: Path) -> _Events:
        out = cls()
        for ev in _read_events(status):
            out.add(ev)
        return out

    def add(self, ev: Mapping[str, Any]) -> None:
        kind = ev.get("event")
        if kind == "mesh":   # the nodes' ephemeral-port listeners and who could connect to whom
            self.mesh = {"listeners": ev.get("listeners") or {}, "reach": ev.get("reach") or []}
        elif kind == "sweep_progress":   # a bounded sweep: the ops done so far (kept if the rank is stopped)
            first = self.progress["started_wall"] if self.progress else ev.get("wall")
            self.progress = {k: ev.get(k) for k in ("size_bytes", "ops", "seconds")}
            self.progress["started_wall"] = first
        elif kind == "phase":
            if ev.get("phase") == "started":
                self.started_wall = ev.get("wall")
            self.phases[ev["phase"]] = ev.get("t")
            self.info.update({k: v for k, v in ev.items() if k not in ("event", "phase", "t", "wall")})
        elif kind == "error":
            self.error = {k: ev.get(k) for k in ("exc_type", "message", "phase", "t")}
        elif kind == "rendezvous_missing":
            self.missing = ev.get("missing")

    @property
    def last(self) -> str | None:
        return max(self.phases, key=PHASES.index) if self.phases else None

    def timings(self, spawned: float) -> dict[str, Any]:
        phases, info = self.phases, self.info
        return {
            "process_start_s": round(self.started_wall - spawned, 6) if self.started_wall else None,
            "import_s": _delta(phases, "started", "imported"),
            "store_connect_s": _delta(phases, "imported", "store_connected"),
            "rendezvous_s": _delta(phases, "store_connected", "all_joined"),
            "init_s": _delta(phases, "imported", "pg_up"),
            "first_collective_s": info.get("first_collective_s"),
            "steady_s": info.get("steady_s"),
            "steady_min_s": info.get("steady_min_s"),
            "steady_max_s": info.get("steady_max_s"),
            "total_s": phases.get("done"),
        }


def _findings(events: _Events, text: str, master: str, env_shown: Mapping[str, str],
              interface: str | None) -> list[dict[str, Any]]:
    """What the rank's error and log say; a rank stuck before "done" with nothing precise: the phase it hung in."""
    findings = decode(events.error["message"] if events.error else None, text, interface=interface)
    precise = [f for f in findings if f["kind"] not in ("store_wait_timeout", "collective_timeout", "peer_crashed")]
    if events.last != "done" and not precise:
        ifnames = ", ".join(f"{k}={env_shown[k]}" for k in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME") if env_shown.get(k))
        stuck = phase_finding(events.last, master=master, ifnames=ifnames, interface=interface)
        if stuck:
            findings.insert(0, stuck)
    return findings


def _rank_outcome(rank: int, local_rank: int, proc: Rank, status: Path, log: Path,
                  killed: str | None, backend: str, spawned: float, master: str,
                  env_shown: Mapping[str, str], interface: str | None = None) -> dict[str, Any]:
    events = _Events.read(status)
    text, tail = _tail(log)
    progress = events.progress
    if progress is not None:   # how long the sweep had when the rank ended: the bound on an op that never finished
        progress["waited_s"] = round(max(time.time() - (progress.pop("started_wall") or time.time()), 0.0), 3)
    info, collected = events.info, "first_collective" in events.phases
    return {
        "rank": rank,
        "local_rank": local_rank,
        "pid": proc.pid,
        "host": info.get("host"),
        "exit_code": proc.returncode,
        "killed": killed,
        "last_phase": events.last,
        "phases": events.phases,
        "error": events.error,
        "findings": _findings(events, text, master, env_shown, interface),
        "never_joined": events.missing,
        "timings": events.timings(spawned),
        "sum_ok": info.get("sum_ok") if collected else None,
        "expected_sum": info.get("expected_sum"),
        "got_sum": info.get("got_sum"),
        "got_range": [info.get("got_min"), info.get("got_max")] if collected else None,
        "device": info.get("device"),
        "pci_bus_id": info.get("pci_bus_id"),
        "nccl_interfaces": nccl_interfaces(text) if backend == "nccl" else [],
        "rank_map": info.get("rank_map") or None,
        "sweep": info.get("sweep"),
        "sweep_progress": progress,
        "mesh": events.mesh,
        "log_tail": tail,
    }


def _delta(phases: Mapping[str, float], a: str, b: str) -> float | None:
    if a in phases and b in phases:
        return round(phases[b] - phases[a], 6)
    return None


def _base_env(env: Mapping[str, str] | None, backend: str) -> dict[str, str]:
    """The ranks' environment: this process's, the caller's additions, unbuffered output, NCCL's debug for nccl."""
    base_env = dict(os.environ)
    base_env.update(env or {})
    base_env["PYTHONUNBUFFERED"] = "1"
    if backend == "nccl":
        base_env.setdefault("NCCL_DEBUG", "INFO")
        base_env.setdefault("NCCL_DEBUG_SUBSYS", "INIT,NET")
    return base_env


@dataclass(frozen=True)
class _Plan:
    """How this node's ranks are started: the world, the deadlines, the options of the worker."""

    master_addr: str
    master_port: int
    world_size: int
    node_rank: int
    nproc_per_node: int
    backend: str
    timeout_s: float
    started: float
    startup_s: float
    workdir: Path
    owned: bool
    device_indices: Sequence[int] | None
    sizes: tuple[int, ...]
    sweep_reserve_s: float | None
    iters: tuple[tuple[str, int | None], ...]

    @property
    def hard_deadline(self) -> float:
        """The latest; ranks that start quickly end sooner."""
        return self.started + self.timeout_s + self.startup_s

    @property
    def worker_deadline(self) -> float:
        """The workers' own deadline, moved on by each rank's start-up."""
        return self.started + self.timeout_s - _grace(self.timeout_s)

    def args(self, rank: int, local: int, status: Path) -> list[str]:
        """The worker's arguments (after ``python -m dsv3_preflight.collective.probes.worker``)."""
        argv = ["--rank", str(rank),
                "--local-rank", str(local), "--world-size", str(self.world_size), "--master-addr", self.master_addr,
                "--master-port", str(self.master_port), "--backend", self.backend,
                "--deadline", f"{self.worker_deadline:.3f}", "--status", str(status),
                "--watchdog-s", f"{_grace(self.timeout_s) / 3:.3f}", "--parent-pid", str(os.getpid())]
        if self.startup_s:
            argv += ["--startup-s", f"{self.startup_s:.3f}", "--spawned", f"{self.started:.3f}"]
        if rank == 0:
            argv.append("--host-store")
        if self.owned:  # the temp dir is ours: a rank whose parent dies removes it (nothing left behind)
            argv += ["--owned-dir", str(self.workdir)]
        if self.device_indices is not None:  # tests force a mapping (two ranks on one GPU); default cuda:LOCAL_RANK
            argv += ["--device-index", str(self.device_indices[local])]
        if self.sizes:
            argv += ["--sweep-sizes", ",".join(str(s) for s in self.sizes)]
            if self.sweep_reserve_s is not None:
                argv += ["--sweep-reserve-s", f"{float(self.sweep_reserve_s):.3f}"]
        for flag, value in self.iters:
            if value is not None:
                argv += [flag, str(int(value))]
        return argv

    def env(self, base_env: Mapping[str, str], rank: int, local: int) -> dict[str, str]:
        """The rank's environment: torch.distributed's own variables (torch reads them; ours travel as flags)."""
        return dict(base_env, RANK=str(rank), LOCAL_RANK=str(local), WORLD_SIZE=str(self.world_size),
                    LOCAL_WORLD_SIZE=str(self.nproc_per_node), MASTER_ADDR=self.master_addr,
                    MASTER_PORT=str(self.master_port), NODE_RANK=str(self.node_rank))


def _wait(procs: Sequence[tuple[int, int, Rank, Path, Path]], plan: _Plan) -> dict[int, str]:
    """Wait for the ranks under the hard deadline; end those still running at it, or shortly after a sibling
    failed. {rank: why it was killed}."""
    killed: dict[int, str] = {}
    first_failure: float | None = None
    while True:
        running = [p for p in procs if p[2].poll() is None]
        if not running:
            return killed
        now = time.time()
        if first_failure is None and any(p[2].returncode not in (None, 0) for p in procs):
            first_failure = now
        if now >= plan.hard_deadline:
            why = (f"killed at the hard deadline ({plan.timeout_s:g} s"
                   + (f" + up to {plan.startup_s:g} s of start-up)" if plan.startup_s else ")"))
        elif first_failure is not None and now >= first_failure + SIBLING_GRACE_S:
            why = f"ended after local rank(s) {[p[0] for p in procs if p[2].returncode not in (None, 0)]} failed"
        else:
            time.sleep(0.05)
            continue
        for rank, _, proc, _, _ in running:
            _kill(proc)
            killed[rank] = why
        return killed


def _rank_offset(backend: str, world_size: int, node_rank: int, nproc_per_node: int, rank_offset: int | None) -> int:
    """The first rank of this node (default node_rank × nproc_per_node); ValueError for a backend or ranks that do not
    fit the world."""
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be gloo or nccl, not {backend!r}")
    if rank_offset is None:
        rank_offset = node_rank * nproc_per_node
    if rank_offset < 0 or rank_offset + nproc_per_node > world_size:
        raise ValueError(f"ranks {rank_offset}..{rank_offset + nproc_per_node - 1} do not fit in world {world_size}")
    return rank_offset


def _start_ranks(run_id: int, plan: _Plan, base_env: Mapping[str, str], rank_offset: int,
                 procs: list[tuple[int, int, Rank, Path, Path]], spawned: dict[int, float],
                 how: dict[str, Any]) -> None:
    """Start this node's ranks, each in its own session with its log; ``procs`` holds every rank started so far (so
    the caller ends them whatever happens here). ``how`` says how they were started: forked from this process's
    zygote (``mode`` "zygote", its pid and the seconds its imports took when it started), or exec'd ("exec", with
    the reason the zygote could not be used as ``fallback``, or none when DSV3_PREFLIGHT_RANK_SPAWN=exec)."""
    for local in range(plan.nproc_per_node):
        rank = rank_offset + local
        status, log = plan.workdir / f"rank{rank}.status.jsonl", plan.workdir / f"rank{rank}.log"
        status.write_text("")
        spawned[rank] = time.time()
        args, env = plan.args(rank, local, status), plan.env(base_env, rank, local)
        proc: Rank | None = None
        if how["mode"] == "zygote":
            try:
                proc, parent = _fork(run_id, args, env, log, plan.hard_deadline)
                how.update(zygote_pid=parent.pid, zygote_import_s=parent.import_s)
            except zygote.ZygoteUnavailable as exc:   # exec this rank and the rest: the probe itself goes on
                how.update(mode="exec", fallback=str(exc))
        if proc is None:
            with open(log, "wb") as fh:
                proc = _spawn(run_id, [sys.executable, "-m", WORKER_MODULE, *args], stdout=fh,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        procs.append((rank, local, proc, status, log))


def probe_node(
    *,
    master_addr: str,
    master_port: int,
    world_size: int,
    node_rank: int,
    nproc_per_node: int = 1,
    rank_offset: int | None = None,
    backend: str = "gloo",
    timeout_s: float = 60.0,
    sweep: bool = False,
    env: Mapping[str, str] | None = None,
    sweep_sizes: tuple[int, ...] | None = None,
    log_dir: str | None = None,
    device_indices: Sequence[int] | None = None,
    steady_iters: int | None = None,
    sweep_iters: int | None = None,
    sweep_warmup: int | None = None,
    startup_s: float = 0.0,
    sweep_reserve_s: float | None = None,
) -> dict[str, Any]:
    """Run this node's ranks of the probe and return its outcome (JSON types); see the package docstring.

    Extra keywords: ``sweep_sizes`` (bytes; default 4 KiB … 16 MiB), ``log_dir`` (keep each rank's log and
    status file there), ``device_indices`` (CUDA device per local rank; default the local rank),
    ``steady_iters`` (small-message all_reduces whose p50 is the latency; default 5), ``sweep_iters`` /
    ``sweep_warmup`` (timed and untimed iterations per sweep size; default 20 / 5), ``startup_s`` (a start-up
    allowance: the time a rank spends starting Python and importing torch, up to this many seconds, is not
    counted against ``timeout_s``, which then times the rendezvous and the collectives; a loaded node that
    needs 15 s to import torch must not turn a healthy link into a timeout), ``sweep_reserve_s`` (bound the
    sweep by time: it ends this many seconds before the ranks' deadline with the iterations it did, and each
    rank's ``sweep_progress`` keeps the ops done should it be stopped in the middle of one).
    """
    rank_offset = _rank_offset(backend, world_size, node_rank, nproc_per_node, rank_offset)
    started = time.time()
    startup_s = max(float(startup_s), 0.0)
    workdir = Path(log_dir) if log_dir else Path(signals.mkdtemp("collective"))  # named by the run: its cleanup removes it
    workdir.mkdir(parents=True, exist_ok=True)
    run_id = next(_IDS)
    with _ACTIVE_LOCK:
        _ACTIVE[run_id] = ([], None if log_dir else workdir)
    base_env = _base_env(env, backend)
    plan = _Plan(master_addr=master_addr, master_port=master_port, world_size=world_size, node_rank=node_rank,
                 nproc_per_node=nproc_per_node, backend=backend, timeout_s=float(timeout_s), started=started,
                 startup_s=startup_s, workdir=workdir, owned=not log_dir, device_indices=device_indices,
                 sizes=tuple(sweep_sizes or DEFAULT_SWEEP_SIZES) if sweep else (), sweep_reserve_s=sweep_reserve_s,
                 iters=(("--steady-iters", steady_iters), ("--sweep-iters", sweep_iters),
                        ("--sweep-warmup", sweep_warmup)))
    procs: list[tuple[int, int, Rank, Path, Path]] = []
    spawned: dict[int, float] = {}
    how: dict[str, Any] = {"mode": "zygote" if zygote.wanted(base_env) else "exec"}
    try:
        _start_ranks(run_id, plan, base_env, rank_offset, procs, spawned, how)
        killed = _wait(procs, plan)
    except ProbeShutdown:
        killed = {rank: "the process exited before this rank finished" for rank, *_ in procs}
    finally:
        for _, _, proc, _, _ in procs:  # an exception or an interrupt here must not leave a rank behind
            if proc.poll() is None:
                _kill(proc)

    route = route_interface(master_addr, master_port)
    interface = remediation_interface(route, spans_nodes=world_size > nproc_per_node)
    ranks = [_rank_outcome(rank, local, proc, status, log, killed.get(rank), backend, spawned[rank],
                           f"{master_addr}:{master_port}", {k: base_env[k] for k in _ENV_SHOWN if k in base_env},
                           interface)
             for rank, local, proc, status, log in procs]
    elapsed = time.time() - started
    rank_map = next((r["rank_map"] for r in ranks if r["rank_map"]), None)
    sweep_rows = next((r["sweep"] for r in ranks if r["sweep"]), None)
    with _ACTIVE_LOCK:
        _ACTIVE.pop(run_id, None)
    if not log_dir:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "node_rank": node_rank,
        "host": socket.gethostname(),
        "backend": backend,
        "master_addr": master_addr,
        "master_port": master_port,
        "world_size": world_size,
        "nproc_per_node": nproc_per_node,
        "rank_offset": rank_offset,
        "timeout_s": float(timeout_s),
        "elapsed_s": round(elapsed, 3),
        "deadline_hit": any("hard deadline" in why for why in killed.values()),
        "ranks": ranks,
        "rank_map": rank_map,
        "sweep": sweep_rows,
        "route_interface": route,
        "spawn": how,
        "env": {k: base_env[k] for k in _ENV_SHOWN if k in base_env},
        "log_dir": str(workdir) if log_dir else None,
        "ok": all(r["last_phase"] == "done" and r["sum_ok"] for r in ranks),
    }
