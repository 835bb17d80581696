"""Merging several result documents (one per node from `pytest checks/`, or runs over time) into one.

Contract: ``merge_documents([(label, doc), ...]) -> doc`` returns a schema_version 1 document with
mode "merged": every node and result of the inputs, counts/verdict/worst recomputed from the
results, and ``merged_from`` listing each input. A node name that occurs in more than one input (the
same node run several times) is labelled ``NAME @ CREATED`` (or ``NAME @ FILE`` when the start times
are equal too) in every occurrence so the matrix keeps one column per run; the cluster-scope results of
several runs keep one column per run too, named ``cluster (NODES) @ CREATED``. The document is built by
``document.build_document``, the builder `run` uses: one verdict function. Secrets are masked again (the
inputs may come from anywhere).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from dsv3_preflight.document import build_document
from dsv3_preflight.result import Result, verdict_rank
from dsv3_preflight.secrets import mask

#: where the cluster-scope results of one run sit (the engine's node name for them)
CLUSTER_NODE = "cluster"


class _Doctor:
    """The doctor sections of the inputs, gathered: the worst verdict, every summary, finding and warning."""

    def __init__(self) -> None:
        self.verdicts: list[str] = []
        self.summaries: list[str] = []
        self.findings: list[dict[str, Any]] = []
        self.warnings: list[dict[str, Any]] = []

    def add(self, doctor: Any, rename: Mapping[str, str]) -> None:
        if not isinstance(doctor, Mapping):
            return
        self.verdicts.append(str(doctor.get("verdict", "")))
        self.summaries.append(str(doctor.get("summary") or ""))
        for target, key in ((self.findings, "findings"), (self.warnings, "warnings")):
            for f in doctor.get(key) or []:
                target.append(dict(f, node=rename.get(str(f.get("node")), f.get("node"))) if f.get("node") else dict(f))

    def section(self) -> dict[str, Any] | None:
        """The merged section; the worst verdict ranked by the one verdict order (``result.verdict_rank``: a failure
        as NO-GO, a log that shows nothing as NOTHING SELECTED, a healthy one as GO)."""
        if not (self.findings or self.verdicts):
            return None
        return {"verdict": max(self.verdicts, key=verdict_rank, default="unknown"),
                "summary": "; ".join(s for s in self.summaries if s),
                "findings": self.findings, "warnings": self.warnings}


def _node_renames(inputs: Sequence[tuple[str, Mapping[str, Any]]]) -> list[dict[str, str]]:
    """Per input, its node names → their names in the merged document (see the module docstring)."""
    name_count = Counter(str(n.get("node")) for _, doc in inputs for n in doc.get("nodes") or [])
    stamp_count = Counter((str(n.get("node")), str(doc.get("created"))) for _, doc in inputs for n in doc.get("nodes") or [])
    with_cluster_rows = [label for label, doc in inputs if any(r.get("node") == CLUSTER_NODE for r in doc.get("results") or [])]
    cluster_stamps = Counter((_members(label, doc), str(doc.get("created", ""))) for label, doc in inputs)
    renames: list[dict[str, str]] = []
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
        if len(with_cluster_rows) > 1:
            # each run's cluster-scope results keep their own column, named by the run's nodes and time
            # (the file, when the same nodes' runs started in the same second)
            members = _members(label, doc)
            when = created if created and cluster_stamps[(members, created)] == 1 else Path(label).name
            rename[CLUSTER_NODE] = f"{CLUSTER_NODE} ({members}) @ {when}"
        renames.append(rename)
    return renames


def _members(label: str, doc: Mapping[str, Any]) -> str:
    return ",".join(str(n.get("node")) for n in doc.get("nodes") or []) or Path(label).name


def _results(doc: Mapping[str, Any], rename: Mapping[str, str]) -> list[Result]:
    out = []
    for r in doc.get("results") or []:
        node = r.get("node", "-")
        if node == "-":
            continue  # a deselection written by an older version: it is in `deselected` too
        out.append(Result.from_dict(dict(r, node=rename.get(node, node))))
    return out


def _merged_from(label: str, doc: Mapping[str, Any], rename: Mapping[str, str]) -> dict[str, Any]:
    return {
        "file": label, "created": str(doc.get("created", "")), "mode": doc.get("mode"), "verdict": doc.get("verdict"),
        "nodes": ", ".join(rename.get(str(n.get("node")), str(n.get("node"))) for n in doc.get("nodes") or []),
        "profile": (doc.get("profile") or {}).get("name"),
        "rendezvous": _rendezvous(doc),
        "command": " ".join(doc.get("command") or []),
    }


def merge_documents(inputs: Iterable[tuple[str, Mapping[str, Any]]], command: list[str] | None = None) -> dict[str, Any]:
    """One document out of several; see the module docstring."""
    inputs = [(label, mask(dict(doc))) for label, doc in inputs]
    if not inputs:
        raise ValueError("nothing to merge")
    if len(inputs) == 1:
        return inputs[0][1]

    nodes: list[dict[str, Any]] = []
    results: list[Result] = []
    deselected: dict[str, str] = {}
    merged_from: list[dict[str, Any]] = []
    doctor = _Doctor()
    for (label, doc), rename in zip(inputs, _node_renames(inputs)):
        nodes += [dict(n, node=rename[str(n.get("node"))]) for n in doc.get("nodes") or []]
        results += _results(doc, rename)
        deselected.update(doc.get("deselected") or {})
        doctor.add(doc.get("doctor"), rename)
        merged_from.append(_merged_from(label, doc, rename))

    first = inputs[0][1]
    extra: dict[str, Any] = {"merged_from": merged_from}
    section = doctor.section()
    if section is not None:
        extra["doctor"] = section
    doc = build_document(
        mode="merged",
        profile=dict(first.get("profile") or {"name": "—", "values": {}, "sources": {}}),
        nodes=nodes, results=results, deselected=deselected, command=list(command or []),
        strict=any(doc.get("strict") for _, doc in inputs),
        started=min(str(doc.get("created")) for _, doc in inputs),
        finished=max(str(doc.get("finished", doc.get("created"))) for _, doc in inputs),
        extra=extra,
    )
    doc["tool"] = dict(first.get("tool") or doc["tool"])
    return doc


def _rendezvous(doc: Mapping[str, Any]) -> str | None:
    values = (doc.get("profile") or {}).get("values") or {}
    if not values.get("master_addr"):
        return None
    return f"{values['master_addr']}:{values.get('master_port')}" if values.get("master_port") else str(values["master_addr"])
