"""Which pairs of nodes `--probe=pairs` tests, in which round, on which port. Pure functions.

Round-robin (the circle method): node 0 stays put, the others rotate one place per round, and in each
round node ``i`` of the circle meets node ``m-1-i``. Every pair meets exactly once; within a round the
pairs are disjoint, so they run at the same time. ``n`` nodes give ``n-1`` rounds of ``n/2`` pairs when
``n`` is even, ``n`` rounds of ``(n-1)/2`` pairs when it is odd (one node sits each round out).
"""
from __future__ import annotations

from typing import Iterable, Sequence

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
