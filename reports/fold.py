"""Folding the healthy nodes of a large cluster out of the node-by-node views (pure: a document in, names out).

Up to ``FOLD_NODES`` nodes every view shows every node. Above it, a node is *folded* when it is up and every result
on it passed or was skipped, and no pairs result names it (a culprit, an unresolved pair, a suspect's row): the
node × check matrix shows the other nodes one by one and the folded ones as one column of counts, the evidence and
the facts of folded nodes stay in the JSON document, and the node table groups them by identical values. The
renderers' cost then grows with the nodes that need a look, not with the cluster (512 nodes, one bad: a few
columns, not 512).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

FOLD_NODES = 16
CLUSTER = "cluster"
PAIRS_CHECK = "dist.pairs"
QUIET = ("pass", "skip")


def pairs_marked(results: Iterable[Mapping[str, Any]]) -> set[str]:
    """The nodes the pairs result names: culprits, unresolved pairs, suspects' rows (as the check wrote them)."""
    out: set[str] = set()
    for r in results:
        if r.get("name") != PAIRS_CHECK:
            continue
        ev = r.get("evidence") or {}
        culprits = ev.get("culprits") or {}
        out.update(str(n) for n in culprits.get("nodes") or [])
        for key in ("links", "failed", "unresolved"):
            out.update(str(n) for pair in culprits.get(key) or [] for n in pair)
        out.update(str(row.get("node")) for row in ev.get("suspect_rows") or [] if isinstance(row, Mapping))
    return out


def fold(node_names: Sequence[str], nodes: Iterable[Mapping[str, Any]],
         results: Iterable[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """(the node names to show one by one, in order, with ``cluster``; the folded ones). Linear in the results."""
    results = list(results)
    real = [n for n in node_names if n != CLUSTER]
    if len(real) <= FOLD_NODES:
        return list(node_names), []
    loud = {str(n.get("node")) for n in nodes if n.get("state") not in (None, "ok", "replayed")}
    loud |= {str(r.get("node")) for r in results if r.get("status") not in QUIET}
    loud |= pairs_marked(results)
    shown = [n for n in node_names if n == CLUSTER or n in loud]
    folded = [n for n in real if n not in loud]
    return shown, folded


def names_text(names: Sequence[str], head: int = 3) -> str:
    """'a, b, c … z' for a long list (the first few and the last)."""
    if len(names) <= head + 1:
        return ", ".join(names)
    return ", ".join(names[:head]) + f" … {names[-1]}"
