"""The stall report: one JSON section (the launch's JSON document's ``stall``, and a file of its own) and the lines
the launch console and log show. Renders only; the causes come from culprit.py."""
from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: how the launcher's stall lines start (the doctor reads them back as the launcher's own)
HEAD = "dsv3-preflight launch: stall: "
#: how the watch's line on a slow run starts (not a stall: no report follows)
SLOW_HEAD = "dsv3-preflight launch: stall watch: "


def slow_line(slow: Mapping[str, Any]) -> str:
    """The line said when a suspected stall turned out to be a slow run."""
    if slow.get("progress") is not None:
        return (f"{SLOW_HEAD}no progress for {slow['at_quiet_s']:g} s, then a progress line came while the ranks were "
                "sampled: slow, not stuck; watching on")
    if slow.get("ended"):
        return (f"{SLOW_HEAD}no progress for {slow['at_quiet_s']:g} s, and every rank has exited after its steps: the "
                "run is ending (torchrun tears down, or waits for the other nodes), not stuck; watching on")
    ranks = ", ".join(slow["working"][:8]) + (" ..." if len(slow["working"]) > 8 else "")
    return (f"{SLOW_HEAD}no progress for {slow['at_quiet_s']:g} s, but {ranks} work (their stacks change, or in set-up "
            "their CPU time advances): slow, not stuck; watching on")


#: the launch log line naming the stall report's file (doctor reads the report through it)
LOG_LINE = "# stall report: "


def section(*, verdict: Mapping[str, Any], captures: Sequence[Mapping[str, Any]], quiet_for: float, threshold: float,
            phase: str, last_progress: str, action: str, stall_after: float) -> dict[str, Any]:
    """The ``stall`` section: when and why a stall was declared, the causes, the ranks grouped by stack, the raw
    capture of each node (stacks trimmed to the groups' examples)."""
    return {"stalled": True, "phase": phase, "quiet_for_s": round(quiet_for, 1), "threshold_s": round(threshold, 1),
            "stall_after_s": stall_after, "last_progress": last_progress, "action": action,
            "causes": list(verdict.get("causes") or []), "groups": list(verdict.get("groups") or []),
            "nodes": [_node_view(n) for n in captures]}


def _node_view(node: Mapping[str, Any]) -> dict[str, Any]:
    ranks = []
    for r in node.get("ranks") or []:
        stacks = r.get("stacks") or {}
        ranks.append({"rank": r.get("rank"), "local_rank": r.get("local_rank"), "pid": r.get("pid"), "cpu_s": r.get("cpu_s"),
                      "wchan": r.get("wchan"), "status": r.get("status"), "tcp": r.get("tcp"),
                      "stack_ok": stacks.get("ok"), "stack_native": stacks.get("native"), "stack_error": stacks.get("error"),
                      "flight_recorder": r.get("flight_recorder")})
    return {"node": node.get("node"), "node_rank": node.get("node_rank"), "host": node.get("host"),
            "torchrun_pid": node.get("torchrun_pid"), "torchrun_alive": node.get("torchrun_alive"),
            "ras": node.get("ras"), "gpus": node.get("gpus"), "ranks": ranks}


def console_lines(stall: Mapping[str, Any]) -> list[str]:
    """The stall report as the console and the launch log show it: the causes (who acts, the fix), then the ranks
    grouped by where they wait, one stack per group."""
    out = [f"{HEAD}no progress for {stall['quiet_for_s']:g} s ({stall['phase']} phase; threshold {stall['threshold_s']:g} s)"
           + (f"; last progress: {stall['last_progress'][:160]}" if stall.get("last_progress") else "")]
    for i, cause in enumerate(stall.get("causes") or [], 1):
        out.append(f"{HEAD}{i}. {cause['id']}: {cause['summary']}")
        out.append(f"{HEAD}   who acts: {cause.get('actor_label') or 'not said (no rank stands out)'}")
        out += [f"{HEAD}   evidence: {e}" for e in cause.get("evidence") or []]
        if cause.get("fix"):
            out.append("   fix: (paste as is)")
            out += cause["fix"].splitlines()
    for g in stall.get("groups") or []:
        out.append(f"{HEAD}ranks {_ranks(g['ranks'])}: {g['site']} (stack of rank {g['example_rank']}):")
        out += [f"      {frame}" for frame in g.get("stack", [])[:12]]
    if stall.get("action") == "stop":
        out.append(f"{HEAD}--on-stall=stop: torchrun stopped on every node after the capture")
    return out


def _ranks(ranks: Sequence[int]) -> str:
    return ", ".join(map(str, ranks))


def write(stall: Mapping[str, Any], directory: str | Path, stamp: str) -> Path:
    """The stall report as a JSON file of its own beside the launch log."""
    path = Path(directory) / f"stall-{stamp}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(stall, indent=2, default=str) + "\n")
    os.replace(tmp, path)
    return path


def add_to_document(json_path: str | Path, stall: Mapping[str, Any]) -> bool:
    """Add the ``stall`` section to the launch's JSON document (the preflight's, written before torchrun started)."""
    from dsv3_preflight.document import write_document

    try:
        doc = json.loads(Path(json_path).read_text())
    except (OSError, ValueError):
        return False
    doc["stall"] = dict(stall)
    write_document(doc, json_path)
    return True


#: a launch log is small (its header, the launcher's own lines); a larger file is not looked at for a stall report
MAX_LAUNCH_LOG_BYTES = 16 << 20


def named_in_log(text: str) -> str | None:
    """The stall report a launch log names (its last ``# stall report: PATH`` line), else None."""
    found = None
    for line in text.splitlines():
        if line.startswith(LOG_LINE):
            found = line[len(LOG_LINE):].strip()
    return found


def from_launch_logs(paths: Iterable[str]) -> dict[str, Any]:
    """``{"stall": report}`` from the last stall report the launch logs among ``paths`` name (``launch-*.log``);
    ``{}`` when none names one or it cannot be read (the doctor's diagnosis stands without it)."""
    found: dict[str, Any] = {}
    for path in paths:
        p = Path(path)
        if not (p.name.startswith("launch-") and p.suffix == ".log"):
            continue
        try:
            if p.stat().st_size > MAX_LAUNCH_LOG_BYTES:
                continue
            named = named_in_log(p.read_text(errors="replace"))
            if named:
                found = {"stall": {**json.loads(Path(named).read_text()), "report": named, "launch_log": str(p)}}
        except (OSError, ValueError):
            continue
    return found
