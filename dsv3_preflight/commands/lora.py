"""`dsv3-preflight lora scan PATH...` and `dsv3-preflight lora watch DIR`: LoRA adapter save safety.

This module parses the arguments, runs the scan or the watch (:mod:`dsv3_preflight.lora.run`: the probes
gather, the engine's wrapper judges), renders the result (:mod:`dsv3_preflight.reports.lora_text`)
and prints it. The verdict and the exit code come from :func:`dsv3_preflight.result.decide`.
"""
from __future__ import annotations

import json
import sys

NAME = "lora"
HELP = "LoRA adapters: scan saved adapters (empty/corrupt/mismatched), watch a training output dir"

EXIT_USAGE = 4


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="lora_command", metavar="{scan,watch}")
    scan = sub.add_parser("scan", help="judge adapters in files and trees from their safetensors header",
                          description="Find adapter_model.safetensors / adapter_model.bin (with adapter_config.json) in "
                          "files and trees such as checkpoint-*/ and judge each from its header and config, the way "
                          "peft would load it. Exit codes: 0 every adapter ok, 1 a bad or unreadable adapter, "
                          "4 a PATH that is neither a file nor a directory, 5 no adapter found.")
    scan.add_argument("paths", nargs="+", metavar="PATH", help="adapter files or directories (walked)")
    scan.add_argument("--deep", action="store_true", help="also stream the tensor data (bounded memory): NaN/Inf, "
                      "all-zero lora_B after training steps (needs torch)")
    _common(scan)
    watch = sub.add_parser("watch", help="follow an output dir and judge each checkpoint as soon as it is complete",
                           description="Poll DIR and judge every save once it is finished: trainer_state.json written, "
                           "a later checkpoint present, or the weights file provably whole (its header's byte ranges "
                           "written, no hole), and unchanged for --settle seconds. A save still being written is never "
                           "judged. Exit codes: 0 every adapter ok, 1 a bad one, 4 DIR missing, 5 none seen.")
    watch.add_argument("dir", metavar="DIR", help="the training output directory (holding checkpoint-*/)")
    watch.add_argument("--interval", type=_number(positive=True), default=5.0, help="seconds between polls (default 5)")
    watch.add_argument("--settle", type=_number(positive=False), default=2.0,
                       help="seconds a finished save must stay unchanged before it is judged (default 2)")
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
    p.add_argument("--peft-version", type=_peft_version, default=None, metavar="VERSION",
                   help="judge for this peft release, the one that will load the adapters (default: the peft installed "
                   "here; releases differ, e.g. 0.22 refuses fan_in_fan_out with target_parameters where 0.21 loads it)")
    p.add_argument("--no-color", action="store_true")


def _peft_version(text: str) -> str:
    import argparse

    from ..lora.peft_versions import release

    if release(text) is None:
        raise argparse.ArgumentTypeError(f"expected a peft version such as 0.22.0, got {text!r}")
    return text.strip()


def _judged_for(args) -> str | None:
    """The peft release to judge for: the one named, else the one installed here (None: none)."""
    from ..lora.probes.scan import installed_peft

    return args.peft_version or installed_peft()


def _cap(args) -> int:
    return max(1, int(args.header_cap_mib * 1024 * 1024))


def _color(args) -> bool:
    return not args.no_color and sys.stdout.isatty()


def _width() -> int | None:
    import os
    import shutil

    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else None


def run(args) -> int:
    if args.lora_command == "scan":
        return _scan(args)
    if args.lora_command == "watch":
        return _watch(args)
    args._lora_parser.print_help()
    return EXIT_USAGE


def _missing_message(missing: list[str]) -> str:
    import os

    return "; ".join(f"{m}: {'not a regular file or directory' if os.path.lexists(m) else 'no such file or directory'}"
                     for m in missing)


def _scan(args) -> int:
    from ..lora.run import scan_paths
    from ..preflight import UsageError
    from ..reports.lora_text import plain, render_scan

    doc, missing = scan_paths(args.paths, cap=_cap(args), deep=args.deep, peft_version=_judged_for(args))
    if missing:
        raise UsageError(f"lora scan: {plain(_missing_message(missing))}: nothing scanned")
    if args.as_json:
        print(json.dumps(doc, indent=2))
    else:
        print(render_scan(doc, color=_color(args), width=_width()), end="")
        if not doc["adapters"]:
            print("no adapter found (adapter_model.safetensors / adapter_model.bin)", file=sys.stderr)
    return doc["exit_code"]


def _watch(args) -> int:
    from pathlib import Path

    from ..lora.run import Watcher, follow
    from ..lora.verdict import watch_summary
    from ..preflight import UsageError
    from ..reports.lora_text import plain, render_watch_event, render_watch_start, render_watch_summary
    from ..result import as_status

    root = Path(args.dir)
    if not root.is_dir():
        raise UsageError(f"lora watch: {plain(args.dir)}: not a directory")
    if not args.as_json:
        print(render_watch_start(str(root), args.interval), flush=True)
    watcher = Watcher(root, settle=args.settle, cap=_cap(args), deep=args.deep, peft_version=_judged_for(args))
    judged: list[dict] = []
    try:
        for verdict in follow(watcher, interval=args.interval, max_seconds=args.max_seconds):
            judged.append(verdict)
            print(json.dumps(verdict) if args.as_json else render_watch_event(verdict), flush=True)
            if args.fail_fast and as_status(verdict["status"]).is_red:  # a FAIL, or an ERROR: never a pass
                break
    except KeyboardInterrupt:
        pass
    doc = watch_summary(judged, watcher.pending(), peft_version=watcher.peft_version)
    if not args.as_json:
        print(render_watch_summary(doc), flush=True)
    return doc["exit_code"]
