"""Guards around third-party plugin code (``--checks-dir`` files and entry points).

A plugin runs inside the preflight's own process, so a careless one could end the run as GO in silence
(``sys.exit(0)`` at import, ``os._exit(0)`` inside a judge), hang it at import, or print into the command a
user pastes (``launch --dry-run``). The guards:

- :func:`load` imports under a deadline in a helper thread. A plugin that hangs, raises, or exits becomes an
  error for that plugin (the registry turns it into an ERROR check ``plugin.<name>``) and the run goes on.
  Trade-off, chosen knowingly: a thread cannot be killed, so a plugin hanging at import keeps its thread (and
  whatever it holds) until the command exits; a subprocess pre-import would isolate that too, but would
  import every plugin twice on every run (slow imports such as torch twice) and still could not catch
  what a plugin does when it is imported for real. Site plugins that hang do so on I/O (a network call,
  an NFS path, a lock): the deadline turns that into a named ERROR at a cost of nothing for healthy plugins.
  Anything printed while importing goes to stderr.
- :func:`guard_check` / :func:`guard_probe` wrap a plugin's judge and gather so that, while they run,
  ``os._exit`` (which no ``except`` can catch) raises :class:`PluginExit` instead of ending the process; the
  engine makes that an ERROR of the check. ``sys.exit`` raises SystemExit, which the engine already reports.
  Only this process and only the thread running plugin code are affected: a forked child, or our own code,
  still exits for real.
- :func:`stdout_to_stderr` points file descriptor 1 at stderr for a block (``launch`` runs its preflight in it,
  so stdout carries only the command to paste, whatever a plugin or a library prints).
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

_local = threading.local()
_owner_pid = os.getpid()
_real_exit = os._exit
_install_lock = threading.Lock()


class PluginExit(SystemExit):
    """A plugin called ``os._exit`` (or ``sys.exit`` at import): reported as its ERROR, never an exit."""

    def __init__(self, code: Any, origin: str) -> None:
        super().__init__(code)
        self.origin = origin

    def __str__(self) -> str:
        return f"the plugin {self.origin} called os._exit({self.code!r}); a check reports a Result, it never exits"


def _guarded_exit(code: int) -> None:
    origin = getattr(_local, "origin", None)
    if origin is not None and os.getpid() == _owner_pid:
        raise PluginExit(code, origin)
    _real_exit(code)


def _install_exit_guard() -> None:
    global _owner_pid
    with _install_lock:
        if os._exit is not _guarded_exit:
            _owner_pid = os.getpid()
            os._exit = _guarded_exit  # type: ignore[assignment]


@contextlib.contextmanager
def plugin_code(origin: str) -> Iterator[None]:
    """Mark this thread as running the plugin ``origin`` (``os._exit`` raises :class:`PluginExit` in it)."""
    _install_exit_guard()
    previous = getattr(_local, "origin", None)
    _local.origin = origin
    try:
        yield
    finally:
        _local.origin = previous


def describe(exc: BaseException) -> str:
    """One line on why a plugin failed to load."""
    if isinstance(exc, PluginExit):
        return f"called os._exit({exc.code!r}) while it was imported"
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r}) while it was imported"
    return f"{type(exc).__name__}: {exc}"


def load(origin: str, func: Callable[[], Any], timeout: float) -> tuple[Any, str | None]:
    """Run ``func`` (a plugin's import) in a helper thread under ``timeout`` with exits guarded and stdout sent
    to stderr; returns (its value, None) or (None, why it failed)."""
    box: dict[str, Any] = {}

    def target() -> None:
        with plugin_code(origin):
            try:
                box["value"] = func()
            except BaseException as exc:  # noqa: BLE001 - SystemExit and PluginExit included: reported, never exits
                box["exc"] = exc

    thread = threading.Thread(target=target, daemon=True, name=f"plugin-import:{origin}")
    with contextlib.redirect_stdout(sys.stderr):
        thread.start()
        thread.join(timeout)
    if thread.is_alive():
        return None, (f"did not finish importing within {timeout:g} s (it hangs at import: a network call, a lock, "
                      "a slow filesystem?); the rest of the run went on without it")
    if "exc" in box:
        return None, describe(box["exc"])
    return box.get("value"), None


def _wrap(func: Callable[..., Any], origin: str) -> Callable[..., Any]:
    if getattr(func, "__dsv3_plugin__", None) == origin:
        return func

    @functools.wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        with plugin_code(origin):
            return func(*args, **kwargs)

    guarded.__dsv3_plugin__ = origin  # type: ignore[attr-defined]
    return guarded


def guard_check(spec: Any, origin: str) -> Any:
    """The CheckSpec with its judge guarded (os._exit raises PluginExit while it runs)."""
    return replace(spec, judge=_wrap(spec.judge, origin))


def guard_probe(spec: Any, origin: str) -> Any:
    """The ProbeSpec with its gather guarded."""
    return replace(spec, gather=_wrap(spec.gather, origin))


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send everything written to stdout (Python's, C's, children's: file descriptor 1) to stderr for the block."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no stdout at all
        yield
        return
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
