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
    out.add_argument("--junit", dest="junit_path", metavar="PATH", help="also write the results as JUnit XML (for CI dashboards)")
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
    cluster.add_argument("--probe", nargs="?", const="gang", default=None, choices=("gang", "pairs"),
                         help="with --all-nodes: also run the collective probe: `--probe` (or =gang) one all_reduce over "
                              "all nodes; `--probe=pairs` every pair of nodes, naming a slow or lossy node or link")
    cluster.add_argument("--pairs", dest="pairs_schedule", default="fast", choices=("fast", "all"),
                         help="with --probe=pairs: `fast` (default) pairs every node once, then tests only the suspects "
                              "against nodes proven good (at most 2+ceil(log2 N) rounds); `all` tests every pair "
                              "(round-robin, N-1 rounds) for a whole link matrix")
    cluster.add_argument("--pairs-sample", type=int, default=None, metavar="K",
                         help="with --probe=pairs: the first K pairs of the round-robin only; the coverage says so")


def add_arguments(parser) -> None:
    add_run_options(parser)


def options_from_args(args, **changes: Any):
    """The typed run options for `run`/`launch` from their parsed arguments (argparse stops here)."""
    from ..options import cli_profile_values
    from ..preflight import RunOptions

    probe = getattr(args, "probe", None)
    values = dict(
        profile_name=args.profile_name, config_path=args.config_path,
        profile_values={k: v for k, v in cli_profile_values(lambda k: getattr(args, k)).items() if v is not None},
        training_values=dict(getattr(args, "training_values", None) or {}),
        only=tuple(args.only), skip=tuple(args.skip), tags=tuple(args.tags), checks_dirs=tuple(args.checks_dir),
        timeout=args.timeout, strict=args.strict, facts_in=args.facts_in, facts_out=args.facts_out,
        logs=tuple(args.logs), all_nodes=args.all_nodes, ray_address=args.ray_address,
        probe=probe, pairs_sample=getattr(args, "pairs_sample", None),
        pairs_schedule=getattr(args, "pairs_schedule", None) or "fast",
        progress=not args.quiet, no_color=args.no_color, command=tuple(getattr(args, "argv", ()) or ()),
    )
    values.update(changes)
    return RunOptions(**values)


def report_paths(directory: str | os.PathLike, label: str) -> tuple[Path, Path]:
    """A fresh (json, html) pair of report paths in ``directory``: the JSON is created exclusively, so two
    runs in the same second (two people, a run and a cron job) never write the same files."""
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", label)[:60] or "node"
    Path(directory).mkdir(parents=True, exist_ok=True)
    for n in range(1, 10000):
        base = Path(directory) / f"preflight-{stamp}-{safe}{'' if n == 1 else f'-{n}'}"
        try:
            fd = os.open(base.with_suffix(".json"), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            continue
        os.close(fd)
        return base.with_suffix(".json"), base.with_suffix(".html")
    raise OSError(f"{directory}: no free report name for {safe} at {stamp}")


def write_outputs(doc: dict[str, Any], *, json_path: str | None, html_path: str | None, no_report: bool,
                  reports_dir: str, junit_path: str | None = None) -> list[Path]:
    """Write the result document, its HTML report and (asked for) JUnit XML; returns the paths written."""
    from ..document import write_document

    written: list[Path] = []
    nodes = doc.get("nodes") or []
    label = "cluster" if doc.get("mode") == "cluster" else (nodes[0]["node"] if len(nodes) == 1 else "cluster")
    default_json = default_html = None
    if not no_report and not (json_path and html_path):
        default_json, default_html = report_paths(reports_dir, label)
        if json_path:  # only the HTML goes to the timestamped name
            os.unlink(default_json)
    json_target = json_path or default_json
    if json_target:
        written.append(write_document(doc, json_target))
    html_target = html_path or default_html
    if html_target:
        from ..reports import write_html

        written.append(write_html(doc, html_target))
    if junit_path:
        from ..reports import render, write_text

        written.append(write_text(render(doc, "junit"), junit_path))
    return written


def execute(args) -> tuple[dict[str, Any], int, list[Path]]:
    """Run the preflight as `args` asks; returns the result document, the exit code and the files written."""
    from ..preflight import UsageError, run_preflight

    doc = run_preflight(options_from_args(args))
    try:
        written = write_outputs(doc, json_path=args.json_path, html_path=args.html_path, no_report=args.no_report,
                                reports_dir=args.reports_dir, junit_path=args.junit_path)
    except OSError as exc:
        raise UsageError(f"cannot write the report: {exc}") from None
    return doc, int(doc["exit_code"]), written


def run(args) -> int:
    from ..console import make_console, render_document

    doc, code, written = execute(args)
    console = make_console(args.no_color)
    render_document(doc, console, quiet=args.quiet)
    _print_diagnosis(doc.get("doctor"), console)
    for path in written:
        console.print(f"wrote {path}", soft_wrap=True, markup=False, highlight=False)  # a path is never wrapped
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
