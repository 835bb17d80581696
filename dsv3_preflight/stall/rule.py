"""When a run is stalled, and how a slow healthy run is told apart from a stuck one. Pure functions.

The rule (docs/stall-watch.md):

- **Suspected**: no sign of progress for ``threshold`` seconds: ``--stall-after`` (default 600 s), raised to 3× the
  longest gap seen between two steps once steps appear (a run whose steps take 5 minutes is not stalled after 10
  minutes of silence until 15). In the set-up phase (no step yet) the silence counts from the last set-up line
  (NCCL connected, an engine ready), or from the start.
- **Slow, not stuck**: once suspected, each rank is sampled twice (CPU time from /proc, its Python stack from
  py-spy, a few dumps in a row each time). A rank whose stack changed between the dumps is working (a long first
  step, a model load, a checkpoint being written); in the set-up phase (no step yet) so is a rank whose CPU time
  advanced (an import or a load sits in one native call; set-up waits do not spin). When any rank works, the run
  is slow: nothing is reported and the watch looks again after another ``threshold`` of silence. A rank with the
  same stack in every dump is waiting there, however much CPU it burns (NCCL's and Gloo's waits spin).
- **Moved**: a progress line that comes while the ranks are sampled or captured (the output reaches the watch
  later than the ranks print it), or a rank that starts or ends between the two samples (a run finishing, a rank
  restarted), also means the run is not stuck.
- **Stalled**: suspected, no rank is working and nothing moved: the capture is taken and the culprit named.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

DEFAULT_STALL_AFTER = 600.0
#: the silence allowed is at least this many times the longest gap seen between steps
GAP_FACTOR = 3.0
#: a rank "uses CPU" when its CPU time grew by at least this share of the wall time between two samples
CPU_SHARE = 0.05


def threshold(stall_after: float, longest_gap: float, steps: int) -> float:
    """The silence after which a stall is suspected: ``stall_after``, at least GAP_FACTOR × the longest step gap."""
    return max(stall_after, GAP_FACTOR * longest_gap) if steps >= 2 else stall_after


def suspected(quiet_since: float, now: float, stall_after: float, longest_gap: float = 0.0, steps: int = 0) -> bool:
    """Whether the run's silence (since ``quiet_since``) reached the threshold."""
    return now - quiet_since >= threshold(stall_after, longest_gap, steps)


@dataclass(frozen=True)
class RankSample:
    """One rank at one instant: its CPU time (s) and its Python stacks, a few dumps in a row (each innermost first,
    "file:line function")."""

    cpu_s: float
    stacks: tuple[tuple[str, ...], ...]
    at: float


def working(first: RankSample, second: RankSample, setup: bool = False) -> bool:
    """A rank works between two samples when its stack changed (among all the dumps of both samples, two differ: a
    loop over a few lines shows them, a wait shows one stack; a dump that failed is left out), or, in the set-up phase,
    when its CPU time advanced: an import or a model load sits in one native call for seconds, and before
    communicators exist a waiting rank burns no CPU (the store's and the rendezvous' waits block). In the work phase
    CPU time alone is not enough: NCCL's and Gloo's waits spin."""
    wall = max(second.at - first.at, 1e-6)
    moved = len({s for s in first.stacks + second.stacks if s}) > 1
    return moved or (setup and (second.cpu_s - first.cpu_s) >= CPU_SHARE * wall)


def slow_not_stuck(samples: Mapping[str, Sequence[RankSample]], setup: bool = False) -> list[str]:
    """The ranks (keys of ``samples``) that work between any two successive samples: not empty = a slow run."""
    return sorted(rank for rank, seq in samples.items()
                  if any(working(a, b, setup) for a, b in zip(seq, seq[1:])))


def came_or_went(samples: Mapping[str, Sequence[RankSample]], taken: int) -> list[str]:
    """The ranks (keys of ``samples``) missing from some of the ``taken`` samples: started or ended between them (the
    run moved)."""
    return sorted(rank for rank, seq in samples.items() if len(seq) < taken)
