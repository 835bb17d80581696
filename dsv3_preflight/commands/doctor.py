"""`dsv3-preflight doctor LOG...`: name the root cause of a failed run from its logs."""
from __future__ import annotations

import json
import sys

NAME = "doctor"
HELP = ("read the logs of a run (files, directories, '-' for stdin, gzip) and name the root cause of its failure, "
        "the fix and the preflight check that catches it (exit 0 logs show progress and no error, 1 failure found "
        "(recognised or not), 4 an input refused, 5 neither errors nor progress)")


def add_arguments(parser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH", help="log files, directories of node logs, or '-' for stdin")
    parser.add_argument("--json", dest="as_json", action="store_true", help="print the doctor document as JSON")
    parser.add_argument("--max-evidence", type=int, default=3, metavar="N", help="evidence lines per finding (default 3)")
    parser.add_argument("--flight-recorder", metavar="DIR", default=None,
                        help="also read PyTorch Flight Recorder dumps (one pickle per rank) from DIR with torch's own "
                             "loader; pickles run code when loaded: only pass dumps your own job wrote")
    parser.add_argument("--flight-recorder-prefix", metavar="PREFIX", default=None,
                        help="file name prefix of the dumps (default: inferred by torch's loader)")
    parser.add_argument("--hung", action="store_true",
                        help="the run hung (killed while stuck, or still stuck): a log without an error is judged as a "
                             "hang, naming its suspects or the phase it stops in (exit 1), instead of 'no progress'")
    parser.add_argument("--list-signatures", action="store_true", help="list the known signatures and exit")
    parser.add_argument("--no-color", action="store_true", help="accepted for symmetry; the text output has no colour")


def run(args) -> int:
    from ..cli import EXIT_USAGE, UsageError

    if args.list_signatures:
        return _list_signatures(args)
    if not args.paths and not args.flight_recorder:
        raise UsageError("doctor needs at least one PATH (a log file, a directory of logs, or '-' for stdin)")
    if args.max_evidence < 1:
        raise UsageError("--max-evidence must be at least 1")
    from ..doctor import triage

    doc = triage(args.paths, max_evidence=args.max_evidence, flight_recorder=args.flight_recorder,
                 flight_recorder_prefix=args.flight_recorder_prefix, hung=args.hung)
    if args.as_json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        from ..reports.doctor_text import render_text

        sys.stdout.write(render_text(doc))
        if doc.get("stall"):   # a launch's stall report, named by its launch log (docs/stall-watch.md)
            from ..stall.report import console_lines

            sys.stdout.write("".join(f"{line}\n" for line in console_lines(doc["stall"])))
    if doc["unreadable"]:
        for u in doc["unreadable"]:
            print(f"dsv3-preflight: error: refused input {u['path']}: {u['error']}", file=sys.stderr)
        return EXIT_USAGE
    return int(doc["exit_code"])


def _list_signatures(args) -> int:
    from ..doctor.signatures import DERIVED, SIGNATURES

    rows = [{"id": s.id, "class": s.cls, "kind": s.kind, "tier": s.tier, "check": s.check, "actor": s.actor,
             "title": s.title, "source": s.source} for s in SIGNATURES + DERIVED]
    if args.as_json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(r["id"]) for r in rows)
    for r in rows:
        print(f"{r['id']:<{width}}  {r['kind']:<8} {str(r['class'] or '-'):<16} {str(r['check'] or '-'):<22} {str(r['actor'] or '-'):<7} {r['title']}")
    return 0
