"""Text rendering of a doctor document (the JSON form is the document itself).

``render_text`` is a pure function: it returns the text and prints nothing, so any caller (the CLI, a report)
decides where it goes.
"""
from __future__ import annotations

from dsv3_preflight.text import safe_terminal

_VERDICT = {"failure": "FAILURE", "healthy": "HEALTHY", "unknown": "UNKNOWN"}


def _where(f: dict) -> str:
    parts = []
    if f.get("node"):
        parts.append(f"node {f['node']}")
    if f.get("rank") is not None:
        parts.append(f"rank {f['rank']}")
    elif f.get("local_rank") is not None:
        parts.append(f"local_rank {f['local_rank']}")
    extra = len(f.get("ranks") or []) - 1
    if extra > 0:
        parts.append(f"+{extra} other rank(s)")
    if f.get("time"):
        parts.append(f"at {f['time']}")
    return ", ".join(parts)


def who_acts(f: dict) -> str:
    """Who must act on a root cause (the finding's actor), with the nodes when it is theirs to repair or drain."""
    if not f.get("actor"):
        return "not said by the log (read the first failing rank's lines first)"
    nodes = f.get("nodes") or ([f["node"]] if f.get("node") else [])
    return (f.get("actor_label") or f["actor"]) + (f" — on {', '.join(nodes)}" if f["actor"] == "node" and nodes else "")


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def _first_failure(d: dict) -> list[str]:
    ff = d.get("first_failure")
    if not ff:
        return []
    where = ", ".join(x for x in (ff.get("node") and f"node {ff['node']}",
                                  ff.get("rank") is not None and f"rank {ff['rank']}",
                                  ff.get("time") and f"at {ff['time']}") if x)
    loc = f"{ff['file']}:{ff['line']}" if ff.get("file") and ff.get("line") else ""
    label = "stopped" if d.get("cause_class") == "interrupted" else "first failure"
    out = [f"{label}: {where or 'origin not shown in the log'}" + (f"  ({loc})" if loc else "")]
    if ff.get("inferred_from"):
        what = "node" if ff.get("rank") is None else "rank"
        out.append(f"  ({what} inferred from {ff['inferred_from']}" + (f"; {loc} is the timeout as the others report it)"
                                                                      if loc else ")"))
    return out


def _no_cause(d: dict) -> list[str]:
    """A stop from outside, or a failure whose cause is not recognised: the lines to read, the nearest causes."""
    if d.get("cause_class") == "interrupted":
        return ["", "no cause to name: the run was stopped by a signal (Ctrl-C, a scheduler's time limit or preemption, "
                    "a kill) and nothing failed before it. What the stop printed:"]
    if d.get("verdict", "unknown") != "failure" or d.get("cause_recognised"):
        return []
    out = ["", "cause not recognised. The error lines:" if d.get("error_lines") else
           "cause not recognised. Every error line is a known symptom, listed below with the first failure first:"]
    out += [f"  {ev['file']}:{ev['line']}  {ev['text']}" for ev in d.get("error_lines") or []]
    near = d.get("nearest_causes") or []
    if near:
        out.append("nearest known causes (a hint, not a diagnosis):")
        out += [f"  - [{n['class']}] {n['title']}" + (f"  (check: {n['check']})" if n.get("check") else "") for n in near]
    return out


def _caught_by(f: dict) -> str:
    """Which preflight check catches a root cause before launch (or found it: the preflight's own verdict)."""
    if str(f.get("id", "")).startswith("preflight."):   # the preflight's own verdict: it did catch it
        launched = (f.get("detail") or {}).get("launched")
        return (f"   found by the preflight{' check ' + f['check'] if f.get('check') else ''}"
                + (": torchrun was not started" if launched else ""))
    if f.get("check"):
        return f"   caught before launch by: dsv3-preflight run --only {f['check']}"
    return ("   caught before launch by: no preflight check (the cause is in the training code, the libraries it "
            "loads with, or the command that starts it)")


