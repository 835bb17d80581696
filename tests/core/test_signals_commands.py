"""SIGINT and SIGTERM stop every long-running command cleanly: exit 2, no process of ours left alive, no port
held, no temp dir (``$TMPDIR/dsv3pf-*``) and no Ray session dir left behind.

Each command runs as a real process with a private TMPDIR, a private Ray temp dir, a free MASTER_PORT and a
marker variable in its environment that every process it starts inherits (our probes, torch's ranks, Ray's
raylet, agents and workers): after the command exits, no live process may carry the marker. SIGINT goes to
the command's whole process group, as a terminal's Ctrl-C does; SIGTERM to its PID, as ``kill``, ``timeout``
and schedulers do. Each moment is an event (a directory appears, a port answers, a line is printed) waited
for with a deadline, never a bare sleep. Embedded Ray starts on 127.0.0.1 only.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest
from conftest import REPO
from harness_env import env_without
from ports import free_port

pytestmark = pytest.mark.slow

MARKER = "DSV3PF_SIGNAL_TEST"


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
        return True
    return False


def _listener_owners(port: int) -> list[int | None]:
    """PIDs of the sockets listening on this TCP port (None where the kernel names no process)."""
    return [c.pid for c in psutil.net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port]


def _environ(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None


def _wait_for(predicate, deadline_s: float, what: str, proc: subprocess.Popen) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if predicate():
            return
        if proc.poll() is not None:
            pytest.fail(f"the command exited ({proc.returncode}) before {what}: {proc.stderr.read()[-2000:]}")
        time.sleep(0.02)
    pytest.fail(f"{what} did not happen within {deadline_s:g} s")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except (OSError, IndexError):
        return False


def _marked(tag: str) -> dict[int, str]:
    """Live processes whose environment carries this test's marker: pid -> command line."""
    needle = f"{MARKER}={tag}".encode()
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        env = _environ(int(entry))
        if not env or needle not in env or not _alive(int(entry)):
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        found[int(entry)] = cmd[:160]
    return found


