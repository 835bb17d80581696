"""The doctor's verdict on a log: stage 4 of its pipeline, beside ``result.decide`` for a run's checks.

One function, ``decide``, turns what the passes judged (``passes.Judged``) into the verdict, its exit code and the
class of its cause. The labels are the doctor's ("failure", "healthy", "unknown"); each is the run verdict it
amounts to (``result.LOG_VERDICTS``: NO-GO, GO, NOTHING SELECTED), and its exit code is that verdict's
(``result.verdict_exit_code``: 1, 0, 5; a log that shows neither errors nor progress is never exit 0). An input the
doctor had to refuse makes the exit code 4 (``ExitCode.USAGE``), whatever the rest says.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..result import ExitCode, Verdict, as_run_verdict, verdict_exit_code
from .passes import Judged
from .passes.stalled import zero_bar
from .timeline import Timeline

FAILURE, HEALTHY, UNKNOWN = "failure", "healthy", "unknown"


@dataclass(frozen=True)
class LogVerdict:
    label: str              # failure | healthy | unknown
    exit_code: int          # 1 | 0 | 5, or 4 when an input was refused
    cause_recognised: bool
    #: the headline's class; "interrupted", "unrecognised", "healthy" or "no_progress"
    cause_class: str

    def as_verdict(self) -> Verdict:
        """The run verdict this amounts to (``result.Verdict``), with the cause's class as its reason."""
        return Verdict(as_run_verdict(self.label), self.exit_code, self.cause_class)


def label_of(j: Judged, tl: Timeline) -> str:
    """failure when failing; healthy only with progress (and not set-up alone ending on a bar at 0); else unknown."""
    if j.failing:
        return FAILURE
    return HEALTHY if tl.progress and zero_bar(tl) is None else UNKNOWN


def decide(j: Judged, tl: Timeline) -> LogVerdict:
    label = label_of(j, tl)
    head, recognised = j.heads.head, j.heads.recognised
    if j.failing and recognised and head is not None:
        cause_class = head.sig.cls or ""
    elif j.interrupted:
        cause_class = "interrupted"
    elif j.failing:
        cause_class = "unrecognised"
    else:
        cause_class = "healthy" if label == HEALTHY else "no_progress"
    code = ExitCode.USAGE if tl.unreadable else verdict_exit_code(label)
    return LogVerdict(label, int(code), bool(j.failing and recognised), cause_class)


__all__ = ["FAILURE", "HEALTHY", "LogVerdict", "UNKNOWN", "decide", "label_of"]
