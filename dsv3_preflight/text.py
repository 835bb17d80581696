"""Small text helpers shared by checks that put system strings into remediations."""
from __future__ import annotations


def one_line(cmdline: str | None, limit: int = 200) -> str:
    """A command line as one line (a `python -c` script has newlines; pasted after `#` they would run)."""
    text = " ".join((cmdline or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
