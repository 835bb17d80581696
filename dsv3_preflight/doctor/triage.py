"""Triage: read the logs, match lines to signatures, order the events, name the first failure and its consequences.

Verdicts (``document()["verdict"]``, ``["exit_code"]``):

- ``failure`` (exit 1): a cause, a symptom or an error line. ``cause_recognised`` says whether the headline is a
  known cause; when it is not, the document carries the error lines and the nearest known causes.
- ``healthy`` (exit 0): signs of progress (NCCL init complete, loss lines, nccl-tests results, "exits
  successfully") and no error line at all.
- ``unknown`` (exit 5): neither errors nor signs of progress (a truncated log, the wrong file, a run that never
  started). It is never exit 0: a script must not read it as healthy.
- a log with neither errors nor progress that stops where a suspect that explains a hang was seen (NCCL on
  loopback or a container bridge in a job NCCL does not show on one node; the rendezvous server waiting for
  workers) is a ``failure`` (exit 1) with that suspect as the suspected cause and ``stalled`` true.

Order: the headline is the finding of the lowest tier (the environment before a specific cause before a weak
cause before a symptom) and, within that tier, the first in time: in one file by line, across files by the
lines' own timestamps. Symptoms (watchdog timeouts, broken pipes, ChildFailedError, the launcher's SIGTERMs)
become consequences of it. When only symptoms are recognised and an unrecognised error came before them, the
cause is not recognised and that error is the first failure.
"""
from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..result import Actor
from ..secrets import mask_text
from .attribution import Stamp, local_stamp, origin_of, stamp_key, stamp_text, strip_collector, strip_launcher, time_of
from .evidence import (
    FACT_NEEDLES,
    RAS_NEEDLES,
    CollectiveTrail,
    NcclFacts,
    RasText,
    elastic_error,
    load_json_document,
    ras_json,
)
from .gate import GATE_NEEDLES, GateText, gate_json, html_twin, is_preflight_html, is_result_document
from .reader import (
    FileStats,
    InputError,
    NeedleSet,
    StreamFilter,
    clean,
    expand_inputs,
    labels_for,
    open_log,
    relined,
    scan,
    unwrap_record,
)
from .signatures import (
    CLASS_TITLES,
    DERIVED,
    DERIVED_NAMES,
    ERROR_NEEDLES,
    ERROR_RE,
    GATE_ERROR_NOTE,
    GATE_LAUNCHED,
    LABELS,
    QUIET_RE,
    SIGNATURES,
    STOPWORDS,
    Signature,
    by_id,
    gate_rerun,
    gate_signature,
)

#: what a teardown line after the end of a run is (doc["warnings"], role "teardown")
TEARDOWN_NOTE = ("Printed while the processes exited, after the log says the run finished: teardown noise, not a failure "
                 "of the run. Ending the training script with torch.distributed.destroy_process_group() on every rank "
                 "closes NCCL and the store in order and quiets it.")
#: what an unrecognised NCCL WARN the run went past is (doc["warnings"], role "went_on")
WENT_ON_NOTE = ("NCCL printed this warning and went on: the run shows progress after it (a fatal NCCL error stops the "
                "init or the step it happens in), so it is no failure. It may still cost speed or a transport; "
                "NCCL_DEBUG=INFO tells what NCCL used instead.")
#: what an error line before the run's successful end is (doc["warnings"], role "survived")
SURVIVED_NOTE = ("Printed before the log says the run succeeded (its training loop returned, its workers exited 0), in "
                 "the same file: the run survived it (a caught and retried error, a restart by torchrun), so it is no "
                 "failure. Worth a look if it recurs: a retry costs time.")
MAX_TEXT = 400
CONTEXT_LINES = 12     # a torchrun summary's host/rank applies to the lines just after it
REQUIRES_LINES = 40    # a `requires` context must have been seen this many lines before
MAX_LISTED = 64        # nodes/ranks listed per finding
MAX_ERROR_LINES = 8    # unrecognised error lines kept for the report
MAX_NCCL_WARNS = 10_000   # unrecognised NCCL WARN lines remembered per file (see Triage._went_on)
TRACEBACK_LINES = 400  # a traceback header and the exception line that ends it (deep stacks, chained frames)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
# the line that ends a Python traceback: the exception's qualified name, a colon (or nothing) and its message
_EXCEPTION_LINE = re.compile(r"^\W*" + LABELS + r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit|Failure)"
                            r"(?::|\s*$)")
_LABELS = re.compile(LABELS)
JSON_LIMIT = 32 << 20  # an input that is one JSON document up to this size is checked for a RAS JSON report
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_OPTIONAL = re.compile(r"\[\[(.*?)\]\]", re.S)   # may span lines (a fix of several commands)
_DERIVED = {s.id: s for s in DERIVED}
EXIT = {"healthy": 0, "failure": 1, "unknown": 5}
#: a frame of a C++ backtrace (c10::Error's "Exception raised from ... (most recent call first):" list). It names
#: functions, exception classes among them ("frame #2: c10::DistNetworkError::DistNetworkError(...)"), never an event:
#: the message it belongs to is on the lines before it
CPP_FRAME = re.compile(LABELS + r"frame #\d+: ")
#: progress that does not show the ranks had connected (a bar: model loading prints one before any rendezvous)
START_EXCLUDED = frozenset({"train.progress_bar"})
#: the launcher's line for a worker that failed, whatever signature it matched (a signal exit is a crash's or a
#: kill's): torchrun's "failed (exitcode: -6) local_rank: 0 (pid: …)", DeepSpeed's "exits with return code = 1"
WORKER_EXIT = re.compile(r"failed \(exitcode: -?\d+\) local_rank: \d+|exits with return code = -?\d+")
#: causes about reaching peers and the store: printed in a file after its launcher saw a worker fail, they are what
#: the failure left behind (peers gone, a restarted worker group connecting to the old one's addresses), not a cause
AFTER_EXIT_CLASSES = frozenset({"nic_iface", "port_rendezvous"})
#: "Connection was likely closed. Did the remote server shutdown or crash?": the store was reached, and went away
STORE_CLOSED = "c10d.store_closed"
#: a collective that timed out on the ranks that report it: the ranks (nodes) that do not are the ones to look at first
TIMEOUTS = ("nccl.watchdog_timeout", "nccl.watchdog_hang", "gloo.recv_timeout")
#: a tqdm bar that has done nothing yet: "  0%|          | 0/16 [00:00<?, ?it/s]"
ZERO_BAR = re.compile(r"(?<![\d.])0%\|[^|]*\|\s*0/\d+")


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
class _Finding:
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


def _groups(m: re.Match) -> dict[str, str]:
    """Named groups, with alternatives' ``name2`` folded into ``name``."""
    out: dict[str, str] = {}
    for k, v in m.groupdict().items():
        if v is None:
            continue
        base = k.rstrip("0123456789") or k
        out.setdefault(base, v)
    return out


def _actor_fields(actor: str | None) -> dict:
    """A finding's "actor" (job, node, network or null when the log does not say) and its label."""
    return {"actor": actor, "actor_label": Actor(actor).label if actor else None}


def _fill(template: str, groups: dict[str, str], names: Iterable[str] = (), quote: bool = False) -> str:
    """``{name}`` → the captured value (shell-quoted when ``quote``); a group the log never filled → ``?``;
    other braces (awk, JSON, ``${VAR}``) stay."""
    import shlex

    known = set(names)
    groups = {k: v for k, v in groups.items() if v}

    def optional(m: re.Match) -> str:   # [[ ... ]]: kept only when every placeholder in it was filled;
        inner, _, otherwise = m.group(1).partition("||")   # [[ ... || else ]]: else when one was not
        missing = [k for k in _PLACEHOLDER.findall(inner) if k in known and k not in groups]
        return otherwise if missing else inner

    def sub(m: re.Match) -> str:
        k = m.group(1)
        if k in groups:
            return shlex.quote(groups[k]) if quote else groups[k]
        if k in known:
            return "unknown" if quote else "?"
        return m.group(0)
    return _PLACEHOLDER.sub(sub, _OPTIONAL.sub(optional, template))


#: our launcher's start of torchrun on a node, on its console after the "[node R name] " prefix (launch/ray_launch.py):
#: "torchrun pid 4242 on gpu-node-1; log …"
_LAUNCH_START_NEEDLES = (b"] torchrun pid ",)
_LAUNCH_STARTED = re.compile(r"torchrun pid \d+ on \S+; log ")


