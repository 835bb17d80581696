"""The result of one check: an immutable value with a status, a one-line summary, evidence and a remediation."""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field, replace
from typing import Any, Mapping


class Status(str, enum.Enum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"
    ERROR = "error"

    @property
    def severity(self) -> int:
        """ERROR and FAIL above WARN above PASS; SKIP sits between PASS and WARN (never counts as a pass)."""
        return _SEVERITY[self]

    @property
    def is_red(self) -> bool:
        return self in (Status.FAIL, Status.ERROR)

    @property
    def symbol(self) -> str:
        return _SYMBOL[self]


_SEVERITY = {Status.PASS: 0, Status.SKIP: 1, Status.WARN: 2, Status.FAIL: 3, Status.ERROR: 4}
_SYMBOL = {Status.PASS: "✔", Status.SKIP: "–", Status.WARN: "!", Status.FAIL: "✘", Status.ERROR: "‼"}


def _jsonable(value: Any) -> Any:
    """Return value as JSON types, or raise TypeError naming what is not serialisable."""
    return json.loads(json.dumps(value, allow_nan=False))


@dataclass(frozen=True)
class Result:
    """What a check says. Checks build it with the constructors; the engine adds name, node and duration."""

    status: Status
    summary: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    remediation: str | None = None
    name: str = ""
    node: str = ""
    duration_s: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.status, Status):
            object.__setattr__(self, "status", Status(self.status))
        if not self.summary or not str(self.summary).strip():
            raise ValueError("a result needs a one-line summary (a SKIP needs its reason)")
        if "\n" in self.summary:
            object.__setattr__(self, "summary", " ".join(self.summary.split()))

    # -- constructors a check uses -------------------------------------------------
    @classmethod
    def passed(cls, summary: str, evidence: Mapping[str, Any] | None = None) -> "Result":
        return cls(Status.PASS, summary, evidence or {})

    @classmethod
    def warned(cls, summary: str, evidence: Mapping[str, Any] | None = None, remediation: str | None = None) -> "Result":
        return cls(Status.WARN, summary, evidence or {}, remediation)

    @classmethod
    def failed(cls, summary: str, evidence: Mapping[str, Any] | None = None, remediation: str | None = None) -> "Result":
        return cls(Status.FAIL, summary, evidence or {}, remediation)

    @classmethod
    def skipped(cls, reason: str, evidence: Mapping[str, Any] | None = None) -> "Result":
        return cls(Status.SKIP, reason, evidence or {})

    # -- engine side ---------------------------------------------------------------
    @classmethod
    def _engine_error(cls, summary: str, evidence: Mapping[str, Any] | None = None, remediation: str | None = None) -> "Result":
        """Only the engine makes ERROR results (an exception or a timeout in a probe or a check)."""
        return cls(Status.ERROR, summary, evidence or {}, remediation)

    def stamped(self, *, name: str, node: str, duration_s: float) -> "Result":
        return replace(self, name=name, node=node, duration_s=round(duration_s, 6))

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "node": self.node,
            "status": self.status.value,
            "summary": self.summary,
            "evidence": _jsonable(dict(self.evidence)),
            "remediation": self.remediation,
            "duration_s": self.duration_s,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Result":
        return cls(
            status=Status(data["status"]),
            summary=data["summary"],
            evidence=data.get("evidence") or {},
            remediation=data.get("remediation"),
            name=data.get("name", ""),
            node=data.get("node", ""),
            duration_s=float(data.get("duration_s", 0.0)),
        )


def worst(statuses) -> Status | None:
    """The most severe status of an iterable, or None when it is empty."""
    statuses = list(statuses)
    return max(statuses, key=lambda s: s.severity) if statuses else None
