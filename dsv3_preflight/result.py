"""Results and verdicts: the one vocabulary every part of the tool speaks.

- :class:`Status` and its one severity order (ERROR and FAIL above WARN above SKIP above PASS);
- :class:`Result`, what a check says (immutable; the engine adds name, node and duration);
- :class:`Finding` and :class:`Findings`, the accumulator a check uses when it weighs several small
  rules: each rule is a pure function returning findings, and the accumulator turns them into one
  result, every distinct problem kept with its own fix (no "first problem (+N more)");
- :class:`Actor`, who must act on a finding (the job's configuration, the node's administrator, the
  network);
- :func:`decide`, the one verdict function (label and exit code) that the engine, the document,
  merge, the launcher's gate and every renderer share.
"""
from __future__ import annotations

import enum
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any


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
#: every status, most severe first: the order of tables, counts and cards everywhere
STATUS_ORDER: tuple[Status, ...] = tuple(sorted(Status, key=lambda s: -_SEVERITY[s]))


def as_status(value: Status | str) -> Status:
    """A Status from itself or its value ("fail"); a ValueError names anything else."""
    return value if isinstance(value, Status) else Status(str(value))


def severity(value: Status | str) -> int:
    """The severity of a status or of its value; an unknown value ranks below PASS."""
    try:
        return as_status(value).severity
    except ValueError:
        return -1


def worst(statuses: Iterable[Status | str]) -> Status | None:
    """The most severe status of an iterable, or None when it is empty."""
    known = [as_status(s) for s in statuses]
    return max(known, key=lambda s: s.severity) if known else None


class Actor(str, enum.Enum):
    """Who must act on a finding, the way the health tools tell a user's problem from a node's."""

    JOB = "job"          # the job's configuration: the person launching pastes the fix
    NODE = "node"        # the node: its administrator repairs it, or drains it from the job
    NETWORK = "network"  # the network between the nodes: its administrator opens or fixes a path

    @property
    def label(self) -> str:
        return _ACTOR_LABEL[self]

    @classmethod
    def from_text(cls, text: str | None) -> Actor | None:
        """The actor a "who acts: ..." line names, by its label or its bare value (as a console prints it and the
        doctor reads it back); None for none or anything else."""
        text = (text or "").strip()
        return next((a for a in cls if text in (a.value, a.label)), None)


_ACTOR_LABEL = {
    Actor.JOB: "the job's configuration (paste the fix)",
    Actor.NODE: "the node's administrator (repair or drain the node)",
    Actor.NETWORK: "the network's administrator (open or fix the path between the nodes)",
}


def _actor(value: Actor | str | None) -> Actor | None:
    return None if value is None else value if isinstance(value, Actor) else Actor(str(value))


def _jsonable(value: Any) -> Any:
    """Return value as JSON types, or raise TypeError naming what is not serialisable."""
    return json.loads(json.dumps(value, allow_nan=False))


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


@dataclass(frozen=True)
class Finding:
    """One problem a rule found: a one-line message, its pasteable fix, who must act, its root-cause key.

    ``cause`` names a root cause shared across checks (``"gpu.no_driver"``): results whose findings share a
    cause on the same node are shown under that cause, once, with one fix.
    """

    status: Status
    message: str
    fix: str | None = None
    actor: Actor | None = None
    cause: str | None = None
    rule: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", as_status(self.status))
        if self.status not in (Status.FAIL, Status.WARN):
            raise ValueError(f"a finding is a FAIL or a WARN, not {self.status.value}")
        if not self.message or not str(self.message).strip():
            raise ValueError("a finding needs a one-line message")
        object.__setattr__(self, "message", _one_line(self.message))
        object.__setattr__(self, "actor", _actor(self.actor))
        if self.fix is not None and not str(self.fix).strip():
            object.__setattr__(self, "fix", None)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status.value, "message": self.message, "fix": self.fix,
                "actor": self.actor.value if self.actor else None, "cause": self.cause, "rule": self.rule}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(status=data["status"], message=data["message"], fix=data.get("fix"), actor=data.get("actor"),
                   cause=data.get("cause"), rule=data.get("rule") or "")


def failure(message: str, fix: str | None = None, *, actor: Actor | str | None = None,
            cause: str | None = None) -> Finding:
    """A FAIL finding (a rule function returns it)."""
    return Finding(Status.FAIL, message, fix, _actor(actor), cause)


