"""`dsv3-preflight lora scan PATH...` and `dsv3-preflight lora watch DIR`: LoRA adapter save safety."""
from __future__ import annotations

import json
import sys

NAME = "lora"
HELP = "LoRA adapters: scan saved adapters (empty/corrupt/mismatched), watch a training output dir"

EXIT_OK, EXIT_RED, EXIT_USAGE, EXIT_NOTHING = 0, 1, 4, 5


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="lora_command", metavar="{scan,watch}")
    scan = sub.add_parser("scan", help="judge adapters in files and trees from their safetensors header",
                          description="Find adapter_model.safetensors / adapter_model.bin (with adapter_config.json) in "
                          "files and trees such as checkpoint-*/ and judge each from its header. Exit codes: 0 ok, "
                          "1 a bad adapter, 4 a path missing/unreadable, 5 no adapter found.")
    scan.add_argument("paths", nargs="+", metavar="PATH", help="adapter files or directories (walked)")
    scan.add_argument("--deep", action="store_true", help="also stream the tensor data (bounded memory): NaN/Inf, "
                      "all-zero lora_B after training steps")
    _common(scan)
    watch = sub.add_parser("watch", help="follow an output dir and judge each checkpoint as soon as it is complete",
                           description="Poll DIR and judge every adapter once it is completely written. Exit codes: "
                           "0 every adapter ok, 1 a bad one, 4 DIR missing, 5 none seen.")
    watch.add_argument("dir", metavar="DIR", help="the training output directory (holding checkpoint-*/)")
    watch.add_argument("--interval", type=_number(positive=True), default=5.0, help="seconds between polls (default 5)")
    watch.add_argument("--settle", type=_number(positive=False), default=2.0,
                       help="seconds a file must stay unchanged before it is judged (default 2)")
    watch.add_argument("--fail-fast", action="store_true", help="exit 1 at the first bad adapter")
    watch.add_argument("--max-seconds", type=_number(positive=False), default=None, help="stop after this many seconds")
    watch.add_argument("--deep", action="store_true", help="also stream the tensor data of each adapter")
    _common(watch)
    parser.set_defaults(_lora_parser=parser)


