"""Triage: match log lines to signatures, aggregate per signature, order by causality, decide the verdict."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from ..secrets import mask_text
from .attribution import origin_of
from .reader import FileStats, UnreadableLog, clean, expand_inputs, label_for, NeedleSet, open_log, scan
from .signatures import SIGNATURES, UNRECOGNISED_NEEDLES, UNRECOGNISED_RE, Signature

MAX_TEXT = 400
CONTEXT_LINES = 12     # a torchrun summary's host/rank applies to the lines just after it
MAX_LISTED = 64        # nodes/ranks listed per finding
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


@dataclass(eq=False)
class _Finding:
    sig: Signature
    first: tuple[int, int]                  # (file index, line)
    groups: dict[str, str]
    node: str | None
    rank: int | None
    local_rank: int | None
    evidence: list[dict] = field(default_factory=list)
    count: int = 0
    nodes: list[str] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)


def _groups(m: re.Match) -> dict[str, str]:
    """Named groups, with alternatives' ``name2`` folded into ``name``."""
    out: dict[str, str] = {}
    for k, v in m.groupdict().items():
        if v is None:
            continue
        base = k[:-1] if k[-1:].isdigit() and k[:-1] else k
        out.setdefault(base, v)
    return out


def _fill(template: str, groups: dict[str, str], names: Iterable[str] = ()) -> str:
    """``{name}`` → the captured value; a group the log never filled → ``?``; other braces (awk, JSON) stay."""
    known = set(names)
    return _PLACEHOLDER.sub(lambda m: groups.get(m.group(1), "?" if m.group(1) in known else m.group(0)), template)


class _Matcher:
    """Signature lookup for one cleaned line: the first signature (table order) whose needle and pattern match."""

    def __init__(self, signatures: Sequence[Signature]):
        self.signatures = [(s, [n.decode() for n in s.needles]) for s in signatures]
        self.unrecognised = [n.decode() for n in UNRECOGNISED_NEEDLES]

    def match(self, text: str) -> tuple[Signature, re.Match] | None:
        for sig, needles in self.signatures:
            if any(n in text for n in needles):
                m = sig.regex.search(text)
                if m:
                    return sig, m
        return None

    def looks_like_error(self, text: str) -> bool:
        return any(n in text for n in self.unrecognised) and bool(UNRECOGNISED_RE.search(text))