def _json_escaped(needles: list[bytes]) -> list[bytes]:
    """The needles, and each as a JSON string escapes it where it differs (a Docker json-file record holds its line
    escaped, and Go's encoder escapes <, > and & too): the line is found, then decoded (``reader.unwrap_record``)."""
    def escaped(n: bytes) -> bytes:
        n = n.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\t", b"\\t")
        return n.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")
    return needles + [e for n in needles if (e := escaped(n)) != n]


def _earliest(events: Sequence[Event]) -> Event:
    """The first of several events: by line within one file, else by timestamp, else by file name (not the order
    the files were given in: the same files in another order name the same first failure)."""
    if len({e.file for e in events}) == 1:
        return min(events, key=lambda e: e.line)
    stamped = [e for e in events if e.ts is not None]
    if stamped:
        with_date = all(e.ts.month is not None for e in stamped)
        return min(stamped, key=lambda e: (stamp_key(e.ts, with_date), e.path, e.line))
    return min(events, key=lambda e: (e.path, e.line))


def _before(ev: Event, mark: Event) -> bool:
    """``ev`` came before ``mark`` in the order ``_earliest`` gives (a line without a time is not before a timed one
    of another file)."""
    return _earliest([mark, ev]) is not mark


def _all_after(events: Sequence[Event], marks: dict[int, int]) -> bool:
    """Every event is in a file with a mark (file index → line) and after that line."""
    return all(e.file in marks and e.line > marks[e.file] for e in events)


class _Matcher:
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


class _Chain(StreamFilter):
    """``head`` then the rest of ``inner`` (the bytes read to check for a JSON document are not lost)."""

    def __init__(self, head: bytes, inner):
        self.head, self.inner = head, inner

    def readinto(self, b) -> int:  # type: ignore[override]
        if self.head:
            n = min(len(b), len(self.head))
            b[:n] = self.head[:n]
            self.head = self.head[n:]
            return n
        data = self.inner.read(len(b))
        b[:len(data)] = data
        return len(data)


