"""Helpers for the report tests: load stored documents and parse rendered HTML with the stdlib parser."""
from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

from dsv3_preflight.document import build_document
from dsv3_preflight.result import Result

REPORT_DATA = Path(__file__).resolve().parent / "data" / "report"


def load(name: str) -> dict:
    return json.loads((REPORT_DATA / name).read_text())


class Page(HTMLParser):
    """Every element (tag, attributes) and the page's visible text, as a browser's parser sees them."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self._text: list[str] = []
        self._in: list[str] = []
        self.script_bodies: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._in.append(tag)
            if tag == "script":
                self.script_bodies.append("")

    def handle_endtag(self, tag):
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data):
        if self._in and self._in[-1] == "script":
            self.script_bodies[-1] += data
        elif not self._in:
            self._text.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self._text).split())

    def tags(self, name: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.elements if t == name]

    def by_class(self, cls: str) -> list[tuple[str, dict]]:
        return [(t, a) for t, a in self.elements if cls in (a.get("class") or "").split()]


HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


def hostile_document() -> dict:
    node = {"node": "gpu-a" + HOSTILE, "node_rank": 0, "state": "error", "error": "died: " + HOSTILE,
            "facts": {"nic_route": {"interface": "eth0" + HOSTILE}}, "fact_errors": {"nvml" + HOSTILE: HOSTILE}}
    result = Result.failed("summary " + HOSTILE, {
        "findings": [{"file": "/nfs/x" + HOSTILE + ".safetensors", "problem": HOSTILE}],
        "log_tail": ["NCCL WARN " + HOSTILE], "sweep": [{"bytes": 1024, "busbw_gbps": 1.0, "algbw_gbps": 1.0, "note": HOSTILE}],
        HOSTILE: {"nested" + HOSTILE: [HOSTILE]}}, remediation="echo " + HOSTILE)
    doc = build_document(mode="node", profile={"name": "p" + HOSTILE, "values": {"master_addr": HOSTILE},
                                               "sources": {"master_addr": "env " + HOSTILE}},
                         nodes=[node], results=[result.stamped(name="x.check" + HOSTILE, node=node["node"], duration_s=0.1)],
                         command=["dsv3-preflight", HOSTILE])
    doc["doctor"] = {"verdict": HOSTILE, "findings": [{"class": HOSTILE, "title": HOSTILE, "root_cause": HOSTILE,
                                                       "fix": HOSTILE, "check": HOSTILE, "node": HOSTILE, "rank": 0,
                                                       "evidence": [{"file": "/var/log/" + HOSTILE, "line": 3, "text": HOSTILE}]}]}
    return doc
