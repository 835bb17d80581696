"""Signals, child processes and temporary directories of one dsv3-preflight command.

The contract (docs/security.md, "Signals and cleanup"): SIGINT, SIGTERM or SIGHUP stop every process the
command started, release every port they held, remove the command's temporary directories
(``$TMPDIR/dsv3pf-*``) and end the command with exit code 2. The same cleanup runs at every normal exit,
so a probe still running past the run's deadline (``run --timeout 1``) leaves nothing behind either.

How:

- :func:`install` (the CLI calls it first) installs the handlers and puts a fresh cookie in this process's
  environment (``DSV3_PREFLIGHT_RUN_ID``). Every process started from here inherits it, whatever starts
  it (our probes, torch, Ray's raylet and its agents and workers), and keeps it when its parent dies and it
  is re-parented. :func:`cleanup` finds them by that cookie in ``/proc/PID/environ`` and ends them by PID:
  the way Jenkins' ProcessTreeKiller finds a build's processes. Nothing without our cookie is ever signalled
  (never ``ray stop``, never a kill by name).
- :func:`spawn` and :func:`run` start a probe's children in their own process group (a session), and
  :func:`run` kills that whole group at the timeout: a child's own children die with it (``subprocess.run``
  kills only the child and leaves a grandchild running, holding the pipes or a port).
- :func:`mkdtemp` makes a ``dsv3pf-`` directory that cleanup removes if its owner did not.
- :func:`deferred` holds a signal back while something must not be torn in half (Ray starting its
  processes: an interrupt inside ``ray.init`` crashed the interpreter and orphaned Ray's agents); the signal
  takes effect when the block ends. It also puts our handlers back (``ray.init`` installs its own SIGTERM
  handler, which ended the command with ``sys.exit(15)``).
"""
from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

COOKIE_VAR = "DSV3_PREFLIGHT_RUN_ID"
TEMP_PREFIX = "dsv3pf-"
EXIT_INTERRUPTED = 2
#: the signals that stop a command (SIGHUP: the terminal went away)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: how long children get between SIGTERM and SIGKILL at cleanup
CLEANUP_GRACE_S = 2.0


