"""port_holders with real processes and real sockets: a socket of this run held by its own child is not a leftover
(psutil names the last process it finds holding a socket, which is the child); another process's listener is.

Seen in CI: of two runs started at once on one MASTER_PORT, one failed host.resources with "port 27094 is held by
pid 20695 (python -c import ctypes…)", the child its own CUDA probe had just forked while port_bind listened."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
from ports import free_port

from dsv3_preflight.host.probes.resources import port_holders
from dsv3_preflight.profile import resolve_profile

SLEEPER = "import time; time.sleep(60)"
# a child that starts a grandchild holding the inherited socket, then sleeps itself
PARENT_OF_SLEEPER = ("import subprocess, sys; fd = int(sys.argv[1]); "
                     "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], pass_fds=[fd]); "
                     "import time; time.sleep(60)")
# a process that is not ours: forked by a child that exits at once, so init (or a subreaper) adopts it
ORPHAN_LISTENER = """
import os, socket, sys, time
port = int(sys.argv[1])
if os.fork():
    os._exit(0)
os.setsid()
s = socket.socket(); s.bind(("127.0.0.1", port)); s.listen()
print(os.getpid(), flush=True)
os.close(1)  # the starter's reader sees the end of its output
time.sleep(60)
"""


def _holders(port: int) -> list[dict]:
    profile = resolve_profile(profile_name="cpu", cli={"master_port": port})
    return port_holders.gather(profile=profile, env={})["holders"]


def _listener(port: int) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def _wait_held_by(pid: int, inode_of: socket.socket, timeout: float = 10.0) -> None:
    """Until ``pid`` holds the socket (its descriptor table has the socket's inode)."""
    inode = os.fstat(inode_of.fileno()).st_ino
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]" for fd in os.listdir(f"/proc/{pid}/fd")):
                return
        except OSError:
            pass
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} never held the socket")


def _stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


def test_this_runs_listener_held_by_its_child_too_is_not_a_holder():
    port = free_port()
    sock = _listener(port)
    child = subprocess.Popen([sys.executable, "-c", SLEEPER], pass_fds=[sock.fileno()], start_new_session=True)
    try:
        _wait_held_by(child.pid, sock)
        assert _holders(port) == []
    finally:
        _stop(child)
        sock.close()


def test_this_runs_listener_held_by_a_grandchild_is_not_a_holder():
    port = free_port()
    sock = _listener(port)
    child = subprocess.Popen([sys.executable, "-c", PARENT_OF_SLEEPER, str(sock.fileno())], pass_fds=[sock.fileno()],
                             start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        grandchildren: list[int] = []
        while not grandchildren and time.monotonic() < deadline:
            grandchildren = [int(p) for p in open(f"/proc/{child.pid}/task/{child.pid}/children").read().split()]
            time.sleep(0.02)
        assert grandchildren, "the child started no grandchild"
        _wait_held_by(grandchildren[0], sock)
        assert _holders(port) == []
    finally:
        _stop(child)
        sock.close()


@contextlib.contextmanager
def _orphan_listening(port: int):
    """A listener on ``port`` in a process this run did not start (its parent exited), once it is a holder of the
    port: yields (its pid, its holders); SIGKILLed by pid at the end."""
    starter = subprocess.run([sys.executable, "-c", ORPHAN_LISTENER, str(port)], stdout=subprocess.PIPE, text=True,
                             timeout=30)
    orphan = int(starter.stdout.split()[0])
    try:
        deadline = time.monotonic() + 10
        holders: list[dict] = []
        while not holders and time.monotonic() < deadline:
            holders = _holders(port)
            time.sleep(0.05)
        yield orphan, holders
    finally:
        try:
            os.kill(orphan, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_listener_of_a_process_not_started_by_this_run_is_named():
    port = free_port()
    with _orphan_listening(port) as (orphan, holders):
        assert [(h["port"], h["process"]["pid"]) for h in holders] == [(port, orphan)]
        assert holders[0]["status"] == "LISTEN" and holders[0]["process"]["cmdline"].endswith(str(port))


def test_a_listener_inside_nccl_port_range_is_not_a_holder_nccl_has_no_such_range():
    """Issue 46.8: NCCL_PORT_RANGE is not NCCL's (NVIDIA/nccl#388): a listener of another process inside it is not
    named (it was, as 'inside NCCL_PORT_RANGE'); only MASTER_PORT's holders are facts here."""
    port, other = free_port(), free_port()
    while other == port:
        other = free_port()
    with _orphan_listening(other) as (_, holders):
        assert holders, "the orphan listener never listened"   # it listens: it is a holder of its own port
        profile = resolve_profile(profile_name="cpu", cli={"master_port": port})
        fact = port_holders.gather(profile=profile, env={"NCCL_PORT_RANGE": f"{other}-{other}"})
        assert fact["holders"] == [] and "nccl_port_range" not in fact


@pytest.fixture(autouse=True)
def _no_master_env(monkeypatch):
    for name in list(os.environ):
        if name.startswith(("MASTER_", "NCCL_")):
            monkeypatch.delenv(name)
