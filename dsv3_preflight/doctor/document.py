"""The doctor's document: stage 5 of its pipeline (docs/DEVELOPING.md, "The doctor's pipeline").

``build`` writes what the passes judged (``passes.Judged``) and the verdict (``decide.LogVerdict``) as the JSON-able
document ``dsv3_preflight.doctor`` describes: each finding rendered with its signature's words filled from the
log's values (``fill``), the warnings by role, the error lines, the nearest known causes, and a one-line summary.
It judges nothing.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Iterable

from ..result import Actor
from .attribution import stamp_text
from .decide import FAILURE, HEALTHY, LogVerdict
from .passes import Judged
from .passes.consequences import roots_and_consequences
from .passes.stalled import zero_bar
from .signatures import CLASS_TITLES, DERIVED_NAMES, SIGNATURES, STOPWORDS
from .timeline import MAX_LISTED, Event, Finding, Timeline, earliest, evidence_line

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
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_OPTIONAL = re.compile(r"\[\[(.*?)\]\]", re.S)   # may span lines (a fix of several commands)


def actor_fields(actor: str | None) -> dict:
    """A finding's "actor" (job, node, network or null when the log does not say) and its label."""
    return {"actor": actor, "actor_label": Actor(actor).label if actor else None}


def fill(template: str, groups: dict[str, str], names: Iterable[str] = (), quote: bool = False) -> str:
    """``{name}`` → the captured value (shell-quoted when ``quote``); a group the log never filled → ``?``;
    other braces (awk, JSON, ``${VAR}``) stay."""
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




def render(f: Finding, role: str, explained_by: str | None) -> dict:
    """One finding as the document lists it."""
    s = f.sig
    names = {k.rstrip("0123456789") or k for k in s.regex.groupindex} | DERIVED_NAMES
    ev = earliest(f.events)
    return {
        "id": s.id, "class": s.cls, "class_title": CLASS_TITLES.get(s.cls or "", None), "kind": s.kind, "tier": s.tier,
        "role": role,
        "title": fill(s.title, f.groups, names), "root_cause": fill(s.root_cause, f.groups, names),
        "fix": f.fix if f.fix is not None else fill(s.fix, f.groups, names, quote=True), "check": s.check,
        **actor_fields(None if role == "consequence" else s.actor if f.actor == "" else f.actor),
        "node": ev.node, "rank": ev.rank, "local_rank": ev.local_rank, "time": stamp_text(ev.ts),
        "nodes": f.nodes, "ranks": f.ranks, "count": f.count,
        "first_seen": {"file": ev.path or None, "line": ev.line or None},
        "explained_by": explained_by,
        "evidence": f.evidence,
        **({"detail": f.extra} if f.extra else {}),
    }


def _findings(j: Judged) -> list[dict]:
    """Root causes (the headline first, marked when its cause is recognised), then consequences."""
    if not j.failing:
        return []
    roots, consequences, head_id = roots_and_consequences(j.heads)
    findings = [render(f, "root_cause", None) for f in roots]
    findings += [render(f, "consequence", j.heads.explained.get(f.sig.id, head_id)) for f in consequences]
    if findings and j.heads.recognised:
        findings[0]["headline"] = True
    return findings


def _warnings(j: Judged) -> list[dict]:
    warnings = [render(f, "warning", None) for f in j.found if j.kind[f.sig.id] == "suspect" and not j.failing]
    warnings += [dict(render(f, "teardown", None), root_cause=TEARDOWN_NOTE, fix="", check=None) for f in j.after_end]
    warnings += [dict(render(f, "survived", None), root_cause=SURVIVED_NOTE, fix="") for f in j.survived]
    warnings += [dict(render(f, "went_on", None), root_cause=WENT_ON_NOTE, fix="", check=None)
                 for f in j.found if f.sig.id == "nccl.warned_then_progressed"]
    return warnings


def ras_summary(tl: Timeline) -> dict | None:
    if not tl.ras:
        return None
    out: dict = {"dead": [], "missing": [], "mismatch": [], "errors": []}
    for r in tl.ras:
        for k in out:
            out[k] += [{x: e.get(x) for x in ("rank", "node", "pid", "gpu", "error") if e.get(x) is not None}
                       for e in getattr(r, k)][:MAX_LISTED]
    return out


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z][a-z0-9_]{2,}", text.lower()) if w not in STOPWORDS}


def nearest(errors: list[Event]) -> list[dict]:
    """The known causes whose words are closest to the unrecognised error lines (a hint, not a diagnosis)."""
    words: set[str] = set()
    for e in errors:
        words |= _words(e.text)
    if not words:
        return []
    scored = []
    for s in SIGNATURES:
        if s.kind not in ("cause", "suspect") or s.cls is None:
            continue
        sw = _words(s.title + " " + s.example + " " + s.root_cause)
        overlap = len(words & sw)
        if overlap:
            scored.append((overlap / (len(sw) ** 0.5), s))
    scored.sort(key=lambda x: -x[0])
    out: list[dict] = []
    seen: set[str | None] = set()
    for score, s in scored:
        if s.cls in seen:
            continue
        seen.add(s.cls)
        out.append({"id": s.id, "class": s.cls, "title": fill(s.title, {}, s.regex.groupindex), "check": s.check,
                    "score": round(score, 2)})
        if len(out) == 3:
            break
    return out