class Interrupted(KeyboardInterrupt):
    """The command was told to stop by a signal (exit 2). A KeyboardInterrupt, so code that already
    cleans up on Ctrl-C does so on SIGTERM too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


class _State:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.installed = False
        self.previous: dict[int, Any] = {}
        self.cookie: str | None = None
        self.previous_cookie: str | None = None
        self.received: int | None = None
        self.stopped_by: int | None = None   # the stop signal of the last command, kept past uninstall()
        self.pending: int | None = None
        self.defer_depth = 0
        self.cleaning = False
        self.atexit_registered = False
        self.installed_at = 0.0
        self.subreaper = False
        self.children: dict[int, subprocess.Popen] = {}
        self.tempdirs: list[str] = []


_state = _State()


# -- signals ------------------------------------------------------------------------------------------------
def _handler(signum: int, frame: Any) -> None:  # noqa: ARG001 - signal handler signature
    if _state.received is not None:
        return  # already stopping: cleanup is bounded, a second Ctrl-C must not tear it in half
    _state.received = signum
    if _state.defer_depth or _state.cleaning:
        _state.pending = signum
        if _state.defer_depth and not _state.cleaning:
            threading.Thread(target=_give_up_deferring, name="signals.deferred-watchdog", daemon=True).start()
        return
    raise Interrupted(signum)


#: how long a deferred stop signal may wait for the block holding it (ray.init) before the command stops anyway
DEFER_MAX_S = 20.0


def _give_up_deferring() -> None:
    """A stop signal waited DEFER_MAX_S for a deferred block (ray.init waiting for a GCS that the same signal
    killed): end our children and exit 2 without waiting any longer (never hang)."""
    deadline = time.monotonic() + DEFER_MAX_S
    while time.monotonic() < deadline:
        if not _state.defer_depth or _state.cleaning:
            return
        time.sleep(0.1)
    if _state.defer_depth and not _state.cleaning:
        cleanup()
        with contextlib.suppress(Exception):
            import sys

            sys.stderr.write(f"dsv3-preflight: interrupted: gave up waiting {DEFER_MAX_S:g} s for Ray to finish "
                             f"starting; stopped the processes it started (exit {EXIT_INTERRUPTED})\n")
            sys.stderr.flush()
        _exit_now(EXIT_INTERRUPTED)


def _exit_now(code: int) -> None:
    real = os._exit
    real(code)


def exit_after_stop(code: int) -> None:
    """The process's end once a command stopped on a signal has cleaned up (the console script's, never a caller's
    in-process): its temp dirs removed and its streams flushed, then ``os._exit(code)`` without the interpreter's
    teardown. A Ray driver's C++ teardown at exit, its threads still mid-call when the signal came, aborted the
    process (SIGABRT) on a loaded machine after the command had printed "exit 2" (fresh-clone run,
    tests/core/test_signals_commands.py). Returns when the last command was not stopped by a signal."""
    if _state.stopped_by is None:
        return
    _remove_at_exit()
    import sys

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    _exit_now(code)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def install() -> str:
    """Install the stop handlers (main thread only) and a fresh run cookie; returns the cookie.

    Called once per command by the CLI; :func:`uninstall` restores what was there (tests call the CLI
    in-process)."""
    with _state.lock:
        if _state.installed:
            return _state.cookie or ""
        if not _state.atexit_registered:  # registered first, so it runs last
            atexit.register(_remove_at_exit)
            _state.atexit_registered = True
        _state.installed_at = time.time()
        _state.cookie = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        _state.previous_cookie = os.environ.get(COOKIE_VAR)
        os.environ[COOKIE_VAR] = _state.cookie
        _state.received = _state.pending = None
        _state.cleaning = False
        if _in_main_thread():
            for sig in STOP_SIGNALS:
                _state.previous[sig] = signal.getsignal(sig)
                signal.signal(sig, _handler)
        _state.installed = True
        return _state.cookie


_PR_SET_CHILD_SUBREAPER = 36


def _prctl_subreaper(on: bool) -> bool:
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return False


def become_subreaper() -> bool:
    """Make this process the child subreaper of everything it starts (Linux ``PR_SET_CHILD_SUBREAPER``, as
    init systems and container inits do): a descendant whose parent dies is re-parented to us, not to init,
    so :func:`cleanup` still finds it among our descendants. Only the CLI process does this (not a test or a
    library calling :func:`dsv3_preflight.cli.main`); :func:`release` undoes it before ``exec``."""
    _state.subreaper = _prctl_subreaper(True)
    return _state.subreaper


def release() -> None:
    """Before ``exec`` of another program (``launch`` starting torchrun): end what the preflight left, stop being
    a subreaper, restore the handlers and the environment (torchrun gets neither our cookie nor our handlers)."""
    cleanup()
    if _state.subreaper:
        _prctl_subreaper(False)
        _state.subreaper = False
    uninstall()


def reassert() -> None:
    """Put our handlers back where a library replaced them (``ray.init`` installs its own SIGTERM handler)."""
    if _state.installed and _in_main_thread():
        for sig in STOP_SIGNALS:
            if signal.getsignal(sig) is not _handler:
                signal.signal(sig, _handler)


def uninstall() -> None:
    """Restore the handlers and the environment as they were before :func:`install`."""
    with _state.lock:
        if not _state.installed:
            return
        if _in_main_thread():
            for sig, previous in _state.previous.items():
                signal.signal(sig, previous if previous is not None else signal.SIG_DFL)
        _state.previous.clear()
        _state.cleaning = False
        _state.stopped_by = _state.received
        _state.received = _state.pending = None
        if _state.previous_cookie is None:
            os.environ.pop(COOKIE_VAR, None)
        else:
            os.environ[COOKIE_VAR] = _state.previous_cookie
        _state.installed = False


def received() -> int | None:
    """The stop signal this command got, or None."""
    return _state.received


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold a stop signal back until the block ends, then raise :class:`Interrupted`; our handlers are put
    back at the end (a library may have replaced them)."""
    _state.defer_depth += 1
    try:
        yield
    finally:
        _state.defer_depth -= 1
        reassert()
        if _state.defer_depth == 0 and _state.pending is not None:
            signum, _state.pending = _state.pending, None
            raise Interrupted(signum)