class Command:
    """One command under test, with its private TMPDIR, Ray temp dir, port and marker."""

    def __init__(self, *argv: str, ray: bool = False) -> None:
        self.tag = uuid.uuid4().hex[:12]
        self.tmp = tempfile.mkdtemp(prefix="d3s", dir="/tmp")  # short: Ray's socket paths live below it
        self.ray_tmp = tempfile.mkdtemp(prefix="d3r", dir="/tmp")
        self.port = free_port()
        self.cwd = Path(self.tmp) / "cwd"
        self.cwd.mkdir()
        self.work = Path(tempfile.mkdtemp(prefix="d3w", dir="/tmp"))
        env = env_without(("RAY_", "MASTER_", "NCCL_", "GLOO_", "DSV3_PREFLIGHT"),
                          ("NNODES", "NODE_RANK", "WORLD_SIZE", "PYTEST_XDIST_WORKER"))
        env.update({MARKER: self.tag, "TMPDIR": str(Path(self.tmp) / "t"), "RAY_TMPDIR": self.ray_tmp,
                    "RAY_DISABLE_USAGE_STATS": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(self.port),
                    "PYTHONPATH": str(REPO)})
        (Path(self.tmp) / "t").mkdir()
        self.env = env
        self.argv = [sys.executable, "-m", "dsv3_preflight", *[a.format(port=self.port, work=self.work) for a in argv]]
        self.proc: subprocess.Popen | None = None
        self.foreign_listeners: dict[int, str] = {}

    def start(self) -> subprocess.Popen:
        self.proc = subprocess.Popen(self.argv, env=self.env, cwd=self.cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        return self.proc

    def temp_entries(self) -> list[str]:
        return sorted(os.listdir(Path(self.tmp) / "t"))

    def temp_files(self) -> list[str]:
        return sorted(str(p.relative_to(Path(self.tmp) / "t")) for p in (Path(self.tmp) / "t").rglob("*"))[:20]

    def signal(self, how: str) -> float:
        """SIGINT to the process group (a terminal's Ctrl-C) or SIGTERM to the process; the time it was sent."""
        assert self.proc is not None
        if how == "SIGINT":
            os.killpg(self.proc.pid, signal.SIGINT)
        else:
            self.proc.send_signal(signal.SIGTERM)
        return time.monotonic()

    def finish(self, timeout: float = 60.0) -> tuple[int, str]:
        assert self.proc is not None
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            _, err = self.proc.communicate()
            pytest.fail(f"the command did not stop within {timeout:g} s of the signal: {err[-2000:]}")
        return self.proc.returncode, err

    def leftovers(self) -> dict[str, object]:
        """What the command left: live marked processes (after up to 3 s: the kernel reaps a killed process's
        children), listening ports of this test, entries of the private TMPDIR, Ray session dirs."""
        end = time.monotonic() + 3.0
        procs, listening = _marked(self.tag), _answers(self.port)
        while (procs or listening) and time.monotonic() < end:
            time.sleep(0.05)
            procs, listening = _marked(self.tag), _answers(self.port)
        sessions = [str(p) for p in Path(self.ray_tmp).rglob("session_*")]
        return {"processes": procs, "port_listening": listening and not self._held_by_another(),
                "tempdirs": self.temp_entries(), "ray_sessions": sessions}

    def _held_by_another(self) -> bool:
        """Whether every listener on the port is a live process of someone else: one whose environment, read
        whole, lacks this command's marker (another test on another xdist worker may draw the same free port).
        A listener without a PID, or one whose environment reads empty (a process of ours in the middle of
        exiting: the kernel drops its memory, environment included, before its sockets) is the command's."""
        owners = _listener_owners(self.port)
        needle = f"{MARKER}={self.tag}".encode()
        foreign = []
        for pid in owners:
            env = _environ(pid) if pid is not None else None
            if not env or needle in env:
                return False
            foreign.append(pid)
        for pid in foreign:
            with contextlib.suppress(psutil.Error):
                self.foreign_listeners[pid] = " ".join(psutil.Process(pid).cmdline())[:160]
        return bool(foreign)

    def close(self) -> None:
        for pid in _marked(self.tag):  # never leave a test's process behind, whatever the assertion said
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        for path in (self.tmp, self.ray_tmp, str(self.work)):
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def command():
    made: list[Command] = []

    def make(*argv: str, ray: bool = False) -> Command:
        made.append(Command(*argv, ray=ray))
        return made[-1]

    yield make
    for c in made:
        c.close()


def _stopped_cleanly(cmd: Command, how: str, *, stop_within: float = 30.0) -> None:
    sent = cmd.signal(how)
    code, err = cmd.finish(timeout=60.0)
    took = time.monotonic() - sent
    left = cmd.leftovers()
    assert code == 2, f"exit {code} after {how}: {err[-3000:]}"
    assert f"interrupted by {how}" in err, err[-2000:]
    assert left == {"processes": {}, "port_listening": False, "tempdirs": [], "ray_sessions": []}, (left, cmd.temp_files(), cmd.foreign_listeners)
    assert took < stop_within, f"stopping took {took:.1f} s"


def _collective_dir(cmd: Command):
    return lambda: any(name.startswith("dsv3pf-collective-") for name in cmd.temp_entries())


# -- run --------------------------------------------------------------------------------------------------------
def test_run_sigterm_while_the_collective_probe_starts_its_ranks_leaves_nothing(command):
    cmd = command("run", "--profile", "cpu", "--no-report", "--no-color")
    proc = cmd.start()
    _wait_for(_collective_dir(cmd), 60, "the collective probe's work dir appeared", proc)
    _stopped_cleanly(cmd, "SIGTERM")


def test_run_ctrl_c_while_rank_0_holds_the_rendezvous_port_leaves_nothing(command):
    cmd = command("run", "--profile", "cpu", "--no-report", "--no-color")
    proc = cmd.start()
    _wait_for(lambda: _answers(cmd.port), 60, "the collective probe's store answered", proc)
    _stopped_cleanly(cmd, "SIGINT")


# -- probe, listen, lora watch, launch --------------------------------------------------------------------------
PROBE = ("probe", "--profile", "cpu", "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1",
         "--master-port", "{port}", "--timeout", "120")


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT"])
def test_probe_waiting_for_a_peer_stops_its_ranks_and_frees_the_port(command, how):
    cmd = command(*PROBE)
    proc = cmd.start()
    _wait_for(lambda: _answers(cmd.port), 60, "rank 0's store answered", proc)
    _stopped_cleanly(cmd, how, stop_within=10)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT"])
def test_listen_frees_the_port(command, how):
    cmd = command("listen", "--host", "127.0.0.1", "--port", "{port}", "--deadline", "120")
    proc = cmd.start()
    _wait_for(lambda: _answers(cmd.port), 30, "the listener answered", proc)
    _stopped_cleanly(cmd, how, stop_within=10)


def test_lora_watch_stops_with_its_summary(command):
    pytest.importorskip("peft")
    cmd = command("lora", "watch", "{work}", "--interval", "0.5", "--no-color")
    proc = cmd.start()
    first: list[str] = []
    _wait_for(lambda: first.append(proc.stdout.readline()) or bool(first[-1].strip()), 30, "watch printed its start line",
              proc)
    _stopped_cleanly(cmd, "SIGINT", stop_within=10)


def test_launch_sigterm_during_its_preflight_starts_nothing_and_leaves_nothing(command):
    cmd = command("launch", "--profile", "cpu", "--no-report", "--no-color", "--", "train.py")
    (cmd.cwd / "train.py").write_text("import time\ntime.sleep(600)\n")
    proc = cmd.start()
    _wait_for(lambda: _answers(cmd.port), 60, "the preflight's collective store answered", proc)
    _stopped_cleanly(cmd, "SIGTERM")


# -- run --all-nodes --probe, embedded Ray on 127.0.0.1 ----------------------------------------------------------
ALL_NODES = ("run", "--all-nodes", "--probe", "--ray-address", "local", "--profile", "cpu", "--no-report", "--no-color",
             "--only", "env.*,host.*,cluster.*")


def _ray_session_started(cmd: Command):
    return lambda: any(Path(cmd.tmp, "t").glob("dsv3pf-ray-*/session_*"))


@pytest.mark.ray
def test_ctrl_c_while_the_embedded_ray_starts_stops_it_whole(command):
    """SIGINT in the middle of ray.init crashed the interpreter (SIGSEGV) and orphaned Ray's dashboard and
    runtime-env agents with 5 listening ports: now the signal waits for ray.init, and Ray is stopped in order."""
    pytest.importorskip("ray")
    cmd = command(*ALL_NODES, ray=True)
    proc = cmd.start()
    _wait_for(_ray_session_started(cmd), 90, "the embedded Ray's session dir appeared (ray.init running)", proc)
    _stopped_cleanly(cmd, "SIGINT", stop_within=45)


@pytest.mark.ray
def test_sigterm_during_the_gang_probe_stops_ray_and_the_ranks(command):
    pytest.importorskip("ray")
    cmd = command(*ALL_NODES, ray=True)
    proc = cmd.start()
    # the gang's work dir (made before its ranks start, kept until they end) rather than its store alone: the store
    # answers only between the ranks' torch import and their exit, and a warm machine ran the whole one-node gang
    # in 1.2 s without this poll seeing it (fresh-clone CI: the command exited 0 first)
    gang_dir = _collective_dir(cmd)
    _wait_for(lambda: gang_dir() or _answers(cmd.port), 120, "the gang's work dir appeared or its store answered", proc)
    _stopped_cleanly(cmd, "SIGTERM", stop_within=45)


def test_a_run_that_ends_at_its_deadline_while_the_collective_probe_works_leaves_nothing(command):
    """`run --timeout 1` returned while the collective probe's ranks still ran: they and their work dir stayed."""
    cmd = command("run", "--profile", "cpu", "--no-report", "--no-color", "--timeout", "1")
    cmd.start()
    code, err = cmd.finish(timeout=60)
    assert code == 1, err[-2000:]  # checks that could not finish in 1 s are ERROR, never PASS
    assert cmd.leftovers() == {"processes": {}, "port_listening": False, "tempdirs": [], "ray_sessions": []}


def test_the_leftovers_check_counts_the_commands_own_listener_and_not_another_processs(command):
    """The port check tells the command's listener (its environment carries the marker) from one another test
    bound to the same free port: a listener of the command is a leftover, another process's is not."""
    cmd = command("listen")
    code = "import socket,sys,time; s=socket.create_server(('127.0.0.1', int(sys.argv[1]))); print(1, flush=True); time.sleep(60)"
    own = subprocess.Popen([sys.executable, "-c", code, str(cmd.port)], env=cmd.env, stdout=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        assert own.stdout.readline().strip() == "1"
        left = cmd.leftovers()
        assert left["port_listening"] is True and own.pid in left["processes"], left
    finally:
        own.kill()
        own.wait()
    with socket.create_server(("127.0.0.1", cmd.port)):   # this pytest process: no marker in its environment
        left = cmd.leftovers()
        assert left["port_listening"] is False, left
        assert list(cmd.foreign_listeners) == [os.getpid()], cmd.foreign_listeners
    assert cmd.leftovers()["port_listening"] is False
