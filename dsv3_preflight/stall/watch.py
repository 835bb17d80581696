"""The watch: fed the run's output lines, it says when a stall is suspected, tells a slow run from a stuck one with two
samples, takes the capture and names the culprit. It does not know how the nodes are reached: ``sample`` and
``capture`` are given (one node's /proc for plain ``launch``, the Ray actors for ``--all-nodes``).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import culprit, report, rule
from .progress import Progress

#: one sample of every node: node rank → rank → (CPU seconds, a few Python stacks in a row, monotonic time)
Sample = Mapping[int, Mapping[int, tuple[float | None, tuple[tuple[str, ...], ...], float]]]
ON_STALL = ("report", "stop")
SAMPLE_GAP_S = 2.0
POLL_S = 1.0


@dataclass
class StallOptions:
    """``--stall-after`` and ``--on-stall`` (0 or less: no watch)."""

    stall_after: float = rule.DEFAULT_STALL_AFTER
    on_stall: str = "report"
    sample_gap: float = SAMPLE_GAP_S

    @property
    def enabled(self) -> bool:
        return self.stall_after > 0


@dataclass
class StallWatch:
    """The state of one run's watch."""

    options: StallOptions
    clock: Callable[[], float] = time.monotonic
    progress: Progress = field(init=False)
    resumed: float = field(init=False)       # the watch counts silence from here at the earliest (after a slow verdict)
    reported: dict[str, Any] | None = None
    slow: list[dict[str, Any]] = field(default_factory=list)   # each time a suspicion ended as "slow, not stuck"

    def __post_init__(self) -> None:
        self.progress = Progress(started=self.clock())
        self.resumed = self.progress.started

    def observe(self, line: str) -> None:
        self.progress.observe(line, self.clock())

    def quiet_since(self) -> float:
        return max(self.progress.quiet_since(), self.resumed)

    def threshold(self) -> float:
        return rule.threshold(self.options.stall_after, self.progress.longest_gap, self.progress.steps)

    def due(self) -> bool:
        """A stall is suspected (and none was reported yet)."""
        return self.reported is None and self.options.enabled and rule.suspected(
            self.quiet_since(), self.clock(), self.options.stall_after, self.progress.longest_gap, self.progress.steps)

    def working(self, first: Sample, second: Sample) -> list[str]:
        """The ranks that worked between two samples ("node R rank N"), and those that started or ended between them
        (a run whose processes come and go is not stuck)."""
        series: dict[str, list[rule.RankSample]] = {}
        for sample in (first, second):
            for node_rank, ranks in sample.items():
                for rank, (cpu, stacks, at) in ranks.items():
                    if cpu is not None:
                        series.setdefault(f"node {node_rank} rank {rank}", []).append(rule.RankSample(cpu, tuple(stacks), at))
        came_or_went = [f"{key} (started or ended between the samples)" for key in rule.came_or_went(series, taken=2)]
        return rule.slow_not_stuck(series, setup=self.progress.phase == "setup") + came_or_went

    def ended(self, first: Sample, second: Sample) -> bool:
        """Whether every rank is gone from both samples after ranks printed steps: the run is ending (torchrun tears
        its workers down, or waits at its exit barrier for the other nodes), not stuck. Once: a run still without a
        rank when the watch is due again is judged (agents waiting in a rendezvous for a node that never comes back
        after a restart). A node whose ranks never started printed no step."""
        if not self.progress.steps or (self.slow and self.slow[-1].get("ended")):
            return False
        return not any(ranks for sample in (first, second) for ranks in sample.values())

    def _slow(self, quiet_for: float, **verdict: Any) -> None:
        """A suspicion that ended as "slow, not stuck": kept for the report, and the silence counts from now."""
        self.slow.append({"at_quiet_s": round(quiet_for, 1), **verdict})
        self.resumed = self.clock()

    def _moved(self, mark: float | None, quiet_for: float) -> bool:
        """Whether a progress line came after ``mark`` (while the ranks were sampled or captured): then the run is
        not stalled."""
        if self.progress.last_any == mark:
            return False
        self._slow(quiet_for, working=[], progress=self.progress.last_line)
        return True

    def judge(self, sample: Callable[[], Sample], capture: Callable[[], Sequence[Mapping[str, Any]]], *,
              expected_nodes: Sequence[int] = (), facts: Mapping[str, Any] | None = None,
              ip_nodes: Mapping[str, str] | None = None, sleep: Callable[[float], None] = time.sleep,
              rendezvous: Callable[[], dict[str, Any]] | None = None,
              refresh: Callable[[], None] | None = None) -> dict[str, Any] | None:
        """Once due: two samples; a slow run defers the watch (None); a stuck one is captured and its stall section
        returned (also kept in ``reported``). ``rendezvous``: the store's agent keys, asked when a node has no rank.
        ``refresh``: reads the output lines that came meanwhile (where no thread feeds them as they come); a progress
        line that came while the ranks were sampled or captured means the run moved: no stall (None)."""
        quiet_for, threshold = self.clock() - self.quiet_since(), self.threshold()
        mark = self.progress.last_any
        first = sample()
        sleep(self.options.sample_gap)
        second = sample()
        if refresh is not None:
            refresh()
        if self._moved(mark, quiet_for):
            return None
        busy = self.working(first, second)
        if busy:
            self._slow(quiet_for, working=busy)
            return None
        if self.ended(first, second):
            self._slow(quiet_for, working=[], ended=True)
            return None
        captures = list(capture())
        if refresh is not None:
            refresh()
        if self._moved(mark, quiet_for):
            return None
        store = None
        if rendezvous is not None and any(not c.get("ranks") for c in captures):
            store = rendezvous()
        verdict = culprit.name_culprit(captures, expected_nodes=expected_nodes, facts=facts, ip_nodes=ip_nodes, store=store)
        self.reported = report.section(verdict=verdict, captures=captures, quiet_for=quiet_for, threshold=threshold,
                                       phase=self.progress.phase, last_progress=self.progress.last_line,
                                       action=self.options.on_stall, stall_after=self.options.stall_after)
        self.reported["slow_before"] = list(self.slow)
        now = self.clock()   # seconds since each rank's (or node's) own last progress line, where lines name one
        self.reported["quiet_by_rank_s"] = {who: round(now - t, 1) for who, t in sorted(self.progress.per_rank.items())}
        if store is not None:
            self.reported["rendezvous"] = store
        return self.reported
