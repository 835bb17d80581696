"""Console rendering of a doctor document (the JSON form is the document itself)."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape

_VERDICT_STYLE = {"failure": "bold red", "healthy": "green", "unknown": "yellow"}


def _where(f: dict) -> str:
    parts = []
    if f.get("node"):
        parts.append(f"node {f['node']}")
    if f.get("rank") is not None:
        parts.append(f"rank {f['rank']}")
    elif f.get("local_rank") is not None:
        parts.append(f"local_rank {f['local_rank']}")
    extra = len(f.get("ranks") or []) - 1
    if extra > 0:
        parts.append(f"+{extra} other rank(s)")
    return ", ".join(parts)


def print_document(doc: dict, console: Console) -> None:
    verdict = doc["verdict"]
    console.print(f"[{_VERDICT_STYLE[verdict]}]doctor: {verdict.upper()}[/] — {escape(doc['summary'])}")
    for i, f in enumerate(doc["findings"], 1):
        where = _where(f)
        mark = "✘" if f["role"] == "root_cause" else "·"
        style = "bold red" if f["role"] == "root_cause" else "dim"
        console.print()
        console.print(f"[{style}]{i}. {mark} {escape(f['title'])}[/]  [dim]\\[{f['class']}]"
                      + (f" {escape(where)}" if where else "") + (f" ×{f['count']}" if f["count"] > 1 else "") + "[/]")
        for ev in f["evidence"]:
            console.print(f"   [cyan]{escape(ev['file'])}:{ev['line']}[/]  {escape(ev['text'])}")
        if f["role"] == "consequence" and f.get("explained_by"):
            console.print(f"   consequence of [bold]{escape(f['explained_by'])}[/]: {escape(f['root_cause'])}")
            continue
        console.print(f"   [bold]cause:[/] {escape(f['root_cause'])}")
        if f["fix"]:
            fix = f["fix"].replace("\n", "\n        ")
            console.print(f"   [bold]fix:[/]   {escape(fix)}")
        if f["check"]:
            console.print(f"   [bold]caught before launch by:[/] dsv3-preflight run --only '{escape(f['check'])}'")
    for w in doc["warnings"]:
        ev = w["evidence"][0]
        console.print(f"\n[yellow]! {escape(w['title'])}[/]  [dim]{escape(ev['file'])}:{ev['line']}[/]\n"
                      f"   {escape(w['root_cause'])}\n   [bold]check:[/] {escape(w['check'] or '-')}")
    unrec = doc["unrecognised"]
    if unrec["count"]:
        console.print(f"\n[yellow]{unrec['count']} error line(s) match no signature[/] (first shown; add a signature "
                      f"in dsv3_preflight/doctor/signatures.py):")
        for ev in unrec["first"]:
            console.print(f"   [cyan]{escape(ev['file'])}:{ev['line']}[/]  {escape(ev['text'])}")
    for u in doc["unreadable"]:
        console.print(f"[bold magenta]unreadable:[/] {escape(u['path'])}: {escape(u['error'])}")
