"""The doctor's timeline: what reading the logs leaves behind, per file, for the passes to judge.

Stage 2 of the doctor's pipeline (docs/DEVELOPING.md, "The doctor's pipeline"): ``reading.LineReader`` turns the
lines of each input into ``Event`` records, matched to signatures (``Matcher``) and gathered per signature as a
``Finding``; the marks it sets per file (the first progress, the run's end, the last success, a worker's exit, ...)
are the ``Timeline``. The passes (``passes/``) read a timeline and say what the findings are; ``decide`` gives the
verdict; ``document`` writes it down.

Order: the first of several events is the first by line within one file, else by the lines' own timestamps,
else by file name (``earliest``).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..secrets import mask_text
from .attribution import Stamp, stamp_key
from .evidence import CollectiveTrail, NcclFacts, RasText
from .gate import GateText
from .signatures import ERROR_RE, QUIET_RE, Signature

MAX_TEXT = 400
CONTEXT_LINES = 12     # a torchrun summary's host/rank applies to the lines just after it
REQUIRES_LINES = 40    # a `requires` context must have been seen this many lines before
MAX_LISTED = 64        # nodes/ranks listed per finding
MAX_ERROR_LINES = 8    # unrecognised error lines kept for the report
MAX_NCCL_WARNS = 10_000   # unrecognised NCCL WARN lines remembered per file (see passes.went_on)
#: progress that does not show the ranks had connected (a bar: model loading prints one before any rendezvous)
START_EXCLUDED = frozenset({"train.progress_bar"})
#: a collective that timed out on the ranks that report it: the ranks (nodes) that do not are the ones to look at first
TIMEOUTS = ("nccl.watchdog_timeout", "nccl.watchdog_hang", "gloo.recv_timeout")

@dataclass
class Event:
    file: int
    path: str
    line: int
    ts: Stamp | None
    node: str | None
    rank: int | None
    local_rank: int | None
    text: str
    device: int | None = None   # the GPU of NCCL's "host:pid:tid [GPU]" prefix (with the node: which process)


@dataclass(eq=False)
class Finding:
    sig: Signature
    groups: dict[str, str]
    first: Event
    events: list[Event] = field(default_factory=list)   # the first event of each distinct origin (bounded)
    evidence: list[dict] = field(default_factory=list)
    count: int = 0
    nodes: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    fix: str | None = None   # a fix given whole by its source (the preflight's report), not filled from the signature
    actor: str | None = ""   # who must act, given by its source (the preflight's "who acts"); "": the signature's
    last: dict[int, int] = field(default_factory=dict)   # file index → the line where it was last seen there


def groups_of(m: re.Match) -> dict[str, str]:
    """Named groups, with alternatives' ``name2`` folded into ``name``."""
    out: dict[str, str] = {}
    for k, v in m.groupdict().items():
        if v is None:
            continue
        base = k.rstrip("0123456789") or k
        out.setdefault(base, v)
    return out



def earliest(events: Sequence[Event]) -> Event:
    """The first of several events: by line within one file, else by timestamp, else by file name (not the order
    the files were given in: the same files in another order name the same first failure)."""
    if len({e.file for e in events}) == 1:
        return min(events, key=lambda e: e.line)
    stamped = [e for e in events if e.ts is not None]
    if stamped:
        with_date = all(e.ts.month is not None for e in stamped)
        return min(stamped, key=lambda e: (stamp_key(e.ts, with_date), e.path, e.line))
    return min(events, key=lambda e: (e.path, e.line))


def before(ev: Event, mark: Event) -> bool:
    """``ev`` came before ``mark`` in the order ``earliest`` gives (a line without a time is not before a timed one
    of another file)."""
    return earliest([mark, ev]) is not mark


def all_after(events: Sequence[Event], marks: dict[int, int]) -> bool:
    """Every event is in a file with a mark (file index → line) and after that line."""
    return all(e.file in marks and e.line > marks[e.file] for e in events)


class Matcher:
    """Signature lookup for one cleaned line: the first signature (table order) whose needle, context and pattern
    match. A benign match only lets progress and context signatures match after it.

    The needles present in the line are found with one alternation regex; only the signatures owning one of them
    are tried, in table order (a line holds a few needles; the table has a hundred signatures).
    """

    def __init__(self, signatures: Sequence[Signature]):
        self.signatures = list(signatures)
        self.owners: dict[str, list[int]] = {}
        for i, s in enumerate(self.signatures):
            for n in s.needles:
                self.owners.setdefault(n.decode(), []).append(i)
        self.owner_items = sorted(self.owners.items())

    def candidates(self, text: str) -> list[int]:
        found = [i for n, owners in self.owner_items if n in text for i in owners]
        return sorted(set(found))

    def match(self, text: str, ctx: dict, line: int,
              one_node: bool = False) -> tuple[Signature | None, re.Match | None, bool]:
        """``one_node``: as the line reads in a one-node job, where the multi-node-only causes do not hold."""
        benign = False
        for i in self.candidates(text):
            sig = self.signatures[i]
            if benign and sig.kind not in ("progress", "context"):
                continue
            if one_node and sig.multi_node_only:
                continue
            if sig.requires and not (line - ctx.get(sig.requires, -10**9) <= REQUIRES_LINES):
                continue
            m = sig.regex.search(text)
            if not m:
                continue
            if sig.kind == "benign":
                benign = True
                continue
            return sig, m, benign
        return None, None, benign


def is_error_line(text: str) -> bool:
    return bool(ERROR_RE.search(text)) and not QUIET_RE.search(text)




