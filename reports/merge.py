"""Merging several result documents (one per node from `pytest checks/`, or runs over time) into one.

Contract: ``merge_documents([(label, doc), ...]) -> doc`` returns a schema_version 1 document with
mode "merged": every node and result of the inputs, counts/verdict/worst recomputed from the
results, and ``merged_from`` listing each input. A node name that occurs in more than one input (the
same node run several times) is labelled ``NAME @ CREATED`` (or ``NAME @ FILE`` when the start times
are equal too) in every occurrence so the matrix keeps one column per run. Secrets are masked again (the inputs may come from anywhere).
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

from dsv3_preflight.document import FORMAT, SCHEMA_VERSION
from dsv3_preflight.secrets import mask

SEVERITY = {"pass": 0, "skip": 1, "warn": 2, "fail": 3, "error": 4}
STATUSES = ("pass", "warn", "fail", "skip", "error")


def merge_documents(inputs: Iterable[tuple[str, Mapping[str, Any]]], command: list[str] | None = None) -> dict[str, Any]:
    """One document out of several; see the module docstring."""
    inputs = [(label, mask(dict(doc))) for label, doc in inputs]
    if not inputs:
        raise ValueError("nothing to merge")
    if len(inputs) == 1:
        return inputs[0][1]

    name_count = Counter(str(n.get("node")) for _, doc in inputs for n in doc.get("nodes") or [])
    stamp_count = Counter((str(n.get("node")), str(doc.get("created"))) for _, doc in inputs for n in doc.get("nodes") or [])
    nodes: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    deselected: dict[str, str] = {}
    merged_from: list[dict[str, Any]] = []
    findings: list[dict[str, Any]] = []
    doctor_verdicts: list[str] = []
    doctor_summaries: list[str] = []
    doctor_warnings: list[dict[str, Any]] = []
    for label, doc in inputs:
        created = str(doc.get("created", ""))
        rename = {}
        for n in doc.get("nodes") or []:
            name = str(n.get("node"))
            if name_count[name] == 1:
                rename[name] = name
            elif stamp_count[(name, created)] == 1:
                rename[name] = f"{name} @ {created}"
            else:  # same node, same start: only the file tells the runs apart
                rename[name] = f"{name} @ {Path(label).name}"
            nodes.append(dict(n, node=rename[name]))
        for r in doc.get("results") or []:
            node = r.get("node", "-")
            if node == "-":
                if r.get("name") in {x.get("name") for x in results if x.get("node") == "-"}:
                    continue  # the same deselection in several inputs is one line
            results.append(dict(r, node=rename.get(node, node)))
        deselected.update(doc.get("deselected") or {})
        doctor = doc.get("doctor")
        if isinstance(doctor, Mapping):
            doctor_verdicts.append(str(doctor.get("verdict", "")))
            doctor_summaries.append(str(doctor.get("summary") or ""))
            for target, key in ((findings, "findings"), (doctor_warnings, "warnings")):
                for f in doctor.get(key) or []:
                    target.append(dict(f, node=rename.get(str(f.get("node")), f.get("node"))) if f.get("node") else dict(f))
        merged_from.append({
            "file": label, "created": created, "mode": doc.get("mode"), "verdict": doc.get("verdict"),
            "nodes": ", ".join(rename.get(str(n.get("node")), str(n.get("node"))) for n in doc.get("nodes") or []),
            "profile": (doc.get("profile") or {}).get("name"),
            "rendezvous": _rendezvous(doc),
            "command": " ".join(doc.get("command") or []),
        })

    results.sort(key=lambda r: (-SEVERITY.get(r.get("status"), 0), str(r.get("node")), str(r.get("name"))))
    counted = [r for r in results if r.get("node") != "-"]
    counts = Counter(r.get("status") for r in results)
    strict = any(doc.get("strict") for _, doc in inputs)
    red = any(SEVERITY.get(r.get("status"), 0) >= 3 for r in counted) or (strict and any(r.get("status") == "warn" for r in counted))
    red = red or any(doc.get("verdict") == "NO-GO" for _, doc in inputs)
    red = red or any(n.get("state") in ("error", "missing") for n in nodes)
    worst = max((r.get("status") for r in results), key=lambda s: SEVERITY.get(s, 0), default="skip")
    first = inputs[0][1]
    out: dict[str, Any] = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "tool": dict(first.get("tool") or {"name": "dsv3-preflight", "version": "unknown"}),
        "created": min(str(doc.get("created")) for _, doc in inputs),
        "finished": max(str(doc.get("finished", doc.get("created"))) for _, doc in inputs),
        "command": list(command or []),
        "mode": "merged",
        "verdict": "NO-GO" if red or not counted else "GO",
        "exit_code": 1 if red else (0 if counted else 5),
        "strict": strict,
        "counts": {s: counts.get(s, 0) for s in STATUSES},
        "worst": worst,
        "profile": dict(first.get("profile") or {"name": "—", "values": {}, "sources": {}}),
        "nodes": nodes,
        "results": results,
        "deselected": deselected,
        "merged_from": merged_from,
    }
    if findings or doctor_verdicts:
        rank = {"failure": 3, "NO-GO": 3, "unknown": 2, "healthy": 1, "GO": 1}
        out["doctor"] = {"verdict": max(doctor_verdicts, key=lambda v: rank.get(v, 0), default="unknown"),
                         "summary": "; ".join(s for s in doctor_summaries if s),
                         "findings": findings, "warnings": doctor_warnings}
    return mask(out)



def _rendezvous(doc: Mapping[str, Any]) -> str | None:
    values = (doc.get("profile") or {}).get("values") or {}
    if not values.get("master_addr"):
        return None
    return f"{values['master_addr']}:{values.get('master_port')}" if values.get("master_port") else str(values["master_addr"])
