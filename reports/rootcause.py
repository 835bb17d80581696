"""Root cause first: the red and yellow results of a document, grouped by the cause they share.

Pure presentation over the document (renderers never judge): a check says what it found, who must act
and, when another check can fail for the same reason, a shared cause key (``Result.cause``,
``Finding.cause``). This module turns that into the list a person reads first:

- every distinct problem is one :class:`Problem` (a result's findings each, else the result itself);
- problems with the same cause key, on any node, collapse into one :class:`Cause`: its title, who must
  act, the checks it blocks, the nodes it hits, and its fix (one per distinct fix, with the nodes it is
  for, since fixes carry each node's real values);
- problems without a cause key group only with the same check saying the same thing on other nodes.

Order: the most severe first (ERROR, FAIL, WARN), then the cause blocking the most checks, then the
order the document lists them in.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from dsv3_preflight.result import Actor, Status, severity

RED_OR_YELLOW = ("error", "fail", "warn")
CLUSTER = "cluster"  # where the engine puts cluster-scope results: not a node
ACTOR_ORDER = {Actor.NODE.value: 0, Actor.NETWORK.value: 1, Actor.JOB.value: 2, None: 3}


@dataclass(frozen=True)
class Problem:
    status: str
    message: str
    fix: str | None
    actor: str | None
    cause: str | None
    check: str
    node: str
    result_index: int


@dataclass
class Cause:
    key: str
    status: str
    title: str
    actor: str | None
    checks: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    #: (fix, nodes it is for): one entry per distinct fix
    fixes: list[tuple[str, list[str]]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def actor_label(self) -> str:
        try:
            return Actor(self.actor).label if self.actor else "not said"
        except ValueError:
            return str(self.actor)

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "status": self.status, "title": self.title, "actor": self.actor,
                "actor_label": self.actor_label, "checks": list(self.checks), "nodes": list(self.nodes),
                "fixes": [{"fix": fix, "nodes": nodes} for fix, nodes in self.fixes],
                "results": sorted({p.result_index for p in self.problems})}


def problems(results: Iterable[Mapping[str, Any]]) -> list[Problem]:
    """Every distinct problem of the red and yellow results, in document order."""
    out: list[Problem] = []
    for index, r in enumerate(results):
        status = str(r.get("status"))
        if status not in RED_OR_YELLOW:
            continue
        findings = [f for f in r.get("findings") or [] if isinstance(f, Mapping)]
        if findings and status != "error":
            for f in findings:
                out.append(Problem(str(f.get("status") or status), str(f.get("message") or r.get("summary")),
                                   f.get("fix"), f.get("actor") or r.get("actor"), f.get("cause"),
                                   str(r.get("name")), str(r.get("node")), index))
        else:
            out.append(Problem(status, str(r.get("summary")), r.get("remediation"), r.get("actor"), r.get("cause"),
                               str(r.get("name")), str(r.get("node")), index))
    return out


def root_causes(results: Iterable[Mapping[str, Any]]) -> list[Cause]:
    """The causes behind the red and yellow results, the one to fix first at the top."""
    results = list(results)
    groups: dict[str, Cause] = {}
    order: list[str] = []
    for p in problems(results):
        key = p.cause or f"{p.check}: {p.message}"
        cause = groups.get(key)
        if cause is None:
            cause = groups[key] = Cause(key=key, status=p.status, title=p.message, actor=p.actor)
            order.append(key)
        cause.problems.append(p)
        if severity(p.status) > severity(cause.status):
            cause.status = p.status
        if p.check not in cause.checks:
            cause.checks.append(p.check)
        if p.node not in cause.nodes:
            cause.nodes.append(p.node)
    for cause in groups.values():
        _settle(cause)
    position = {key: i for i, key in enumerate(order)}
    return sorted(groups.values(), key=lambda c: (-severity(c.status), -len(c.checks), position[c.key]))


def _settle(cause: Cause) -> None:
    """Title, actor and fixes from the problem that leads: the most severe, with a fix, of the first check."""
    lead = sorted(cause.problems, key=lambda p: (-severity(p.status), p.fix is None, p.check))[0]
    cause.title = lead.message
    cause.actor = lead.actor or next((p.actor for p in cause.problems if p.actor), None)
    fixes: dict[str, list[str]] = {}
    for p in sorted(cause.problems, key=lambda p: (-severity(p.status), p.check)):
        if p.fix:
            nodes = fixes.setdefault(p.fix, [])
            if p.node not in nodes:
                nodes.append(p.node)
    if cause.problems and any(p.cause for p in cause.problems):
        # one cause: on each node, the fixes of the check that leads there (the other checks' fixes repeat them
        # or follow from them); every distinct fix of that check is kept (two leftovers are two kill lines)
        per_node: dict[str, list[str]] = {}
        for node in cause.nodes:
            here = sorted((p for p in cause.problems if p.node == node), key=lambda p: (-severity(p.status), p.fix is None, p.check))
            lead_check = here[0].check
            per_node[node] = list(dict.fromkeys(p.fix for p in here if p.check == lead_check and p.fix))
        fixes = {}
        for node, node_fixes in per_node.items():
            if node_fixes:
                fixes.setdefault("\n".join(node_fixes), []).append(node)
    cause.fixes = list(fixes.items())


def node_names(nodes: list, results: list) -> list[str]:
    """The document's nodes by rank, then any other node its results name (``CLUSTER`` among them when a
    cluster-scope check ran)."""
    names = [str(n.get("node")) for n in sorted(nodes, key=lambda n: (n.get("node_rank") is None, n.get("node_rank") or 0))]
    for r in results:
        if r.get("node") not in names:
            names.append(str(r.get("node")))
    return names


def is_multi_node(doc: Mapping[str, Any]) -> bool:
    """More than one real node: causes then name their nodes (``cause_where``)."""
    return len([n for n in node_names(list(doc.get("nodes") or []), list(doc.get("results") or [])) if n != CLUSTER]) > 1


def cause_lead(cause: Cause) -> Problem:
    """The problem a cause is shown under: the one whose message is its title."""
    return next((p for p in cause.problems if p.message == cause.title), cause.problems[0])


def cause_where(cause: Cause, multi_node: bool) -> str:
    """' on node1, node2' after the check's name (nothing for a one-node run's one node)."""
    return f" on {', '.join(cause.nodes)}" if multi_node or len(cause.nodes) > 1 else ""


def cause_heading(number: int, cause: Cause, multi_node: bool) -> str:
    """'1. ✘ FAIL host.resources: port 39511 is held by …' in plain text: the console's heading of a cause (the
    launch log repeats it, the doctor reads it back: dsv3_preflight.doctor.gate)."""
    status = cause.status
    symbol = Status(status).symbol if status in Status._value2member_map_ else ""
    lead = cause_lead(cause)
    return f"{number}. {symbol} {status.upper()} {lead.check}{cause_where(cause, multi_node)}: {cause.title}"


def verdict_line_parts(doc: Mapping[str, Any]) -> str:
    """'6 fail, 1 warn, 2 pass, 11 skip' for the verdict line (counts as the document has them)."""
    counts = doc.get("counts") or {}
    return ", ".join(f"{counts[s]} {s}" for s in ("error", "fail", "warn", "pass", "skip") if counts.get(s))
