"""The versioned result document: what `run --json` writes and the report and cluster mode read.

Secrets are masked when the document is built, so neither the JSON nor anything rendered from it
can show them.
"""
from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from . import __version__
from .result import Result, Status, counts, decide_results, worst
from .secrets import mask

FORMAT = "dsv3-preflight/result"
SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("schema") / "result.schema.json"


class DocumentError(Exception):
    """A result document cannot be read."""


def build_document(
    *,
    mode: str,
    profile: Mapping[str, Any],
    nodes: list[Mapping[str, Any]],
    results: Iterable[Result],
    deselected: Mapping[str, str] | None = None,
    command: list[str] | None = None,
    strict: bool = False,
    started: _dt.datetime | str | None = None,
    finished: _dt.datetime | str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble the document; the verdict, exit code and counts come from :func:`result.decide` on the
    results (deselected checks are listed in ``deselected`` only, never as results). Every string in it
    passes through secret masking."""
    results = list(results)
    decision = decide_results(results, strict=strict)
    now = _dt.datetime.now(_dt.timezone.utc)

    def stamp(value: _dt.datetime | str | None) -> str:
        return value if isinstance(value, str) else (value or now).isoformat(timespec="seconds")

    doc = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "dsv3-preflight", "version": __version__},
        "created": stamp(started),
        "finished": stamp(finished),
        "command": list(command or []),
        "mode": mode,
        "verdict": decision.label,
        "verdict_reason": decision.reason,
        "exit_code": int(decision.exit_code),
        "strict": strict,
        "counts": counts(r.status for r in results),
        "worst": (worst(r.status for r in results) or Status.SKIP).value,
        "profile": dict(profile),
        "nodes": [dict(n) for n in nodes],
        "results": [r.to_dict() for r in sort_results(results)],
        "deselected": dict(deselected or {}),
    }
    if extra:
        doc.update(extra)
    return mask(doc)


def sort_results(results: Iterable[Result]) -> list[Result]:
    """Failures first (by severity), then by node and name."""
    return sorted(results, key=lambda r: (-r.status.severity, r.node, r.name))


def write_document(doc: Mapping[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    tmp.replace(path)
    return path


#: a result document larger than this is refused before it is parsed: json.loads takes about 20 bytes of
#: memory per byte of input (an 80 MiB document took 1.78 GiB); a 100-node cluster's document is under 4 MiB
MAX_DOCUMENT_BYTES = 32 << 20


def read_document(path: str | Path, *, max_bytes: int = MAX_DOCUMENT_BYTES) -> dict[str, Any]:
    """A result document from a regular file, through the bounded reader: a FIFO, a device, an empty, binary,
    deeply nested or oversized file, or NaN counts are a DocumentError naming the file (exit 4), never a hang
    or a crash."""
    from .inputs import InputError, read_json

    try:
        doc = read_json(path, what="result document", max_bytes=max_bytes)
    except InputError as exc:
        raise DocumentError(f"{path}: not a readable JSON document: {exc.reason}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DocumentError(f"{path}: not a dsv3-preflight result document (format is not {FORMAT!r})")
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise DocumentError(f"{path}: schema_version {doc.get('schema_version')!r}; this tool reads {SCHEMA_VERSION}")
    return doc


def load_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())
