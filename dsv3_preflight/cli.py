"""The `dsv3-preflight` command line. Subcommands are the modules of ``dsv3_preflight.commands``.

Each command module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``
and imports nothing heavy at module level: ``--help`` must not import torch, ray or deepspeed.

Exit codes (pytest's): 0 no FAIL/ERROR · 1 some FAIL/ERROR · 2 interrupted · 3 internal error ·
4 usage or config error · 5 nothing selected. 141 (128 + SIGPIPE, what a shell reports for a command its pipe's
reader stopped): standard output was closed before everything was printed (``| head``); nothing more is said.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence

from .preflight import UsageError  # noqa: F401  (re-exported: the commands raise it)
from .result import ExitCode

EXIT_OK, EXIT_RED, EXIT_INTERRUPTED, EXIT_INTERNAL, EXIT_USAGE, EXIT_NOTHING = (
    int(ExitCode.OK), int(ExitCode.RED), int(ExitCode.INTERRUPTED), int(ExitCode.INTERNAL), int(ExitCode.USAGE),
    int(ExitCode.NOTHING))
EXIT_BROKEN_PIPE = 141   # 128 + SIGPIPE: what a shell reports for a writer whose pipe's reader stopped


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
    _bound_numbers(parser)
    return parser


#: numeric options where 0 is meaningful (no grace period, no evidence lines); every other number must be > 0
_ZERO_OK = {"stop_grace", "max_evidence", "settle", "max_seconds"}


def _number_type(kind: type, flag: str, zero_ok: bool):
    """An argparse type for a numeric option: finite, > 0 (>= 0 where zero means something): `--timeout 0`,
    `nan`, `inf` or `-5` are usage errors (exit 4), never "no limit" or an ERROR for every check."""
    import math

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}, got {text!r}") from None
        if (isinstance(value, float) and not math.isfinite(value)) or value < 0 or (value == 0 and not zero_ok):
            raise argparse.ArgumentTypeError(f"expected a {'finite ' if kind is float else ''}number "
                                             f"{'>= 0' if zero_ok else '> 0'}, got {text!r}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def _bound_numbers(parser: argparse.ArgumentParser) -> None:
    """Give every plain ``type=float``/``type=int`` option of every command (and subcommand) the bounded type."""
    for action in parser._actions:  # argparse keeps no public list of them
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                _bound_numbers(sub)
        elif action.type in (float, int) and action.option_strings:
            action.type = _number_type(action.type, action.option_strings[-1], action.dest in _ZERO_OK)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse, run the command, map errors to the documented exit codes."""
    from . import signals
    from .document import DocumentError
    from .facts import FactError
    from .inputs import InputError
    from .profile import ConfigError
    from .registry import RegistryError
    from .text import safe_terminal

    signals.install()  # first: a stop signal during the imports below is an exit 2 too, not a traceback
    code = EXIT_INTERNAL
    args = argparse.Namespace(debug=False)
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "_run", None):
            parser.print_help()
            return EXIT_USAGE
        args.argv = ["dsv3-preflight", *(sys.argv[1:] if argv is None else argv)]
        code = int(args._run(args))
    except (UsageError, ConfigError, RegistryError, FactError, DocumentError, InputError) as exc:
        if args.debug:
            raise
        print(f"dsv3-preflight: error: {safe_terminal(exc)}", file=sys.stderr)
        code = EXIT_USAGE
    except KeyboardInterrupt as exc:  # SIGINT, SIGTERM, SIGHUP (signals.Interrupted) or Ctrl-C
        code = EXIT_INTERRUPTED
        _interrupted(getattr(exc, "signum", None) or signals.received())
    except BrokenPipeError:   # the reader of standard output stopped (`| head`): not an error of ours
        with contextlib.suppress(OSError, ValueError):   # nothing more can reach it, not even the flush at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_BROKEN_PIPE
    except Exception as exc:  # noqa: BLE001 - the one path for internal errors
        if args.debug:
            raise
        print(f"dsv3-preflight: internal error: {type(exc).__name__}: {safe_terminal(exc)} "
              "(run again with --debug for the traceback)", file=sys.stderr)
        code = EXIT_INTERNAL
    finally:
        # every exit, not only an interrupt: a probe still running past the run's deadline leaves nothing behind
        signals.cleanup()
        if signals.received() is not None and code != EXIT_INTERRUPTED:
            code = EXIT_INTERRUPTED  # a command that caught the interrupt itself, or a signal during the cleanup
            _interrupted(signals.received())
        signals.uninstall()
    return code


def _interrupted(signum: int | None) -> None:
    import signal

    name = signal.Signals(signum).name if signum else "SIGINT"
    with contextlib.suppress(OSError, ValueError):  # stderr closed with the terminal (SIGHUP)
        print(f"dsv3-preflight: interrupted by {name}: stopped the processes it started (exit {EXIT_INTERRUPTED})",
              file=sys.stderr, flush=True)


def entry() -> None:  # pragma: no cover - the console script and `python -m dsv3_preflight`
    from . import signals

    signals.become_subreaper()  # this process owns what it starts: orphans come back to it (signals.cleanup)
    code = main()
    signals.exit_after_stop(code)   # stopped by a signal: exit without the interpreter's (and Ray's) teardown
    sys.exit(code)
