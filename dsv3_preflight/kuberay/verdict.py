"""One way every kuberay.* check turns its rule's judgement into a result.

A rule returns a :class:`Judgement`: its findings, the evidence (what was read and from where), the summary of a
clean manifest, and, when nothing in the manifest could be judged, the reason. The check adds nothing: a manifest
that was not given or not read, and a judgement with nothing judged, are the same SKIP or FAIL for every check.
"""
from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dsv3_preflight.result import Actor, Findings, Result

from .manifest import ManifestFacts

NOT_GIVEN = "no KubeRay manifest given (dsv3-preflight lint FILE.yaml, or --kuberay-manifest FILE)"
UNREADABLE = "kuberay.manifest_unreadable"


@dataclass
class Judgement:
    findings: Findings = field(default_factory=Findings)
    evidence: dict[str, Any] = field(default_factory=dict)
    ok: list[str] = field(default_factory=list)          # what was judged and found right
    not_judged: list[str] = field(default_factory=list)  # what could not be judged, and why


def at(facts: ManifestFacts, line: int | None) -> str:
    """``file:line`` for a finding."""
    return f"{facts.get('path', '?')}:{line}" if line else str(facts.get("path", "?"))


def result(facts: ManifestFacts, rule: Callable[[ManifestFacts], Judgement]) -> Result:
    """The check's result: SKIP without a manifest, FAIL for one that cannot be read, else the rule's verdict."""
    if not facts.get("given"):
        return Result.skipped(NOT_GIVEN)
    if facts.get("error"):
        return Result.failed(f"the KubeRay manifest {facts.get('path')} cannot be read: {facts['error']}", {"path": facts.get("path")},
                             f"yq . {shlex.quote(str(facts.get('path')))}   # shows where the YAML breaks", actor=Actor.JOB,
                             cause=UNREADABLE)
    judged = rule(facts)
    evidence = {"path": facts.get("path"), **judged.evidence}
    if judged.not_judged:
        evidence["not_judged"] = judged.not_judged
    if not judged.findings and not judged.ok:
        return Result.skipped("; ".join(judged.not_judged) or "nothing in the manifest to judge", evidence)
    ok = "; ".join(judged.ok + [f"not judged: {n}" for n in judged.not_judged])
    return judged.findings.result(ok or "nothing to judge", evidence)
