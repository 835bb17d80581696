"""Helpers for the report tests: load stored documents and parse rendered HTML with the stdlib parser."""
from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

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