def _finding(i: int, f: dict, stalled: bool) -> list[str]:
    where = _where(f)
    mark = "✘" if f["role"] == "root_cause" else "·"
    head = f"{i}. {mark} {f['title']}  [{f.get('class') or 'consequence'}]" + (f" {where}" if where else "")
    head += f" ×{f['count']}" if f.get("count", 1) > 1 else ""
    out = ["", head] + [f"   {ev['file']}:{ev['line']}  {ev['text']}" for ev in f.get("evidence") or []]
    if f["role"] == "consequence":
        if f.get("explained_by"):
            return out + [f"   consequence of {f['explained_by']}: {f['root_cause']}"]
        return out + [f"   {f['root_cause']}"]
    # a log that only stops (no error, no progress): the cause is suspected, not seen failing
    out.append(f"   {'suspected cause' if stalled else 'cause'}: {f['root_cause']}")
    if f.get("fix"):
        out += ["   fix:", _indent(f["fix"], "     ")]
    out.append(f"   who acts: {who_acts(f)}")
    if f.get("role") == "root_cause" or str(f.get("id", "")).startswith("preflight.") or f.get("check"):
        out.append(_caught_by(f))
    return out


def _silent(d: dict) -> list[str]:
    out: list[str] = []
    if d.get("silent_ranks"):
        out += ["", f"ranks that did not report the timeout (look at their logs first): {d['silent_ranks']}"]
    if d.get("silent_nodes"):
        out += ["", "nodes whose logs do not report the timeout the others' do (look at their ranks first): "
                + ", ".join(d["silent_nodes"])]
    return out


def _warnings(d: dict) -> list[str]:
    out: list[str] = []
    warnings = d.get("warnings") or []
    for w in (w for w in warnings if w.get("role") not in ("teardown", "survived")):
        ev = (w.get("evidence") or [{}])[0]
        out += ["", f"! {w['title']}  {ev.get('file', '')}:{ev.get('line', '')}", f"   {w['root_cause']}"]
        if w.get("check"):
            out.append(f"   check: dsv3-preflight run --only {w['check']}")
    for role, head in (("survived", "survived: printed before the log says the run succeeded"),
                       ("teardown", "teardown noise, printed after the log says the run finished")):
        group = [w for w in warnings if w.get("role") == role]
        if not group:
            continue
        out += ["", head + ":"]
        for w in group:
            ev = (w.get("evidence") or [{}])[0]
            count = f" ×{w['count']}" if w.get("count", 1) > 1 else ""
            out.append(f"  - {w['title']}{count}  {ev.get('file', '')}:{ev.get('line', '')}")
        out.append(f"  {group[0]['root_cause']}")
    return out


def _closing(d: dict) -> list[str]:
    out: list[str] = []
    verdict = d.get("verdict", "unknown")
    if verdict == "healthy" and d.get("healthy_signs"):
        out += ["", "signs of progress: " + ", ".join(f"{h['title']} ×{h['count']}" for h in d["healthy_signs"])]
    if verdict == "unknown":
        out += ["", "no error line and no sign of progress: the log may be truncated, from the wrong process, or from a "
                    "run that never started (exit 5, not 0)"]
    out += [f"not read as a log: {k['path']}: {k['why']}" for k in d.get("skipped") or []]
    out += [f"refused input: {u['path']}: {u['error']}" for u in d.get("unreadable") or []]
    return out


def render_text(diagnosis: dict) -> str:
    """The doctor's diagnosis as plain text (what ``dsv3-preflight doctor`` prints without --json)."""
    d = diagnosis
    verdict = d.get("verdict", "unknown")
    code = d.get("exit_code")
    out = [f"doctor: {_VERDICT.get(verdict, verdict.upper())}" + (f" (exit {code})" if code is not None else "")
           + f" — {d.get('summary', '')}"]
    out += _first_failure(d)
    out += _no_cause(d)
    for i, f in enumerate(d.get("findings") or [], 1):
        out += _finding(i, f, bool(d.get("stalled")))
    out += _silent(d) + _warnings(d) + _closing(d)
    # every string here comes from logs and file names: no control character or bidi override reaches the terminal
    return safe_terminal("\n".join(out)) + "\n"
