"""The passes: stage 3 of the doctor's pipeline (docs/DEVELOPING.md, "The doctor's pipeline").

Each pass is a function over the ``Timeline`` the reader gathered and the findings the passes before it left, in
this order: teardown noise and a stop from outside are set aside (``teardown``, ``stop``), a one-node job reads as
one (``one_node``), a store lost after the start becomes one consequence (``store``), a run that survived its
errors is not failing (``survived``), a log that stops names its suspect (``stalled``), and the first failure and
its consequences are chosen (``first_failure``, ``consequences``). ``judge`` runs them and returns a ``Judged``;
``decide.decide`` gives its verdict and ``document.build`` its document.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..signatures import DERIVED
from ..timeline import MAX_ERROR_LINES, Event, Finding, Timeline, record
from .first_failure import Heads, first_failure, heads, silent_nodes, silent_ranks
from .one_node import as_one_node
from .stalled import stall
from .stop import interrupted, signal_stops, without_the_stop
from .store import store_lost
from .survived import survived
from .teardown import teardown
from .went_on import resolved

_SURVIVED = next(s for s in DERIVED if s.id == "run.error_survived")


@dataclass(frozen=True)
class Judged:
    """What the passes say about a timeline."""
    found: list[Finding]               # the findings left (neither teardown nor survived)
    kind: dict[str, str]               # id → kind as judged (a transient suspect the run went past: "suspect")
    errors: list[Event]                # the unrecognised error lines kept for the report
    error_count: int                   # how many there were
    after_end: list[Finding]           # teardown noise
    survived: list[Finding]            # errors the run survived
    failing: bool
    stalled: bool
    heads: Heads
    stops: dict[int, Finding]          # stop-signal findings by the id of their earliest event
    first_stop: Event | None
    interrupted: bool                  # stopped from outside, nothing failed before
    silent_ranks: list[int]
    silent_nodes: list[str]
    first_failure: dict | None         # the document's "first_failure"


@dataclass(frozen=True)
class _Sorted:
    found: list[Finding]
    after_end: list[Finding]
    errors: list[Event]
    error_count: int
    one_node_errors: list[Event]


def _set_aside(tl: Timeline, hung: bool) -> _Sorted:
    """Teardown noise, the stop's lines (``--hung``), and a one-node job's multi-node causes set aside; a store lost
    after the start merged into one finding."""
    errors, error_count = tl.errors, tl.error_count
    found, after_end = teardown(tl, list(tl.findings.values()), hung)
    if hung:   # the user says it hung and stopped it: what the stop printed (Ctrl-C, SIGTERM) is not the failure
        found, errors, error_count = without_the_stop(found, errors, error_count)
    one_node_errors: list[Event] = []
    if tl.facts.one_node():   # loopback or a container bridge is the right interface for a one-node job
        found = as_one_node(tl, found)
        one_node_errors = tl.one_node_errors
        errors = errors + one_node_errors[:max(0, MAX_ERROR_LINES - len(errors))]
        error_count += len(one_node_errors)
    return _Sorted(store_lost(tl, found), after_end, errors, error_count, one_node_errors)


def _survived(tl: Timeline, s: _Sorted, kind: dict[str, str]) -> tuple[list[Finding], list[Finding]]:
    """(the findings left, those the run survived): every error of every file printed before its file says the run
    succeeded. The unrecognised lines become one finding (the first few kept), counted in full."""
    gone = [f for f in s.found if kind[f.sig.id] in ("cause", "symptom")]
    found = [f for f in s.found if f not in gone]
    for ev in s.errors:
        record(tl, _SURVIVED, {"what": ev.text.strip()[:120]}, ev)
    if s.errors:
        gone.append(tl.findings[_SURVIVED.id])
        gone[-1].count = s.error_count
    return found, gone


def judge(tl: Timeline, hung: bool) -> Judged:
    """Run the passes over a timeline (after ``derive.derive`` and ``went_on.went_on``)."""
    s = _set_aside(tl, hung)
    kind = {f.sig.id: ("suspect" if f.sig.transient and resolved(tl, f) else f.sig.kind) for f in s.found}
    failing = s.error_count > 0 or any(kind[f.sig.id] in ("cause", "symptom") for f in s.found)
    found, errors, error_count = s.found, s.errors, s.error_count
    gone: list[Finding] = []
    if failing and not hung and survived(tl, s.found, kind, s.one_node_errors):
        found, gone = _survived(tl, s, kind)
        errors, error_count, failing = [], 0, False
    found, stalled, failing = stall(tl, found, kind, failing, hung)
    h = heads(tl, found, kind, failing, errors)
    stops, first_stop = signal_stops(h.candidates)
    stopped = failing and not h.recognised and interrupted(h.candidates, first_stop, h.first_error)
    # no error line outside the known symptoms: the head (the lowest tier, then the earliest: a rank's crash before
    # the launcher's closing signals it caused) is where the failure shows first, even with no class to name
    lead = h.head if h.recognised or (h.first_error is None and not stopped) else None
    ranks, nodes = silent_ranks(tl), silent_nodes(tl)
    first = first_failure(lead, first_stop if stopped else h.first_error, failing, found, ranks, nodes)
    if stopped and first is not None:
        first["finding"] = stops[id(first_stop)].sig.id
    return Judged(found, kind, errors, error_count, s.after_end, gone, failing, stalled, h, stops, first_stop,
                  stopped, ranks, nodes, first)


__all__ = ["Judged", "judge"]
