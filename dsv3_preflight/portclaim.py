"""Claims on a TCP port between dsv3-preflight runs on one node: two runs at once must not see each other.

A run's ``port_bind`` test listener and its collective probe listen on MASTER_PORT for a moment; a second
run started at the same moment would see them through ``port_holders``/``port_bind`` and blame "a leftover
process", or lose the port to them. So a probe that binds or inspects the port first *claims* it; a second
run's probe waits for the claim (bounded by its timeout) and, when it cannot get it, says which run holds it
(pid and command line) instead of judging the port.

The claim is a listening Unix socket in the Linux *abstract* namespace, ``@dsv3-preflight/port/39500``:

- it lives exactly as long as the claiming process holds it: the kernel frees it when the process exits,
  even on SIGKILL (no stale lock file, nothing left in /tmp);
- it is per network namespace, like the port itself: runs in two containers or namespaces do not contend;
- the holder's PID is the kernel's (``SO_PEERCRED``), not a number written in a file.
"""
from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

POLL_S = 0.05


@dataclass(frozen=True)
class Holder:
    """Who holds a claim: pid and command line (None where this user cannot see them)."""

    pid: int | None
    cmdline: str | None

    def describe(self) -> str:
        if self.pid is None:
            return "another dsv3-preflight run (its pid is not visible)"
        return f"another dsv3-preflight run, pid {self.pid}" + (f" ({self.cmdline})" if self.cmdline else "")


class PortBusy(Exception):
    """The port is claimed by another live dsv3-preflight run; ``holder`` says which."""

    def __init__(self, port: int, holder: Holder, waited_s: float) -> None:
        super().__init__(f"port {port} is in use by {holder.describe()}: this run waited {waited_s:.1f} s for it and "
                         "did not touch the port; run again when that run has finished")
        self.port, self.holder, self.waited_s = port, holder, waited_s


def _address(port: int) -> str:
    return f"\0dsv3-preflight/port/{int(port)}"


def holder(port: int) -> Holder | None:
    """The run holding the claim on ``port``, or None when nobody does."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)  # a full backlog must not block us
    try:
        sock.connect(_address(port))
    except (ConnectionRefusedError, FileNotFoundError):
        return None
    except (BlockingIOError, OSError):
        return Holder(None, None)
    try:
        pid, _uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except OSError:
        return Holder(None, None)
    finally:
        sock.close()
    return Holder(pid, _cmdline(pid))


def _named(found: Holder | None) -> Holder | None:
    """``found`` when it is another process; None when it is this one: the address still held by a socket this
    process made (a copy a child inherited for a moment; seen in CI, where the run then named itself as
    "another dsv3-preflight run"). A run never names itself."""
    return None if found is None or found.pid == os.getpid() else found


def _cmdline(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            raw = fh.read(4096)
    except OSError:
        return None
    words = [w.decode(errors="replace") for w in raw.split(b"\0") if w]
    if len(words) >= 3 and words[1:3] == ["-m", "dsv3_preflight"]:  # python -m dsv3_preflight run ... -> dsv3-preflight run ...
        words = ["dsv3-preflight", *words[3:]]
    text = " ".join(words)
    return text[:200] or None


#: claims this process holds: port -> [listening socket, number of holders]. Probes of one run share them
#: (port_bind and port_holders run at the same time; they are one run, not two)
_HELD: dict[int, list] = {}
_HELD_LOCK = threading.Lock()


class Claim:
    """A held claim; release it with :meth:`release` or by leaving the ``with`` block."""

    def __init__(self, port: int, waited_s: float, waited_for: Holder | None) -> None:
        self.port, self.waited_s, self.waited_for = port, waited_s, waited_for
        self._released = False

    def release(self) -> None:
        with _HELD_LOCK:
            if self._released:
                return
            self._released = True
            entry = _HELD.get(self.port)
            if entry is not None:
                entry[1] -= 1
                if entry[1] <= 0:
                    entry[0].close()
                    del _HELD[self.port]

    def __enter__(self) -> Claim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def try_claim(port: int) -> socket.socket | None:
    """Claim ``port`` now: the listening socket, or None when another process holds the claim."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(_address(port))
        sock.listen(64)
    except OSError:
        sock.close()
        return None
    return sock


def claim(port: int, wait_s: float) -> Claim:
    """Claim ``port``, waiting up to ``wait_s`` seconds for another run to release it; :class:`PortBusy` names
    that run when it does not. Within one process the claim is shared (counted), never waited for."""
    started = time.monotonic()
    deadline = started + max(wait_s, 0.0)
    first_holder: Holder | None = None
    while True:
        with _HELD_LOCK:
            entry = _HELD.get(port)
            if entry is not None:
                entry[1] += 1
                return Claim(port, time.monotonic() - started, first_holder)
            sock = try_claim(port)
            if sock is not None:
                _HELD[port] = [sock, 1]
                return Claim(port, time.monotonic() - started, first_holder)
            if first_holder is None:
                # asked under the lock: another probe of this run cannot take the claim in between and be named
                # as "another run" (None: the other run let go meanwhile; try again at once)
                found = holder(port)
                if found is None:
                    continue
                first_holder = _named(found)
        if time.monotonic() >= deadline:
            raise PortBusy(port, _named(holder(port)) or first_holder or Holder(None, None), time.monotonic() - started)
        time.sleep(POLL_S)


@contextlib.contextmanager
def claimed(port: int, wait_s: float) -> Iterator[Claim]:
    """``with claimed(39500, wait_s=10) as c:`` hold the claim for the block."""
    held = claim(port, wait_s)
    try:
        yield held
    finally:
        held.release()
