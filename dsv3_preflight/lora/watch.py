"""Follow a training output directory and judge each adapter once it is completely written.

A weights file is complete when its size and modification time have not changed for ``settle``
seconds and the adapter_config.json beside it exists (peft writes it with the weights). A file still
being written is never judged, so a half-written file is not a finding; a file that stays truncated
after it settled is one. Directories named ``tmp-checkpoint-*`` (the Trainer's staging name) are ignored.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from .header import DEFAULT_HEADER_CAP
from .scan import CONFIG_NAME, AdapterReport, find_adapters, scan_adapter


@dataclass
class _Seen:
    signature: tuple[int, int] | None
    since: float


@dataclass
class Watcher:
    """Polls ``root``; :meth:`poll` returns the reports of adapters that became complete since the last poll."""

    root: Path
    settle: float = 2.0
    cap: int = DEFAULT_HEADER_CAP
    deep: bool = False
    clock: Callable[[], float] = time.monotonic
    _pending: dict[Path, _Seen] = field(default_factory=dict)
    _judged: dict[Path, tuple[int, int] | None] = field(default_factory=dict)

    def poll(self) -> list[AdapterReport]:
        now = self.clock()
        found, _ = find_adapters([self.root]) if self.root.is_dir() else ([], [])
        ready: list[AdapterReport] = []
        for path in found:
            if any(part.startswith("tmp-checkpoint") for part in path.parts):
                continue
            sig = _signature(path)
            if self._judged.get(path, ()) == sig:
                continue
            seen = self._pending.get(path)
            if seen is None or seen.signature != sig:
                self._pending[path] = _Seen(sig, now)
                if self.settle > 0:
                    continue
                seen = self._pending[path]
            if now - seen.since < self.settle:
                continue
            directory = path if path.is_dir() else path.parent
            if not path.is_dir() and not (directory / CONFIG_NAME).exists() and now - seen.since < 10 * self.settle:
                continue  # the config follows the weights; give it time before judging without it
            del self._pending[path]
            self._judged[path] = sig
            ready.append(scan_adapter(path, cap=self.cap, deep=self.deep))
        return ready


def _signature(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path / CONFIG_NAME if path.is_dir() else path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


def watch(root: Path, *, interval: float = 5.0, settle: float = 2.0, max_seconds: float | None = None,
          cap: int = DEFAULT_HEADER_CAP, deep: bool = False, sleep: Callable[[float], None] = time.sleep) -> Iterator[AdapterReport]:
    """Yield a report for every adapter as soon as it is complete; stops after ``max_seconds`` if given."""
    watcher = Watcher(Path(root), settle=settle, cap=cap, deep=deep)
    start = time.monotonic()
    while True:
        yield from watcher.poll()
        if max_seconds is not None and time.monotonic() - start >= max_seconds:
            return
        sleep(interval)
