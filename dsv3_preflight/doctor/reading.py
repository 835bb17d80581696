"""Reading the inputs into a timeline: stage 1 of the doctor's pipeline (docs/DEVELOPING.md).

``LineReader`` opens each input (``reader``: files, directories, stdin, gzip, collectors' records), reads the
preflight's own documents and RAS JSON reports whole, and turns every other line into an ``Event``: matched to the
signature table (``timeline.Matcher``) it is recorded as a finding, unmatched and erroneous it is an unrecognised
error line, and a sign of progress sets its file's marks. What it gathers is a ``timeline.Timeline``; it judges
nothing.
"""
from __future__ import annotations

import io
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from .attribution import Origin, Stamp, local_stamp, origin_of, strip_collector, strip_launcher, time_of
from .evidence import FACT_NEEDLES, RAS_NEEDLES, RasText, elastic_error, load_json_document, ras_json
from .gate import (
    GATE_NEEDLES,
    GateText,
    gate_json,
    html_twin,
    is_preflight_html,
    is_result_document,
    read_named_report,
)
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
from .signatures import ERROR_NEEDLES, LABELS, SIGNATURES, Signature
from .timeline import (
    CONTEXT_LINES,
    MAX_ERROR_LINES,
    MAX_NCCL_WARNS,
    START_EXCLUDED,
    Event,
    Matcher,
    Timeline,
    evidence_line,
    groups_of,
    is_error_line,
    record,
)

TRACEBACK_LINES = 400  # a traceback header and the exception line that ends it (deep stacks, chained frames)
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)")
# the line that ends a Python traceback: the exception's qualified name, a colon (or nothing) and its message
_EXCEPTION_LINE = re.compile(r"^\W*" + LABELS + r"(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit|Failure)"
                            r"(?::|\s*$)")
_LABELS = re.compile(LABELS)
JSON_LIMIT = 32 << 20  # an input that is one JSON document up to this size is checked for a RAS JSON report
#: a frame of a C++ backtrace (c10::Error's "Exception raised from ... (most recent call first):" list). It names
#: functions, exception classes among them ("frame #2: c10::DistNetworkError::DistNetworkError(...)"), never an event:
#: the message it belongs to is on the lines before it
CPP_FRAME = re.compile(LABELS + r"frame #\d+: ")
#: the launcher's line for a worker that failed, whatever signature it matched (a signal exit is a crash's or a
#: kill's): torchrun's "failed (exitcode: -6) local_rank: 0 (pid: …)", DeepSpeed's "exits with return code = 1"
WORKER_EXIT = re.compile(r"failed \(exitcode: -?\d+\) local_rank: \d+|exits with return code = -?\d+")
#: "Connection was likely closed. Did the remote server shutdown or crash?": the store was reached, and went away
STORE_CLOSED = "c10d.store_closed"
#: our launcher's start of torchrun on a node, on its console after the "[node R name] " prefix (launch/ray_launch.py):
#: "torchrun pid 4242 on gpu-node-1; log …"
_LAUNCH_START_NEEDLES = (b"] torchrun pid ",)
_LAUNCH_STARTED = re.compile(r"torchrun pid \d+ on \S+; log ")
_FAILING_KINDS = ("cause", "symptom", "suspect")


def _json_escaped(needles: list[bytes]) -> list[bytes]:
    """The needles, and each as a JSON string escapes it where it differs (a Docker json-file record holds its line
    escaped, and Go's encoder escapes <, > and & too): the line is found, then decoded (``reader.unwrap_record``)."""
    def escaped(n: bytes) -> bytes:
        n = n.replace(b"\\", b"\\\\").replace(b'"', b'\\"').replace(b"\t", b"\\t")
        return n.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")
    return needles + [e for n in needles if (e := escaped(n)) != n]


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


