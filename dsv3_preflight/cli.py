"""The `dsv3-preflight` command line. Subcommands are the modules of ``dsv3_preflight.commands``.

Each command module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``
and imports nothing heavy at module level: ``--help`` must not import torch, ray or deepspeed.

Exit codes (pytest's): 0 no FAIL/ERROR · 1 some FAIL/ERROR · 2 interrupted · 3 internal error ·
4 usage or config error · 5 nothing selected.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from typing import Sequence

from .preflight import UsageError  # noqa: F401  (re-exported: the commands raise it)
from .result import ExitCode

EXIT_OK, EXIT_RED, EXIT_INTERRUPTED, EXIT_INTERNAL, EXIT_USAGE, EXIT_NOTHING = (
    int(ExitCode.OK), int(ExitCode.RED), int(ExitCode.INTERRUPTED), int(ExitCode.INTERNAL), int(ExitCode.USAGE),
    int(ExitCode.NOTHING))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own usage errors exit 4, like pytest's
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _command_modules():
    from . import commands

    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"{commands.__name__}.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = _Parser(
        prog="dsv3-preflight",
        description="Preflight diagnostics for multi-node GPU training (torchrun + DeepSpeed ZeRO-3 + PEFT).",
        epilog="exit codes: 0 go, 1 FAIL/ERROR, 2 interrupted, 3 internal error, 4 usage/config error, 5 nothing selected",
    )
    parser.add_argument("--version", action="version", version=f"dsv3-preflight {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for module in _command_modules():
        cmd = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        cmd.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
        module.add_arguments(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse, run the command, map errors to the documented exit codes."""
    from .document import DocumentError
    from .facts import FactError
    from .profile import ConfigError
    from .registry import RegistryError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_USAGE
    args.argv = ["dsv3-preflight", *(sys.argv[1:] if argv is None else argv)]
    try:
        return int(args._run(args))
    except (UsageError, ConfigError, RegistryError, FactError, DocumentError) as exc:
        if args.debug:
            raise
        print(f"dsv3-preflight: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("dsv3-preflight: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the one path for internal errors
        if args.debug:
            raise
        print(f"dsv3-preflight: internal error: {type(exc).__name__}: {exc} (run again with --debug for the traceback)",
              file=sys.stderr)
        return EXIT_INTERNAL


def entry() -> None:  # pragma: no cover
    sys.exit(main())
