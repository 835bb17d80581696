"""The capture on a stall, on one node: for each rank its stacks (py-spy), wchan and status, TCP connections, its
Flight Recorder dump; for the node NCCL RAS and NVML. Every probe has a timeout, and a timeout is recorded as a
finding ("timed out after N s"), never as healthy; what cannot exist here (no dump pipe under Gloo, no NVML on a CPU
node) is recorded as "not available" with the reason. Plain data out; the culprit rules judge it (stall/culprit.py).
"""
from __future__ import annotations

import glob
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypedDict

from . import procs

PYSPY_TIMEOUT_S = 20.0
FR_TIMEOUT_S = 10.0
RAS_TIMEOUT_S = 10.0
#: the Flight Recorder variables the launcher sets (torch reads the TORCH_NCCL_* names; 2.7+ also TORCH_FR_*)
FR_BUFFER_VAR = "TORCH_NCCL_TRACE_BUFFER_SIZE"
FR_PIPE_VAR = "TORCH_NCCL_DEBUG_INFO_PIPE_FILE"
FR_DUMP_VAR = "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"
FR_BUFFER_DEFAULT = "2000"


class Frame(TypedDict):
    name: str
    file: str
    line: int
    native: bool


class Thread(TypedDict):
    tid: int
    active: bool
    frames: list[Frame]   # innermost first


class Stacks(TypedDict):
    """py-spy's dump of one process: ``native`` says whether native frames are in it; ``error`` why it is missing."""

    ok: bool
    native: bool
    error: str | None
    threads: list[Thread]


class RankCapture(TypedDict, total=False):
    rank: int
    local_rank: int
    node_rank: int | None
    node: str
    pid: int
    cpu_s: float | None
    cpu_delta_s: float | None
    stacks: Stacks
    wchan: dict[str, str]
    status: dict[str, str]
    tcp: list[procs.TcpConn]
    flight_recorder: dict[str, Any]


class NodeCapture(TypedDict, total=False):
    node: str
    node_rank: int
    host: str
    torchrun_pid: int | None
    torchrun_alive: bool
    ranks: list[RankCapture]
    ras: dict[str, Any]
    gpus: dict[str, Any]
    taken_at: float
    agent: dict[str, Any]   # torchrun's own stack, when the node has no rank process


def watch_env(environ: Mapping[str, str], fr_dir: str) -> dict[str, str]:
    """The variables the launcher adds for the capture (a value the user set is kept): the Flight Recorder's
    buffer, its on-demand dump pipe and its dump file prefix, under ``fr_dir``."""
    wanted = {FR_BUFFER_VAR: FR_BUFFER_DEFAULT, FR_PIPE_VAR: os.path.join(fr_dir, "fr_pipe_"),
              FR_DUMP_VAR: os.path.join(fr_dir, "fr_dump_")}
    return {k: v for k, v in wanted.items() if not (environ.get(k) or "").strip()}


def pyspy() -> str | None:
    """The py-spy executable: beside this interpreter (the lock installs it there), else on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return here if os.access(here, os.X_OK) else shutil.which("py-spy")


def _frames(raw: Sequence[Mapping[str, Any]]) -> list[Frame]:
    out: list[Frame] = []
    for f in raw:
        file = str(f.get("filename") or f.get("short_filename") or "?")
        native = not file.endswith(".py") and int(f.get("line") or 0) == 0
        out.append(Frame(name=str(f.get("name") or "?"), file=file, line=int(f.get("line") or 0), native=native))
    return out


def dump_stacks(pid: int, native: bool = True, timeout: float = PYSPY_TIMEOUT_S) -> Stacks:
    """py-spy dump of ``pid`` as JSON; with native frames where permitted, else Python frames only."""
    exe = pyspy()
    if exe is None:
        return Stacks(ok=False, native=False, error="py-spy not installed", threads=[])
    errors = []
    for with_native in ((True, False) if native else (False,)):
        argv = [exe, "dump", "--pid", str(pid), "--json"] + (["--native"] if with_native else [])
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            errors.append(f"py-spy{' --native' if with_native else ''} timed out after {timeout:g} s")
            continue
        except OSError as exc:
            return Stacks(ok=False, native=False, error=f"py-spy: {exc}", threads=[])
        if proc.returncode == 0:
            try:
                data = json.loads(proc.stdout)
            except ValueError as exc:
                errors.append(f"py-spy output unreadable: {exc}")
                continue
            threads = [Thread(tid=int(t.get("os_thread_id") or t.get("thread_id") or 0), active=bool(t.get("active")),
                              frames=_frames(t.get("frames") or [])) for t in data]
            return Stacks(ok=True, native=with_native, error="; ".join(errors) or None, threads=threads)
        errors.append((proc.stderr or proc.stdout).strip().splitlines()[0][:300] if (proc.stderr or proc.stdout).strip()
                      else f"py-spy exited {proc.returncode}")
    return Stacks(ok=False, native=False, error="; ".join(errors), threads=[])


def python_stack(stacks: Stacks) -> tuple[str, ...]:
    """The main thread's Python frames as "file:line name" (innermost first): what two samples compare."""
    if not stacks["threads"]:
        return ()
    main = stacks["threads"][-1] if len(stacks["threads"]) > 1 else stacks["threads"][0]
    main = next((t for t in stacks["threads"] if any(f["name"] == "<module>" for f in t["frames"])), main)
    return tuple(f"{f['file']}:{f['line']} {f['name']}" for f in main["frames"] if not f["native"])


