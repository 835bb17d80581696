"""`dsv3-preflight config`: the resolved profile and where each value came from."""
from __future__ import annotations

import json
import os

NAME = "config"
HELP = "show the resolved profile and the source of each value"


def add_arguments(parser) -> None:
    from ..options import add_profile_options

    add_profile_options(parser)
    parser.add_argument("--json", dest="as_json", action="store_true", help="print JSON")
    parser.add_argument("--no-color", action="store_true")


def run(args) -> int:
    from rich.markup import escape
    from rich.table import Table

    from ..console import make_console
    from ..options import resolve_from_options

    profile = resolve_from_options(lambda k: getattr(args, k), os.environ)
    data = profile.to_dict()
    if args.as_json:
        print(json.dumps(data, indent=2))
        return 0
    table = Table(title=f"profile {profile.name}")
    table.add_column("key")
    table.add_column("value")
    table.add_column("source")
    for key, value in data["values"].items():
        shown = ",".join(value) if isinstance(value, list) else ("" if value is None else str(value))
        table.add_row(key, escape(shown), escape(data["sources"][key]))
    table.add_row("(world size)", str(profile.effective_world_size), "world_size or nnodes × nproc_per_node")
    make_console(args.no_color).print(table)
    return 0
