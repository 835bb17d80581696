"""One process per node that imports torch once and forks the collective probe's ranks from it.

Every rank of the probe used to be a fresh interpreter (``python -m dsv3_preflight.collective.probes.worker``)
that imported torch on its own: 1-2 CPU-seconds each with the CPU wheel, several seconds with a CUDA build on a
busy node, repeated by every local rank at once and again in every round of the pairwise probe. The zygote is
started once per process that runs ranks (the CLI, or the Ray worker that runs a node's part in cluster mode, across
the rounds), imports torch, ``torch.distributed`` and the worker module, and then forks one child per rank. A fork
shares the imported torch copy-on-write and runs :func:`worker.main` at once.

The protocol is JSON lines: the owner writes ``{"id", "argv", "env", "log", "cwd"}`` on the zygote's stdin; the
zygote answers ``{"event": "ready", ...}`` once (after its imports), ``{"event": "started", "id", "pid"}`` per
rank, and ``{"event": "exit", "pid", "code"}`` when it reaps one (``code`` as Popen's returncode: negative for a
signal). It exits when its stdin closes (its owner exited or was killed).

A forked rank behaves as an exec'd one: its own session, stdin from /dev/null, stdout and stderr into its log, the
environment the owner gave it (set before torch.distributed reads any of it: Gloo, NCCL and c10d read their
variables when a process group or store is made), and ``--parent-pid`` the zygote's pid, so the rank's watchdog ends
it when the zygote goes (its owner's death closes the zygote). What a fork cannot change is what was read when
torch was imported (the dynamic linker's and the interpreter's variables, OpenMP's): :func:`import_key` holds those,
and the owner starts a new zygote when a call's differ (:class:`Zygote`).

The owner side, :class:`Zygote`, never waits unbounded: the zygote's imports are bounded by the caller's deadline,
and any failure (the imports fail, time out, or the zygote dies) makes :func:`spawn` raise
:class:`ZygoteUnavailable`, on which the caller starts the rank as a fresh interpreter instead.
"""
from __future__ import annotations

import io
import json
import os
import select
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

#: DSV3_PREFLIGHT_RANK_SPAWN=exec starts every rank as a fresh interpreter (the zygote's fallback, always)
SPAWN_ENV = "DSV3_PREFLIGHT_RANK_SPAWN"
#: what the dynamic linker, the interpreter, OpenMP and torch read when torch is imported: a fork keeps the values
#: its zygote had then, so a call whose values differ gets a zygote of its own
IMPORT_TIME_PREFIXES = ("PYTHON", "LD_", "OMP_", "KMP_", "MKL_", "TORCH_", "CUDA_", "VIRTUAL_ENV", "PATH")
#: how long the owner waits for a zygote's answer to a fork (it forks at once; a zygote that does not answer is gone)
FORK_ANSWER_S = 10.0


class ZygoteUnavailable(RuntimeError):
    """The zygote could not start this rank (its imports failed or timed out, or it died): exec the rank instead.
    ``lasting``: its imports failed, and would fail again in this process for the same environment."""

    def __init__(self, message: str, *, lasting: bool = False) -> None:
        super().__init__(message)
        self.lasting = lasting


