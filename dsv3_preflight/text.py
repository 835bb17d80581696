"""Small text helpers shared by checks that put system strings into remediations."""
from __future__ import annotations


def one_line(cmdline: str | None, limit: int = 200) -> str:
    """A command line as one line (a `python -c` script has newlines; pasted after `#` they would run)."""
    text = " ".join((cmdline or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)) if c not in (0x09, 0x0A)}
_CONTROL.update({0x1B: "\\e", 0x0D: "\\r"})
_TRANSLATE = {code: text for code, text in _CONTROL.items()}


def safe_terminal(text: object) -> str:
    """Text from an input (a log line, an environment value, a file name) made safe to print to a terminal.

    Every C0/C1 control character except newline and tab is shown escaped (ESC as ``\\e``, CR as ``\\r``,
    others as ``\\xNN``), so a hostile log line cannot move the cursor, retitle the window, or hide text."""
    return str(text).translate(_TRANSLATE)
