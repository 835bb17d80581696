"""The console report: a result document in, terminal text out (pure; the command prints it).

Layout, root cause first:
- not ``quiet``: with one node, the table of every result (failures first); with several nodes, the
  node x check matrix (it comes before the cards, so the odd node out shows at a glance);
- the causes of a NO-GO (or of warnings), most severe first: each distinct problem on its own, results
  sharing a cause collapsed under it with the checks it blocks, the nodes it hits, who must act, and one
  fix per distinct fix;
- notes of the run, then the verdict line.

Every string from the document is shown through ``text.safe_terminal`` (a hostile log line or
environment value cannot send control sequences to the terminal) and rich-escaped (no markup injection).
"""
from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dsv3_preflight.result import GO, NOTHING_SELECTED, STATUS_ORDER, Status
from dsv3_preflight.text import safe_terminal

from .fold import fold, names_text
from .probe_text import render_pairs_text
from .rootcause import CLUSTER, Cause, cause_lead, cause_where, node_names, root_causes, verdict_line_parts

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim", "error": "bold magenta"}
LABEL = {s.value: f"{s.symbol} {s.value.upper()}" for s in Status}
SYMBOL = {s.value: s.symbol for s in Status}
DEFAULT_WIDTH = 140


def t(value: Any) -> str:
    """A document string made safe for the terminal and for rich markup."""
    return escape(safe_terminal(value))


def render_console(doc: Mapping[str, Any], *, color: bool = False, width: int | None = None,
                   quiet: bool = False) -> str:
    """The console text of a result document (ANSI colours only when ``color``)."""
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=color, no_color=not color, color_system="standard" if color else None,
                      width=width or DEFAULT_WIDTH, highlight=False, emoji=False, soft_wrap=False)
    results = list(doc.get("results") or [])
    nodes = doc.get("nodes") or []
    names = node_names(nodes, results)
    real_nodes = [n for n in names if n != CLUSTER]
    if not quiet and results:
        if len(real_nodes) > 1 or doc.get("mode") == "cluster":
            _nodes_line(console, nodes)
        if len(real_nodes) > 1:
            _matrix(console, results, names, nodes)
        else:
            _table(console, results)
        pairs = render_pairs_text(doc)  # `--probe=pairs`: the node x node matrix the causes below refer to
        if pairs:
            console.print("\n" + pairs, markup=False, soft_wrap=True)
    causes = root_causes(results)
    if causes:
        red = sum(1 for c in causes if c.status in ("error", "fail"))
        head = (f"Why {doc.get('verdict')}: {red} cause{'s' if red != 1 else ''}" if doc.get("verdict") != GO
                else "Warnings")
        console.print(f"\n[bold]{head}[/] (most severe first; each with who must act and the fix to paste)")
        for number, cause in enumerate(causes, 1):
            _cause(console, number, cause, multi_node=len(real_nodes) > 1)
    for note in doc.get("notes") or []:
        console.print(f"[dim]note:[/] {t(note)}", soft_wrap=True)
    for n in nodes:  # another run on this node held a resource this run's probes needed: they waited, and say so
        for fact, wait in sorted((n.get("fact_waits") or {}).items()):
            console.print(f"[dim]note:[/] {t(n.get('node'))}: {t(fact)} {t(wait)}", soft_wrap=True)
    console.print("\n" + verdict_line(doc, color=True))
    return buffer.getvalue()


def verdict_line(doc: Mapping[str, Any], color: bool = False) -> str:
    """The last line: the verdict and the counts (or why nothing was selected), as rich markup."""
    verdict = str(doc.get("verdict"))
    if verdict == NOTHING_SELECTED:
        return f"[bold yellow]{verdict}[/]: {t(doc.get('nothing_selected') or doc.get('verdict_reason') or '')}"
    style = "bold green" if verdict == GO else "bold red"
    return f"[{style}]{t(verdict)}[/]: {verdict_line_parts(doc)}"