def evidence_line(path: str, line: int, text: str, pos: int = 0) -> dict:
    """An evidence line, secrets masked, a long line cut to a window that keeps the match (at ``pos``)."""
    if len(text) > MAX_TEXT:
        start = max(0, min(pos - MAX_TEXT // 4, len(text) - MAX_TEXT))
        text = ("…" if start else "") + text[start:start + MAX_TEXT] + ("…" if start + MAX_TEXT < len(text) else "")
    return {"file": path, "line": line, "text": mask_text(text.strip())}


def order_key(ev: Event) -> tuple:
    """How findings of one role are listed: timed lines first, by time, then by file and line."""
    return (ev.ts is None, stamp_key(ev.ts, False) if ev.ts else (0,), ev.path, ev.line)


@dataclass
class Timeline:
    """What the reader gathered from every input: the findings per signature, the unrecognised error lines, and the
    marks per file (file index → line) the passes order events against. Filled by ``reading.LineReader`` and by the
    derived findings (``derive``); the passes read it (``record`` is the one way a finding is added)."""
    max_evidence: int = 3
    #: the ids of the progress signatures that are set-up only (NCCL connected), not work
    setup: frozenset = frozenset()
    findings: dict[str, Finding] = field(default_factory=dict)
    progress: dict[str, dict] = field(default_factory=dict)
    first_progress: dict[int, int] = field(default_factory=dict)   # file index → line of its first sign of progress
    run_end: dict[int, int] = field(default_factory=dict)   # file index → line of its first sign that the run finished
    succeeded_last: dict[int, int] = field(default_factory=dict)   # file index → line of its last sign of success
    last_error: dict[int, int] = field(default_factory=dict)   # file index → its last unrecognised non-NCCL-WARN error
    worker_exit: dict[int, int] = field(default_factory=dict)  # file index → where its launcher first saw a worker fail
    store_gone: dict[int, int] = field(default_factory=dict)   # file index → its first "store closed the connection"
    #: what the lines of the multi-node-only causes are in a one-node job: the next signature of the table that
    #: takes them (findings, recorded apart), or, when none does, unrecognised error lines (the events)
    one_node_findings: dict[str, Finding] = field(default_factory=dict)
    one_node_errors: list[Event] = field(default_factory=list)
    work_start: dict[int, int] = field(default_factory=dict)   # file index → its first sign that the run started
    workers_done: set[int] = field(default_factory=set)   # files whose node's workers all succeeded
    tails: dict[int, str] = field(default_factory=dict)     # file index → its last line that is not blank
    errors: list[Event] = field(default_factory=list)
    open_tracebacks: dict[tuple, Event] = field(default_factory=dict)   # origin → its last traceback header not ended
    nccl_warns: dict[int, list[Event]] = field(default_factory=dict)   # file → its unrecognised "NCCL WARN" lines
    went_past: set[int] = field(default_factory=set)   # ids of those the run went on after (passes.went_on)
    setup_last: dict[tuple, int] = field(default_factory=dict)   # (file, node, GPU) → the last line its NCCL connected
    first_work: dict[int, int] = field(default_factory=dict)     # file → its first sign of work (a step)
    error_count: int = 0
    files: list[dict] = field(default_factory=list)
    unreadable: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)   # inputs read through another (an HTML report: its JSON twin)
    summary_hosts: dict[int, str] = field(default_factory=dict)   # rank → host, from torchrun's failure summaries
    #: file index → the nodes our launcher started torchrun on, as that file says (its console)
    launch_nodes: dict[int, set[str]] = field(default_factory=dict)
    facts: NcclFacts = field(default_factory=NcclFacts)
    trail: CollectiveTrail = field(default_factory=CollectiveTrail)
    ras: list[RasText] = field(default_factory=list)
    gates: list[GateText] = field(default_factory=list)   # our own preflight's verdict, per input that holds it
    flight: dict | None = None


def record(tl: Timeline, sig: Signature, groups: dict, ev: Event, pos: int = 0, extra: dict | None = None,
           into: dict[str, Finding] | None = None) -> Finding:
    """Count ``ev`` as one more line of ``sig`` (into ``tl.findings``, or ``into``); the bounded lists keep the first."""
    findings = tl.findings if into is None else into
    f = findings.get(sig.id)
    if f is None:
        f = findings[sig.id] = Finding(sig, dict(groups), ev)
    f.count += 1
    f.last[ev.file] = max(ev.line, f.last.get(ev.file, 0))
    for k, v in groups.items():   # later lines may carry what the first did not
        f.groups.setdefault(k, v)
    if extra:
        f.extra.update(extra)
    origin_key = (ev.file, ev.node, ev.rank, ev.local_rank)
    if len(f.events) < MAX_LISTED and not any((e.file, e.node, e.rank, e.local_rank) == origin_key for e in f.events):
        f.events.append(ev)
    if len(f.evidence) < tl.max_evidence:
        f.evidence.append(evidence_line(ev.path, ev.line, ev.text, pos))
    if ev.node is not None and ev.node not in f.nodes and len(f.nodes) < MAX_LISTED:
        f.nodes.append(ev.node)
    if ev.rank is not None and ev.rank not in f.ranks and len(f.ranks) < MAX_LISTED:
        f.ranks.append(ev.rank)
    return f


__all__ = ["CONTEXT_LINES", "Event", "Finding", "MAX_ERROR_LINES", "MAX_LISTED", "MAX_NCCL_WARNS", "Matcher",
           "START_EXCLUDED", "TIMEOUTS", "Timeline", "all_after", "before", "earliest", "evidence_line", "groups_of",
           "is_error_line", "order_key", "record"]
