"""Running `lora scan` and `lora watch`: the probes gather each adapter's facts, the engine's wrapper judges.

Each adapter is judged on its own by the rules of :mod:`dsv3_preflight.lora.verdict`, called through
:func:`dsv3_preflight.engine.judged`, the wrapper every check goes through: a rule that raises on an input
nobody foresaw is that adapter's ERROR (a dsv3-preflight bug to report, never blamed on the job's
configuration), the other adapters are judged as usual, and the scan always ends with a verdict. A directory
the walk cannot list is reported as unreadable, never skipped.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine import judged
from .case import AdapterCase
from .probes.adapter_files import DEFAULT_HEADER_CAP, find_adapters
from .probes.scan import INSTALLED, adapter_facts, add_deep_facts, judged_for
from .probes.watch import SaveWatch
from .verdict import RULES, UNREADABLE_RULES, adapter_result, scan_document, unreadable_facts, verdict_of

#: what the engine's ERROR calls the judge when an adapter's rules raise
JUDGE_NAME = "the adapter's rules"


def judge_facts(facts: Mapping[str, Any], *, rule_set: Iterable[Any] = RULES) -> dict[str, Any]:
    """The verdict on one adapter's facts, judged through the engine's wrapper (a raising rule is an ERROR)."""
    case = AdapterCase.of(facts)
    rules = tuple(rule_set)
    result = judged(lambda: adapter_result(case, rule_set=rules), what=JUDGE_NAME)
    return verdict_of(case, result, facts.get("step"))


def judge_unreadable(entry: Mapping[str, str]) -> dict[str, Any]:
    """The verdict on a directory the walk could not list (``{"path", "error"}`` from find_adapters)."""
    return judge_facts(unreadable_facts(entry), rule_set=UNREADABLE_RULES)


def judge_path(path: str | os.PathLike[str], *, cap: int = DEFAULT_HEADER_CAP, deep: bool = False,
               rule_set: Iterable[Any] = RULES, peft_version: str | None = INSTALLED) -> dict[str, Any]:
    """The verdict on one adapter path (weights file, or a directory holding only a config).

    ``deep``: an adapter whose files are sound is judged again with its tensor data streamed. ``peft_version``: the
    peft release that will load it (by default the one installed here)."""
    rules = tuple(rule_set)
    facts = adapter_facts(path, cap=cap, peft_version=peft_version)
    verdict = judge_facts(facts, rule_set=rules)
    if deep and verdict["status"] not in ("fail", "error") and facts.get("format") in ("safetensors", "pickle"):
        verdict = judge_facts(add_deep_facts(facts), rule_set=rules)
    return verdict


def scan_paths(paths: Iterable[str | os.PathLike[str]], *, cap: int = DEFAULT_HEADER_CAP, deep: bool = False,
               rule_set: Iterable[Any] = RULES,
               peft_version: str | None = INSTALLED) -> tuple[dict[str, Any] | None, list[str]]:
    """(the scan document, []) or (None, the paths that are neither a file nor a directory)."""
    names = [str(p) for p in paths]
    rules = tuple(rule_set)
    version = judged_for(peft_version)
    found, missing, unreadable = find_adapters(names)
    if missing:
        return None, missing
    adapters = [judge_path(f, cap=cap, deep=deep, rule_set=rules, peft_version=version) for f in found]
    adapters += [judge_unreadable(u) for u in unreadable]
    adapters.sort(key=lambda a: (a["step"] is None, a["step"] or 0, a["path"]))
    return scan_document(adapters, paths=names, peft_version=version), []


@dataclass
class Watcher:
    """Polls ``root``; :meth:`poll` returns the verdicts of the saves that finished since the last poll."""

    root: Path
    settle: float = 2.0
    cap: int = DEFAULT_HEADER_CAP
    deep: bool = False
    clock: Callable[[], float] = time.monotonic
    rule_set: tuple[Any, ...] = RULES
    peft_version: str | None = INSTALLED
    _saves: SaveWatch = field(init=False)

    def __post_init__(self) -> None:
        self.peft_version = judged_for(self.peft_version)   # resolved once: the version the watch judges for
        self._saves = SaveWatch(Path(self.root), settle=self.settle, cap=self.cap, clock=self.clock)

    def poll(self) -> list[dict[str, Any]]:
        unreadable, finished = self._saves.finished()
        return ([judge_unreadable(entry) for entry in unreadable]
                + [judge_path(path, cap=self.cap, deep=self.deep, rule_set=self.rule_set, peft_version=self.peft_version)
                   for path in finished])

    def pending(self) -> list[dict[str, str]]:
        """Saves seen but not finished (never judged), with why: what the watch reports when it stops."""
        return self._saves.pending()


def follow(watcher: Watcher, *, interval: float = 5.0, max_seconds: float | None = None,
           sleep: Callable[[float], None] = time.sleep) -> Iterator[dict[str, Any]]:
    """Yield each verdict as soon as its save is finished; stops after ``max_seconds`` when given."""
    start = time.monotonic()
    while True:
        yield from watcher.poll()
        if max_seconds is not None and time.monotonic() - start >= max_seconds:
            return
        sleep(interval)
