"""Live progress of a cluster run per node on stderr."""
from __future__ import annotations

import time
from dataclasses import replace

from .dispatch import NodeReport


class Progress:
    """Live progress per node on stderr (one line per event, so it also reads well in a log)."""

    def __init__(self, enabled: bool, no_color: bool = False) -> None:
        self.enabled = enabled
        self._console = None
        if enabled:
            from ..console import make_console

            self._console = make_console(no_color, stderr=True)
        self.t0 = time.monotonic()
        self.names: dict[str, str] = {}  # node id -> the name the node reported

    def say(self, text: str) -> None:
        if self._console is not None:
            from rich.markup import escape

            self._console.print(f"[dim]{time.monotonic() - self.t0:6.1f}s[/] {escape(text)}", soft_wrap=True)

    def done(self, report: NodeReport, wave: str) -> None:
        n = report.node
        if report.value is None:
            self.say(f"node {n.node_rank} {n.name}: ERROR ({report.kind}) {report.error}")
            return
        reported = report.value.node_name
        if reported and reported != n.name:
            self.names[n.node_id] = reported
        n = replace(n, name=f"{reported or n.name} ({n.short_id})")
        counts: dict[str, int] = {}
        for r in report.value.results:
            counts[r.status.value] = counts.get(r.status.value, 0) + 1
        parts = ", ".join(f"{counts[s]} {s}" for s in ("fail", "error", "warn", "pass", "skip") if counts.get(s))
        self.say(f"node {n.node_rank} {n.name}: {wave} done in {report.elapsed_s:.1f} s ({parts or 'no checks'})")
