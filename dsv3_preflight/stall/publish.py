"""Where a stall report goes: the launch console (stderr), the launch log (its lines, and the file it names), a JSON
file of its own beside the log, the launch's JSON document (``stall`` section) and its HTML report, rendered again."""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import report


def publisher(*, launch_log: Path | None, written: Sequence[Path], reports_dir: str | Path,
              out: Any = None) -> Callable[[dict[str, Any]], None]:
    """The function the watch hands its stall section to."""

    def publish(stall: dict[str, Any]) -> None:
        from dsv3_preflight.launch.gate import write_launch_log

        stream = out or sys.stderr
        lines = report.console_lines(stall)
        directory = Path(launch_log).parent if launch_log else Path(reports_dir)
        path = None
        try:
            path = report.write(stall, directory, time.strftime("%Y%m%d-%H%M%S"))
            lines.append(f"{report.HEAD}report {path}")
        except OSError as exc:
            lines.append(f"{report.HEAD}report not written: {exc}")
        for line in lines:
            print(line, file=stream, flush=True)
        if launch_log:
            write_launch_log(launch_log, "".join(f"# {line}\n" for line in lines)
                             + (f"{report.LOG_LINE}{path}\n" if path else ""))
        _into_reports(stall, written)

    return publish


def _into_reports(stall: dict[str, Any], written: Sequence[Path]) -> None:
    """The ``stall`` section into the launch's JSON document, and its HTML report rendered again from it."""
    jsons = [p for p in written if str(p).endswith(".json")]
    if not jsons or not report.add_to_document(jsons[0], stall):
        return
    from dsv3_preflight.document import read_document
    from dsv3_preflight.reports import write_html

    doc = read_document(jsons[0])
    for html in (p for p in written if str(p).endswith(".html")):
        write_html(doc, html)