def _nodes_line(console: Console, nodes: list) -> None:
    parts = []
    if len(nodes) > 16:   # a large cluster: the count, its ends, and every node not up
        down = [n for n in nodes if n.get("state") not in ("ok", "replayed")]
        names = [str(n.get("node")) for n in nodes]
        console.print(f"nodes: {len(nodes)} ({t(names_text(names))})"
                      + ("; not up: " + ", ".join(f"{t(n.get('node'))} [{t(n.get('state'))}]" for n in down) if down else ""),
                      soft_wrap=True)
        return
    for n in nodes:
        state = n.get("state")
        parts.append(f"{t(n.get('node'))}=node {n.get('node_rank')}" + ("" if state in ("ok", "replayed") else f" [{t(state)}]"))
    if parts:
        console.print("nodes: " + ", ".join(parts), soft_wrap=True)


def _table(console: Console, results: list) -> None:
    table = Table(show_lines=False, expand=False)
    table.add_column("status", no_wrap=True)
    table.add_column("check", no_wrap=True)
    table.add_column("summary")
    table.add_column("time", justify="right", no_wrap=True)
    for r in results:
        table.add_row(f"[{STYLE.get(r['status'], '')}]{LABEL.get(r['status'], r['status'])}[/]", t(r["name"]),
                      t(r["summary"]), f"{float(r.get('duration_s') or 0):.2f}s")
    console.print(table)


def _matrix(console: Console, results: list, node_names: list[str], nodes: list) -> None:
    """Checks down, nodes across; the worst status of each cell; a dead node's column says so. Above 16 nodes the
    healthy ones are folded into one column of counts (reports/fold.py)."""
    shown, folded = fold(node_names, nodes, results)
    folded_set = set(folded)
    node_names = shown
    cell: dict[tuple[str, str], str] = {}
    folded_counts: dict[str, dict[str, int]] = {}
    order = {s.value: i for i, s in enumerate(STATUS_ORDER)}
    best: dict[str, int] = {}
    for r in results:
        name = str(r["name"])
        if str(r["node"]) in folded_set:
            counts = folded_counts.setdefault(name, {})
            counts[r["status"]] = counts.get(r["status"], 0) + 1
            best[name] = min(best.get(name, 99), order[r["status"]])
            continue
        key = (name, str(r["node"]))
        if key not in cell or order[r["status"]] < order[cell[key]]:
            cell[key] = r["status"]
        best[name] = min(best.get(name, 99), order[r["status"]])
    checks = sorted(best, key=lambda c: (best[c], c))
    state = {str(n.get("node")): n.get("state") for n in nodes}
    table = Table(show_lines=False, expand=False, title="node × check")
    table.add_column("check", no_wrap=True)
    for name in node_names:
        dead = state.get(name) not in (None, "ok", "replayed")
        table.add_column(t(name) + (f"\n[bold magenta]‼ {t(state.get(name))}[/]" if dead else ""), no_wrap=True, justify="center")
    if folded:
        table.add_column(f"{len(folded)} healthy\n(folded)", no_wrap=True, justify="center")
    for check in checks:
        row = [t(check)]
        for name in node_names:
            status = cell.get((check, name))
            row.append(f"[{STYLE[status]}]{LABEL[status]}[/]" if status else "·")
        if folded:
            counts = folded_counts.get(check, {})
            row.append(" ".join(f"[{STYLE[s]}]{SYMBOL[s]} {counts[s]}[/]" for s in STYLE if counts.get(s)) or "·")
        table.add_row(*row)
    console.print(table)


def _cause(console: Console, number: int, cause: Cause, multi_node: bool) -> None:
    lead = cause_lead(cause)
    where = cause_where(cause, multi_node)
    console.print(f"\n{number}. [{STYLE.get(cause.status, '')}]{LABEL.get(cause.status, cause.status)}[/] "
                  f"[bold]{t(lead.check)}[/]{t(where)}: {t(cause.title)}", soft_wrap=True)
    others = [c for c in cause.checks if c != lead.check]
    if others:
        console.print(f"   also blocks: {t(', '.join(others))} (same cause)", soft_wrap=True)
    console.print(f"   who acts: {t(cause.actor_label)}", soft_wrap=True)
    for fix, fix_nodes in cause.fixes:
        label = f"fix on {', '.join(fix_nodes)}:" if len(cause.fixes) > 1 or (multi_node and len(cause.nodes) > 1
                                                                              and fix_nodes != cause.nodes) else "fix:"
        console.print(f"   {t(label)} (paste as is)")
        for line in fix.splitlines():  # flush left: an indented heredoc terminator would never end the heredoc
            console.print(t(line), soft_wrap=True)