def warning(message: str, fix: str | None = None, *, actor: Actor | str | None = None,
            cause: str | None = None) -> Finding:
    """A WARN finding (a rule function returns it)."""
    return Finding(Status.WARN, message, fix, _actor(actor), cause)


@dataclass(frozen=True)
class Result:
    """What a check says. Checks build it with the constructors; the engine adds name, node and duration.

    ``findings`` holds every distinct problem with its own fix when a check weighed several rules;
    ``actor`` says who must act and ``cause`` names the root cause shared with other checks.
    """

    status: Status
    summary: str
    evidence: Mapping[str, Any] = field(default_factory=dict)
    remediation: str | None = None
    name: str = ""
    node: str = ""
    duration_s: float = 0.0
    findings: tuple[Finding, ...] = ()
    actor: Actor | None = None
    cause: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", as_status(self.status))
        if not self.summary or not str(self.summary).strip():
            raise ValueError("a result needs a one-line summary (a SKIP needs its reason)")
        if "\n" in self.summary:
            object.__setattr__(self, "summary", _one_line(self.summary))
        object.__setattr__(self, "findings", tuple(self.findings))
        object.__setattr__(self, "actor", _actor(self.actor))
        if self.remediation is not None and not str(self.remediation).strip():
            object.__setattr__(self, "remediation", None)

    # -- constructors a check uses -------------------------------------------------
    @classmethod
    def passed(cls, summary: str, evidence: Mapping[str, Any] | None = None) -> Result:
        return cls(Status.PASS, summary, evidence or {})

    @classmethod
    def warned(cls, summary: str, evidence: Mapping[str, Any] | None = None, remediation: str | None = None, *,
               actor: Actor | str | None = None, cause: str | None = None) -> Result:
        return cls(Status.WARN, summary, evidence or {}, remediation, actor=_actor(actor), cause=cause)

    @classmethod
    def failed(cls, summary: str, evidence: Mapping[str, Any] | None = None, remediation: str | None = None, *,
               actor: Actor | str | None = None, cause: str | None = None) -> Result:
        return cls(Status.FAIL, summary, evidence or {}, remediation, actor=_actor(actor), cause=cause)

    @classmethod
    def skipped(cls, reason: str, evidence: Mapping[str, Any] | None = None, *, cause: str | None = None) -> Result:
        return cls(Status.SKIP, reason, evidence or {}, cause=cause)

    @classmethod
    def _engine_error(cls, summary: str, evidence: Mapping[str, Any] | None = None, remediation: str | None = None,
                      actor: Actor | str | None = None, cause: str | None = None) -> Result:
        """Only the engine makes ERROR results; runners use ``engine.error_result``."""
        return cls(Status.ERROR, summary, evidence or {}, remediation, actor=_actor(actor), cause=cause)

    def stamped(self, *, name: str, node: str, duration_s: float) -> Result:
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
            "findings": [f.to_dict() for f in self.findings],
            "actor": self.actor.value if self.actor else None,
            "cause": self.cause,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Result:
        return cls(
            status=Status(data["status"]),
            summary=data["summary"],
            evidence=data.get("evidence") or {},
            remediation=data.get("remediation"),
            name=data.get("name", ""),
            node=data.get("node", ""),
            duration_s=float(data.get("duration_s", 0.0)),
            findings=tuple(Finding.from_dict(f) for f in data.get("findings") or ()),
            actor=data.get("actor"),
            cause=data.get("cause"),
        )