def flight_recorder(rank: int, environ: Mapping[str, str], timeout: float = FR_TIMEOUT_S) -> dict[str, Any]:
    """Ask the rank for its Flight Recorder dump through its pipe and read it with torch's own loader.

    Under Gloo, or a torch without the pipe, there is no pipe: "not available" (not healthy)."""
    pipe_prefix, dump_prefix = environ.get(FR_PIPE_VAR), environ.get(FR_DUMP_VAR)
    if not pipe_prefix or not dump_prefix:
        return {"available": False, "why": f"{FR_PIPE_VAR}/{FR_DUMP_VAR} not set for this rank"}
    pipe = f"{pipe_prefix}{rank}.pipe"
    if not os.path.exists(pipe):
        return {"available": False, "why": f"no dump pipe {pipe}: the rank has no NCCL process group (Gloo or CPU) "
                                           "or its torch does not open one"}
    dump = f"{dump_prefix}{rank}"
    try:
        fd = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(fd, b"1\n")
        finally:
            os.close(fd)
    except OSError as exc:
        return {"available": False, "why": f"dump pipe {pipe} did not take the request: {exc.strerror or exc}"}
    deadline = time.monotonic() + timeout
    while not os.path.exists(dump):
        if time.monotonic() > deadline:
            return {"available": False, "why": f"asked through {pipe}; no dump {dump} after {timeout:g} s (timed out)",
                    "timed_out": True}
        time.sleep(0.2)
    return read_dump(os.path.dirname(dump), os.path.basename(dump_prefix), rank)


def read_dump(directory: str, prefix: str, rank: int) -> dict[str, Any]:
    """The rank's last collectives from its dump, read by torch.distributed.flight_recorder's loader."""
    try:
        from torch.distributed.flight_recorder.components.config_manager import JobConfig
        from torch.distributed.flight_recorder.components.loader import read_dir

        details, version = read_dir(JobConfig().parse_args([directory, "--prefix", prefix]))
    except Exception as exc:  # noqa: BLE001 - torch too old, or the dump unreadable: recorded, not raised
        return {"available": False, "why": f"dump unreadable: {type(exc).__name__}: {exc}"[:300]}
    for dump in details.values():
        if int(dump.get("rank", -1)) != rank:
            continue
        entries = [e for e in dump.get("entries") or [] if isinstance(e, dict)]
        last = max(entries, key=lambda e: e.get("collective_seq_id") or 0, default=None)
        return {"available": True, "version": version, "entries": len(entries),
                "last": None if last is None else {"seq": last.get("collective_seq_id"), "op": last.get("profiling_name"),
                                                   "state": last.get("state"), "pg": str(last.get("process_group"))}}
    return {"available": False, "why": f"the dump holds no entry of rank {rank}"}


def nccl_ras(timeout: float = RAS_TIMEOUT_S) -> dict[str, Any]:
    """NCCL's RAS client (NCCL 2.24+) when it is installed: its text, else "not available"."""
    exe = shutil.which("ncclras")
    if exe is None:
        return {"available": False, "why": "ncclras not on PATH (NCCL < 2.24, or its tools not installed)"}
    try:
        proc = subprocess.run([exe], capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"available": False, "why": f"ncclras timed out after {timeout:g} s", "timed_out": True}
    except OSError as exc:
        return {"available": False, "why": f"ncclras: {exc}"}
    return {"available": proc.returncode == 0, "text": (proc.stdout or proc.stderr)[-4000:], "exit": proc.returncode}


