"""Teardown noise: what a process prints while it exits, after the log says the run finished, is no failure."""
from __future__ import annotations

from ..timeline import Event, Finding, Timeline


def after_end_at(tl: Timeline, fi: int, line: int) -> bool:
    """Line ``line`` of file ``fi`` came after a sign that the run finished: later in its own file, or in a file
    without such a sign when another file has one (a rank's teardown lines beside rank 0's ``train_runtime``)."""
    if fi in tl.workers_done:
        return True
    if not tl.run_end:
        return False
    end = tl.run_end.get(fi)
    return line > end if end is not None else True


def after_end(tl: Timeline, ev: Event) -> bool:
    return after_end_at(tl, ev.file, ev.line)


def agents_closed_late(tl: Timeline, found: list[Finding], hung: bool) -> bool:
    """The workers made progress, no error line anywhere, and all that is left in a multi-file log are teardown
    lines: torchrun's agent on a node shutting the C10d rendezvous down after the head's agent (which hosts the
    store) had already exited ("has failed to shutdown the rendezvous", "Connection was likely closed"). An agent
    only gets there once its workers have ended; a node that failed, or died mid-run, leaves error lines or causes
    on the others (their collectives break). So it is the end of a run that worked, whose logs print no end-of-run
    line (torchrun logs its "worker group successfully finished" at INFO)."""
    if hung or not found or tl.error_count or not tl.progress or not all(f.sig.teardown for f in found):
        return False
    return sum(1 for f in tl.files if f["lines"]) >= 2


def teardown(tl: Timeline, found: list[Finding], hung: bool) -> tuple[list[Finding], list[Finding]]:
    """(the findings left, those set aside as teardown noise)."""
    after = [f for f in found if f.sig.teardown and all(after_end(tl, e) for e in f.events)]
    found = [f for f in found if f not in after]
    if agents_closed_late(tl, found, hung):   # torchrun's agents racing the store's host out at the end: noise
        return [], after + found
    return found, after


__all__ = ["after_end", "after_end_at", "agents_closed_late", "teardown"]