@contextlib.contextmanager
def starting_ray() -> Iterator[None]:
    """Around ``ray.init`` starting an embedded Ray: a stop signal waits until it returns (:func:`deferred`), and
    Ray is kept from replacing our SIGTERM handler with its own, which calls ``sys.exit(15)`` wherever the main
    thread is, inside ``ray.init`` too (a half-started Ray: exit 15 and orphaned agents holding ports)."""
    try:
        import ray._private.utils as ray_utils
    except ImportError:  # pragma: no cover - Ray is installed wherever this is called
        ray_utils = None
    original = getattr(ray_utils, "set_sigterm_handler", None)
    if original is not None:
        ray_utils.set_sigterm_handler = lambda handler: None  # noqa: ARG005 - ours stays; see docstring
    try:
        with deferred():
            yield
    except Interrupted:  # Ray is up and we are told to stop: stop it in order now (its atexit would do it after
        _stop_ray()      # our temp dirs are gone, and write its session dir again)
        raise
    finally:
        if original is not None:
            ray_utils.set_sigterm_handler = original


def _stop_ray() -> None:
    with contextlib.suppress(Exception):
        import ray

        if ray.is_initialized():
            ray.shutdown()


# -- children -----------------------------------------------------------------------------------------------
def spawn(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen:
    """``subprocess.Popen`` in a new session (its own process group), registered for :func:`cleanup`.

    End it with :func:`kill_group` (which unregisters it); ``start_new_session`` is forced."""
    kwargs["start_new_session"] = True
    proc = subprocess.Popen(list(argv), **kwargs)
    with _state.lock:
        _state.children[proc.pid] = proc
    return proc


def forget(proc: subprocess.Popen) -> None:
    """Unregister a child that has been waited for."""
    with _state.lock:
        _state.children.pop(proc.pid, None)


def kill_group(proc: subprocess.Popen, grace: float = 0.0) -> None:
    """End a child started by :func:`spawn` and every process in its group: SIGTERM, ``grace`` seconds, then
    SIGKILL; waits for the child and unregisters it."""
    if grace > 0 and proc.poll() is None:
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    _signal_group(proc.pid, signal.SIGKILL)  # also the group's other members when the leader has exited
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - a process in uninterruptible sleep (D state)
        pass
    forget(proc)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run(argv: Sequence[str], *, timeout: float, input: bytes | str | None = None, capture_output: bool = False,
        text: bool = False, check: bool = False, **kwargs: Any) -> subprocess.CompletedProcess:
    """``subprocess.run`` for probes: the child runs in its own process group and, at ``timeout``, the whole
    group is killed (the child's children too) before :class:`subprocess.TimeoutExpired` is raised with the
    output so far. A timeout is required: a probe never waits without one."""
    if capture_output:
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    if input is not None:
        kwargs["stdin"] = subprocess.PIPE
    proc = spawn(argv, text=text, **kwargs)
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        try:  # the group is dead; what it wrote is still in the pipes (a setsid'd grandchild may hold them)
            out, err = proc.communicate(timeout=2.0)
        except (subprocess.TimeoutExpired, ValueError, OSError):
            out = err = None
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        raise subprocess.TimeoutExpired(list(argv), timeout, output=out, stderr=err) from None
    except BaseException:  # an interrupt while waiting: the child and its group go with us
        kill_group(proc)
        raise
    forget(proc)
    _signal_group(proc.pid, signal.SIGKILL)  # a daemon the child left behind in its group
    completed = subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
    if check:
        completed.check_returncode()
    return completed


# -- temporary directories ----------------------------------------------------------------------------------
def mkdtemp(what: str, *, tagged: bool = True) -> str:
    """A fresh ``$TMPDIR/dsv3pf-WHAT-COOKIE-*`` directory, removed by :func:`cleanup` if its owner does not.

    The name carries the command's cookie (inherited through the environment), so the command's cleanup also
    removes the directories its descendants made (a Ray worker that ran the gang probe and was killed) and no
    other run's. ``tagged=False`` for a directory whose paths must stay short (Ray's Unix socket paths)."""
    cookie = _state.cookie or os.environ.get(COOKIE_VAR, "")
    tag = f"{cookie.rsplit('-', 1)[-1]}-" if tagged and cookie else ""
    reap_orphaned_tempdirs()
    path = tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{what}-{tag}")
    with contextlib.suppress(OSError):  # who owns it: a later run removes it once this process is gone
        with open(os.path.join(path, OWNER_FILE), "w", encoding="ascii") as fh:
            fh.write(f"{os.getpid()} {_start_time(os.getpid())}\n")
    with _state.lock:
        _state.tempdirs.append(path)
    return path


#: inside each directory :func:`mkdtemp` makes: "PID STARTTIME" of the process that made it
OWNER_FILE = ".dsv3pf-owner"


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22): with the pid, it names
    one process even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
        return int(stat[stat.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _owner_gone(path: str) -> bool:
    """True when the directory's owner file names a process that no longer exists (a dir without one: False)."""
    try:
        with open(os.path.join(path, OWNER_FILE), encoding="ascii") as fh:
            pid_text, _, start_text = fh.read(64).strip().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return False
    start = _start_time(pid)
    return start is None or (start_text.isdigit() and int(start_text) != start)


def reap_orphaned_tempdirs() -> list[str]:
    """Remove the ``dsv3pf-*`` directories whose owner died without removing them (SIGKILLed with its whole
    process group: a Ray worker and its ranks killed at once, an OOM kill). Only directories with an owner
    file naming a dead process are touched; returns the ones removed. The next run's first temp dir runs it."""
    root = tempfile.gettempdir()
    try:
        names = [n for n in os.listdir(root) if n.startswith(TEMP_PREFIX)]
    except OSError:
        return []
    removed = []
    for name in names:
        path = os.path.join(root, name)
        if os.path.isdir(path) and not os.path.islink(path) and _owner_gone(path):
            shutil.rmtree(path, ignore_errors=True)
            if not os.path.exists(path):
                removed.append(path)
    return removed


def _descendants_tempdirs() -> list[str]:
    """``dsv3pf-*`` directories in the temp dir that carry this command's cookie (made by its descendants)."""
    if not _state.cookie:
        return []
    tag = f"-{_state.cookie.rsplit('-', 1)[-1]}-"
    root = tempfile.gettempdir()
    try:
        names = os.listdir(root)
    except OSError:
        return []
    return [os.path.join(root, n) for n in names if n.startswith(TEMP_PREFIX) and tag in n]


def rmtree(path: str) -> None:
    """Remove a directory made by :func:`mkdtemp` and unregister it."""
    shutil.rmtree(path, ignore_errors=True)
    with _state.lock:
        if path in _state.tempdirs and not os.path.exists(path):  # partly removed: cleanup tries again
            _state.tempdirs.remove(path)


# -- cleanup ------------------------------------------------------------------------------------------------
def cookie_processes(cookie: str | None = None) -> list[int]:
    """PIDs of the live processes (not this one) whose environment carries ``cookie`` (default: ours)."""
    cookie = cookie or _state.cookie
    if not cookie:
        return []
    needle = f"{COOKIE_VAR}={cookie}".encode()
    me, found = os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:  # pragma: no cover - not Linux
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                env = fh.read()
        except OSError:  # gone, a kernel thread, or another user's
            continue
        if needle + b"\0" in env or env.endswith(needle):
            if _alive(int(entry)):
                found.append(int(entry))
    return found


def descendants() -> list[int]:
    """Live processes below this one started since :func:`install` (orphans included when we are the
    subreaper); processes that were there before (a test's own fixtures) are never ours to end."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - a dependency
        return []
    found = []
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return []
    for child in children:
        try:
            if child.create_time() >= _state.installed_at - 0.01 and _alive(child.pid):
                found.append(child.pid)
        except psutil.Error:
            continue
    return found


def _alive(pid: int) -> bool:
    """True unless the process is gone or a zombie (a zombie holds no port and no file)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def _end(pids: list[int], grace: float) -> list[int]:
    """SIGTERM, up to ``grace`` seconds, SIGKILL what is left; returns the PIDs that needed SIGKILL."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    left = list(pids)
    while left and time.monotonic() < deadline:
        _reap(left)
        left = [p for p in left if _alive(p)]
        if left:
            time.sleep(0.05)
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 2.0  # gone before their files are removed (a dying process may still write)
    while any(_alive(p) for p in left) and time.monotonic() < deadline:
        _reap(left)
        time.sleep(0.02)
    _reap(pids)
    return left


def _reap(pids: list[int] = ()) -> None:
    """Collect our own exited children (registered ones, and the orphans ``pids`` re-parented to us)."""
    with _state.lock:
        children = list(_state.children.values())
    for proc in children:
        if proc.poll() is not None:
            forget(proc)
    tracked = {p.pid for p in children}
    for pid in pids:
        if pid not in tracked:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)


def cleanup(grace: float = CLEANUP_GRACE_S) -> dict[str, Any]:
    """End every child this command started (registered groups, then anything carrying our cookie), remove our
    temporary directories. Safe to call more than once; returns what it did."""
    _state.cleaning = True  # a signal now is recorded (exit 2), never raised into the middle of the cleanup
    done: dict[str, Any] = {"groups": [], "processes": [], "killed": [], "tempdirs": []}
    with _state.lock:
        children = list(_state.children.values())
    for proc in children:
        if proc.poll() is None:
            done["groups"].append(proc.pid)
            _signal_group(proc.pid, signal.SIGTERM)
    for proc in children:
        if proc.pid in done["groups"]:
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        kill_group(proc)  # SIGKILL to the group: the leader if it is still there, and what it left behind
    for _ in range(3):  # a process may start another while we end it (a raylet restarting a worker)
        # by ancestry and by cookie: a process that rewrites its title (Ray's ray::DashboardAgent, ray::IDLE)
        # may overwrite the environment block that /proc/PID/environ shows, so the cookie alone misses it
        pids = sorted(set(descendants()) | set(cookie_processes()))
        if not pids:
            break
        done["processes"] += pids
        done["killed"] += _end(pids, grace)
    with _state.lock:
        dirs = list(dict.fromkeys(_state.tempdirs + _descendants_tempdirs()))
        _state.tempdirs = dirs
    for path in dirs:
        if os.path.exists(path):
            done["tempdirs"].append(path)
            _remove(path)
    return done


def _remove(path: str, tries: int = 5) -> None:
    """Remove a directory of ours; a file written into it meanwhile (a process exiting) gets another try."""
    for _ in range(tries):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            with _state.lock:
                if path in _state.tempdirs:
                    _state.tempdirs.remove(path)
            return
        time.sleep(0.05)


def _remove_at_exit() -> None:
    """Last chance at interpreter exit, after every other exit handler (a library's shutdown may write logs)."""
    with _state.lock:
        dirs = list(_state.tempdirs)
    for path in dirs:
        _remove(path, tries=2)


def stop_message(signum: int) -> str:
    return f"dsv3-preflight: interrupted by {signal.Signals(signum).name}: stopped every process it started (exit 2)"