class Triage:
    """Accumulates matches over several inputs; ``document()`` gives the JSON-able result."""

    def __init__(self, signatures: Sequence[Signature] = SIGNATURES, max_evidence: int = 3):
        self.signatures = signatures
        self.max_evidence = max_evidence
        self._matcher = _Matcher(signatures)
        self._needles = NeedleSet([n for s in signatures for n in s.needles] + list(UNRECOGNISED_NEEDLES))
        self.findings: dict[str, _Finding] = {}
        self.healthy: dict[str, dict] = {}
        self.unrecognised: list[dict] = []
        self.unrecognised_count = 0
        self.files: list[dict] = []
        self.unreadable: list[dict] = []
        self.summary_hosts: dict[int, str] = {}   # rank → host, from torchrun's failure summaries

    # -- reading --------------------------------------------------------------------------
    def add_paths(self, paths: Iterable[str]) -> None:
        files, unreadable = expand_inputs(paths)
        self.unreadable += unreadable
        label_nodes = len(files) > 1
        for path in files:
            try:
                self.add_stream(path, label_nodes=label_nodes)
            except UnreadableLog as exc:
                self.unreadable.append({"path": path, "error": str(exc)})

    def add_stream(self, path: str, label_nodes: bool = False) -> None:
        stats = FileStats(path)
        file_index = len(self.files)
        fallback_node = label_for(path) if label_nodes else None
        stream = open_log(path)
        ctx: dict[str, Any] = {}
        try:
            for line, raw in scan(stream, self._needles, stats):
                self._line(file_index, path, line, clean(raw), fallback_node, ctx)
        finally:
            if path != "-":
                stream.close()
        self.files.append({"path": path, "node": fallback_node, "lines": stats.lines, "bytes": stats.bytes})

    def _line(self, file_index: int, path: str, line: int, text: str, fallback_node: str | None, ctx: dict) -> None:
        hit = self._matcher.match(text)
        if hit is None:
            if self._matcher.looks_like_error(text):
                self.unrecognised_count += 1
                if len(self.unrecognised) < self.max_evidence:
                    self.unrecognised.append(self._evidence(path, line, text))
            return
        sig, m = hit
        groups = _groups(m)
        if sig.kind == "context":
            if groups.get("field") == "host":
                ctx.update(host=groups["value"], line=line)
            elif groups.get("field") == "rank" and groups["value"].isdigit():
                ctx.update(rank=int(groups["value"]), line=line,
                           local_rank=int(groups["local_rank"]) if groups.get("local_rank") else None)
                if ctx.get("host") and line - ctx.get("host_line", line) <= 2:
                    self.summary_hosts.setdefault(ctx["rank"], ctx["host"])
            if groups.get("field") == "host":
                ctx["host_line"] = line
            return
        if sig.kind == "healthy":
            entry = self.healthy.setdefault(sig.id, {"id": sig.id, "title": sig.title, "count": 0,
                                                     "first": self._evidence(path, line, text)})
            entry["count"] += 1
            return
        origin = origin_of(text)
        rank = int(groups["rank_a"]) if "rank_a" in groups else origin.rank
        local_rank = int(groups["local_rank"]) if groups.get("local_rank", "").isdigit() else origin.local_rank
        node = origin.node
        if ctx and line - ctx.get("line", -10**9) <= CONTEXT_LINES:  # inside torchrun's failure summary
            rank = ctx.get("rank", rank) if rank is None else rank
            local_rank = ctx.get("local_rank", local_rank) if local_rank is None else local_rank
            node = node or ctx.get("host")
        node = node or fallback_node
        f = self.findings.get(sig.id)
        if f is None:
            f = self.findings[sig.id] = _Finding(sig, (file_index, line), groups, node, rank, local_rank)
        f.count += 1
        for k, v in groups.items():   # later lines may carry what the first did not (host vs address)
            f.groups.setdefault(k, v)
        if f.node is None:      # the first occurrence that says where it comes from
            f.node = node
        if f.rank is None:
            f.rank = rank
        if f.local_rank is None:
            f.local_rank = local_rank
        if len(f.evidence) < self.max_evidence:
            f.evidence.append(self._evidence(path, line, text, m.start()))
        if node is not None and node not in f.nodes and len(f.nodes) < MAX_LISTED:
            f.nodes.append(node)
        if rank is not None and rank not in f.ranks and len(f.ranks) < MAX_LISTED:
            f.ranks.append(rank)

    @staticmethod
    def _evidence(path: str, line: int, text: str, pos: int = 0) -> dict:
        """An evidence line, secrets masked, a long line cut to a window that keeps the match (at ``pos``)."""
        if len(text) > MAX_TEXT:
            start = max(0, min(pos - MAX_TEXT // 4, len(text) - MAX_TEXT))
            text = ("…" if start else "") + text[start:start + MAX_TEXT] + ("…" if start + MAX_TEXT < len(text) else "")
        return {"file": path, "line": line, "text": mask_text(text.strip())}

    # -- judging --------------------------------------------------------------------------
    def document(self) -> dict:
        found = list(self.findings.values())
        for f in found:  # torchrun's summary names the host of a rank whose own lines do not
            if f.node is None and f.rank is not None and f.rank in self.summary_hosts:
                f.node = self.summary_hosts[f.rank]
        failing = any(f.sig.kind in ("cause", "symptom") for f in found)
        causes = [f for f in found if f.sig.kind == "cause" or (failing and f.sig.kind == "suspect")]
        symptoms = [f for f in found if f.sig.kind == "symptom"]
        suspects = [f for f in found if f.sig.kind == "suspect" and not failing]
        order = lambda f: (f.sig.priority, f.first)  # noqa: E731 - upstream first, then first seen
        present = {f.sig.id for f in causes}
        explained = {f.sig.id: next(c for c in f.sig.consequence_of if c in present)
                     for f in causes if any(c in present for c in f.sig.consequence_of)}
        symptoms += [f for f in causes if f.sig.id in explained]
        causes = [f for f in causes if f.sig.id not in explained]
        causes.sort(key=order)
        symptoms.sort(key=order)
        head = (causes or symptoms)[0].sig.id if failing else None
        findings = [self._render(f, "root_cause", None) for f in causes]
        findings += [self._render(f, "consequence", explained.get(f.sig.id, head if causes else None))
                     for f in symptoms]
        if failing:
            verdict = "failure"
        elif self.healthy and not self.unrecognised_count:
            verdict = "healthy"
        else:
            verdict = "unknown"
        return {
            "tool": "dsv3-preflight doctor",
            "verdict": verdict,
            "summary": self._summary(verdict, findings),
            "findings": findings,
            "warnings": [self._render(f, "warning", None) for f in sorted(suspects, key=order)],
            "healthy_signs": list(self.healthy.values()),
            "unrecognised": {"count": self.unrecognised_count, "first": self.unrecognised},
            "files": self.files,
            "unreadable": self.unreadable,
        }

    def _render(self, f: _Finding, role: str, explained_by: str | None) -> dict:
        s = f.sig
        names = {k.rstrip("0123456789") or k for k in s.regex.groupindex}
        return {
            "id": s.id, "class": s.cls, "kind": s.kind, "role": role,
            "title": _fill(s.title, f.groups, names), "root_cause": _fill(s.root_cause, f.groups, names),
            "fix": _fill(s.fix, f.groups, names), "check": s.check,
            "node": f.node, "rank": f.rank, "local_rank": f.local_rank,
            "nodes": f.nodes, "ranks": f.ranks, "count": f.count,
            "first_seen": {"file": self.files[f.first[0]]["path"] if f.first[0] < len(self.files) else None,
                           "line": f.first[1]},
            "explained_by": explained_by,
            "evidence": f.evidence,
        }

    def _summary(self, verdict: str, findings: list[dict]) -> str:
        nlines = sum(f["lines"] for f in self.files)
        where = f"{len(self.files)} file(s), {nlines} lines"
        if verdict == "failure":
            top = findings[0]
            at = ", ".join(x for x in (top["node"] and f"node {top['node']}",
                                       top["rank"] is not None and f"rank {top['rank']}") if x)
            n_roots = sum(1 for f in findings if f["role"] == "root_cause")
            rest = len(findings) - 1
            label = "root cause" if n_roots else "first failure (no root cause recognised)"
            return f"{label}: {top['title']}" + (f" ({at})" if at else "") + (f"; {rest} more finding(s)" if rest else "") + f" in {where}"
        if not self.files and self.unreadable:
            return f"no readable log ({len(self.unreadable)} unreadable input(s))"
        if verdict == "healthy":
            return f"no failure found; the log shows a successful start ({', '.join(h['title'] for h in self.healthy.values())}) in {where}"
        if self.unrecognised_count:
            return f"no known failure, but {self.unrecognised_count} error line(s) match no signature (not guessing) in {where}"
        return f"no known failure and no sign of a successful start (truncated or not a training log?) in {where}"


def triage(paths: list[str], max_evidence: int = 3) -> dict:
    """Read the logs at ``paths`` (files, directories, ``-`` for stdin, gzip) and return the doctor document."""
    t = Triage(max_evidence=max_evidence)
    t.add_paths(paths)
    return t.document()
