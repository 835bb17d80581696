"""The first failure and its consequences: which findings explain which, the headline (the lowest tier, then the
earliest), whether its cause is recognised, and where the failure shows first."""
from __future__ import annotations

from dataclasses import dataclass

from ..attribution import stamp_text
from ..timeline import MAX_LISTED, TIMEOUTS, Event, Finding, Timeline, earliest, evidence_line
from .store import after_store_gone, after_worker_exit


@dataclass(frozen=True)
class Heads:
    """The failing findings and how they explain one another."""
    candidates: list[Finding]          # causes and symptoms (and suspects, in a failing log)
    explained: dict[str, str]          # id → the id of the present finding it is a consequence of
    heads: list[Finding]               # those nothing present explains
    head: Finding | None               # the headline: the lowest tier, then the earliest
    first_error: Event | None          # the earliest unrecognised error line
    recognised: bool                   # the headline is a known cause, and no unknown error came before it


def _head(heads: list[Finding]) -> Finding | None:
    if not heads:
        return None
    best = min(f.sig.tier for f in heads)
    tier_heads = [f for f in heads if f.sig.tier == best]
    firsts = {id(earliest(f.events)): f for f in tier_heads}
    return firsts[id(earliest([earliest(f.events) for f in tier_heads]))]


def _left_behind(tl: Timeline, candidates: list[Finding], explained: dict[str, str]) -> set[str]:
    """What a worker's failure left behind: a consequence of the first failure (rendered with the head's id)."""
    after_exit = {f.sig.id for f in candidates if f.sig.id not in explained
                  and (after_worker_exit(tl, f) or after_store_gone(tl, f))}
    if not any(f.sig.kind == "cause" and f.sig.cls is not None and f.sig.id not in after_exit for f in candidates):
        return set()   # only another cause can be what the worker failed of (a summary may be all there is)
    return after_exit


def heads(tl: Timeline, found: list[Finding], kind: dict[str, str], failing: bool, errors: list[Event]) -> Heads:
    candidates = [f for f in found if kind[f.sig.id] in ("cause", "symptom") or (failing and kind[f.sig.id] == "suspect")]
    present = {f.sig.id for f in candidates}
    explained = {f.sig.id: next(c for c in f.sig.consequence_of if c in present)
                 for f in candidates if any(c in present for c in f.sig.consequence_of)}
    after_exit = _left_behind(tl, candidates, explained)
    tops = [f for f in candidates if f.sig.id not in explained and f.sig.id not in after_exit]
    head = _head(tops)
    first_error = earliest(errors) if errors else None
    recognised = head is not None and head.sig.cls is not None
    if head is not None and recognised and head.sig.tier >= 3 and first_error is not None:
        # only consequences are recognised: an unrecognised error before them is the first failure
        head_first = earliest(head.events)
        if earliest([first_error, head_first]) is first_error and first_error is not head_first:
            recognised = False
    return Heads(candidates, explained, tops, head, first_error, recognised)


def _better_attributed(head: Finding, ev: Event) -> Event:
    """The same failure seen again with more attribution (torchrun's "Root Cause" summary names host and rank of
    the local_rank its first line gave)."""
    for other in head.events:
        if other is not ev and (ev.local_rank is None or other.local_rank in (None, ev.local_rank)) \
                and (other.rank is not None or other.node is not None):
            return Event(ev.file, ev.path, ev.line, ev.ts, ev.node or other.node,
                         ev.rank if ev.rank is not None else other.rank,
                         ev.local_rank if ev.local_rank is not None else other.local_rank, ev.text)
    return ev


def first_failure(head: Finding | None, first_error: Event | None, failing: bool, found: list[Finding],
                  silent_ranks: list[int], silent_nodes: list[str]) -> dict | None:
    """Where the failure shows first: the headline's earliest event (or the first error line), with the silent
    rank or node it points to when the headline is a timeout others report."""
    if not failing:
        return None
    ev = earliest(head.events) if head is not None else first_error
    if head is not None and ev is not None and (ev.rank is None or ev.node is None):
        ev = _better_attributed(head, ev)
    if ev is None:
        syms = [f for f in found if f.sig.kind in ("symptom", "cause")]
        if not syms:
            return None
        ev = earliest([earliest(f.events) for f in syms])
    out = {"node": ev.node, "rank": ev.rank, "local_rank": ev.local_rank, "file": ev.path or None,
           "line": ev.line or None, "time": stamp_text(ev.ts), "text": evidence_line(ev.path, ev.line, ev.text)["text"],
           "finding": head.sig.id if head is not None else None, "inferred_from": None}
    if head is not None and head.sig.tier >= 3 and out["rank"] is not None:
        if silent_ranks and len(silent_ranks) <= 4:
            out.update(rank=silent_ranks[0], node=None, inferred_from="the ranks that did not report the timeout")
        elif head.sig.id in TIMEOUTS and silent_nodes:
            out.update(node=silent_nodes[0], rank=None, local_rank=None,
                       inferred_from="the node whose lines do not report the timeout the others' do")
    return out


def silent_nodes(tl: Timeline) -> list[str]:
    """Nodes whose log does not report the collective timeout that the other nodes' logs do: their ranks are the
    stuck or dead ones (a rank in its data loader, a rank that skipped the collective). With a Gloo job, or NCCL
    without INFO lines, no world size is printed: the nodes stand in for the ranks. The nodes are the files (one
    node's log each), or the nodes our launcher says it started in one file holding all their lines (the
    console of `launch --all-nodes`)."""
    events = [e for sid in TIMEOUTS if sid in tl.findings for e in tl.findings[sid].events]
    reporting = {e.file for e in events}
    nodes = {i: f["node"] for i, f in enumerate(tl.files) if f.get("node") and f.get("lines")}
    if reporting and len(nodes) >= 2 and reporting <= set(nodes):
        silent = [n for i, n in nodes.items() if i not in reporting]
        return silent if len(silent) <= len(nodes) // 2 else []
    for fi, started in sorted(tl.launch_nodes.items()):
        told = {e.node for e in events if e.file == fi}
        if len(started) >= 2 and told and told <= started:
            silent = sorted(started - told)
            return silent if len(silent) <= len(started) // 2 else []
    return []


def silent_ranks(tl: Timeline) -> list[int]:
    """Ranks that never reported the collective timeout the others did (they are the stuck or dead ones)."""
    f = tl.findings.get("nccl.watchdog_timeout")
    nranks = tl.facts.nranks
    if f is None or not nranks or not f.ranks or len(f.ranks) >= MAX_LISTED:
        return []
    silent = sorted(set(range(nranks)) - set(f.ranks))
    return silent if 0 < len(silent) <= nranks // 2 else []


__all__ = ["Heads", "first_failure", "heads", "silent_nodes", "silent_ranks"]