def gpus() -> dict[str, Any]:
    """Each GPU's utilisation and memory from NVML, where it answers."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - no NVML here: recorded as not available
        return {"available": False, "why": f"NVML: {type(exc).__name__}: {exc}"[:200]}
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            util, mem = pynvml.nvmlDeviceGetUtilizationRates(h), pynvml.nvmlDeviceGetMemoryInfo(h)
            bus = pynvml.nvmlDeviceGetPciInfo(h).busId
            out.append({"index": i, "bus_id": bus.decode() if isinstance(bus, bytes) else str(bus), "util_pct": util.gpu,
                        "mem_used_mib": mem.used >> 20, "mem_total_mib": mem.total >> 20})
        return {"available": True, "gpus": out}
    except Exception as exc:  # noqa: BLE001
        return {"available": False, "why": f"NVML: {type(exc).__name__}: {exc}"[:200]}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def capture_rank(proc: procs.RankProc, node: str, cpu_before: float | None = None) -> RankCapture:
    """Everything the capture takes of one rank."""
    pid = proc["pid"]
    cpu = procs.cpu_seconds(pid)
    env = procs.environ(pid)
    return RankCapture(rank=proc["rank"], local_rank=proc["local_rank"], node_rank=proc["node_rank"], node=node, pid=pid,
                       cpu_s=cpu, cpu_delta_s=None if cpu is None or cpu_before is None else round(cpu - cpu_before, 3),
                       stacks=dump_stacks(pid), wchan=procs.wchan(pid), status=procs.status(pid),
                       tcp=procs.tcp_connections(pid), flight_recorder=flight_recorder(proc["rank"], env))


def capture_node(root: int | None, node: str, node_rank: int, cpu_before: Mapping[int, float] | None = None) -> NodeCapture:
    """The capture of every rank under ``root`` (torchrun or its shim) on this node, and the node's RAS and GPUs."""
    alive = root is not None and os.path.exists(f"/proc/{root}")
    ranks = procs.rank_processes(root) if alive and root is not None else []
    before = cpu_before or {}
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(ranks)))) as pool:
        taken = list(pool.map(lambda p: capture_rank(p, node, before.get(p["rank"])), ranks))
    for rank in taken:   # the send queues read again, after the stacks: a queue that did not drain is stuck
        later = {(c["local"], c["peer"]): c["send_q"] for c in procs.tcp_connections(rank["pid"])}
        for conn in rank["tcp"]:
            conn["send_q_later"] = later.get((conn["local"], conn["peer"]))  # type: ignore[typeddict-unknown-key]
    out = NodeCapture(node=node, node_rank=node_rank, host=socket.gethostname(), torchrun_pid=root, torchrun_alive=alive,
                      ranks=taken, ras=nccl_ras(), gpus=gpus(), taken_at=time.time())
    if alive and root is not None and not taken:   # no rank yet: where torchrun's agent waits (rendezvous or not)
        out["agent"] = {"pid": root, "stacks": dump_stacks(root, native=False)}
    return out


#: the key of torchrun's own agent in a sample (before its workers exist, the agent is what works: imports, rendezvous)
AGENT = -1


#: py-spy dumps of each rank in one sample
SAMPLE_DUMPS = 3


def sample_node(root: int | None, dumps: int = SAMPLE_DUMPS) -> dict[int, tuple[float | None, tuple[tuple[str, ...], ...], float]]:
    """One sample of every rank under ``root`` and of ``root`` itself (torchrun's agent, key AGENT): CPU time, its
    Python stack ``dumps`` times in a row (py-spy, no native frames), the time."""
    if root is None or not os.path.exists(f"/proc/{root}"):
        return {}
    pids = [(AGENT, root)] + [(p["rank"], p["pid"]) for p in procs.rank_processes(root)]

    def one(item: tuple[int, int]) -> tuple[int, tuple[float | None, tuple[tuple[str, ...], ...], float]]:
        key, pid = item
        cpu, at = procs.cpu_seconds(pid), time.monotonic()
        return key, (cpu, tuple(python_stack(dump_stacks(pid, native=False)) for _ in range(dumps)), at)

    with ThreadPoolExecutor(max_workers=min(8, len(pids))) as pool:
        return dict(pool.map(one, pids))


def fr_dumps(fr_dir: str) -> list[str]:
    """The dump files in the run's Flight Recorder directory (for the report)."""
    return sorted(glob.glob(os.path.join(fr_dir, "fr_dump_*")))
