"""What a failure left behind: a store that worked at the start and went away, peers gone after a worker failed."""
from __future__ import annotations

from ..signatures import DERIVED
from ..timeline import MAX_LISTED, Finding, Timeline, all_after, earliest

#: causes about reaching peers and the store: printed in a file after its launcher saw a worker fail, they are what
#: the failure left behind (peers gone, a restarted worker group connecting to the old one's addresses), not a cause
AFTER_EXIT_CLASSES = frozenset({"nic_iface", "port_rendezvous"})
_LOST = next(s for s in DERIVED if s.id == "store.lost_after_start")


def after_start(tl: Timeline, f: Finding) -> bool:
    """The run had started when every event of ``f`` was printed: a sign of the work (not a progress bar, which
    model loading prints before any rank connects) in some file, and in the event's own file not after it."""
    started = tl.work_start
    return bool(started) and all(e.file not in started or e.line > started[e.file] for e in f.events)


def after_worker_exit(tl: Timeline, f: Finding) -> bool:
    """``f`` is about reaching peers or the store, and each of its lines comes after its file's launcher saw a
    worker fail: the peers it could not reach were gone, or a restarted worker group (``--max-restarts``) was
    connecting to the addresses of the one that failed (recorded: static rendezvous, node 2 restarted alone)."""
    return f.sig.kind == "cause" and f.sig.cls in AFTER_EXIT_CLASSES and all_after(f.events, tl.worker_exit)


def after_store_gone(tl: Timeline, f: Finding) -> bool:
    """``f`` says the store could not be reached (a ``lost_after_start`` cause), and each of its lines comes after its
    file said the store closed the connection: it had been reached, and its host went away (recorded: a node
    given another --rdzv-id, whose store host ended on its own rendezvous timeout)."""
    return f.sig.lost_after_start and all_after(f.events, tl.store_gone)


def store_lost(tl: Timeline, found: list[Finding]) -> list[Finding]:
    """The store worked at the start: a ``lost_after_start`` cause printed after it is one consequence of its
    host's failure, ``store.lost_after_start`` (the findings it replaces merged into it, first event first)."""
    lost = [f for f in found if f.sig.lost_after_start and after_start(tl, f)]
    if not lost:
        return found
    merged = Finding(_LOST, {}, earliest([earliest(f.events) for f in lost]))
    for f in lost:   # each list keeps the bound record keeps
        merged.count += f.count
        merged.events += f.events[:MAX_LISTED - len(merged.events)]
        merged.evidence += f.evidence[:max(0, tl.max_evidence - len(merged.evidence))]
        merged.nodes += [n for n in f.nodes if n not in merged.nodes][:MAX_LISTED - len(merged.nodes)]
        merged.ranks += [r for r in f.ranks if r not in merged.ranks][:MAX_LISTED - len(merged.ranks)]
    return [f for f in found if f not in lost] + [merged]


__all__ = ["AFTER_EXIT_CLASSES", "after_start", "after_store_gone", "after_worker_exit", "store_lost"]
