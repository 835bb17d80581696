"""`lora scan` and `lora watch` as terminal text (pure: a scan document or an adapter's verdict in, text out).

Every string taken from the document (file names, adapter keys, config values, messages built from them)
is shown through :func:`_t`: control characters, line breaks and bidirectional overrides are escaped, so
a hostile file name cannot move the cursor, retitle the terminal, fake a line of output or reorder what is
shown. Colour (ANSI, only when asked) is applied to the status symbols alone, never to document text.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dsv3_preflight.text import safe_terminal

SYMBOL = {"pass": "✔", "warn": "!", "fail": "✘", "skip": "–", "error": "‼"}
ANSI = {"pass": "32", "warn": "33", "fail": "31", "skip": "2", "error": "35"}
DEFAULT_WIDTH = 140
#: bidirectional formatting characters: they reorder what a terminal shows
_BIDI = {c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)}


def plain(value: Any) -> str:
    """A document string safe for a terminal line: no control character, line break or bidi override survives."""
    return safe_terminal(value).replace("\n", "\\n").replace("\t", "\\t").translate(_BIDI)


def _shown(path: str, roots: Iterable[str]) -> str:
    """The adapter's path relative to the scanned directory it lies in (as given on the command line)."""
    for root in roots:
        prefix = root.rstrip("/") + "/"
        if root and path.startswith(prefix) and "/" in path[len(prefix):]:
            return path[len(prefix):]
    return path


def _ranks(a: Mapping[str, Any]) -> str:
    text = ",".join(map(str, a.get("ranks") or [])) or "-"
    if a.get("config_r") is not None and [a["config_r"]] != list(a.get("ranks") or []):
        text += f" (config {a['config_r']})"
    return text


def counts_line(adapters: list[Mapping[str, Any]]) -> str:
    statuses = [a["status"] for a in adapters]
    errors = statuses.count("error")
    return (f"{len(adapters)} adapters: {statuses.count('fail')} bad, {statuses.count('warn')} with warnings, "
            f"{statuses.count('pass')} ok" + (f", {errors} not judged (ERROR: a dsv3-preflight bug)" if errors else ""))


def _wrap(text: str, room: int) -> list[str]:
    if len(text) <= room:
        return [text]
    import textwrap

    return textwrap.wrap(text, room, break_on_hyphens=False) or [text]


def _paint(text: str, status: str, color: bool) -> str:
    return f"\x1b[{ANSI[status]}m{text}\x1b[0m" if color and status in ANSI else text


def render_scan(doc: Mapping[str, Any], *, color: bool = False, width: int | None = None) -> str:
    """The table of every adapter (its first finding, or its summary), each further finding on its own line,
    each distinct fix once (unindented, as it pastes), then the counts. Plain text: 400 rows render in
    milliseconds; long verdicts wrap under their column, never cut."""
    width = max(80, width or DEFAULT_WIDTH)
    adapters = list(doc.get("adapters") or [])
    roots = [str(p) for p in doc.get("paths") or []]
    lines: list[str] = []
    if adapters:
        rows = [(a["status"], [plain(_shown(a["path"], roots)), "-" if a.get("step") is None else str(a["step"]),
                               plain(a.get("format", "")), str(a.get("tensors", 0)), plain(_ranks(a))],
                 plain((a.get("findings") or [{}])[0].get("message") or a.get("summary", ""))) for a in adapters]
        head = ["adapter", "step", "format", "tensors", "r"]
        cols = [max(len(h), *(len(cells[i]) for _, cells, _ in rows)) for i, h in enumerate(head)]
        right = (1, 3)  # numbers align right
        room = max(30, width - 2 - sum(c + 2 for c in cols))
        lines += ["LoRA adapters", "  " + "".join(h.ljust(c + 2) for h, c in zip(head, cols)) + "verdict"]
        for status, cells, verdict in rows:
            row = "".join((c.rjust(w) if i in right else c.ljust(w)) + "  " for i, (c, w) in enumerate(zip(cells, cols)))
            text = _wrap(verdict, room)
            lines.append(f"{_paint(SYMBOL.get(status, '?'), status, color)} {row}{text[0]}")
            lines += [" " * (len(row) + 2) + more for more in text[1:]]
    for a in adapters:
        for f in (a.get("findings") or [])[1:]:
            lines.append(f"  {plain(_shown(a['path'], roots))}: {_paint(f['status'], f['status'], color)} {plain(f['message'])}")
    fixes: dict[str, list[str]] = {}
    for a in adapters:
        for f in a.get("findings") or []:
            if f.get("fix") and a["path"] not in fixes.setdefault(f["fix"], []):
                fixes[f["fix"]].append(a["path"])
    for fix, paths in fixes.items():
        # the fix is printed as it is pasted: unindented (a heredoc's EOF must start its line), never wrapped
        which = plain(_shown(paths[0], roots)) + (f" and {len(paths) - 1} more adapters" if len(paths) > 1 else "")
        lines += ["", f"fix for {which}:", *(plain(line) for line in fix.splitlines())]
    lines.append(counts_line(adapters))
    return "\n".join(lines) + "\n"


def render_watch_start(root: str, interval: float) -> str:
    return f"watching {plain(root)} every {interval:g}s (Ctrl-C to stop)"


def render_watch_event(a: Mapping[str, Any]) -> str:
    """One line per judged save: its verdict the moment it was finished."""
    step = f"step {a['step']}: " if a.get("step") is not None else ""
    return f"{SYMBOL.get(a['status'], '?')} {step}{plain(a['path'])}: {plain(a.get('summary', ''))}"


def render_watch_summary(doc: Mapping[str, Any]) -> str:
    """What the watch saw when it stops: how many saves were judged and bad, and those never finished."""
    adapters = list(doc.get("adapters") or [])
    bad = sum(a["status"] == "fail" for a in adapters)
    errors = sum(a["status"] == "error" for a in adapters)
    lines = [f"{len(adapters)} adapters judged, {bad} bad"
             + (f", {errors} not judged (ERROR: a dsv3-preflight bug)" if errors else "")]
    for p in doc.get("pending") or []:
        lines.append(f"not judged (not finished when the watch stopped): {plain(p['path'])}: {plain(p['why'])}")
    return "\n".join(lines)
