"""`lora watch`'s observing half: follow a training output directory and say which saves are finished.

Each poll observes every save under the directory (sizes and times, whether trainer_state.json or a later
checkpoint exists, whether the weights file proves itself whole) and asks
:func:`dsv3_preflight.lora.completeness.decide_save` whether it may be judged; a save that is still being
written is left alone, whatever state its bytes are in. Nothing here blocks: FIFOs and devices are never
opened for reading (``inputs.open_regular``), trainer_state.json is only looked at, not read.
Directories named ``tmp-checkpoint-*`` (the Trainer's staging name) are ignored. The judging of a finished
save is :mod:`dsv3_preflight.lora.run`'s (through the engine's wrapper), never this package's.
"""
from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsv3_preflight.inputs import InputError, kind_of, open_regular
from dsv3_preflight.lora.case import CONFIG_NAME, step_of
from dsv3_preflight.lora.completeness import decide_save

from .adapter_files import DEFAULT_HEADER_CAP, TRAINER_STATE, find_adapters, read_header

_ZIP_END = b"PK\x05\x06"


def _stat_sig(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def _signature(path: Path) -> tuple[Any, ...]:
    """What must stay unchanged for ``settle`` seconds: the weights and the config beside them."""
    directory = path if path.is_dir() else path.parent
    return (None if path.is_dir() else _stat_sig(path), _stat_sig(directory / CONFIG_NAME))


def _safetensors_whole(path: Path, cap: int) -> bool:
    """The header is sound, its tensor data ends where the file ends, and none of that data is a hole."""
    header = read_header(path, cap)
    if header.get("kind") is not None or header.get("declared_len") is None:
        return False
    start = 8 + header["declared_len"]
    try:
        with open_regular(path, what="adapter weights") as fh:
            size = os.fstat(fh.fileno()).st_size
            if start >= size:
                return True
            try:
                return os.lseek(fh.fileno(), start, os.SEEK_HOLE) >= size
            except OSError:  # no SEEK_HOLE on this filesystem: the size and the header are all we know
                return True
    except (InputError, OSError):
        return False


def _zip_whole(path: Path) -> bool:
    """A torch zip pickle ends with its end-of-central-directory record."""
    try:
        with open_regular(path, what="adapter weights") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < 22:
                return False
            return os.pread(fh.fileno(), 4, size - 22) == _ZIP_END
    except (InputError, OSError):
        return False


def observe(path: Path, *, cap: int = DEFAULT_HEADER_CAP) -> dict[str, Any]:
    """The facts :func:`decide_save` needs about one save (never reads trainer_state.json)."""
    directory = path if path.is_dir() else path.parent
    obs: dict[str, Any] = {"trainer_state": os.path.lexists(directory / TRAINER_STATE),
                           "config": os.path.lexists(directory / CONFIG_NAME),
                           "missing_weights": path.is_dir(), "next_checkpoint": _later_checkpoint(directory)}
    if not path.is_dir():
        try:
            mode = os.stat(path).st_mode   # stat, never open: a FIFO opened for reading would block
        except OSError:
            mode = None
        if mode is not None and not stat.S_ISREG(mode):
            obs["not_regular"] = kind_of(mode)   # no wait will make it a file of weights: judge it now
            return obs
    if not obs["trainer_state"] and not obs["next_checkpoint"] and not path.is_dir():
        obs["file_complete"] = _zip_whole(path) if path.suffix in (".bin", ".pt") else _safetensors_whole(path, cap)
    return obs


def _later_checkpoint(directory: Path) -> bool:
    step = step_of(directory)
    if step is None or step_of(directory.parent) is not None:
        return False
    try:
        with os.scandir(directory.parent) as entries:
            return any((s := step_of(e.name)) is not None and s > step and not e.name.startswith("tmp-")
                       and e.is_dir(follow_symlinks=False) for e in entries)
    except OSError:
        return False


@dataclass
class _Seen:
    signature: tuple[Any, ...]
    since: float
    why: str = ""


@dataclass
class SaveWatch:
    """Polls ``root``; :meth:`finished` returns the saves that finished since the last poll (to be judged)."""

    root: Path
    settle: float = 2.0
    cap: int = DEFAULT_HEADER_CAP
    clock: Callable[[], float] = time.monotonic
    _pending: dict[Path, _Seen] = field(default_factory=dict)
    _judged: dict[Path, tuple[Any, ...]] = field(default_factory=dict)
    _unreadable: set[str] = field(default_factory=set)

    def finished(self) -> tuple[list[dict[str, str]], list[Path]]:
        """(directories newly found unreadable, ``{"path", "error"}``; saves finished since the last poll)."""
        now = self.clock()
        root = Path(self.root)
        found, _, unreadable = find_adapters([root]) if root.is_dir() else ([], [], [])
        new_unreadable = [entry for entry in unreadable if entry["path"] not in self._unreadable]
        self._unreadable.update(entry["path"] for entry in new_unreadable)
        ready: list[Path] = []
        for path in found:
            if any(part.startswith("tmp-checkpoint") for part in path.parts):
                continue
            sig = _signature(path)
            if self._judged.get(path) == sig:
                continue
            seen = self._pending.get(path)
            if seen is None or seen.signature != sig:
                seen = self._pending[path] = _Seen(sig, now)
            decision = decide_save(observe(path, cap=self.cap), stable_for=now - seen.since, settle=self.settle)
            if not decision.ready:
                seen.why = decision.why
                continue
            del self._pending[path]
            self._judged[path] = sig
            ready.append(path)
        return new_unreadable, ready

    def pending(self) -> list[dict[str, str]]:
        """Saves seen but not finished (never judged), with why: what the watch reports when it stops."""
        return [{"path": str(p), "why": s.why or "not finished"} for p, s in sorted(self._pending.items())
                if p not in self._judged]
