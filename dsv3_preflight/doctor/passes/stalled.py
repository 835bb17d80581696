"""A log that stops: no error and no progress where a suspect that explains a hang was seen, or a run the user says
hung (``--hung``): the suspect, or the phase the log stops in, is the suspected cause."""
from __future__ import annotations

import re

from ..signatures import DERIVED
from ..timeline import Event, Finding, Timeline, record

#: a tqdm bar that has done nothing yet: "  0%|          | 0/16 [00:00<?, ?it/s]"
ZERO_BAR = re.compile(r"(?<![\d.])0%\|[^|]*\|\s*0/\d+")
_DERIVED = {s.id: s for s in DERIVED}


def zero_bar(tl: Timeline) -> tuple[int, str] | None:
    """(file index, bar) when the only progress is set-up (NCCL connected) and a file ends on a progress bar
    that has done nothing: the run stopped before it finished a first step (cut short, or hung there), which
    is no sign that the work runs."""
    if not tl.progress or not set(tl.progress) <= tl.setup:
        return None
    for fi, text in sorted(tl.tails.items()):
        m = ZERO_BAR.search(text)
        if m:
            return fi, " ".join(text[:m.end()].split())[-80:]   # "Processed prompts: 0%| | 0/16"
    return None


def _phase(tl: Timeline) -> tuple[str, dict, str] | None:
    """(signature id, groups, text) of the phase a hung log stops in; None when it does not show one."""
    if tl.progress:   # which sign came last is not known: a file's progress needles are dropped once seen
        shown = ", ".join(h["title"] for h in tl.progress.values())
        bar = zero_bar(tl)
        if bar is not None:
            shown += f", then a progress bar at 0 ({bar[1]})"
        return "hang.after_progress", {"shown": shown}, f"hung after {shown}"
    if tl.facts.world and not tl.facts.nranks:
        if tl.facts.one_node():
            return "hang.nccl_init_one_node", {}, "hung in NCCL init on one node"
        hosts, world = str(max(len(tl.facts.nodes), 1)), str(tl.facts.world)
        return "hang.nccl_init", {"hosts": hosts, "world": world}, f"hung in NCCL init ({world} ranks, {hosts} host(s) in the log)"
    return None


def hang_phase(tl: Timeline) -> Finding | None:
    """For ``--hung`` with no error and no suspect: the phase the log stops in, as a derived finding (None: the
    log does not show one)."""
    longest = max(range(len(tl.files)), key=lambda i: tl.files[i]["lines"], default=None)
    if longest is None:
        return None
    phase = _phase(tl)
    if phase is None:
        return None
    sid, groups, text = phase
    path, lines = tl.files[longest]["path"], tl.files[longest]["lines"]
    f = record(tl, _DERIVED[sid], groups, Event(longest, path, lines, None, None, None, None, text))
    f.evidence[-1]["text"] = f"{text} (doctor --hung; the log ends at line {lines})"
    return f


def stall(tl: Timeline, found: list[Finding], kind: dict[str, str], failing: bool,
          hung: bool) -> tuple[list[Finding], bool, bool]:
    """(the findings, stalled, failing): a log that stops with no error and no progress where a suspect that
    explains a hang was seen has that suspect as its suspected cause (exit 1), not "no progress" (exit 5). ``kind``
    gains the hang phase's kind when one is added."""
    if not failing and not tl.progress and any(f.sig.stall for f in found):
        return [f for f in found if kind[f.sig.id] != "suspect" or f.sig.stall], True, True
    if not hung or failing:
        return found, False, failing
    # the user says it hung. Before any progress a suspect that can explain a hang is the suspected cause
    # (the stall suspects were handled above); after progress the run got past what it printed before, and
    # a harmless suspect (an IPv6 lookup) never is: the log's last phase speaks
    blamed = [] if tl.progress else [f for f in found if kind[f.sig.id] == "suspect" and f.sig.hang_suspect]
    found = [f for f in found if kind[f.sig.id] != "suspect" or f in blamed]
    if not blamed:
        phase = hang_phase(tl)
        if phase is not None:
            found.append(phase)
            kind[phase.sig.id] = phase.sig.kind
    return found, True, True


__all__ = ["ZERO_BAR", "hang_phase", "stall", "zero_bar"]
