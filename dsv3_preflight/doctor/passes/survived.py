"""A run that survived its errors: every error of every file was printed before its file says the run succeeded
(a caught and retried error, a restart by torchrun)."""
from __future__ import annotations

from ..timeline import Event, Finding, Timeline
from .teardown import after_end_at


def survived(tl: Timeline, found: list[Finding], kind: dict[str, str], more_errors: list[Event]) -> bool:
    """Every error in the logs was printed before a sign that the run succeeded (``succeeded``) in its own file:
    each failing finding everywhere it was seen, every unrecognised error line (NCCL WARN lines the run went
    past aside). A file with an error and no such sign, or an error after it, and the run did not survive."""
    end = tl.succeeded_last
    if not end:
        return False

    def before(fi: int, line: int) -> bool:
        return fi in end and line < end[fi]

    if not all(before(fi, line) for fi, line in tl.last_error.items()):
        return False
    if not all(before(ev.file, ev.line) for ev in more_errors):
        return False
    if not all(before(ev.file, ev.line) or id(ev) in tl.went_past
               for warns in tl.nccl_warns.values() for ev in warns):
        return False
    failing = [f for f in found if kind[f.sig.id] in ("cause", "symptom")]
    # a teardown line after the end of its file (or in a file without an end beside one that has it) is noise
    # wherever the same finding also stands before the success
    return all(f.last and all(before(fi, line) or (f.sig.teardown and after_end_at(tl, fi, line))
                              for fi, line in f.last.items()) for f in failing)


__all__ = ["survived"]
