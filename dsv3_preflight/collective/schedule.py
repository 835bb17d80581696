"""Which pairs of nodes `--probe=pairs` tests, in which round, on which port. Pure functions.

Two schedules: the fast one (the default, ``--pairs=fast``: round 1 covers every node, then only the suspects,
see below) and the round-robin over every pair (``--pairs=all``, for a whole link matrix).

Round-robin (the circle method): node 0 stays put, the others rotate one place per round, and in each
round node ``i`` of the circle meets node ``m-1-i``. Every pair meets exactly once; within a round the
pairs are disjoint, so they run at the same time. ``n`` nodes give ``n-1`` rounds of ``n/2`` pairs when
``n`` is even, ``n`` rounds of ``(n-1)/2`` pairs when it is odd (one node sits each round out).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

Pair = tuple[int, int]


def round_robin(n: int) -> list[list[Pair]]:
    """The rounds of disjoint pairs ``(a, b)`` (``a < b``, node indices) that meet every pair once."""
    if n < 2:
        return []
    circle: list[int | None] = list(range(n)) + ([None] if n % 2 else [])
    m = len(circle)
    rounds = []
    for _ in range(m - 1):
        pairs = []
        for i in range(m // 2):
            a, b = circle[i], circle[m - 1 - i]
            if a is not None and b is not None:
                pairs.append((min(a, b), max(a, b)))
        rounds.append(sorted(pairs))
        circle = [circle[0], circle[-1], *circle[1:-1]]
    return rounds


def total_pairs(n: int) -> int:
    """Every pair of ``n`` nodes: n·(n−1)/2."""
    return n * (n - 1) // 2 if n > 1 else 0


def sample_rounds(rounds: Sequence[Sequence[Pair]], k: int | None) -> list[list[Pair]]:
    """The first rounds holding ``k`` pairs (the last one cut short); all of them when ``k`` is None.

    Whole rounds first: after ``r`` rounds every node has met ``r`` partners (two are needed to tell a bad
    node from a bad link), and the wall time grows by rounds, not by pairs."""
    if k is None:
        return [list(r) for r in rounds]
    if k < 1:
        raise ValueError(f"--pairs-sample must be at least 1, not {k}")
    out, left = [], k
    for r in rounds:
        if left <= 0:
            break
        out.append(list(r)[:left])
        left -= len(out[-1])
    return out


def pair_port(base: int, round_index: int, slot: int, n: int) -> int:
    """The rendezvous port of the ``slot``-th pair of a round: ``base + slot``, shifted by half the node count on
    odd rounds (a port is not reused by the very next round, whose sockets may still be closing)."""
    return base + slot + (round_index % 2) * ((n + 1) // 2)


def partners(rounds: Iterable[Sequence[Pair]], node: int) -> list[int]:
    """The partners ``node`` meets, in round order."""
    return [b if a == node else a for r in rounds for a, b in r if node in (a, b)]


# -- the fast schedule: localisation in a few rounds -------------------------------------------------------------
#
# Round 1: disjoint pairs (0,1), (2,3), ... cover every node (an odd node out waits for round 2, where it meets a
# node round 1 proved good). Then only the suspects are tested, each against a distinct node already proven good
# that it has not met: a suspect pair is split and each end re-paired, so a bad node is slow again (two outliers:
# named) and the other end is cleared, while a bad link clears both ends (the link itself is named). When the
# suspects outnumber the free proven-good nodes, a round tests as many as there are partners and every suspect it
# clears becomes a partner for the next, so the capacity at least doubles per round: a single bad node or link
# among N nodes is named within 2 + ceil(log2 N) rounds (``max_fast_rounds``), and a healthy cluster of an even
# N is done after round 1 (an odd N: round 1 and the odd node's one pair). The node states come from
# :func:`localise.node_states` (pure, the same ratios to a reference median the judge uses); the judge
# ``dist.pairs`` still makes every verdict from the facts.

FAST, ALL = "fast", "all"
SCHEDULES = (FAST, ALL)
#: below this many nodes round 1 has no reference pair: the round-robin (N <= 3: at most 3 rounds) is used
FAST_MIN_NODES = 4


def first_round(n: int) -> list[Pair]:
    """Round 1 of the fast schedule: disjoint pairs (0,1), (2,3), ...; an odd last node waits for round 2."""
    return [(i, i + 1) for i in range(0, n - 1, 2)]


def max_fast_rounds(n: int) -> int:
    """The most rounds the fast schedule runs: 2 + ceil(log2 n)."""
    return 2 + max(0, math.ceil(math.log2(n))) if n > 1 else 0


def uses_fast(n: int, schedule: str, sample: int | None) -> bool:
    """Whether ``n`` nodes take the fast schedule (not with ``--pairs=all``, a sample, or fewer than 4 nodes)."""
    return schedule == FAST and sample is None and n >= FAST_MIN_NODES


def next_round(nodes: Sequence[str], states: Mapping[str, str], met: Mapping[str, set],
               rounds_done: int) -> list[tuple[str, str]]:
    """The next round of the fast schedule ([] when done): each suspect ("suspect" or "untested" in ``states``)
    against a distinct free node proven "good" that it has not met, in node order; with no good node at all,
    suspects meet suspects they have not met. ``met``: {node: partners so far}. Pairs are (lower rank, higher)."""
    if rounds_done >= max_fast_rounds(len(nodes)):
        return []
    if rounds_done == 0:
        return [(nodes[a], nodes[b]) for a, b in first_round(len(nodes))]
    rank = {n: i for i, n in enumerate(nodes)}
    suspects = [n for n in nodes if states.get(n, "untested") in ("suspect", "untested")]
    good = [n for n in nodes if states.get(n) == "good"]
    busy: set[str] = set()
    out: list[tuple[str, str]] = []
    at = 0
    for s in suspects:
        mine = met.get(s) or set()
        for step in range(len(good)):
            g = good[(at + step) % len(good)]
            if g not in busy and g not in mine:
                out.append((s, g) if rank[s] < rank[g] else (g, s))
                busy.update((s, g))
                at = (at + step + 1) % len(good)
                break
    if not good:
        for i, s in enumerate(suspects):
            if s in busy:
                continue
            mine = met.get(s) or set()
            t = next((t for t in suspects[i + 1:] if t not in busy and t not in mine), None)
            if t is not None:
                out.append((s, t))
                busy.update((s, t))
    return sorted(out, key=lambda p: (rank[p[0]], rank[p[1]]))