class LineReader:
    """Reads inputs into one ``Timeline`` (``self.tl``); its only state besides is which needles it still scans for."""

    def __init__(self, signatures: Sequence[Signature] = SIGNATURES, max_evidence: int = 3):
        self._matcher = Matcher(signatures)
        # the signs that a run finished stay read after the first progress: lines after them may be teardown noise
        base = [n for s in signatures if s.kind != "progress" or s.ends_run for n in s.needles] + list(ERROR_NEEDLES)
        base += list(FACT_NEEDLES) + list(RAS_NEEDLES) + list(GATE_NEEDLES) + list(_LAUNCH_START_NEEDLES)
        base = _json_escaped(base)
        progress = _json_escaped([n for s in signatures if s.kind == "progress" for n in s.needles])
        self._needles_all = NeedleSet(base + progress)
        self._needles_quiet = NeedleSet(base)   # once progress is seen, its (frequent) needles are dropped
        self._progress_only = frozenset(progress) - frozenset(base)
        self.tl = Timeline(max_evidence=max_evidence,
                           setup=frozenset(s.id for s in signatures if s.kind == "progress" and s.setup))
        #: a sign of the work's progress (not only set-up) was seen: progress needles are dropped from then on
        self._work_seen = False

    # -- inputs -----------------------------------------------------------------------------
    def add_paths(self, paths: Iterable[str]) -> None:
        files, refused = expand_inputs(paths)
        self.tl.unreadable += refused
        files = self._html_reports(files)
        labels = labels_for(files)
        for path in files:
            try:
                self.add_stream(path, label=labels[path])
            except InputError as exc:
                self.tl.unreadable.append({"path": exc.path or path, "error": exc.reason})

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
                self.tl.unreadable.append({"path": path, "error": "the preflight's HTML report: the doctor reads its JSON "
                                           "result document (the .json written beside it, or `run --json PATH`)"})
            elif os.path.realpath(twin) in real:
                self.tl.skipped.append({"path": path, "why": f"the preflight's HTML report: its JSON twin {twin} is read"})
            else:
                self.tl.skipped.append({"path": path,
                                        "why": f"the preflight's HTML report: its JSON twin {twin} is read instead"})
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
        tl = self.tl
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
                    tl.files.append({"path": path, "node": fallback_node, "lines": stats.lines, "bytes": stats.bytes})
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
            file_index = len(tl.files)
            tl.files.append({"path": path, "node": fallback_node, "lines": 0, "bytes": 0})
            for line, raw, nxt in scan(stream, self._needles, stats, self._skip, unwrapped):
                self._line(file_index, path, line, clean(raw), fallback_node, ctx, nxt)
            self._end_of_file(file_index, path, fallback_node, ctx)
        finally:
            if path != "-":
                stream.close()
        tl.files[file_index].update(lines=stats.lines, bytes=stats.bytes)
        tl.tails[file_index] = clean(stats.tail)

    def _end_of_file(self, file_index: int, path: str, fallback_node: str | None, ctx: dict) -> None:
        hosts = ctx.get("summary_hosts") or set()
        if fallback_node is not None and len(hosts) == 1:   # the host name torchrun gave the file's node
            self.tl.files[file_index]["host"] = next(iter(hosts))
        if ctx["ras"].dead or ctx["ras"].missing or ctx["ras"].mismatch or ctx["ras"].errors:
            self.tl.ras.append(ctx["ras"])
        gate = read_named_report(ctx["gate"], path)   # a launch log's causes: from the JSON document it names
        if gate:
            self.tl.gates.append(gate)

    def _json_input(self, path: str, doc: object) -> bool:
        if is_result_document(doc):   # the preflight's own result document
            gate = gate_json(doc, path)  # type: ignore[arg-type]
            if gate:   # (a GO document says nothing about a run: read, and nothing to record)
                self.tl.gates.append(gate)
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
        self.tl.ras.append(ras)
        return True

    # -- lines ------------------------------------------------------------------------------
    def _origin(self, fi: int, text: str, ctx: dict) -> tuple[str, Stamp | None, Origin] | None:
        """The line without its wrappers (a collector's record, our launcher's prefix), its time (a collector's
        first: one clock on every line of its files; else the line's; else the last one seen in the file) and who
        printed it; None for our launcher's start of torchrun on a node (recorded, no line of the run)."""
        text, logged = unwrap_record(text)
        ts = time_of(logged or text)
        text, collected_on = strip_collector(text)
        text, launched_on = strip_launcher(text)
        origin = origin_of(text, launched_on or collected_on)
        if launched_on is not None and _LAUNCH_STARTED.match(text):
            self.tl.launch_nodes.setdefault(fi, set()).add(launched_on)
            return None
        if origin.local_rank is None and ctx.get("local_rank") is not None:   # a torchrun --log-dir rank's own file
            origin.local_rank = ctx["local_rank"]
        if ts is not None:
            ctx["ts"] = ts
        return text, ts if ts is not None else ctx.get("ts"), origin

    def _line(self, fi: int, path: str, line: int, text: str, fallback_node: str | None, ctx: dict,
              nxt: bytes = b"") -> None:
        read = self._origin(fi, text, ctx)
        if read is None:
            return
        text, ts, origin = read
        if self._observed(fi, path, line, text, ts, origin.node or fallback_node, origin, ctx):
            return
        sig, m, benign = self._matcher.match(text, ctx, line)
        if sig is None and not benign and nxt.strip() and (is_error_line(text) or len(text) >= 60):
            sig, m, text = self._wrapped(text, nxt, ctx, line)
        if sig is None or m is None:
            if not benign and is_error_line(text):
                self._error_line(fi, path, line, ts, origin, fallback_node, text)
            return
        groups = groups_of(m)
        if sig.enrich is not None:
            groups.update(sig.enrich(groups))
        if sig.kind not in ("context", "progress"):
            self._failure_line(sig, groups, m.start(), Event(fi, path, line, ts, None, None, None, text, origin.device),
                               origin, fallback_node, ctx)
            return
        if sig.kind == "context":
            self._context(groups, line, ctx)
        else:
            self._progress(sig, fi, path, line, text, origin.node or fallback_node, origin.device)
        # a progress bar or a traceback frame can carry an error on the same line ("... 3.06it/s]Killed")
        if not benign and is_error_line(text):
            self._error_line(fi, path, line, ts, origin, fallback_node, text)

    def _observed(self, fi: int, path: str, line: int, text: str, ts: Stamp | None, node: str | None,
                       origin: Origin, ctx: dict) -> bool:
        """The facts, the collective trail and the worker-exit mark see every line; True when the line is the
        preflight's own or a RAS report's (read there, no log line of the run) or a C++ backtrace frame."""
        where = {"file": path, "line": line}
        self.tl.facts.observe(text, node, where, origin.device)
        self.tl.trail.observe(text, fi, path, line, ts, node)
        if fi not in self.tl.worker_exit and "exit" in text and WORKER_EXIT.search(text):
            self.tl.worker_exit[fi] = line
        return bool(ctx["ras"].observe(text, where) or ctx["gate"].observe(text, {**where, "node": node})
                    or CPP_FRAME.match(text))

    def _wrapped(self, text: str, nxt: bytes, ctx: dict, line: int) -> tuple[Signature | None, re.Match | None, str]:
        """A message wrapped over two lines ("... train_batch_size is not" / "equal to ..."; "colle" / "ctive"): the
        signature that needs both lines, and the joined text; (None, None, text) when none does."""
        follow = strip_collector(unwrap_record(clean(nxt))[0])[0].strip()
        label = _LABELS.match(text).group().strip()   # type: ignore[union-attr]  # the rank's label goes on the next line too
        if label and follow.startswith(label):
            follow = follow[len(label):].strip()
        for sep in (" ", ""):
            joined = text + sep + follow
            sig, m, _ = self._matcher.match(joined, ctx, line)
            # only a match that needs both lines: the next line is read on its own when it holds a needle
            if sig is not None and m is not None and sig.kind in _FAILING_KINDS and m.start() < len(text) < m.end():
                return sig, m, joined
        return None, None, text

    def _progress(self, sig: Signature, fi: int, path: str, line: int, text: str, node: str | None,
                  device: int | None) -> None:
        tl = self.tl
        tl.first_progress.setdefault(fi, line)
        if sig.id not in START_EXCLUDED:
            tl.work_start.setdefault(fi, line)
        if sig.ends_run:
            tl.run_end.setdefault(fi, line)
        if sig.succeeded:
            tl.succeeded_last[fi] = line
        if sig.workers_done:
            tl.workers_done.add(fi)
        if sig.id not in tl.progress:
            tl.progress[sig.id] = {"id": sig.id, "title": sig.title, "count": 0, "first": evidence_line(path, line, text)}
        tl.progress[sig.id]["count"] += 1
        self._work_seen = self._work_seen or sig.id not in tl.setup
        if sig.id in tl.setup:   # NCCL connected: which process, for the warnings it went on after
            tl.setup_last[(fi, node, device)] = line
        elif sig.id not in START_EXCLUDED:   # a step of the work (not a bar: model loading prints one first)
            tl.first_work.setdefault(fi, line)

    @staticmethod
    def _attribute(groups: dict, origin: Origin, fallback_node: str | None, ctx: dict,
                   line: int) -> tuple[str | None, int | None, int | None]:
        """The node, rank and local rank of a failure line: its own words, else its origin, else torchrun's summary
        just before it."""
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
        return node or fallback_node, rank, local_rank

    def _failure_line(self, sig: Signature, groups: dict, pos: int, at: Event, origin: Origin,
                      fallback_node: str | None, ctx: dict) -> None:
        """A line a cause, symptom or suspect signature matched (``at``: where, not yet attributed)."""
        tl = self.tl
        node, rank, local_rank = self._attribute(groups, origin, fallback_node, ctx, at.line)
        ev = Event(at.file, at.path, at.line, at.ts, node, rank, local_rank, at.text, at.device)
        if sig.workers_done:
            tl.workers_done.add(at.file)
        if sig.id == STORE_CLOSED:
            tl.store_gone.setdefault(at.file, at.line)
        record(tl, sig, groups, ev, pos)
        if sig.multi_node_only:
            alt, am, _ = self._matcher.match(at.text, ctx, at.line, one_node=True)
            if alt is not None and am is not None and alt.kind in _FAILING_KINDS:
                record(tl, alt, groups_of(am), ev, am.start(), into=tl.one_node_findings)
            elif is_error_line(at.text):
                tl.one_node_errors.append(ev)
        self._end_traceback((at.file, origin.node or fallback_node, origin.rank, origin.local_rank), at.line)

    def _error_line(self, fi: int, path: str, line: int, ts: Stamp | None, origin: Origin, fallback_node: str | None,
                    text: str) -> None:
        """An error line no cause or symptom signature knows."""
        tl = self.tl
        tl.error_count += 1
        ev = Event(fi, path, line, ts, origin.node or fallback_node, origin.rank, origin.local_rank, text, origin.device)
        key = (fi, ev.node, ev.rank, ev.local_rank)
        if _TRACEBACK.search(text):
            tl.open_tracebacks[key] = ev
        elif _EXCEPTION_LINE.match(text):   # an unknown exception ends its traceback: it, not the header, is the error
            self._end_traceback(key, line)
        if "NCCL WARN" in text:
            warns = tl.nccl_warns.setdefault(fi, [])
            if len(warns) < MAX_NCCL_WARNS:
                warns.append(ev)
            else:   # more than are remembered: none of them is known to be survived or gone past
                tl.last_error[fi] = line
        else:
            tl.last_error[fi] = line
        if len(tl.errors) < MAX_ERROR_LINES:
            tl.errors.append(ev)
        elif ts is not None and tl.errors[-1].ts is not None and ts < tl.errors[-1].ts:
            tl.errors[-1] = ev   # keep the earliest lines when files are read out of time order

    def _end_traceback(self, key: tuple, line: int) -> None:
        """A recognised line from the origin of an open "Traceback (most recent call last):" header ends that traceback:
        the header is not an unrecognised error of its own (it would be the "first failure" before every exception
        line it introduces, so a traceback ending in a known symptom would read as "cause not recognised")."""
        tl = self.tl
        header = tl.open_tracebacks.pop(key, None)
        if header is None and key[2] is not None:
            # a header printed without a rank prefix whose exception names its rank ("RuntimeError: [Rank 1] Caught
            # collective operation timeout"): the rank came from the exception line's words, not from its origin
            # (under torchrun --tee the header and the line still share the local rank's "[default0]:")
            header = tl.open_tracebacks.pop(key[:2] + (None, key[3]), None)
        if header is None and key[2:] != (None, None):
            header = tl.open_tracebacks.pop(key[:2] + (None, None), None)
        if header is not None and line - header.line <= TRACEBACK_LINES:
            tl.error_count -= 1
            if header in tl.errors:
                tl.errors.remove(header)

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
                self.tl.summary_hosts.setdefault(int(value), ctx["summary_host"])
        elif fld in ("time", "exitcode"):
            ctx["summary_line"] = line


__all__ = ["CPP_FRAME", "JSON_LIMIT", "LineReader", "STORE_CLOSED", "WORKER_EXIT"]
