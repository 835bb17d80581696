"""`dsv3-preflight doctor LOG...`: name the root cause of a failed run from its logs."""
from __future__ import annotations

import json
import sys

NAME = "doctor"
HELP = ("read the logs of a run (files, directories, '-' for stdin, gzip) and name the root cause of its failure, "
        "the fix and the preflight check that catches it (exit 0 no failure, 1 failure found, 4 unreadable input)")


def add_arguments(parser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH", help="log files, directories of node logs, or '-' for stdin")
    parser.add_argument("--json", dest="as_json", action="store_true", help="print the doctor document as JSON")
    parser.add_argument("--max-evidence", type=int, default=3, metavar="N", help="evidence lines per finding (default 3)")
    parser.add_argument("--list-signatures", action="store_true", help="list the known signatures and exit")
    parser.add_argument("--no-color", action="store_true")


def run(args) -> int:
    from ..cli import EXIT_OK, EXIT_RED, EXIT_USAGE, UsageError
    from ..console import make_console

    if args.list_signatures:
        return _list_signatures(args)
    if not args.paths:
        raise UsageError("doctor needs at least one PATH (a log file, a directory of logs, or '-' for stdin)")
    if args.max_evidence < 1:
        raise UsageError("--max-evidence must be at least 1")
    from ..doctor import triage

    doc = triage(args.paths, max_evidence=args.max_evidence)
    if args.as_json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        from ..doctor.render import print_document

        print_document(doc, make_console(args.no_color))
    if doc["unreadable"]:
        for u in doc["unreadable"]:
            print(f"dsv3-preflight: error: cannot read {u['path']}: {u['error']}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_RED if doc["verdict"] == "failure" else EXIT_OK


def _list_signatures(args) -> int:
    from ..doctor.signatures import SIGNATURES

    rows = [{"id": s.id, "class": s.cls, "kind": s.kind, "check": s.check, "title": s.title, "source": s.source}
            for s in SIGNATURES]
    if args.as_json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.markup import escape
    from rich.table import Table

    from ..console import make_console

    table = Table(title="doctor signatures")
    for col in ("id", "class", "kind", "check", "title"):
        table.add_column(col)
    for r in rows:
        table.add_row(escape(r["id"]), r["class"], r["kind"], escape(r["check"] or "-"), escape(r["title"]))
    make_console(args.no_color).print(table)
    return 0
