"""Renderers, in one room: a result document in, text out. Installed as ``dsv3_preflight.reports``.

::

    from dsv3_preflight.reports import render
    text = render(doc, "console", color=False, width=120, quiet=False)   # the terminal report
    html = render(doc, "html")                                           # one self-contained page
    xml = render(doc, "junit")                                           # JUnit XML for CI

Renderers read only the document; they never judge (the verdict is ``result.decide``'s, in the
document) and never print. The doctor's own document renders through ``render(diagnosis, "doctor")``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any


def _console(doc: Mapping[str, Any], **options: Any) -> str:
    from .console import render_console

    return render_console(doc, **options)


def _html(doc: Mapping[str, Any], **options: Any) -> str:
    from .html import render_html

    return render_html(doc, **options)


def _junit(doc: Mapping[str, Any], **options: Any) -> str:
    from .junit import render_junit

    return render_junit(doc, **options)


def _doctor(diagnosis: Mapping[str, Any], **options: Any) -> str:
    from .doctor_text import render_text

    return render_text(diagnosis, **options)


RENDERERS: dict[str, Callable[..., str]] = {"console": _console, "html": _html, "junit": _junit, "doctor": _doctor}


def render(doc: Mapping[str, Any], fmt: str, **options: Any) -> str:
    """Render a document in one of RENDERERS' formats."""
    try:
        renderer = RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"no renderer {fmt!r}; known: {', '.join(RENDERERS)}") from None
    return renderer(doc, **options)


def write_html(doc: Mapping[str, Any], path: str | Path) -> Path:
    """Render the result document as one self-contained HTML file."""
    return write_text(render(doc, "html"), path)


def write_text(text: str, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
