"""`dsv3-preflight list`: the registered checks and probes."""
from __future__ import annotations

import json

NAME = "list"
HELP = "list the checks (and with --probes the probes) and where each comes from"


def add_arguments(parser) -> None:
    from ..options import add_selection_options

    add_selection_options(parser)
    parser.add_argument("--probes", action="store_true", help="also list the probes (facts)")
    parser.add_argument("--json", dest="as_json", action="store_true", help="print JSON")
    parser.add_argument("--no-color", action="store_true")


def run(args) -> int:
    from rich.markup import escape
    from rich.table import Table

    from ..console import make_console
    from ..options import split_commas
    from ..registry import load_registry

    registry = load_registry(args.checks_dir)
    selection = registry.select(split_commas(args.only), split_commas(args.skip), split_commas(args.tags))
    selected, deselected = selection
    rows = [{"name": c.name, "scope": c.scope, "tags": list(c.tags), "needs": list(c.needs), "timeout_s": c.timeout,
             "origin": c.origin, "description": c.description} for c in selected]
    probes = [{"fact": p.fact, "needs": list(p.needs), "after": list(p.after), "timeout_s": p.timeout, "origin": p.origin, "description": p.description}
              for p in sorted(registry.probes.values(), key=lambda p: p.fact)]
    if args.as_json:
        print(json.dumps({"checks": rows, "deselected": deselected, **({"probes": probes} if args.probes else {}),
                          **({} if rows else {"nothing_selected": selection.why_empty()})}, indent=2))
        return 0 if rows else 5
    console = make_console(args.no_color)
    if not rows:
        console.print(f"nothing selected: {escape(selection.why_empty())}")
        return 5
    # names never wrap or truncate (people grep and paste them); the description takes what width is left
    table = Table(title="checks")
    table.add_column("check", no_wrap=True, min_width=max((len(r["name"]) for r in rows), default=5))
    table.add_column("scope", no_wrap=True)
    table.add_column("tags")
    table.add_column("origin")
    table.add_column("description", ratio=1)
    for r in rows:
        needs = f"\n[dim]needs: {escape(', '.join(r['needs']))}[/dim]" if r["needs"] else ""
        table.add_row(escape(r["name"]), r["scope"], escape(",".join(r["tags"])), escape(_origin(r["origin"])),
                      escape(r["description"]) + needs)
    console.print(table)
    if args.probes:
        table = Table(title="probes")
        table.add_column("fact", no_wrap=True, min_width=max((len(p["fact"]) for p in probes), default=4))
        table.add_column("needs")
        table.add_column("timeout", no_wrap=True)
        table.add_column("origin")
        table.add_column("description", ratio=1)
        for p in probes:
            after = f"\n[dim]after: {escape(', '.join(p['after']))}[/dim]" if p["after"] else ""
            table.add_row(escape(p["fact"]), escape(", ".join(p["needs"])) + after, f"{p['timeout_s']:g}s",
                          escape(p["origin"]), escape(p["description"]))
        console.print(table)
    return 0 if rows else 5


def _origin(origin: str) -> str:
    """Where a check comes from, short: built-in, a plugin's entry point, or the --checks-dir file."""
    if origin.startswith("dsv3_preflight.checks."):
        return "built-in"
    return origin
