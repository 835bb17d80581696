"""Triage: read the logs, match lines to signatures, order the events, name the first failure and its consequences.

Verdicts (``document()["verdict"]``, ``["exit_code"]``):

- ``failure`` (exit 1): a cause, a symptom or an error line. ``cause_recognised`` says whether the headline is a
  known cause; when it is not, the document carries the error lines and the nearest known causes.
- ``healthy`` (exit 0): signs of progress (NCCL init complete, loss lines, nccl-tests results, "exits
  successfully") and no error line at all.
- ``unknown`` (exit 5): neither errors nor signs of progress (a truncated log, the wrong file, a run that never
  started). It is never exit 0: a script must not read it as healthy.
- a log with neither errors nor progress that stops where a suspect that explains a hang was seen (NCCL on
  loopback or a container bridge in a job NCCL does not show on one node; the rendezvous server waiting for
  workers) is a ``failure`` (exit 1) with that suspect as the suspected cause and ``stalled`` true.

Order: the headline is the finding of the lowest tier (the environment before a specific cause before a weak
cause before a symptom) and, within that tier, the first in time: in one file by line, across files by the
lines' own timestamps. Symptoms (watchdog timeouts, broken pipes, ChildFailedError, the launcher's SIGTERMs)
become consequences of it. When only symptoms are recognised and an unrecognised error came before them, the
cause is not recognised and that error is the first failure.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence

from . import derive as _derive
from .decide import decide
from .document import build
from .passes import judge
from .passes.went_on import attribute_hosts, went_on
from .reader import InputError
from .reading import LineReader
from .signatures import SIGNATURES, Signature, by_id
from .timeline import Timeline, is_error_line


class Triage:
    """The doctor's pipeline over several inputs: ``add_paths``/``add_stream`` read them into a timeline
    (``reading``), ``add_flight_recorder`` adds a Flight Recorder dump, and ``document()`` runs the rest once:
    the derived findings (``derive``), the passes (``passes.judge``), the verdict (``decide``) and the document
    (``document.build``)."""

    def __init__(self, signatures: Sequence[Signature] = SIGNATURES, max_evidence: int = 3, hung: bool = False,
                 inputs_label: str = "{n} file(s)"):
        self.hung = hung   # the user says the run hung (doctor --hung)
        self.inputs_label = inputs_label   # how the summary counts what it read ({n}: the number of files)
        self.reader = LineReader(signatures, max_evidence)

    @property
    def timeline(self) -> Timeline:
        return self.reader.tl

    def add_paths(self, paths: Iterable[str]) -> None:
        self.reader.add_paths(paths)

    def add_stream(self, path: str, label: tuple[str | None, int | None] = (None, None)) -> None:
        self.reader.add_stream(path, label)

    def add_flight_recorder(self, trace_dir: str, prefix: str | None = None) -> None:
        from . import flight_recorder

        details, version = flight_recorder.load(trace_dir, prefix)
        _derive.flight_recorder(self.timeline, flight_recorder.analyse(details, version), trace_dir)

    def document(self) -> dict:
        tl = self.timeline
        _derive.derive(tl)
        went_on(tl)
        attribute_hosts(tl)
        judged = judge(tl, self.hung)
        return build(tl, judged, decide(judged, tl), self.hung, self.inputs_label)


def triage(paths: list[str], max_evidence: int = 3, flight_recorder: str | None = None,
           flight_recorder_prefix: str | None = None, hung: bool = False, inputs_label: str = "{n} file(s)") -> dict:
    """Read the logs at ``paths`` (files, directories, ``-`` for stdin, gzip) and return the doctor document.
    ``hung``: the user says the run hung (it was killed or is still stuck), so a log without an error is not
    "no progress" but a hang whose suspects, or last phase, are named (exit 1). ``inputs_label``: how the summary
    counts the files it read ("{n} file(s)"; the launcher, which writes one per node: "the output of {n} node(s)")."""
    t = Triage(max_evidence=max_evidence, hung=hung, inputs_label=inputs_label)
    t.add_paths(paths)
    if flight_recorder:
        try:
            t.add_flight_recorder(flight_recorder, flight_recorder_prefix)
        except InputError as exc:
            t.timeline.unreadable.append({"path": exc.path, "error": exc.reason})
    doc = t.document()
    from dsv3_preflight.stall.report import from_launch_logs  # the stall report a launch log names (stall-watch.md)

    return {**doc, **from_launch_logs(f["path"] for f in doc.get("files") or [])}


__all__ = ["Triage", "triage", "by_id", "is_error_line"]
