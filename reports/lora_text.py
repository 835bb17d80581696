"""`lora scan` and `lora watch` as terminal text (pure: a scan document or an adapter's verdict in, text out).

Every string taken from the document (file names, adapter keys, config values, messages built from them)
is shown through :func:`_t`: control characters, line breaks and bidirectional overrides are escaped, so
a hostile file name cannot move the cursor, retitle the terminal, fake a line of output or reorder what is
shown; and rich markup in it is escaped.
"""
from __future__ import annotations

import io
from typing import Any, Iterable, Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dsv3_preflight.text import safe_terminal

SYMBOL = {"pass": "✔", "warn": "!", "fail": "✘", "skip": "–", "error": "‼"}
STYLE = {"pass": "green", "warn": "yellow", "fail": "red", "skip": "dim", "error": "magenta"}
DEFAULT_WIDTH = 140
#: bidirectional formatting characters: they reorder what a terminal shows
_BIDI = {c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)}


def plain(value: Any) -> str:
    """A document string safe for a terminal line: no control character, line break or bidi override survives."""
    return safe_terminal(value).replace("\n", "\\n").replace("\t", "\\t").translate(_BIDI)


def _t(value: Any) -> str:
    return escape(plain(value))


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


def _console(buffer: io.StringIO, color: bool, width: int | None) -> Console:
    return Console(file=buffer, force_terminal=color, no_color=not color, color_system="standard" if color else None,
                   width=width or DEFAULT_WIDTH, highlight=False, emoji=False, soft_wrap=False)


def counts_line(adapters: list[Mapping[str, Any]]) -> str:
    statuses = [a["status"] for a in adapters]
    return (f"{len(adapters)} adapters: {statuses.count('fail')} bad, {statuses.count('warn')} with warnings, "
            f"{statuses.count('pass')} ok")


def render_scan(doc: Mapping[str, Any], *, color: bool = False, width: int | None = None) -> str:
    """The table of every adapter, each extra finding on its own line, each distinct fix once, then the counts."""
    buffer = io.StringIO()
    console = _console(buffer, color, width)
    adapters = list(doc.get("adapters") or [])
    roots = [str(p) for p in doc.get("paths") or []]
    if adapters:
        table = Table(title="LoRA adapters")
        for col in ("", "adapter", "step", "format", "tensors", "r"):
            table.add_column(col, overflow="fold")
        table.add_column("verdict", overflow="fold", ratio=1, min_width=30)
        for a in adapters:
            status = a["status"]
            findings = a.get("findings") or []
            lead = findings[0]["message"] if findings else a.get("summary", "")
            table.add_row(f"[{STYLE.get(status, 'white')}]{SYMBOL.get(status, '?')}[/]", _t(_shown(a["path"], roots)),
                          "-" if a.get("step") is None else str(a["step"]), _t(a.get("format", "")),
                          str(a.get("tensors", 0)), _t(_ranks(a)), _t(lead))
        console.print(table)
    for a in adapters:
        for f in (a.get("findings") or [])[1:]:
            console.print(f"  {_t(_shown(a['path'], roots))}: [{STYLE.get(f['status'], 'white')}]{f['status']}[/] "
                          f"{_t(f['message'])}")
    fixes: dict[str, list[str]] = {}
    for a in adapters:
        for f in a.get("findings") or []:
            if f.get("fix"):
                fixes.setdefault(f["fix"], [])
                if a["path"] not in fixes[f["fix"]]:
                    fixes[f["fix"]].append(a["path"])
    for fix, paths in fixes.items():
        # the fix is printed as it is pasted: unindented (a heredoc's EOF must start its line)
        which = _t(_shown(paths[0], roots)) + (f" and {len(paths) - 1} more adapters" if len(paths) > 1 else "")
        console.print(f"\n[bold]fix for {which}:[/]")
        for line in fix.splitlines():
            console.print(_t(line), soft_wrap=True)  # never wrapped: a wrapped command would not paste
    console.print(counts_line(adapters))
    return buffer.getvalue()


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
    lines = [f"{len(adapters)} adapters judged, {bad} bad"]
    for p in doc.get("pending") or []:
        lines.append(f"not judged (not finished when the watch stopped): {plain(p['path'])}: {plain(p['why'])}")
    return "\n".join(lines)
