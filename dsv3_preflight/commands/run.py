"""`dsv3-preflight run`: run the suite on this node (or, with --all-nodes, on every node through Ray)."""
from __future__ import annotations

import datetime as _dt
import os
import re
from pathlib import Path
from typing import Any

NAME = "run"
HELP = "run the preflight checks and write the result document"
DEFAULT_REPORTS_DIR = "preflight-reports"


def add_run_options(parser) -> None:
    """Options shared by `run` and `launch`."""
    from ..options import add_profile_options, add_selection_options

    add_profile_options(parser)
    add_selection_options(parser)
    out = parser.add_argument_group("output")
    out.add_argument("--json", dest="json_path", metavar="PATH", help="write the result document here")
    out.add_argument("--html", dest="html_path", metavar="PATH", help="write the HTML report here")
    out.add_argument("--reports-dir", default=DEFAULT_REPORTS_DIR, metavar="DIR",
                     help=f"where timestamped result documents and reports go (default ./{DEFAULT_REPORTS_DIR})")
    out.add_argument("--no-report", action="store_true", help="write no files unless --json/--html name them")
    out.add_argument("--facts-out", metavar="PATH", help="save this node's gathered facts (for replay and bug reports)")
    out.add_argument("--facts-in", metavar="PATH", help="replay saved facts instead of probing this machine")
    out.add_argument("--logs", action="append", default=[], metavar="PATH",
                     help="attach logs of a failed run (files, dirs, .gz): the doctor's findings go into the report")
    out.add_argument("--quiet", "-q", action="store_true", help="print only failures and the verdict")
    out.add_argument("--no-color", action="store_true", help="no colours in the console output")
    out.add_argument("--strict", action="store_true", help="WARN counts as a failure (exit 1)")
    out.add_argument("--timeout", type=float, default=None, metavar="S", help="overall time limit in seconds (profile run_timeout)")
    cluster = parser.add_argument_group("cluster")
    cluster.add_argument("--all-nodes", action="store_true", help="run on every node of the Ray cluster, then the cluster checks")
    cluster.add_argument("--ray-address", default=None, metavar="ADDR", help="Ray cluster address (default $RAY_ADDRESS or auto)")
    cluster.add_argument("--probe", action="store_true", help="with --all-nodes: also run the collective probe as a gang")


def add_arguments(parser) -> None:
    add_run_options(parser)


def _timestamped(directory: str, node: str, suffix: str) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", node)[:60] or "node"
    return Path(directory) / f"preflight-{stamp}-{safe}.{suffix}"


def execute(args) -> tuple[dict[str, Any], int, list[Path]]:
    """Run the preflight as `args` asks; returns the result document, the exit code and the files written."""
    from ..cli import UsageError
    from ..document import build_document, write_document
    from ..engine import exit_code
    from ..facts import load_facts, save_facts
    from ..options import resolve_from_options, split_commas
    from ..registry import load_registry
    from ..secrets import mask

    if args.facts_in and args.all_nodes:
        raise UsageError("--facts-in replays one node; it cannot be combined with --all-nodes")
    started = _dt.datetime.now(_dt.timezone.utc)
    facts_doc = load_facts(args.facts_in) if args.facts_in else None
    # A replay resolves the profile against the recorded environment, so it reproduces the node.
    environ = (facts_doc or {}).get("facts", {}).get("env", os.environ) if facts_doc else os.environ
    profile = resolve_from_options(lambda k: getattr(args, k), environ, getattr(args, "training_values", None))
    registry = load_registry(args.checks_dir)
    selected, deselected = registry.select(split_commas(args.only), split_commas(args.skip), split_commas(args.tags))
    timeout = args.timeout if args.timeout is not None else profile.run_timeout

    if args.all_nodes:
        from ..cluster import run_all_nodes

        outcome = run_all_nodes(registry, selected, profile, args=args, timeout=timeout)
        results, nodes, mode, extra = outcome.results, outcome.nodes, "cluster", outcome.extra
    else:
        from ..console import progress
        from ..runner import run_this_node

        with progress(len(selected), enabled=not args.quiet, no_color=args.no_color) as advance:
            outcome = run_this_node(registry, selected, profile, facts_doc=facts_doc,
                                    replay_source=args.facts_in, timeout=timeout, on_result=advance)
        results, nodes, mode, extra = outcome.results, [outcome.entry], ("replay" if facts_doc else "node"), None
        if args.facts_out:
            save_facts(args.facts_out, outcome.node, profile.to_dict(),
                       mask({k: outcome.entry[k] for k in ("facts", "fact_errors", "fact_timings_s")}))

    for name, reason in deselected.items():
        from ..result import Result

        results.append(Result.skipped(reason).stamped(name=name, node="-", duration_s=0.0))
    if args.logs:
        from ..doctor import triage

        diagnosis = triage(list(args.logs))
        if diagnosis["unreadable"] and not diagnosis["files"]:
            raise UsageError("--logs: " + "; ".join(f"{u['path']}: {u['error']}" for u in diagnosis["unreadable"]))
        extra = {**(extra or {}), "doctor": diagnosis}
    code = exit_code([r for r in results if r.name not in deselected] or ([] if not selected else results), args.strict)
    doc = build_document(mode=mode, profile=profile.to_dict(), nodes=nodes, results=results, deselected=deselected,
                         command=list(args.argv), exit_code=code, strict=args.strict, started=started, extra=extra)
    try:
        written = _write_outputs(args, doc, nodes)
    except OSError as exc:
        raise UsageError(f"cannot write the report: {exc}") from None
    return doc, code, written


def _write_outputs(args, doc, nodes) -> list[Path]:
    from ..document import write_document

    written: list[Path] = []
    node_label = nodes[0]["node"] if len(nodes) == 1 else "cluster"
    json_path = args.json_path or (None if args.no_report else _timestamped(args.reports_dir, node_label, "json"))
    if json_path:
        written.append(write_document(doc, json_path))
    html_path = args.html_path or (None if args.no_report else _timestamped(args.reports_dir, node_label, "html"))
    if html_path:
        from ..reports import write_html

        written.append(write_html(doc, html_path))
    return written


def run(args) -> int:
    from ..console import make_console, render_document

    doc, code, written = execute(args)
    console = make_console(args.no_color)
    render_document(doc, console, quiet=args.quiet)
    _print_diagnosis(doc.get("doctor"), console)
    for path in written:
        console.print(f"wrote {path}")
    return code


def _print_diagnosis(diagnosis, console) -> None:
    """One line on the logs attached with --logs (the findings are in the report), and the inputs not read."""
    if not diagnosis:
        return
    from rich.markup import escape

    style = {"failure": "bold red", "healthy": "green"}.get(diagnosis["verdict"], "yellow")
    console.print(f"\n[{style}]attached logs (doctor): {diagnosis['verdict'].upper()}[/] — {escape(diagnosis['summary'])}"
                  "\n  (logs of an earlier run: they do not change this verdict; the findings are in the HTML report's "
                  "Doctor section, or run `dsv3-preflight doctor` on the logs)")
    for u in diagnosis.get("unreadable") or []:
        console.print(f"[bold magenta]attached log not read:[/] {escape(str(u['path']))}: {escape(str(u['error']))}")
