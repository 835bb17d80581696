"""Console rendering: live progress while checks run, then a table with failures first."""
from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, Iterator, Mapping

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .result import NO_GO, NOTHING_SELECTED, Result, Status

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim", "error": "bold magenta"}
LABEL = {s.value: f"{s.symbol} {s.value.upper()}" for s in Status}


def make_console(no_color: bool = False, stderr: bool = False) -> Console:
    """A console on stdout (or stderr); when it is not a terminal, lines are 140 columns (or $COLUMNS)."""
    import os

    stream = sys.stderr if stderr else sys.stdout
    width = None
    if not stream.isatty():
        width = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else 140
    return Console(file=stream, no_color=no_color, highlight=False, width=width)


@contextmanager
def progress(total: int, enabled: bool, no_color: bool = False, label: str = "checks") -> Iterator[Any]:
    """A rich progress bar on stderr when it is a terminal; otherwise a no-op callback."""
    if not enabled or not sys.stderr.isatty():
        yield lambda result: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = make_console(no_color, stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(label, total=total)

        def advance(result: Result) -> None:
            bar.update(task, advance=1, description=f"{label}: {result.node} {result.name} {result.status.value}")

        yield advance


def render_document(doc: Mapping[str, Any], console: Console, quiet: bool = False) -> None:
    """The result table (failures first), each red/warn remediation, then the verdict line."""
    results = doc["results"]
    if not results and doc.get("verdict") == NOTHING_SELECTED:
        quiet = True  # no table of nothing
    multi_node = len({r["node"] for r in results}) > 1
    if not quiet:
        nodes = doc.get("nodes") or []
        if len(nodes) > 1 or doc.get("mode") == "cluster":
            ranks = ", ".join(f"{escape(n['node'])}=node {n.get('node_rank')}" + ("" if n.get("state") in ("ok", "replayed") else f" [{n.get('state')}]")
                              for n in nodes)
            console.print(f"nodes: {ranks}")
        table = Table(show_lines=False, expand=False)
        table.add_column("status", no_wrap=True)
        table.add_column("check", no_wrap=True)
        if multi_node:
            table.add_column("node", no_wrap=True)
        table.add_column("summary")
        table.add_column("time", justify="right", no_wrap=True)
        for r in results:
            row = [f"[{STYLE[r['status']]}]{LABEL[r['status']]}[/]", escape(r["name"])]
            if multi_node:
                row.append(escape(r["node"]))
            row += [escape(r["summary"]), f"{r['duration_s']:.2f}s"]
            table.add_row(*row)
        console.print(table)
    for r in results:
        # every red or yellow result is spelled out (also under --quiet), with its fix when it has one
        if r["status"] in ("fail", "error", "warn"):
            where = f" on {r['node']}" if multi_node else ""
            console.print(f"\n[{STYLE[r['status']]}]{LABEL[r['status']]}[/] [bold]{escape(r['name'])}[/]{escape(where)}: {escape(r['summary'])}")
            if r.get("remediation"):
                console.print("  fix:")
                for line in r["remediation"].splitlines():
                    console.print(f"    {escape(line)}", soft_wrap=True)
    for note in doc.get("notes") or []:
        console.print(f"[dim]note:[/] {escape(str(note))}", soft_wrap=True)
    counts = doc["counts"]
    parts = ", ".join(f"{counts[s]} {s}" for s in ("fail", "error", "warn", "pass", "skip") if counts.get(s))
    if doc["verdict"] == NOTHING_SELECTED:
        console.print(f"\n[bold yellow]{doc['verdict']}[/]: {escape(str(doc.get('nothing_selected') or doc.get('verdict_reason')))}")
        return
    style = "bold red" if doc["verdict"] == NO_GO else "bold green"
    console.print(f"\n[{style}]{doc['verdict']}[/]: {parts}")
