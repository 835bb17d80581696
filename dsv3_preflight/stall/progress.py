"""Progress of a launched run, read from its own output lines: which rank printed a sign of progress, and when.

The signs are the doctor's: the ``progress`` signatures of ``dsv3_preflight.doctor.SIGNATURES`` (loss lines,
DeepSpeed's step reports, progress bars, NCCL's "Init COMPLETE"...). Those marked ``setup`` (NCCL connected, an
engine ready) are set-up lines; the others are the work's steps. Pure: lines and times in, a state out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

#: the rank a line carries in its prefix: torch's ``[rank3]:``, torchrun --tee's ``[default3]:`` (a local rank),
#: our own launcher's ``[node 1 name]`` (a node rank)
# TODO(doctor restructure): take these from dsv3_preflight.doctor.attribution.origin_of once it is a public name
_RANK = re.compile(r"\[rank(?P<rank>\d+)\]:")
_TEE = re.compile(r"^\[[A-Za-z_]+?(?P<local>\d+)\]:")
_NODE = re.compile(r"^\[node (?P<node_rank>\d+) [^\]\s]+\] ")


@dataclass(frozen=True)
class Sign:
    """One progress line: the doctor's signature id, whether it is set-up, and the rank it names (None: unknown)."""

    sig: str
    setup: bool
    rank: int | None = None
    local_rank: int | None = None
    node_rank: int | None = None


@lru_cache(maxsize=1)
def _signatures() -> tuple:
    """The doctor's progress signatures with their needles as text (a line holding none of them is not looked at)."""
    from dsv3_preflight.doctor import SIGNATURES

    return tuple((s, tuple(n.decode("utf-8", "replace") for n in s.needles)) for s in SIGNATURES if s.kind == "progress")


def classify(line: str) -> Sign | None:
    """The sign of progress in ``line`` (the first progress signature that matches), else None."""
    for sig, needles in _signatures():
        if any(n in line for n in needles) and sig.regex.search(line):
            return Sign(sig.id, bool(sig.setup), *_origin(line))
    return None


def _origin(line: str) -> tuple[int | None, int | None, int | None]:
    node = _NODE.match(line)
    rest = line[node.end():] if node else line
    rank = _RANK.search(rest)
    tee = None if rank else _TEE.match(rest)
    return (int(rank.group("rank")) if rank else None, int(tee.group("local")) if tee else None,
            int(node.group("node_rank")) if node else None)


@dataclass
class Progress:
    """What the run's output said so far: the last sign of progress, of set-up, the longest gap between steps."""

    started: float
    last_any: float | None = None     # the last sign of progress of any kind
    last_setup: float | None = None
    last_step: float | None = None
    steps: int = 0
    longest_gap: float = 0.0          # between two successive step lines (any rank)
    last_line: str = ""               # the last progress line (for the report)
    per_rank: dict[str, float] = field(default_factory=dict)   # "rank 3" / "node 1" → time of its last sign

    def observe(self, line: str, now: float) -> Sign | None:
        """Read one output line at time ``now``; the sign it carries (None: not progress)."""
        sign = classify(line)
        if sign is None:
            return None
        self.last_any = now
        self.last_line = line[:300]
        if sign.setup:
            self.last_setup = now
        else:
            if self.last_step is not None:
                self.longest_gap = max(self.longest_gap, now - self.last_step)
            self.last_step = now
            self.steps += 1
        who = (f"rank {sign.rank}" if sign.rank is not None else f"local rank {sign.local_rank}"
               if sign.local_rank is not None else None)
        if sign.node_rank is not None:
            who = f"node {sign.node_rank}" + (f" {who}" if who else "")
        if who:
            self.per_rank[who] = now
        return sign

    @property
    def phase(self) -> str:
        """``setup`` until the first step line, then ``work``."""
        return "work" if self.steps else "setup"

    def quiet_since(self) -> float:
        """Since when the run has shown no progress: its last step; in set-up, its last set-up line (or its start)."""
        if self.steps and self.last_step is not None:
            return self.last_step
        return self.last_setup if self.last_setup is not None else self.started
