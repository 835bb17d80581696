"""The terminal: a console on stdout/stderr, live progress while checks run, and printing the console report
(the report itself is rendered by the pure ``reports.console.render_console``)."""
from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from rich.console import Console

from .result import Result


def make_console(no_color: bool = False, stderr: bool = False) -> Console:
    """A console on stdout (or stderr); when it is not a terminal, lines are 140 columns (or $COLUMNS)."""
    import os

    stream = sys.stderr if stderr else sys.stdout
    width = None
    if not stream.isatty():
        width = int(os.environ["COLUMNS"]) if os.environ.get("COLUMNS", "").isdigit() else 140
    return Console(file=stream, no_color=no_color, highlight=False, width=width)


@contextmanager
def progress(total: int, enabled: bool, no_color: bool = False, label: str = "checks") -> Iterator[Any]:
    """A rich progress bar on stderr when it is a terminal; otherwise a no-op callback."""
    if not enabled or not sys.stderr.isatty():
        yield lambda result: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = make_console(no_color, stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as bar:
        task = bar.add_task(label, total=total)

        def advance(result: Result) -> None:
            bar.update(task, advance=1, description=f"{label}: {result.node} {result.name} {result.status.value}")

        yield advance


def render_document(doc: Mapping[str, Any], console: Console, quiet: bool = False) -> None:
    """Print the console report of a result document (rendered by ``reports.console``, a pure function)."""
    from dsv3_preflight.reports.console import render_console

    color = console.is_terminal and not console.no_color
    console.file.write(render_console(doc, color=color, width=console.width, quiet=quiet))
    console.file.flush()
