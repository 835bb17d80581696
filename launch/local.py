"""Run torchrun on this node under the launcher, which stays its parent: `launch` without ``--all-nodes``.

The launcher used to exec torchrun, so a Ctrl-C or a SIGTERM ended with torchrun's own exit (1), while every
other command exits 2 when interrupted (README's exit codes). Now torchrun runs in a process group of its own
(so the signal reaches it once, from here, not twice from the terminal), the launcher forwards each stop signal
to that group, waits for torchrun to stop (``stop_grace`` seconds after the first signal, then SIGKILL), and
exits 2; otherwise it exits with torchrun's code (128 + N when torchrun was killed by signal N, as a shell says).
torchrun gets SIGTERM if the launcher itself is killed (PR_SET_PDEATHSIG), so it is never left behind.

Its own process group is a background group of the terminal: a rank that read the terminal (a login prompt of
wandb or huggingface_hub, a debugger's) would be stopped by SIGTTIN and the job would hang without a word. So when
the launcher's stdin is a terminal, torchrun's stdin is /dev/null: such a read ends at once (EOFError in Python),
and the rank fails with its own traceback. A pipe or a file on stdin is passed on as it is.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from typing import Any

#: the signals that stop the launch; each is forwarded to torchrun's process group
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_INTERRUPTED = 2
_PR_SET_PDEATHSIG = 1


def _own_group_dying_with_parent() -> None:   # runs in the child between fork and exec
    os.setpgid(0, 0)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


def torchrun_stdin() -> int | None:
    """/dev/null for torchrun when the launcher's stdin is a terminal (see the module's docstring), else inherit."""
    try:
        return subprocess.DEVNULL if os.isatty(0) else None
    except OSError:  # pragma: no cover - no fd 0
        return subprocess.DEVNULL


def exit_code(returncode: int) -> int:
    """torchrun's exit status as a shell reports it (a death by signal N is 128 + N)."""
    return 128 - returncode if returncode < 0 else returncode


def run_torchrun(argv: Sequence[str], env: Mapping[str, str], stop_grace: float = 10.0, watch: Any = None) -> int:
    """Start ``argv`` in its own process group, forward stop signals to it, wait; 2 when a stop signal came, else
    torchrun's exit code. OSError when it cannot be started.

    ``watch`` (a ``dsv3_preflight.stall.local.LocalWatch``): torchrun's output passes through it and it watches for a
    stall (docs/stall-watch.md); when it stopped a stalled run (``--on-stall=stop``) the code is its EXIT_STALLED."""
    got: list[int] = []
    proc: subprocess.Popen | None = None

    def forward(signum, frame):  # noqa: ARG001 - signal handler signature
        got.append(signum)
        if proc is not None:
            try:
                os.killpg(proc.pid, signum)
            except ProcessLookupError:
                pass

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        proc = subprocess.Popen(list(argv), env=dict(env), preexec_fn=_own_group_dying_with_parent,  # noqa: PLW1509
                                stdin=torchrun_stdin(), **(watch.popen_kwargs() if watch is not None else {}))
        if watch is not None:
            watch.start(proc)
        if got:   # a signal came while it was being started
            forward(got[-1], None)
        deadline = None
        while True:
            try:
                returncode = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            if got and deadline is None:
                deadline = time.monotonic() + stop_grace
            if deadline is not None and time.monotonic() > deadline:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                returncode = proc.wait()
                break
        # what torchrun left in its group (workers it did not reap) goes with it
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    finally:
        if watch is not None:
            watch.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    if got:
        return EXIT_INTERRUPTED
    return watch.EXIT_STALLED if watch is not None and watch.stopped else exit_code(returncode)