class Triage:
    """Accumulates evidence over several inputs; ``document()`` gives the JSON-able diagnosis."""

    def __init__(self, signatures: Sequence[Signature] = SIGNATURES, max_evidence: int = 3, hung: bool = False,
                 inputs_label: str = "{n} file(s)"):
        self.hung = hung   # the user says the run hung (doctor --hung)
        self.inputs_label = inputs_label   # how the summary counts what it read ({n}: the number of files)
        self.signatures = signatures
        self.max_evidence = max_evidence
        self._matcher = _Matcher(signatures)
        # the signs that a run finished stay read after the first progress: lines after them may be teardown noise
        base = [n for s in signatures if s.kind != "progress" or s.ends_run for n in s.needles] + list(ERROR_NEEDLES)
        base += list(FACT_NEEDLES) + list(RAS_NEEDLES) + list(GATE_NEEDLES) + list(_LAUNCH_START_NEEDLES)
        base = _json_escaped(base)
        progress = _json_escaped([n for s in signatures if s.kind == "progress" for n in s.needles])
        self._needles_all = NeedleSet(base + progress)
        self._needles_quiet = NeedleSet(base)   # once progress is seen, its (frequent) needles are dropped
        self._progress_only = frozenset(progress) - frozenset(base)
        self.findings: dict[str, _Finding] = {}
        self.progress: dict[str, dict] = {}
        self.first_progress: dict[int, int] = {}   # file index → line of its first sign of progress
        self.run_end: dict[int, int] = {}   # file index → line of its first sign that the run finished
        self.succeeded_last: dict[int, int] = {}   # file index → line of its last sign that the run succeeded
        self._last_error: dict[int, int] = {}   # file index → its last unrecognised error line that is no NCCL WARN
        self.worker_exit: dict[int, int] = {}  # file index → the line where its launcher first saw a worker fail
        self.store_gone: dict[int, int] = {}   # file index → its first line saying the store closed the connection
        #: what the lines of the multi-node-only causes are in a one-node job: the next signature of the table that
        #: takes them (findings, recorded apart), or, when none does, unrecognised error lines (the events)
        self._one_node_findings: dict[str, _Finding] = {}
        self._one_node_errors: list[Event] = []
        self.work_start: dict[int, int] = {}   # file index → its first sign that the run started (START_EXCLUDED aside)
        self.workers_done: set[int] = set()   # files whose node's workers all succeeded (a workers_done symptom)
        self.tails: dict[int, str] = {}     # file index → its last line that is not blank
        self._setup = frozenset(s.id for s in signatures if s.kind == "progress" and s.setup)
        #: a sign of the work's progress (not only set-up) was seen: progress needles are dropped from then on
        self._work_seen = False
        self.errors: list[Event] = []
        self._open_tracebacks: dict[tuple, Event] = {}   # origin → its last traceback header not yet ended
        self._nccl_warns: dict[int, list[Event]] = {}   # file → its unrecognised "NCCL WARN" error lines (bounded)
        self._went_past: set[int] = set()   # ids of those the run went on after (``_went_on``): no errors
        self._setup_last: dict[tuple, int] = {}   # (file, node, GPU) → the last line where that process's NCCL connected
        self._first_work: dict[int, int] = {}     # file → its first sign of work (a step: not set-up, not a bar)
        self.error_count = 0
        self.files: list[dict] = []
        self.unreadable: list[dict] = []
        self.skipped: list[dict] = []   # inputs read through another (an HTML report through its JSON twin)
        self.summary_hosts: dict[int, str] = {}   # rank → host, from torchrun's failure summaries
        #: file index → the nodes our launcher started torchrun on, as that file says (its console)
        self.launch_nodes: dict[int, set[str]] = {}
        self.facts = NcclFacts()
        self.trail = CollectiveTrail()
        self.ras: list[RasText] = []
        self.gates: list[GateText] = []   # our own preflight's verdict, per input that holds it
        self.flight: dict | None = None

    # -- reading --------------------------------------------------------------------------
    def add_paths(self, paths: Iterable[str]) -> None:
        files, refused = expand_inputs(paths)
        self.unreadable += refused
        files = self._html_reports(files)
        labels = labels_for(files)
        for path in files:
            try:
                self.add_stream(path, label=labels[path])
            except InputError as exc:
                self.unreadable.append({"path": exc.path or path, "error": exc.reason})

    def _html_reports(self, files: list[str]) -> list[str]:
        """The preflight's HTML reports give way to their JSON twins (the same results, without markup a log reader
        would misread); one without a twin is refused, saying what to pass instead."""
        out: list[str] = []
        real = {os.path.realpath(f) for f in files if f != "-"}
        for path in files:
            if path == "-" or not is_preflight_html(path):
                out.append(path)
                continue
            twin = html_twin(path)
            if twin is None:
                self.unreadable.append({"path": path, "error": "the preflight's HTML report: the doctor reads its JSON "
                                        "result document (the .json written beside it, or `run --json PATH`)"})
            elif os.path.realpath(twin) in real:
                self.skipped.append({"path": path, "why": f"the preflight's HTML report: its JSON twin {twin} is read"})
            else:
                self.skipped.append({"path": path, "why": f"the preflight's HTML report: its JSON twin {twin} is read instead"})
                real.add(os.path.realpath(twin))
                out.append(twin)
        return out

    def _needles(self) -> NeedleSet:
        return self._needles_quiet if self._work_seen else self._needles_all

    def _skip(self) -> frozenset:
        return self._progress_only if self._work_seen else frozenset()

    def add_stream(self, path: str, label: tuple[str | None, int | None] = (None, None)) -> None:
        """Read one input; ``label``: the node and local rank its path speaks for (``reader.labels_for``), for the
        lines that do not name their own."""
        stats = FileStats(path)
        fallback_node, file_local_rank = label
        stream = open_log(path, self._needles_all)   # the needles tell a message cut by a hard wrap
        unwrapped = relined(stream)
        ctx: dict[str, Any] = {"ras": RasText(), "gate": GateText(), "local_rank": file_local_rank}
        try:
            head = stream.peek(256)[:256]  # type: ignore[attr-defined]
            if head.lstrip()[:1] == b"{":
                data = stream.read(JSON_LIMIT + 1)
                doc = load_json_document(data, JSON_LIMIT)
                if self._json_input(path, doc):
                    stats.bytes = len(data)
                    stats.lines = data.count(b"\n")
                    self.files.append({"path": path, "node": fallback_node, "lines": stats.lines, "bytes": stats.bytes})
                    return
                elastic = elastic_error(doc)
                if elastic is not None:   # a rank's error file: its traceback's lines, at the time the file gives
                    if path != "-":
                        stream.close()
                    stream = io.BufferedReader(io.BytesIO(elastic.text.encode()))  # type: ignore[arg-type]
                    if elastic.timestamp is not None:
                        ctx["ts"] = local_stamp(elastic.timestamp)
                else:
                    stream = io.BufferedReader(_Chain(data, stream), 8 << 20)  # type: ignore[arg-type]
            file_index = len(self.files)
            self.files.append({"path": path, "node": fallback_node, "lines": 0, "bytes": 0})
            for line, raw, nxt in scan(stream, self._needles, stats, self._skip, unwrapped):
                self._line(file_index, path, line, clean(raw), fallback_node, ctx, nxt)
            hosts = ctx.get("summary_hosts") or set()
            if fallback_node is not None and len(hosts) == 1:   # the host name torchrun gave the file's node
                self.files[file_index]["host"] = next(iter(hosts))
            if ctx["ras"].dead or ctx["ras"].missing or ctx["ras"].mismatch or ctx["ras"].errors:
                self.ras.append(ctx["ras"])
            if ctx["gate"]:
                self.gates.append(ctx["gate"])
        finally:
            if path != "-":
                stream.close()
        self.files[file_index].update(lines=stats.lines, bytes=stats.bytes)
        self.tails[file_index] = clean(stats.tail)

    def _json_input(self, path: str, doc: object) -> bool:
        if is_result_document(doc):   # the preflight's own result document
            gate = gate_json(doc, path)
            if gate:   # (a GO document says nothing about a run: read, and nothing to record)
                self.gates.append(gate)
            return True
        rep = ras_json(doc) if doc is not None else None
        if rep is None:
            return False
        ras = RasText()
        where = {"file": path, "line": 1}
        for key in ("dead", "missing", "mismatch", "errors"):
            for e in rep[key]:
                getattr(ras, key).append({**e, **where})
        ras.section = "JSON"
        self.ras.append(ras)
        return True

    def _line(self, fi: int, path: str, line: int, text: str, fallback_node: str | None, ctx: dict,
              nxt: bytes = b"") -> None:
        text, logged = unwrap_record(text)
        ts = time_of(logged or text)   # a collector's time first (one clock on every line of its files), else the line's
        text, collected_on = strip_collector(text)
        text, launched_on = strip_launcher(text)
        origin = origin_of(text, launched_on or collected_on)
        if launched_on is not None and _LAUNCH_STARTED.match(text):
            self.launch_nodes.setdefault(fi, set()).add(launched_on)
            return
        if origin.local_rank is None and ctx.get("local_rank") is not None:   # a torchrun --log-dir rank's own file
            origin.local_rank = ctx["local_rank"]
        if ts is not None:
            ctx["ts"] = ts
        else:
            ts = ctx.get("ts")
        where = {"file": path, "line": line}
        self.facts.observe(text, origin.node or fallback_node, where, origin.device)
        self.trail.observe(text, fi, path, line, ts, origin.node or fallback_node)
        if fi not in self.worker_exit and "exit" in text and WORKER_EXIT.search(text):
            self.worker_exit[fi] = line
        if ctx["ras"].observe(text, where) or ctx["gate"].observe(text, {**where, "node": origin.node or fallback_node}) \
                or CPP_FRAME.match(text):
            return
        sig, m, benign = self._matcher.match(text, ctx, line)
        if sig is None and not benign and nxt.strip() and (is_error_line(text) or len(text) >= 60):
            # a message wrapped over two lines ("... train_batch_size is not" / "equal to ..."; "colle" / "ctive")
            follow = strip_collector(unwrap_record(clean(nxt))[0])[0].strip()
            label = _LABELS.match(text).group().strip()   # the rank's label goes on the next line of its output too
            if label and follow.startswith(label):
                follow = follow[len(label):].strip()
            for sep in (" ", ""):
                joined = text + sep + follow
                sig, m, _ = self._matcher.match(joined, ctx, line)
                # only a match that needs both lines: the next line is read on its own when it holds a needle
                if sig is not None and sig.kind in ("cause", "symptom", "suspect") and m.start() < len(text) < m.end():
                    text = joined
                    break
                sig, m = None, None
        if sig is None:
            if not benign and is_error_line(text):
                self._error_line(fi, path, line, ts, origin, fallback_node, text)
            return
        groups = _groups(m)
        if sig.enrich is not None:
            groups.update(sig.enrich(groups))
        if sig.kind in ("context", "progress"):
            if sig.kind == "context":
                self._context(groups, line, ctx)
            else:
                self.first_progress.setdefault(fi, line)
                if sig.id not in START_EXCLUDED:
                    self.work_start.setdefault(fi, line)
                if sig.ends_run:
                    self.run_end.setdefault(fi, line)
                if sig.succeeded:
                    self.succeeded_last[fi] = line
                if sig.workers_done:
                    self.workers_done.add(fi)
                if sig.id not in self.progress:
                    self.progress[sig.id] = {"id": sig.id, "title": sig.title, "count": 0, "first": self._evidence(path, line, text)}
                self.progress[sig.id]["count"] += 1
                self._work_seen = self._work_seen or sig.id not in self._setup
                if sig.id in self._setup:   # NCCL connected: which process, for the warnings it went on after
                    self._setup_last[(fi, origin.node or fallback_node, origin.device)] = line
                elif sig.id not in START_EXCLUDED:   # a step of the work (not a bar: model loading prints one first)
                    self._first_work.setdefault(fi, line)
            # a progress bar or a traceback frame can carry an error on the same line ("... 3.06it/s]Killed")
            if not benign and is_error_line(text):
                self._error_line(fi, path, line, ts, origin, fallback_node, text)
            return
        rank = int(groups["rank_a"]) if groups.get("rank_a", "").isdigit() else origin.rank
        local_rank = int(groups["local_rank"]) if groups.get("local_rank", "").isdigit() else origin.local_rank
        node = origin.node
        if ctx.get("summary_line") is not None and line - ctx["summary_line"] <= CONTEXT_LINES:  # torchrun's summary
            rank = ctx.get("summary_rank", rank) if rank is None else rank
            local_rank = ctx.get("summary_local_rank", local_rank) if local_rank is None else local_rank
            if fallback_node is None or len(ctx.get("summary_hosts", ())) > 1:
                # a file of its own is one node, under its file's label, whatever torchrun calls its host (the label
                # and the host name are one node: "node1" and "gpu-node-1.cluster" would count as two); a file whose
                # summaries name several hosts is not one node's: from its second host on, the summary's host is the node
                node = node or ctx.get("summary_host")
        node = node or fallback_node
        ev = Event(fi, path, line, ts, node, rank, local_rank, text, origin.device)
        if sig.workers_done:
            self.workers_done.add(fi)
        if sig.id == STORE_CLOSED:
            self.store_gone.setdefault(fi, line)
        self._record(sig, groups, ev, m.start())
        if sig.multi_node_only:
            alt, am, _ = self._matcher.match(text, ctx, line, one_node=True)
            if alt is not None and alt.kind in ("cause", "symptom", "suspect"):
                self._record(alt, _groups(am), ev, am.start(), into=self._one_node_findings)
            elif is_error_line(text):
                self._one_node_errors.append(ev)
        self._end_traceback((fi, origin.node or fallback_node, origin.rank, origin.local_rank), line)

    def _error_line(self, fi: int, path: str, line: int, ts, origin, fallback_node: str | None, text: str) -> None:
        """An error line no cause or symptom signature knows."""
        self.error_count += 1
        ev = Event(fi, path, line, ts, origin.node or fallback_node, origin.rank, origin.local_rank, text, origin.device)
        key = (fi, ev.node, ev.rank, ev.local_rank)
        if _TRACEBACK.search(text):
            self._open_tracebacks[key] = ev
        elif _EXCEPTION_LINE.match(text):   # an unknown exception ends its traceback: it, not the header, is the error
            self._end_traceback(key, line)
        if "NCCL WARN" in text:
            warns = self._nccl_warns.setdefault(fi, [])
            if len(warns) < MAX_NCCL_WARNS:
                warns.append(ev)
            else:   # more than are remembered: none of them is known to be survived or gone past
                self._last_error[fi] = line
        else:
            self._last_error[fi] = line
        if len(self.errors) < MAX_ERROR_LINES:
            self.errors.append(ev)
        elif ts is not None and self.errors[-1].ts is not None and ts < self.errors[-1].ts:
            self.errors[-1] = ev   # keep the earliest lines when files are read out of time order

    def _end_traceback(self, key: tuple, line: int) -> None:
        """A recognised line from the origin of an open "Traceback (most recent call last):" header ends that traceback:
        the header is not an unrecognised error of its own (it would be the "first failure" before every exception
        line it introduces, so a traceback ending in a known symptom would read as "cause not recognised")."""
        header = self._open_tracebacks.pop(key, None)
        if header is None and key[2] is not None:
            # a header printed without a rank prefix whose exception names its rank ("RuntimeError: [Rank 1] Caught
            # collective operation timeout"): the rank came from the exception line's words, not from its origin
            # (under torchrun --tee the header and the line still share the local rank's "[default0]:")
            header = self._open_tracebacks.pop(key[:2] + (None, key[3]), None)
        if header is None and key[2:] != (None, None):
            header = self._open_tracebacks.pop(key[:2] + (None, None), None)
        if header is not None and line - header.line <= TRACEBACK_LINES:
            self.error_count -= 1
            if header in self.errors:
                self.errors.remove(header)

    def _context(self, groups: dict, line: int, ctx: dict) -> None:
        for key in groups:
            if key not in ("field", "value", "local_rank"):
                ctx[key] = line
        fld, value = groups.get("field"), groups.get("value")
        if fld == "host":
            ctx.update(summary_host=value, summary_line=line)
            ctx.setdefault("summary_hosts", set()).add(value)
        elif fld == "rank" and value and value.isdigit():
            ctx.update(summary_rank=int(value), summary_line=line,
                       summary_local_rank=int(groups["local_rank"]) if groups.get("local_rank") else None)
            if ctx.get("summary_host") and line - ctx.get("summary_line", line) <= 2:
                self.summary_hosts.setdefault(int(value), ctx["summary_host"])
        elif fld in ("time", "exitcode"):
            ctx["summary_line"] = line

    def _record(self, sig: Signature, groups: dict, ev: Event, pos: int = 0, extra: dict | None = None,
                into: dict[str, _Finding] | None = None) -> _Finding:
        findings = self.findings if into is None else into
        f = findings.get(sig.id)
        if f is None:
            f = findings[sig.id] = _Finding(sig, dict(groups), ev)
        f.count += 1
        f.last[ev.file] = max(ev.line, f.last.get(ev.file, 0))
        for k, v in groups.items():   # later lines may carry what the first did not
            f.groups.setdefault(k, v)
        if extra:
            f.extra.update(extra)
        origin_key = (ev.file, ev.node, ev.rank, ev.local_rank)
        if len(f.events) < MAX_LISTED and not any((e.file, e.node, e.rank, e.local_rank) == origin_key for e in f.events):
            f.events.append(ev)
        elif ev.ts is not None and f.events and all(e.file != ev.file for e in f.events[:1]):
            pass
        if len(f.evidence) < self.max_evidence:
            f.evidence.append(self._evidence(ev.path, ev.line, ev.text, pos))
        if ev.node is not None and ev.node not in f.nodes and len(f.nodes) < MAX_LISTED:
            f.nodes.append(ev.node)
        if ev.rank is not None and ev.rank not in f.ranks and len(f.ranks) < MAX_LISTED:
            f.ranks.append(ev.rank)
        return f

    @staticmethod
    def _evidence(path: str, line: int, text: str, pos: int = 0) -> dict:
        """An evidence line, secrets masked, a long line cut to a window that keeps the match (at ``pos``)."""
        if len(text) > MAX_TEXT:
            start = max(0, min(pos - MAX_TEXT // 4, len(text) - MAX_TEXT))
            text = ("…" if start else "") + text[start:start + MAX_TEXT] + ("…" if start + MAX_TEXT < len(text) else "")
        return {"file": path, "line": line, "text": mask_text(text.strip())}

    # -- evidence beyond single lines --------------------------------------------------------
    def add_flight_recorder(self, trace_dir: str, prefix: str | None = None) -> None:
        from . import flight_recorder

        details, version = flight_recorder.load(trace_dir, prefix)
        self.flight = flight_recorder.analyse(details, version)
        for b in self.flight["behind"]:
            for rank in b["ranks"]:
                ev = Event(-1, trace_dir, 0, None, None, rank, None,
                           f"flight recorder: rank {rank} last collective #{b['behind_at'][str(rank)]}, ranks {b['ahead']} at #{b['seq']} ({b['op']})")
                self._record(_DERIVED["fr.rank_behind"], {"rank": str(rank), "seq": str(b["seq"]), "op": str(b["op"]),
                                                          "ahead": ",".join(map(str, b["ahead"]))}, ev)
        for d in self.flight["desync"]:
            ev = Event(-1, trace_dir, 0, None, None, None, None,
                       "flight recorder: at #{} {}".format(d["seq"], "; ".join(f"rank {r}: {v[0]} {v[1]}" for r, v in d["ops"].items())))
            self._record(_DERIVED["fr.desync"], {"seq": str(d["seq"])}, ev)

    def _derive(self) -> None:
        """Findings from the per-node NCCL facts and the RAS reports (once, before judging)."""
        file_of = {f["path"]: i for i, f in enumerate(self.files)}
        for d in self.facts.drift():
            sid = {"nccl_version": "nccl.version_drift", "cuda_driver": "cuda.driver_drift",
                   "net_plugin": "nccl.plugin_drift", "network": "nccl.network_drift"}[d["key"]]
            values = "; ".join(f"{v} on {', '.join(ns[:4])}{'…' if len(ns) > 4 else ''}" for v, ns in d["values"].items())
            for where in d["evidence"] or [{"file": None, "line": 0}]:
                node = next((n for v, ns in d["values"].items() for n in ns
                             if (d["key"], n, v) in self.facts.evidence and self.facts.evidence[(d["key"], n, v)] == where), None)
                ev = Event(file_of.get(where["file"], -1), where["file"] or "", where["line"], None, node, None, None,
                           f"{d['key']} {values}")
                f = self._record(_DERIVED[sid], {"values": values}, ev, extra={"values": d["values"]})
                f.evidence[-1]["text"] = f"{d['key']}: {values}"
        d = self.trail.divergence()
        if d is not None and (self.error_count or not self.progress):   # a log cut mid-run is always out of step
            groups = {"behind": ", ".join(map(str, d["behind"])), "ahead": ", ".join(map(str, d["ahead"])),
                      "seq_behind": str(d["seq_behind"]), "op_behind": d["op_behind"],
                      "seq_ahead": str(d["seq_ahead"]), "op_ahead": d["op_ahead"]}
            for w in d["where"]:
                self._record(_DERIVED["c10d.fingerprints_diverge"], groups,
                             Event(w["fi"], w["path"], w["line"], w["ts"], w["node"], w["rank"], None, w["text"]))
        self._derive_node_rank()
        self._derive_c10d_store()
        self._derive_gate(file_of)
        for ras in self.ras:
            for key, sid in (("mismatch", "ras.mismatch"), ("dead", "ras.dead"), ("missing", "ras.incomplete"),
                             ("errors", "ras.rank_error")):
                for e in getattr(ras, key):
                    groups = {k: str(v) for k, v in e.items() if v is not None and k in ("rank", "node", "pid", "error")}
                    ev = Event(file_of.get(e["file"], -1), e["file"], e["line"], None, e.get("node"),
                               e.get("rank"), None, "RAS " + ", ".join(f"{k} {v}" for k, v in groups.items()))
                    f = self._record(_DERIVED[sid], groups, ev)
                    if ras.mismatch_detail:
                        f.extra.setdefault("detail", ras.mismatch_detail[:4])

    def _derive_node_rank(self) -> None:
        """Two nodes (files) whose torchrun agents waited for the same node rank's share of the global ranks, or both
        as node rank 0 for every node's info: two nodes run with one --node-rank."""
        f = self.findings.get("elastic.ranks_not_assigned")
        if f is None:
            return
        by_rank: dict[str, list[Event]] = {}
        for ev in f.events:
            m = f.sig.regex.search(ev.text)
            if m is None:
                continue
            rank = "0" if m.group("kind") == "role_info" else m.group("rank")   # only node rank 0 waits for role_info
            if all((e.file, e.node) != (ev.file, ev.node) for e in by_rank.get(rank, [])):
                by_rank.setdefault(rank, []).append(ev)
        for rank, evs in sorted(by_rank.items()):
            if len(evs) < 2:
                continue
            names = [ev.node or ev.path for ev in evs]
            for ev in evs:
                self._record(_DERIVED["elastic.duplicate_node_rank"], {"rank": rank, "nodes": ", ".join(names)}, ev)

    def _derive_c10d_store(self) -> None:
        """Every file read is a node whose torchrun timed out connecting to one rendezvous endpoint, the C10d
        backend's RendezvousConnectionError in one of them at least, two files at least, no progress anywhere:
        nobody hosted the store. A node that hosted it would wait for the others instead, so one file without the
        timeout (or a launcher's log beside them) and nothing is derived."""
        conn, timeout = self.findings.get("elastic.rendezvous_connection"), self.findings.get("c10d.store_timeout")
        if conn is None or timeout is None or self.progress or len(self.files) < 2:
            return
        endpoints: dict[int, set[tuple[str, str]]] = {}
        events: dict[int, Event] = {}
        for ev in timeout.events:
            m = timeout.sig.regex.search(ev.text)
            groups = _groups(m) if m else {}
            if groups.get("host") and groups.get("port"):
                endpoints.setdefault(ev.file, set()).add((groups["host"], groups["port"]))
                events.setdefault(ev.file, ev)
        files = set(endpoints)   # (the others, stopped once one failed, may not have printed the backend's error)
        if len(files) != len(self.files):
            return
        common = set.intersection(*(endpoints[fi] for fi in files))
        if len(common) != 1:
            return
        host, port = next(iter(common))
        names = ", ".join(events[fi].node or events[fi].path for fi in sorted(files))
        for fi in sorted(files):
            self._record(_DERIVED["elastic.c10d_store_not_hosted"], {"host": host, "port": port, "nodes": names}, events[fi])

    def _derive_gate(self, file_of: dict[str, int]) -> None:
        """One finding per check our preflight reported FAIL or ERROR; its NO-GO line alone when no input names one."""
        report = next((g.report for g in self.gates if g.report), None)
        launched = any(g.launched for g in self.gates)
        for gate in self.gates:
            for e in gate.entries:
                groups = {k: e[k] for k in ("check", "status", "summary", "who", "also") if e.get(k)}
                if launched:
                    groups["launched"] = GATE_LAUNCHED
                if e["nodes"]:
                    groups["nodes"] = ", ".join(e["nodes"])
                if report:
                    groups["report"] = report
                if e["status"] == "ERROR":
                    groups["error_note"] = GATE_ERROR_NOTE
                sig = gate_signature(e["check"])
                for node in e["nodes"] or [e.get("node")]:
                    f = self._record(sig, groups, Event(file_of.get(e["file"], -1), e["file"], e["line"], None, node,
                                                        None, None, e["text"]))
                named = Actor.from_text(e.get("who"))
                f.actor = named.value if named else None
                if e.get("fix"):   # the preflight's own fix (JSON report), with the node's values: pasted as it is
                    f.fix = e["fix"] + "\n" + gate_rerun(e["check"])
                f.extra["launched"] = launched
        if not any(g.entries for g in self.gates):
            for gate in self.gates:
                for c in gate.closed:
                    groups = dict(c["groups"], **({"report": report} if report else {}))
                    f = self._record(_DERIVED["preflight.no_go"], groups,
                                     Event(file_of.get(c["file"], -1), c["file"], c["line"], None, c.get("node"), None,
                                           None, c["text"]))
                    f.extra["launched"] = True   # the launcher's line

    # -- judging --------------------------------------------------------------------------
    def _gone_past(self, ev: Event) -> bool:
        """The run went on after ``ev``. An NCCL line: a step of the work later in its file, or its own process
        (node and GPU of NCCL's prefix) connecting later; a fatal NCCL error fails the init or the collective it
        happens in, so neither follows it, while another rank's "Init COMPLETE" or a model-loading bar may. Any
        other line (a store or connect retry): any sign of progress later in its file."""
        if "NCCL " in ev.text:
            work = self._first_work.get(ev.file)
            if work is not None and ev.line < work:
                return True
            setup = self._setup_last.get((ev.file, ev.node, ev.device)) if None not in (ev.node, ev.device) else None
            return setup is not None and ev.line < setup
        return ev.file in self.first_progress and ev.line < self.first_progress[ev.file]

    def _went_on(self) -> None:
        """Unrecognised NCCL WARN lines that the run went on after (``_gone_past``) are no error: they are counted out
        of the error lines and listed, as a finding that is never a cause."""
        went_on = [ev for warns in self._nccl_warns.values() for ev in warns if self._gone_past(ev)]
        if not went_on:
            return
        self._went_past = gone = {id(ev) for ev in went_on}
        self.errors = [e for e in self.errors if id(e) not in gone]
        self.error_count -= len(went_on)
        for ev in went_on:
            m = _DERIVED["nccl.warned_then_progressed"].regex.search(ev.text)
            self._record(_DERIVED["nccl.warned_then_progressed"], {"what": m.group("what").strip()[:120] if m else ""}, ev)

    def document(self) -> dict:
        self._derive()
        self._went_on()
        found = list(self.findings.values())
        for f in found:  # torchrun's summary names the host of a rank whose own lines do not
            for ev in f.events:
                if ev.node is None and ev.rank is not None and ev.rank in self.summary_hosts:
                    ev.node = self.summary_hosts[ev.rank]
        errors, error_count = self.errors, self.error_count
        # what a process prints while it exits, after the run said it finished, is teardown noise, not a failure
        after_end = [f for f in found if f.sig.teardown and all(self._after_end(e) for e in f.events)]
        found = [f for f in found if f not in after_end]
        if self._agents_closed_late(found):   # torchrun's agents racing the store's host out at the end: noise
            after_end, found = after_end + found, []
        if self.hung:   # the user says it hung and stopped it: what the stop printed (Ctrl-C, SIGTERM) is not the failure
            found, errors, error_count = self._without_the_stop(found, errors, error_count)
        one_node_errors: list[Event] = []
        if self.facts.one_node():   # loopback or a container bridge is the right interface for a one-node job
            found = self._as_one_node(found)
            one_node_errors = self._one_node_errors
            errors = errors + one_node_errors[:max(0, MAX_ERROR_LINES - len(errors))]
            error_count += len(one_node_errors)
        errors_present = error_count > 0
        found = self._store_lost(found)
        kind = {f.sig.id: ("suspect" if f.sig.transient and self._resolved(f) else f.sig.kind) for f in found}
        failing = errors_present or any(kind[f.sig.id] in ("cause", "symptom") for f in found)
        # every error of every file printed before its file says the run succeeded: the run survived them
        survived: list[_Finding] = []
        if failing and not self.hung and self._survived(found, kind, one_node_errors):
            survived = [f for f in found if kind[f.sig.id] in ("cause", "symptom")]
            found = [f for f in found if f not in survived]
            for ev in errors:   # the unrecognised ones (the first few kept) as one finding, counted in full
                self._record(_DERIVED["run.error_survived"], {"what": ev.text.strip()[:120]}, ev)
            if errors:
                survived.append(self.findings["run.error_survived"])
                survived[-1].count = error_count
            errors, error_count, failing = [], 0, False
        # a log that stops with no error and no progress where a suspect that explains a hang was seen: that suspect
        # is the suspected cause (exit 1), not "no progress" (exit 5)
        stalled = not failing and not self.progress and any(f.sig.stall for f in found)
        if stalled:
            failing = True
            found = [f for f in found if kind[f.sig.id] != "suspect" or f.sig.stall]
        elif self.hung and not failing:
            # the user says it hung. Before any progress a suspect that can explain a hang is the suspected cause
            # (the stall suspects were handled above); after progress the run got past what it printed before, and
            # a harmless suspect (an IPv6 lookup) never is: the log's last phase speaks
            stalled = failing = True
            blamed = [] if self.progress else [f for f in found if kind[f.sig.id] == "suspect" and f.sig.hang_suspect]
            found = [f for f in found if kind[f.sig.id] != "suspect" or f in blamed]
            if not blamed:
                phase = self._hang_phase()
                if phase is not None:
                    found.append(phase)
                    kind[phase.sig.id] = phase.sig.kind
        candidates = [f for f in found if kind[f.sig.id] in ("cause", "symptom") or (failing and kind[f.sig.id] == "suspect")]
        present = {f.sig.id for f in candidates}
        explained = {f.sig.id: next(c for c in f.sig.consequence_of if c in present)
                     for f in candidates if any(c in present for c in f.sig.consequence_of)}
        # what a worker's failure left behind: a consequence of the first failure (rendered with the head's id)
        after_exit = {f.sig.id for f in candidates if f.sig.id not in explained
                      and (self._after_worker_exit(f) or self._after_store_gone(f))}
        if not any(f.sig.kind == "cause" and f.sig.cls is not None and f.sig.id not in after_exit for f in candidates):
            after_exit = set()   # only another cause can be what the worker failed of (a summary may be all there is)
        heads = [f for f in candidates if f.sig.id not in explained and f.sig.id not in after_exit]
        head: _Finding | None = None
        if heads:
            best = min(f.sig.tier for f in heads)
            tier_heads = [f for f in heads if f.sig.tier == best]
            firsts = {id(_earliest(f.events)): f for f in tier_heads}
            head = firsts[id(_earliest([_earliest(f.events) for f in tier_heads]))]
        first_error = _earliest(errors) if errors else None
        recognised = head is not None and head.sig.cls is not None
        if recognised and head.sig.tier >= 3 and first_error is not None:
            # only consequences are recognised: an unrecognised error before them is the first failure
            head_first = _earliest(head.events)
            if _earliest([first_error, head_first]) is first_error and first_error is not head_first:
                recognised = False
        # stopped from outside (Ctrl-C, a scheduler's SIGTERM) with nothing failing before the signal: the run did not
        # fail by itself, and no cause is to be named (with --hung the stop lines were set aside above). The launcher's
        # "closing signal" lines ("relay") do not show that: torchrun sends them after a rank's own failure too
        stops = {id(_earliest(f.events)): f for f in candidates if f.sig.stop == "signal"}   # by its earliest event
        first_stop = _earliest([_earliest(f.events) for f in stops.values()]) if stops else None
        interrupted = (failing and not recognised and first_stop is not None
                       and all(f.sig.stop or (f.sig.cls is None and not _before(_earliest(f.events), first_stop))
                               for f in candidates)
                       and (first_error is None or not _before(first_error, first_stop)))
        if not failing:
            verdict = "healthy" if self.progress and self._zero_bar() is None else "unknown"
        else:
            verdict = "failure"
        order = lambda f: (0 if f is head else 1, f.sig.tier, self._order_key(_earliest(f.events)))  # noqa: E731
        findings: list[dict] = []
        if failing:
            roots = [f for f in heads if f.sig.kind in ("cause", "suspect") and f.sig.cls is not None]
            if recognised and head not in roots:
                roots.insert(0, head)
            if not recognised:
                roots = [f for f in roots if f.sig.tier < 3 and f is not head] if head is not None and head.sig.tier >= 3 else roots
            roots.sort(key=order)
            consequences = [f for f in candidates if f not in roots]
            consequences.sort(key=order)
            head_id = roots[0].sig.id if roots and recognised else None
            findings = [self._render(f, "root_cause", None) for f in roots]
            findings += [self._render(f, "consequence", explained.get(f.sig.id, head_id)) for f in consequences]
            if findings and recognised:
                findings[0]["headline"] = True
        warnings = [self._render(f, "warning", None) for f in found if kind[f.sig.id] == "suspect" and not failing]
        warnings += [dict(self._render(f, "teardown", None), root_cause=TEARDOWN_NOTE, fix="", check=None) for f in after_end]
        warnings += [dict(self._render(f, "survived", None), root_cause=SURVIVED_NOTE, fix="") for f in survived]
        warnings += [dict(self._render(f, "went_on", None), root_cause=WENT_ON_NOTE, fix="", check=None)
                     for f in found if f.sig.id == "nccl.warned_then_progressed"]
        # no error line outside the known symptoms: the head (the lowest tier, then the earliest: a rank's crash before
        # the launcher's closing signals it caused) is where the failure shows first, even with no class to name
        lead = head if recognised or (first_error is None and not interrupted) else None
        silent_ranks, silent_nodes = self._silent_ranks(), self._silent_nodes()
        first = self._first_failure(lead, first_stop if interrupted else first_error, failing, found,
                                    silent_ranks, silent_nodes)
        if interrupted and first is not None:
            first["finding"] = stops[id(first_stop)].sig.id
        cause_class = (head.sig.cls if (failing and recognised and head is not None)
                       else "interrupted" if interrupted
                       else "unrecognised" if failing else "healthy" if verdict == "healthy" else "no_progress")
        doc = {
            "tool": "dsv3-preflight doctor",
            "verdict": verdict,
            "exit_code": EXIT[verdict],
            "cause_recognised": bool(failing and recognised),
            "cause_class": cause_class,
            "stalled": stalled,
            "hung": self.hung,
            "summary": "",
            "first_failure": first,
            "findings": findings,
            "warnings": warnings,
            "error_lines": [self._evidence(e.path, e.line, e.text) | {"node": e.node, "rank": e.rank} for e in errors],
            "nearest_causes": self._nearest(errors) if failing and not recognised and not interrupted else [],
            "silent_ranks": silent_ranks,
            "silent_nodes": [] if silent_ranks else silent_nodes,
            "healthy_signs": list(self.progress.values()),
            "unrecognised": {"count": error_count,
                             "first": [self._evidence(e.path, e.line, e.text) for e in errors[:self.max_evidence]]},
            "nccl": self.facts.to_dict(),
            "ras": self._ras_summary(),
            "flight_recorder": self.flight,
            "files": self.files,
            "unreadable": self.unreadable,
            "skipped": self.skipped,
        }
        doc["summary"] = self._summary(doc)
        if self.unreadable:
            doc["exit_code"] = 4
        return doc

    def _as_one_node(self, found: list[_Finding]) -> list[_Finding]:
        """The findings as a one-node job reads them: no multi-node-only cause, no stall suspect of a multi-node job.
        The lines those causes took read as the rest of the table reads them (a store timeout, a closed connection);
        the ones no other signature takes are ``_one_node_errors``: a failure line is never dropped."""
        found = [f for f in found if f.sig.stall != "multi_node" and not f.sig.multi_node_only]
        for alt in self._one_node_findings.values():
            mine = self.findings.get(alt.sig.id)
            if mine is None:
                found.append(alt)
            elif mine in found:   # (one set aside as teardown after the end takes these with it)
                mine.count += alt.count
                mine.events += [e for e in alt.events if len(mine.events) < MAX_LISTED]
                for fi, ln in alt.last.items():
                    mine.last[fi] = max(ln, mine.last.get(fi, 0))
        return found

    def _survived(self, found: list[_Finding], kind: dict[str, str], more_errors: list[Event]) -> bool:
        """Every error in the logs was printed before a sign that the run succeeded (``succeeded``) in its own file:
        each failing finding everywhere it was seen, every unrecognised error line (NCCL WARN lines the run went
        past aside). A file with an error and no such sign, or an error after it, and the run did not survive."""
        end = self.succeeded_last
        if not end:
            return False

        def before(fi: int, line: int) -> bool:
            return fi in end and line < end[fi]

        if not all(before(fi, line) for fi, line in self._last_error.items()):
            return False
        if not all(before(ev.file, ev.line) for ev in more_errors):
            return False
        if not all(before(ev.file, ev.line) or id(ev) in self._went_past
                   for warns in self._nccl_warns.values() for ev in warns):
            return False
        failing = [f for f in found if kind[f.sig.id] in ("cause", "symptom")]
        # a teardown line after the end of its file (or in a file without an end beside one that has it) is noise
        # wherever the same finding also stands before the success
        return all(f.last and all(before(fi, line) or (f.sig.teardown and self._after_end_at(fi, line))
                                  for fi, line in f.last.items()) for f in failing)

    def _zero_bar(self) -> tuple[int, str] | None:
        """(file index, bar) when the only progress is set-up (NCCL connected) and a file ends on a progress bar
        that has done nothing: the run stopped before it finished a first step (cut short, or hung there), which
        is no sign that the work runs."""
        if not self.progress or not set(self.progress) <= self._setup:
            return None
        for fi, text in sorted(self.tails.items()):
            m = ZERO_BAR.search(text)
            if m:
                return fi, " ".join(text[:m.end()].split())[-80:]   # "Processed prompts: 0%| | 0/16"
        return None

    def _agents_closed_late(self, found: list[_Finding]) -> bool:
        """The workers made progress, no error line anywhere, and all that is left in a multi-file log are teardown
        lines: torchrun's agent on a node shutting the C10d rendezvous down after the head's agent (which hosts the
        store) had already exited ("has failed to shutdown the rendezvous", "Connection was likely closed"). An agent
        only gets there once its workers have ended; a node that failed, or died mid-run, leaves error lines or causes
        on the others (their collectives break). So it is the end of a run that worked, whose logs print no end-of-run
        line (torchrun logs its "worker group successfully finished" at INFO)."""
        if self.hung or not found or self.error_count or not self.progress or not all(f.sig.teardown for f in found):
            return False
        return sum(1 for f in self.files if f["lines"]) >= 2

    def _after_end(self, ev: Event) -> bool:
        """``ev`` came after a sign that the run finished: later in its own file, or in a file without such a sign
        when another file has one (a rank's teardown lines beside rank 0's ``train_runtime``)."""
        return self._after_end_at(ev.file, ev.line)

    def _after_end_at(self, fi: int, line: int) -> bool:
        if fi in self.workers_done:
            return True
        if not self.run_end:
            return False
        end = self.run_end.get(fi)
        return line > end if end is not None else True

    def _without_the_stop(self, found: list[_Finding], errors: list[Event],
                          error_count: int) -> tuple[list[_Finding], list[Event], int]:
        """For ``--hung``: the findings and unrecognised error lines (and their count) without the stop's lines (a
        signal, the launcher relaying it) and without what the stop caused. A symptom with no class, or an
        unrecognised error line, that is not before the first stop signal (the same order the "interrupted" verdict
        uses) is the stop's doing: the first node stopped closes its connections, and the ranks still waiting on the
        others print "Connection closed by peer" while they exit. The lines are dropped only when all were kept
        (``MAX_ERROR_LINES``): an error line not kept may be before the stop."""
        signals = [_earliest(f.events) for f in found if f.sig.stop == "signal"]
        if not signals:
            return [f for f in found if not f.sig.stop], errors, error_count
        first_stop = _earliest(signals)
        if error_count == len(errors):
            errors = [e for e in errors if _before(e, first_stop)]
            error_count = len(errors)
        kept = [f for f in found if not f.sig.stop and (f.sig.cls is not None or _before(_earliest(f.events), first_stop))]
        return kept, errors, error_count

    def _hang_phase(self) -> _Finding | None:
        """For ``--hung`` with no error and no suspect: the phase the log stops in, as a derived finding (None: the
        log does not show one)."""
        longest = max(range(len(self.files)), key=lambda i: self.files[i]["lines"], default=None)
        if longest is None:
            return None
        path, lines = self.files[longest]["path"], self.files[longest]["lines"]
        if self.progress:   # which sign came last is not known: a file's progress needles are dropped once seen
            shown = ", ".join(h["title"] for h in self.progress.values())
            bar = self._zero_bar()
            if bar is not None:
                shown += f", then a progress bar at 0 ({bar[1]})"
            sid, groups, text = "hang.after_progress", {"shown": shown}, f"hung after {shown}"
        elif self.facts.world and not self.facts.nranks:
            if self.facts.one_node():
                sid, groups, text = "hang.nccl_init_one_node", {}, "hung in NCCL init on one node"
            else:
                hosts, world = str(max(len(self.facts.nodes), 1)), str(self.facts.world)
                sid, groups = "hang.nccl_init", {"hosts": hosts, "world": world}
                text = f"hung in NCCL init ({world} ranks, {hosts} host(s) in the log)"
        else:
            return None
        ev = Event(longest, path, lines, None, None, None, None, text)
        f = self._record(_DERIVED[sid], groups, ev)
        f.evidence[-1]["text"] = f"{text} (doctor --hung; the log ends at line {lines})"
        return f

    def _after_start(self, f: _Finding) -> bool:
        """The run had started when every event of ``f`` was printed: a sign of the work (not a progress bar, which
        model loading prints before any rank connects) in some file, and in the event's own file not after it."""
        started = self.work_start
        return bool(started) and all(e.file not in started or e.line > started[e.file] for e in f.events)

    def _after_worker_exit(self, f: _Finding) -> bool:
        """``f`` is about reaching peers or the store, and each of its lines comes after its file's launcher saw a
        worker fail: the peers it could not reach were gone, or a restarted worker group (``--max-restarts``) was
        connecting to the addresses of the one that failed (recorded: static rendezvous, node 2 restarted alone)."""
        return f.sig.kind == "cause" and f.sig.cls in AFTER_EXIT_CLASSES and _all_after(f.events, self.worker_exit)

    def _after_store_gone(self, f: _Finding) -> bool:
        """``f`` says the store could not be reached (a ``lost_after_start`` cause), and each of its lines comes after its
        file said the store closed the connection: it had been reached, and its host went away (recorded: a node
        given another --rdzv-id, whose store host ended on its own rendezvous timeout)."""
        return f.sig.lost_after_start and _all_after(f.events, self.store_gone)

    def _store_lost(self, found: list[_Finding]) -> list[_Finding]:
        """The store worked at the start: a ``lost_after_start`` cause printed after it is one consequence of its
        host's failure, ``store.lost_after_start`` (the findings it replaces merged into it, first event first)."""
        lost = [f for f in found if f.sig.lost_after_start and self._after_start(f)]
        if not lost:
            return found
        sig = _DERIVED["store.lost_after_start"]
        merged = _Finding(sig, {}, _earliest([_earliest(f.events) for f in lost]))
        for f in lost:   # each list keeps the bound _record keeps
            merged.count += f.count
            merged.events += f.events[:MAX_LISTED - len(merged.events)]
            merged.evidence += f.evidence[:max(0, self.max_evidence - len(merged.evidence))]
            merged.nodes += [n for n in f.nodes if n not in merged.nodes][:MAX_LISTED - len(merged.nodes)]
            merged.ranks += [r for r in f.ranks if r not in merged.ranks][:MAX_LISTED - len(merged.ranks)]
        return [f for f in found if f not in lost] + [merged]

    def _resolved(self, f: _Finding) -> bool:
        """A transient finding (a retry, a warning NCCL goes on after) that the run went on after, every time."""
        return all(self._gone_past(e) for e in f.events)

    def _order_key(self, ev: Event) -> tuple:
        return (ev.ts is None, stamp_key(ev.ts, False) if ev.ts else (0,), ev.path, ev.line)

    def _first_failure(self, head: _Finding | None, first_error: Event | None, failing: bool, found: list,
                       silent_ranks: list[int], silent_nodes: list[str]) -> dict | None:
        if not failing:
            return None
        ev = _earliest(head.events) if head is not None else first_error
        if head is not None and ev is not None and (ev.rank is None or ev.node is None):
            # the same failure seen again with more attribution (torchrun's "Root Cause" summary names host and rank
            # of the local_rank its first line gave)
            for other in head.events:
                if other is not ev and (ev.local_rank is None or other.local_rank in (None, ev.local_rank)) \
                        and (other.rank is not None or other.node is not None):
                    ev = Event(ev.file, ev.path, ev.line, ev.ts, ev.node or other.node,
                               ev.rank if ev.rank is not None else other.rank,
                               ev.local_rank if ev.local_rank is not None else other.local_rank, ev.text)
                    break
        if ev is None:
            syms = [f for f in found if f.sig.kind in ("symptom", "cause")]
            if not syms:
                return None
            ev = _earliest([_earliest(f.events) for f in syms])
        out = {"node": ev.node, "rank": ev.rank, "local_rank": ev.local_rank, "file": ev.path or None,
               "line": ev.line or None, "time": stamp_text(ev.ts), "text": self._evidence(ev.path, ev.line, ev.text)["text"],
               "finding": head.sig.id if head is not None else None, "inferred_from": None}
        if head is not None and head.sig.tier >= 3 and out["rank"] is not None:
            if silent_ranks and len(silent_ranks) <= 4:
                out.update(rank=silent_ranks[0], node=None, inferred_from="the ranks that did not report the timeout")
            elif head.sig.id in TIMEOUTS and silent_nodes:
                out.update(node=silent_nodes[0], rank=None, local_rank=None,
                           inferred_from="the node whose lines do not report the timeout the others' do")
        return out

    def _silent_nodes(self) -> list[str]:
        """Nodes whose log does not report the collective timeout that the other nodes' logs do: their ranks are the
        stuck or dead ones (a rank in its data loader, a rank that skipped the collective). With a Gloo job, or NCCL
        without INFO lines, no world size is printed: the nodes stand in for the ranks. The nodes are the files (one
        node's log each), or the nodes our launcher says it started in one file holding all their lines (the
        console of `launch --all-nodes`)."""
        events = [e for sid in TIMEOUTS if sid in self.findings for e in self.findings[sid].events]
        reporting = {e.file for e in events}
        nodes = {i: f["node"] for i, f in enumerate(self.files) if f.get("node") and f.get("lines")}
        if reporting and len(nodes) >= 2 and reporting <= set(nodes):
            silent = [n for i, n in nodes.items() if i not in reporting]
            return silent if len(silent) <= len(nodes) // 2 else []
        for fi, started in sorted(self.launch_nodes.items()):
            told = {e.node for e in events if e.file == fi}
            if len(started) >= 2 and told and told <= started:
                silent = sorted(started - told)
                return silent if len(silent) <= len(started) // 2 else []
        return []

    def _silent_ranks(self) -> list[int]:
        """Ranks that never reported the collective timeout the others did (they are the stuck or dead ones)."""
        f = self.findings.get("nccl.watchdog_timeout")
        nranks = self.facts.nranks
        if f is None or not nranks or not f.ranks or len(f.ranks) >= MAX_LISTED:
            return []
        silent = sorted(set(range(nranks)) - set(f.ranks))
        return silent if 0 < len(silent) <= nranks // 2 else []

    def _ras_summary(self) -> dict | None:
        if not self.ras:
            return None
        out: dict = {"dead": [], "missing": [], "mismatch": [], "errors": []}
        for r in self.ras:
            for k in out:
                out[k] += [{x: e.get(x) for x in ("rank", "node", "pid", "gpu", "error") if e.get(x) is not None}
                           for e in getattr(r, k)][:MAX_LISTED]
        return out

    def _nearest(self, errors: list[Event]) -> list[dict]:
        """The known causes whose words are closest to the unrecognised error lines (a hint, not a diagnosis)."""
        words = set()
        for e in errors:
            words |= {w for w in re.findall(r"[a-z][a-z0-9_]{2,}", e.text.lower()) if w not in STOPWORDS}
        if not words:
            return []
        scored = []
        for s in SIGNATURES:
            if s.kind not in ("cause", "suspect") or s.cls is None:
                continue
            sw = {w for w in re.findall(r"[a-z][a-z0-9_]{2,}", (s.title + " " + s.example + " " + s.root_cause).lower())
                  if w not in STOPWORDS}
            overlap = len(words & sw)
            if overlap:
                scored.append((overlap / (len(sw) ** 0.5), s))
        scored.sort(key=lambda x: -x[0])
        out, seen = [], set()
        for score, s in scored:
            if s.cls in seen:
                continue
            seen.add(s.cls)
            out.append({"id": s.id, "class": s.cls, "title": _fill(s.title, {}, s.regex.groupindex), "check": s.check,
                        "score": round(score, 2)})
            if len(out) == 3:
                break
        return out

    def _render(self, f: _Finding, role: str, explained_by: str | None) -> dict:
        s = f.sig
        names = {k.rstrip("0123456789") or k for k in s.regex.groupindex} | DERIVED_NAMES
        ev = _earliest(f.events)
        return {
            "id": s.id, "class": s.cls, "class_title": CLASS_TITLES.get(s.cls or "", None), "kind": s.kind, "tier": s.tier,
            "role": role,
            "title": _fill(s.title, f.groups, names), "root_cause": _fill(s.root_cause, f.groups, names),
            "fix": f.fix if f.fix is not None else _fill(s.fix, f.groups, names, quote=True), "check": s.check,
            **_actor_fields(None if role == "consequence" else s.actor if f.actor == "" else f.actor),
            "node": ev.node, "rank": ev.rank, "local_rank": ev.local_rank, "time": stamp_text(ev.ts),
            "nodes": f.nodes, "ranks": f.ranks, "count": f.count,
            "first_seen": {"file": ev.path or None, "line": ev.line or None},
            "explained_by": explained_by,
            "evidence": f.evidence,
            **({"detail": f.extra} if f.extra else {}),
        }

    def _summary(self, doc: dict) -> str:
        nlines = sum(f["lines"] for f in self.files)
        where = f"{self.inputs_label.format(n=len(self.files))}, {nlines} lines"
        verdict = doc["verdict"]
        if verdict == "failure":
            ff = doc["first_failure"] or {}
            at = ", ".join(x for x in (ff.get("node") and f"node {ff['node']}",
                                       ff.get("rank") is not None and f"rank {ff['rank']}") if x)
            rest = sum(1 for f in doc["findings"] if f["role"] == "consequence")
            tail = (f" ({at})" if at else "") + (f"; {rest} consequence(s)" if rest else "") + f" in {where}"
            if doc["stalled"] and self.hung:
                if not doc["findings"]:
                    return ("the run hung (doctor --hung) and the log shows no error, no suspect and no phase: run with "
                            "NCCL_DEBUG=INFO and TORCH_DISTRIBUTED_DEBUG=DETAIL to see where it waits" + tail)
                return f"suspected cause of the hang (doctor --hung): {doc['findings'][0]['title']}" + tail
            if doc["stalled"]:
                return (f"suspected cause: {doc['findings'][0]['title']}: the log stops there with no error and no sign "
                        f"of progress (a hang?)" + tail)
            if doc["cause_recognised"]:
                return f"root cause: {doc['findings'][0]['title']}" + tail
            # the finding the first failure is (a stop from outside; a known symptom of an unknown cause)
            known = next((f for f in doc["findings"] if f["id"] == ff.get("finding")), None)
            if doc["cause_class"] == "interrupted":
                shown = ", ".join(h["title"] for h in self.progress.values())
                return ("stopped from outside, nothing failed before it: "
                        + (known["title"] if known else (ff.get("text") or "")[:160])
                        + (f" (after progress: {shown})" if shown else " (before any sign of progress)")
                        + "; if it was stopped because it hung, `dsv3-preflight doctor --hung` names where" + tail)
            if known is not None:   # a rank's native crash: the first failure, whose cause is not known
                return f"cause not recognised; the first failure: {known['title']}" + tail
            return f"cause not recognised: first error: {(ff.get('text') or '')[:160]}" + tail
        if not self.files and self.unreadable:
            return f"no readable log ({len(self.unreadable)} unreadable input(s))"
        if verdict == "healthy":
            teardown = sum(w["count"] for w in doc["warnings"] if w["role"] == "teardown")
            went_on = sum(w["count"] for w in doc["warnings"] if w["role"] == "went_on")
            survived = sum(w["count"] for w in doc["warnings"] if w["role"] == "survived")
            noise = f"; {teardown} line(s) printed at teardown after it finished (not a failure)" if teardown else ""
            noise += (f"; {survived} error line(s) printed before the run succeeded (survived, not a failure)"
                      if survived else "")
            noise += f"; {went_on} NCCL warning(s) the run went on after (not a failure)" if went_on else ""
            return (f"no error; the log shows progress ({', '.join(h['title'] for h in self.progress.values())}){noise} "
                    f"in {where}")
        bar = self._zero_bar()
        if bar is not None:
            shown = ", ".join(h["title"] for h in self.progress.values())
            return (f"no error, and no step finished: after set-up only ({shown}) the log ends on a progress bar at 0 "
                    f"({bar[1]}); cut short, or hung at its first step (`dsv3-preflight doctor --hung` "
                    f"names where) in {where}")
        return f"no error and no sign of progress (truncated, not started, or not a training log?) in {where}"


def triage(paths: list[str], max_evidence: int = 3, flight_recorder: str | None = None,
           flight_recorder_prefix: str | None = None, hung: bool = False, inputs_label: str = "{n} file(s)") -> dict:
    """Read the logs at ``paths`` (files, directories, ``-`` for stdin, gzip) and return the doctor document.
    ``hung``: the user says the run hung (it was killed or is still stuck), so a log without an error is not
    "no progress" but a hang whose suspects, or last phase, are named (exit 1). ``inputs_label``: how the summary
    counts the files it read ("{n} file(s)"; the launcher, which writes one per node: "the output of {n} node(s)")."""
    t = Triage(max_evidence=max_evidence, hung=hung, inputs_label=inputs_label)
    t.add_paths(paths)
    if flight_recorder:
        try:
            t.add_flight_recorder(flight_recorder, flight_recorder_prefix)
        except InputError as exc:
            t.unreadable.append({"path": exc.path, "error": exc.reason})
    doc = t.document()
    from dsv3_preflight.stall.report import from_launch_logs  # the stall report a launch log names (stall-watch.md)

    return {**doc, **from_launch_logs(f["path"] for f in doc.get("files") or [])}


__all__ = ["Triage", "triage", "by_id", "is_error_line"]