def _number(*, positive: bool, what: str = "a number of seconds"):
    """An argparse type: a finite number, > 0 when ``positive`` else >= 0 (a bad value is a usage error, exit 4)."""
    import argparse
    import math

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not math.isfinite(value) or value < 0 or (positive and value == 0):
            raise argparse.ArgumentTypeError(f"expected {what} {'> 0' if positive else '>= 0'}, got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def _common(p) -> None:
    p.add_argument("--json", dest="as_json", action="store_true", help="print JSON (watch: one JSON object per line)")
    p.add_argument("--header-cap-mib", type=_number(positive=True, what="a size in MiB"), default=64.0,
                   help="refuse a declared safetensors header length above this (default 64 MiB)")
    p.add_argument("--no-color", action="store_true")


def _missing_extra() -> str | None:
    """The LoRA tools parse adapter_config.json with peft's own config class: peft must be installed."""
    import importlib.util

    missing = [m for m in ("peft", "safetensors") if importlib.util.find_spec(m) is None]
    if missing:
        return f"{', '.join(missing)} not installed: pip install 'dsv3-preflight[lora]'"
    return None


def run(args) -> int:
    if args.lora_command in ("scan", "watch") and (why := _missing_extra()):
        print(f"dsv3-preflight: error: {why}", file=sys.stderr)
        return EXIT_USAGE
    if args.lora_command == "scan":
        return _scan(args)
    if args.lora_command == "watch":
        return _watch(args)
    args._lora_parser.print_help()
    return EXIT_USAGE


def _cap(args) -> int:
    return max(1, int(args.header_cap_mib * 1024 * 1024))


def _scan(args) -> int:
    from ..lora.scan import scan_paths

    reports, missing = scan_paths(args.paths, cap=_cap(args), deep=args.deep)
    import os

    for m in missing:
        why = "not a regular file or directory" if os.path.lexists(m) else "no such file or directory"
        print(f"dsv3-preflight: error: {m}: {why}", file=sys.stderr)
    if args.as_json:
        print(json.dumps({"adapters": [r.as_dict() for r in reports], "missing": missing}, indent=2))
    else:
        _table(reports, args.no_color, args.paths)
    if missing or any(f.code == "unreadable" for r in reports for f in r.findings):
        return EXIT_USAGE
    if not reports:
        if not args.as_json:
            print("no adapter found (adapter_model.safetensors / adapter_model.bin)", file=sys.stderr)
        return EXIT_NOTHING
    return EXIT_RED if any(r.status == "fail" for r in reports) else EXIT_OK


_STYLE = {"ok": ("✔", "green"), "warn": ("!", "yellow"), "fail": ("✘", "red")}


def _shown(path: str, roots) -> str:
    """The adapter's path as short as it reads unambiguously: relative to the scanned directory."""
    import os

    for root in roots:
        if os.path.isdir(root):
            rel = os.path.relpath(path, root)
            if not rel.startswith("..") and os.sep in rel:
                return rel
    return path


def _table(reports, no_color: bool, roots=()) -> None:
    from rich.markup import escape
    from rich.table import Table

    from ..console import make_console

    console = make_console(no_color)
    table = Table(title="LoRA adapters")
    for col in ("", "adapter", "step", "format", "tensors", "r"):
        table.add_column(col, overflow="fold")
    table.add_column("verdict", overflow="fold", ratio=1, min_width=30)
    for r in reports:
        sym, color = _STYLE[r.status]
        ranks = ",".join(map(str, r.ranks)) or "-"
        if r.config_r is not None and [r.config_r] != r.ranks:
            ranks += f" (config {r.config_r})"
        table.add_row(f"[{color}]{sym}[/]", escape(_shown(r.path, roots)), "-" if r.step is None else str(r.step), r.format,
                      str(r.tensors), ranks, escape(r.summary))
    console.print(table)
    for r in reports:
        for f in r.findings[1:] if len(r.findings) > 1 else []:
            console.print(f"  {escape(r.path)}: [{_STYLE[f.severity][1]}]{f.severity}[/] {escape(f.message)}")
    bad = sum(r.status == "fail" for r in reports)
    console.print(f"{len(reports)} adapters: {bad} bad, {sum(r.status == 'warn' for r in reports)} with warnings, "
                  f"{sum(r.status == 'ok' for r in reports)} ok")


def _watch(args) -> int:
    from pathlib import Path

    from ..lora.watch import watch

    root = Path(args.dir)
    if not root.is_dir():
        print(f"dsv3-preflight: error: {args.dir}: not a directory", file=sys.stderr)
        return EXIT_USAGE
    import peft  # noqa: F401  (loaded before the first save lands, so that save is judged at once)

    if not args.as_json:
        print(f"watching {root} every {args.interval:g}s (Ctrl-C to stop)", flush=True)
    seen = bad = 0
    try:
        for report in watch(root, interval=args.interval, settle=args.settle, max_seconds=args.max_seconds,
                            cap=_cap(args), deep=args.deep):
            seen += 1
            bad += report.status == "fail"
            if args.as_json:
                print(json.dumps(report.as_dict()), flush=True)
            else:
                sym = _STYLE[report.status][0]
                step = f"step {report.step}: " if report.step is not None else ""
                print(f"{sym} {step}{report.path}: {report.summary}", flush=True)
            if report.status == "fail" and args.fail_fast:
                return EXIT_RED
    except KeyboardInterrupt:
        pass
    if not args.as_json:
        print(f"{seen} adapters judged, {bad} bad", flush=True)
    if bad:
        return EXIT_RED
    return EXIT_OK if seen else EXIT_NOTHING
