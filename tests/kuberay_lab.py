"""The KubeRay manifests of tests/data/kuberay/, read through the probe's reader, and variants of them.

A variant is the recorded file with lines replaced (``edits={"old": "new"}``), written to a temporary file and read
back: the tests judge facts the reader produced, never facts typed by hand.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from dsv3_preflight.kuberay.manifest import ManifestFacts
from dsv3_preflight.kuberay.probes.manifest import read_manifest
from dsv3_preflight.kuberay.verdict import Judgement, result
from dsv3_preflight.result import Result

KUBERAY = Path(__file__).resolve().parent / "data" / "kuberay"


def text(name: str, edits: Mapping[str, str] | None = None) -> str:
    body = (KUBERAY / name).read_text()
    for old, new in (edits or {}).items():
        assert old in body, f"{name} has no {old!r} to replace"
        body = body.replace(old, new)
    return body


def facts(name: str, edits: Mapping[str, str] | None = None) -> ManifestFacts:
    """The facts of a recorded manifest (or of a variant of it)."""
    if not edits:
        return read_manifest(str(KUBERAY / name))
    fd, path = tempfile.mkstemp(suffix=f"-{name}")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text(name, edits))
        return read_manifest(path)
    finally:
        os.unlink(path)


def judge(name: str, rule: Callable[[ManifestFacts], Judgement], edits: Mapping[str, str] | None = None) -> Result:
    """The check's result on a recorded manifest (or a variant)."""
    return result(facts(name, edits), rule)