def import_key(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables a forked rank cannot change: read when the zygote imported torch."""
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(IMPORT_TIME_PREFIXES)))


def wanted(env: Mapping[str, str]) -> bool:
    """Whether ranks are forked from a zygote (the default) rather than exec'd."""
    return (env.get(SPAWN_ENV) or "zygote").strip().lower() != "exec"


# -- the zygote itself ---------------------------------------------------------------------------------------
def _send(event: dict[str, Any]) -> None:
    os.write(1, (json.dumps(event) + "\n").encode())


def _child(request: dict[str, Any], zygote_pid: int, wake_r: int, wake_w: int) -> None:
    """In the fork: become the rank (session, fds, cwd, environment) and run the worker; never returns."""
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)   # as an exec'd rank's (the zygote ignores it)
        os.close(wake_r)
        os.close(wake_w)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(null)
        os.close(log)
        # unbuffered, as PYTHONUNBUFFERED makes an exec'd rank: its last lines must be in the log if it is killed
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        from . import worker

        code = worker.main([*request["argv"], "--parent-pid", str(zygote_pid)])
    except BaseException as exc:  # noqa: BLE001 - the rank's failure is its exit code and its log
        code = exc.code if isinstance(exc, SystemExit) and isinstance(exc.code, int) else 1
        if not isinstance(exc, SystemExit):
            print(f"[dsv3-preflight zygote child] {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)   # as the exec'd worker: no interpreter teardown of torch's and Gloo's threads


def _reap() -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send({"event": "exit", "pid": pid, "code": os.waitstatus_to_exitcode(status)})


def _exit_when_orphaned(importing: threading.Event) -> None:
    """While the zygote imports (seconds, and it reads no request then): exit at once when its stdin hangs up.

    The owner writes nothing before "ready", so a hang-up then is its end: a command stopped by a signal while its
    probe thread was starting the zygote exits without waiting for it (``os._exit``, after its clean-up had looked
    for its children), and the zygote would otherwise live on until torch had finished importing."""
    poller = select.poll()
    poller.register(0, select.POLLHUP)
    while importing.is_set():
        for _, events in poller.poll(100):
            if events & (select.POLLHUP | select.POLLERR | select.POLLNVAL):
                os._exit(0)


def serve(owner: int) -> int:
    """The zygote's main loop (``python -m dsv3_preflight.collective.probes.zygote OWNER_PID``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # a terminal's Ctrl-C is the owner's to handle
    started = time.monotonic()
    importing = threading.Event()
    importing.set()
    watcher = threading.Thread(target=_exit_when_orphaned, args=(importing,), name="dsv3-zygote-orphan", daemon=True)
    watcher.start()
    try:
        import torch  # noqa: F401 - the import every rank would repeat
        import torch.distributed  # noqa: F401

        from . import worker  # noqa: F401
    except BaseException as exc:  # noqa: BLE001 - the owner execs the ranks instead, and they report the failure
        _send({"event": "ready", "ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]})
        return 1
    finally:
        importing.clear()   # the main loop reads stdin from here on, and forks: no thread of ours is left running
        watcher.join()
    if os.getppid() != owner:   # the owner went while torch was imported
        return 0
    _send({"event": "ready", "ok": True, "pid": os.getpid(), "import_s": round(time.monotonic() - started, 3)})
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(0, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    pending = b""
    while True:
        for key, _ in selector.select():
            if key.fd == wake_r:
                os.read(wake_r, 4096)
                _reap()
                continue
            data = os.read(0, 1 << 16)
            if not data:   # the owner closed our stdin, or exited
                return 0
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    request = json.loads(line)
                    pid = os.fork()
                    if pid == 0:
                        selector.close()
                        _child(request, os.getppid(), wake_r, wake_w)
                    _send({"event": "started", "id": request["id"], "pid": pid})


# -- the owner's side ----------------------------------------------------------------------------------------
class ForkedRank:
    """A rank the zygote forked, with the part of :class:`subprocess.Popen` the probe uses: ``pid``, ``poll()``,
    ``wait(timeout)``, ``returncode``. Its exit code is the zygote's report; if the zygote is gone before it
    reports, the code stays unknown (None) and the probe's deadline ends the wait."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self.pid = pid
        self._zygote = zygote

    @property
    def returncode(self) -> int | None:
        return self._zygote.exit_code(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        if not self._zygote.wait_exit(self.pid, timeout):
            raise subprocess.TimeoutExpired(f"rank pid {self.pid}", timeout or 0.0)
        return self.returncode


class Zygote:
    """The owner's handle on one zygote process (thread-safe): started on first use with the environment of the
    ranks it will fork, its answers read by a thread of its own."""

    def __init__(self, env: Mapping[str, str], deadline: float) -> None:
        self.key = import_key(env)
        self._cond = threading.Condition()
        self._ready: dict[str, Any] | None = None
        self._started: dict[int, int] = {}
        self._exits: dict[int, int] = {}
        self._alive = True
        self._ids = 0
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dsv3_preflight.collective.probes.zygote", str(os.getpid())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=dict(env),
            start_new_session=True)   # not in the terminal's process group: Ctrl-C is the owner's to handle
        threading.Thread(target=self._read, name="dsv3-zygote-reader", daemon=True).start()
        self._wait_ready(deadline)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def import_s(self) -> float | None:
        return (self._ready or {}).get("import_s")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                kind = event.get("event")
                if kind == "ready":
                    self._ready = event
                elif kind == "started":
                    self._started[event["id"]] = event["pid"]
                elif kind == "exit":
                    self._exits[event["pid"]] = event["code"]
                self._cond.notify_all()
        with self._cond:
            self._alive = False
            self._cond.notify_all()

    def _wait_ready(self, deadline: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: self._ready is not None or not self._alive, max(deadline - time.time(), 0.0))
            ready, alive = self._ready, self._alive
        if ready is None or not ready.get("ok"):
            why = (ready or {}).get("error") or ("its imports outlasted the deadline" if alive
                                                else "it exited before it was ready")
            self.close(grace_s=0.0)
            raise ZygoteUnavailable(f"the rank zygote is unavailable: {why}", lasting=not alive or ready is not None)

    @property
    def alive(self) -> bool:
        return self._alive and self.proc.poll() is None

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], log: str, cwd: str) -> ForkedRank:
        """Fork one rank; ZygoteUnavailable if the zygote cannot."""
        with self._cond:
            if not self.alive:
                raise ZygoteUnavailable("the rank zygote has exited")
            self._ids += 1
            rid = self._ids
            request = {"id": rid, "argv": list(argv), "env": dict(env), "log": log, "cwd": cwd}
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write((json.dumps(request) + "\n").encode())
                self.proc.stdin.flush()
            except (OSError, ValueError) as exc:
                raise ZygoteUnavailable(f"the rank zygote is gone: {exc}") from exc
            self._cond.wait_for(lambda: rid in self._started or not self._alive, FORK_ANSWER_S)
            pid = self._started.pop(rid, None)
        if pid is None:
            self.close(grace_s=0.0)
            raise ZygoteUnavailable("the rank zygote did not answer a fork")
        return ForkedRank(self, pid)

    def exit_code(self, pid: int) -> int | None:
        with self._cond:
            return self._exits.get(pid)

    def wait_exit(self, pid: int, timeout: float | None) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: pid in self._exits or not self._alive, timeout) and pid in self._exits

    def close(self, grace_s: float = 2.0) -> None:
        """End the zygote (its ranks are the caller's to end): close its stdin, then kill it if it lingers
        ``grace_s`` (at once for one that never became ready or stopped answering)."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


_LOCK = threading.Lock()
_CURRENT: Zygote | None = None
#: why no zygote is started any more in this process for an import-time environment (its imports failed there):
#: the ranks of such calls are exec'd at once
_BROKEN: dict[tuple[tuple[str, str], ...], str] = {}


def spawn(argv: Sequence[str], env: Mapping[str, str], log: str, cwd: str, deadline: float) -> tuple[ForkedRank, Zygote]:
    """Fork a rank from this process's zygote, starting one (bounded by ``deadline``, epoch seconds) if there is none
    or if the call's import-time environment differs from its. ZygoteUnavailable: exec the rank."""
    global _CURRENT
    key = import_key(env)
    with _LOCK:
        if key in _BROKEN:
            raise ZygoteUnavailable(_BROKEN[key])
        zygote = _CURRENT
        if zygote is not None and (not zygote.alive or zygote.key != key):
            zygote.close()
            zygote = _CURRENT = None
        if zygote is None:
            try:
                zygote = _CURRENT = Zygote(env, deadline)
            except ZygoteUnavailable as exc:
                if exc.lasting:   # a failed import fails again: stop trying it here
                    _BROKEN[key] = str(exc)
                raise
    return zygote.spawn(argv, env, log, cwd), zygote


def shutdown() -> None:
    """End this process's zygote (at exit; its stdin's closing ends it anyway)."""
    global _CURRENT
    with _LOCK:
        zygote, _CURRENT = _CURRENT, None
    if zygote is not None:
        zygote.close()


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1])))
