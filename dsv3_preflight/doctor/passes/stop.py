"""A stop from outside (Ctrl-C, a scheduler's SIGTERM): with ``--hung`` its lines are set aside; without, a run
stopped with nothing failing before the signal is "interrupted", with no cause to name."""
from __future__ import annotations

from ..timeline import Event, Finding, before, earliest


def without_the_stop(found: list[Finding], errors: list[Event],
                     error_count: int) -> tuple[list[Finding], list[Event], int]:
    """For ``--hung``: the findings and unrecognised error lines (and their count) without the stop's lines (a
    signal, the launcher relaying it) and without what the stop caused. A symptom with no class, or an
    unrecognised error line, that is not before the first stop signal (the same order the "interrupted" verdict
    uses) is the stop's doing: the first node stopped closes its connections, and the ranks still waiting on the
    others print "Connection closed by peer" while they exit. The lines are dropped only when all were kept
    (``MAX_ERROR_LINES``): an error line not kept may be before the stop."""
    signals = [earliest(f.events) for f in found if f.sig.stop == "signal"]
    if not signals:
        return [f for f in found if not f.sig.stop], errors, error_count
    first_stop = earliest(signals)
    if error_count == len(errors):
        errors = [e for e in errors if before(e, first_stop)]
        error_count = len(errors)
    kept = [f for f in found if not f.sig.stop and (f.sig.cls is not None or before(earliest(f.events), first_stop))]
    return kept, errors, error_count


def signal_stops(candidates: list[Finding]) -> tuple[dict[int, Finding], Event | None]:
    """The stop-signal findings by their earliest event's id, and the first of those events."""
    stops = {id(earliest(f.events)): f for f in candidates if f.sig.stop == "signal"}
    first_stop = earliest([earliest(f.events) for f in stops.values()]) if stops else None
    return stops, first_stop


def interrupted(candidates: list[Finding], first_stop: Event | None, first_error: Event | None) -> bool:
    """Stopped from outside with nothing failing before the signal: the run did not fail by itself, and no cause is
    to be named (with --hung the stop lines were set aside). The launcher's "closing signal" lines ("relay") do not
    show that: torchrun sends them after a rank's own failure too. (Only asked of a failing log whose cause is not
    recognised.)"""
    if first_stop is None:
        return False
    return (all(f.sig.stop or (f.sig.cls is None and not before(earliest(f.events), first_stop)) for f in candidates)
            and (first_error is None or not before(first_error, first_stop)))


__all__ = ["interrupted", "signal_stops", "without_the_stop"]