class Findings:
    """Collects the findings of a check's small rules and turns them into one :class:`Result`.

    ::

        found = Findings()
        found.check(rule_service_running, facts)      # a rule returns a Finding, several, or None
        found.check(rule_versions_match, facts, driver)
        return found.result("Fabric Manager 535.129.03 running", evidence)

    The summary names every problem (failures first, one line); each stays in ``Result.findings`` with
    its own fix; the remediation is the distinct fixes in order; the result's actor and cause are the
    first failure's (else the first warning's).
    """

    def __init__(self, findings: Iterable[Finding] = ()) -> None:
        self._items: list[Finding] = []
        self.extend(findings)

    def add(self, found: Finding | Iterable[Finding] | None, rule: str = "") -> Findings:
        """Add what a rule returned (a finding, an iterable of findings, or None)."""
        if found is None:
            return self
        items = [found] if isinstance(found, Finding) else list(found)
        for item in items:
            if not isinstance(item, Finding):
                raise TypeError(f"a rule returned {type(item).__name__}, not a Finding")
            if rule and not item.rule:
                item = replace(item, rule=rule)
            if item not in self._items:
                self._items.append(item)
        return self

    def extend(self, findings: Iterable[Finding]) -> Findings:
        for f in findings:
            self.add(f)
        return self

    def check(self, rule: Callable[..., Any], *args: Any, **kwargs: Any) -> Findings:
        """Run a rule function and add what it found, labelled with the rule's name."""
        return self.add(rule(*args, **kwargs), rule=getattr(rule, "__name__", ""))

    def __iter__(self) -> Iterator[Finding]:
        return iter(self.ordered())

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)

    @property
    def failures(self) -> list[Finding]:
        return [f for f in self._items if f.status is Status.FAIL]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self._items if f.status is Status.WARN]

    def ordered(self) -> list[Finding]:
        return self.failures + self.warnings

    def result(self, ok_summary: str, evidence: Mapping[str, Any] | None = None, *,
               remediation: str | None = None, actor: Actor | str | None = None) -> Result:
        """PASS with ``ok_summary`` when nothing was found; else FAIL (any failure) or WARN."""
        evidence = dict(evidence or {})
        if not self._items:
            return Result.passed(ok_summary, evidence)
        ordered = self.ordered()
        lead = ordered[0]
        fixes = remediation or "\n".join(dict.fromkeys(f.fix for f in ordered if f.fix)) or None
        summary = "; ".join(f.message for f in ordered)
        status = Status.FAIL if self.failures else Status.WARN
        return Result(status, summary, evidence, fixes, findings=tuple(ordered),
                      actor=_actor(actor) or lead.actor, cause=lead.cause)


# -- the verdict -------------------------------------------------------------------------------------------


class ExitCode(enum.IntEnum):
    """pytest's exit codes, which users know."""

    OK = 0            # no FAIL/ERROR (and no WARN under --strict)
    RED = 1           # some FAIL or ERROR
    INTERRUPTED = 2   # SIGINT/SIGTERM
    INTERNAL = 3      # a bug in the tool
    USAGE = 4         # bad usage or configuration
    NOTHING = 5       # nothing selected


GO, NO_GO, NOTHING_SELECTED = "GO", "NO-GO", "NOTHING SELECTED"


@dataclass(frozen=True)
class Verdict:
    label: str       # GO | NO-GO | NOTHING SELECTED
    exit_code: int
    reason: str

    @property
    def is_go(self) -> bool:
        return self.exit_code == ExitCode.OK


def decide(statuses: Iterable[Status | str], *, strict: bool = False) -> Verdict:
    """The verdict of a run from the statuses of the checks it selected (deselected checks are not results).

    GO (exit 0): something ran and nothing is FAIL or ERROR (nor WARN under ``strict``); NO-GO (exit 1)
    otherwise; nothing selected (exit 5) when no check ran at all: never GO.
    """
    known = [as_status(s) for s in statuses]
    if not known:
        return Verdict(NOTHING_SELECTED, ExitCode.NOTHING, "no check was selected")
    red = [s for s in known if s.is_red]
    if red:
        counts = {s: red.count(s) for s in (Status.FAIL, Status.ERROR) if s in red}
        return Verdict(NO_GO, ExitCode.RED, ", ".join(f"{n} {s.value.upper()}" for s, n in counts.items()))
    warns = known.count(Status.WARN)
    if strict and warns:
        return Verdict(NO_GO, ExitCode.RED, f"{warns} WARN under --strict")
    return Verdict(GO, ExitCode.OK, "no FAIL or ERROR")


def decide_results(results: Iterable[Any], *, strict: bool = False) -> Verdict:
    """:func:`decide` over Result objects or their dicts."""
    return decide([r.status if isinstance(r, Result) else r.get("status") for r in results], strict=strict)


def counts(statuses: Iterable[Status | str]) -> dict[str, int]:
    """{status value: how many}, every status present, most severe first."""
    known = [as_status(s) for s in statuses]
    return {s.value: known.count(s) for s in STATUS_ORDER}

