"""Report rendering. Installed as ``dsv3_preflight.reports``."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping


def write_html(doc: Mapping[str, Any], path: str | Path) -> Path:
    """Render the result document as one self-contained HTML file."""
    from .html import render_html

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(doc), encoding="utf-8")
    return path