def build(tl: Timeline, j: Judged, v: LogVerdict, hung: bool, inputs_label: str = "{n} file(s)") -> dict:
    """The doctor's document (see ``dsv3_preflight.doctor``)."""
    errors = j.errors
    doc = {
        "tool": "dsv3-preflight doctor",
        "verdict": v.label,
        "exit_code": v.exit_code,
        "cause_recognised": v.cause_recognised,
        "cause_class": v.cause_class,
        "stalled": j.stalled,
        "hung": hung,
        "summary": "",
        "first_failure": j.first_failure,
        "findings": _findings(j),
        "warnings": _warnings(j),
        "error_lines": [evidence_line(e.path, e.line, e.text) | {"node": e.node, "rank": e.rank} for e in errors],
        "nearest_causes": nearest(errors) if j.failing and not j.heads.recognised and not j.interrupted else [],
        "silent_ranks": j.silent_ranks,
        "silent_nodes": [] if j.silent_ranks else j.silent_nodes,
        "healthy_signs": list(tl.progress.values()),
        "unrecognised": {"count": j.error_count,
                         "first": [evidence_line(e.path, e.line, e.text) for e in errors[:tl.max_evidence]]},
        "nccl": tl.facts.to_dict(),
        "ras": ras_summary(tl),
        "flight_recorder": tl.flight,
        "files": tl.files,
        "unreadable": tl.unreadable,
        "skipped": tl.skipped,
    }
    doc["summary"] = summary(doc, tl, hung, inputs_label)
    return doc


# -- the summary line ------------------------------------------------------------------------
def _progress_titles(tl: Timeline) -> str:
    return ", ".join(h["title"] for h in tl.progress.values())


def _failure_summary(doc: dict, tl: Timeline, hung: bool, where: str) -> str:
    ff = doc["first_failure"] or {}
    at = ", ".join(x for x in (ff.get("node") and f"node {ff['node']}",
                               ff.get("rank") is not None and f"rank {ff['rank']}") if x)
    rest = sum(1 for f in doc["findings"] if f["role"] == "consequence")
    tail = (f" ({at})" if at else "") + (f"; {rest} consequence(s)" if rest else "") + f" in {where}"
    if doc["stalled"] and hung:
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
        shown = _progress_titles(tl)
        return ("stopped from outside, nothing failed before it: "
                + (known["title"] if known else (ff.get("text") or "")[:160])
                + (f" (after progress: {shown})" if shown else " (before any sign of progress)")
                + "; if it was stopped because it hung, `dsv3-preflight doctor --hung` names where" + tail)
    if known is not None:   # a rank's native crash: the first failure, whose cause is not known
        return f"cause not recognised; the first failure: {known['title']}" + tail
    return f"cause not recognised: first error: {(ff.get('text') or '')[:160]}" + tail


def _healthy_summary(doc: dict, tl: Timeline, where: str) -> str:
    counts = {role: sum(w["count"] for w in doc["warnings"] if w["role"] == role)
              for role in ("teardown", "went_on", "survived")}
    noise = (f"; {counts['teardown']} line(s) printed at teardown after it finished (not a failure)"
             if counts["teardown"] else "")
    noise += (f"; {counts['survived']} error line(s) printed before the run succeeded (survived, not a failure)"
              if counts["survived"] else "")
    noise += f"; {counts['went_on']} NCCL warning(s) the run went on after (not a failure)" if counts["went_on"] else ""
    return f"no error; the log shows progress ({_progress_titles(tl)}){noise} in {where}"


def summary(doc: dict, tl: Timeline, hung: bool, inputs_label: str = "{n} file(s)") -> str:
    """The document's one line."""
    nlines = sum(f["lines"] for f in tl.files)
    where = f"{inputs_label.format(n=len(tl.files))}, {nlines} lines"
    if doc["verdict"] == FAILURE:
        return _failure_summary(doc, tl, hung, where)
    if not tl.files and tl.unreadable:
        return f"no readable log ({len(tl.unreadable)} unreadable input(s))"
    if doc["verdict"] == HEALTHY:
        return _healthy_summary(doc, tl, where)
    bar = zero_bar(tl)
    if bar is not None:
        return (f"no error, and no step finished: after set-up only ({_progress_titles(tl)}) the log ends on a "
                f"progress bar at 0 ({bar[1]}); cut short, or hung at its first step (`dsv3-preflight doctor --hung` "
                f"names where) in {where}")
    return f"no error and no sign of progress (truncated, not started, or not a training log?) in {where}"


__all__ = ["SURVIVED_NOTE", "TEARDOWN_NOTE", "WENT_ON_NOTE", "actor_fields", "build", "fill", "nearest", "render",
           "summary"]
