"""Warnings the run went past: an unrecognised NCCL WARN (or a transient finding) after which the run went on is
no error. Runs on the timeline once, before the other passes (it takes those lines out of the error lines)."""
from __future__ import annotations

from ..signatures import DERIVED
from ..timeline import Event, Finding, Timeline, record

_WARNED = next(s for s in DERIVED if s.id == "nccl.warned_then_progressed")


def gone_past(tl: Timeline, ev: Event) -> bool:
    """The run went on after ``ev``. An NCCL line: a step of the work later in its file, or its own process
    (node and GPU of NCCL's prefix) connecting later; a fatal NCCL error fails the init or the collective it
    happens in, so neither follows it, while another rank's "Init COMPLETE" or a model-loading bar may. Any
    other line (a store or connect retry): any sign of progress later in its file."""
    if "NCCL " in ev.text:
        work = tl.first_work.get(ev.file)
        if work is not None and ev.line < work:
            return True
        setup = tl.setup_last.get((ev.file, ev.node, ev.device)) if None not in (ev.node, ev.device) else None
        return setup is not None and ev.line < setup
    return ev.file in tl.first_progress and ev.line < tl.first_progress[ev.file]


def resolved(tl: Timeline, f: Finding) -> bool:
    """A transient finding (a retry, a warning NCCL goes on after) that the run went on after, every time."""
    return all(gone_past(tl, e) for e in f.events)


def went_on(tl: Timeline) -> None:
    """Unrecognised NCCL WARN lines that the run went on after (``gone_past``) are no error: they are counted out
    of the error lines and listed, as a finding that is never a cause."""
    went = [ev for warns in tl.nccl_warns.values() for ev in warns if gone_past(tl, ev)]
    if not went:
        return
    tl.went_past = gone = {id(ev) for ev in went}
    tl.errors = [e for e in tl.errors if id(e) not in gone]
    tl.error_count -= len(went)
    for ev in went:
        m = _WARNED.regex.search(ev.text)
        record(tl, _WARNED, {"what": m.group("what").strip()[:120] if m else ""}, ev)


def attribute_hosts(tl: Timeline) -> None:
    """torchrun's summary names the host of a rank whose own lines do not."""
    for f in tl.findings.values():
        for ev in f.events:
            if ev.node is None and ev.rank is not None and ev.rank in tl.summary_hosts:
                ev.node = tl.summary_hosts[ev.rank]


__all__ = ["attribute_hosts", "gone_past", "resolved", "went_on"]
