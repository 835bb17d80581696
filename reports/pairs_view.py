"""The pair matrix of `--probe=pairs` as heat maps for the HTML report (pure: a document in, view data out).

``pairs_view(doc)`` reads the `dist.pairs` result's evidence (the matrix, the culprits, the coverage) and
returns what ``templates/pairs.html.j2`` lays out: two node × node maps (p50 latency, busbw), each cell
with its value, a shade from 0 (the best pair) to 1 (the worst, on a log scale) and whether it is a
culprit (a pair of the bad node, the bad link, or the pair that failed); None when the document has no
pair matrix. Above 32 nodes the check keeps no matrix (most of its cells would be pairs the fast schedule never
ran): the view is then the suspects' rows, each named or unresolved node with every pair it was in. No judging:
the culprits are the check's.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

PAIRS_CHECK = "dist.pairs"


def _result(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for r in doc.get("results") or []:
        ev = r.get("evidence") or {}
        if r.get("name") == PAIRS_CHECK and (isinstance(ev.get("matrix"), Mapping) or isinstance(ev.get("suspect_rows"), list)):
            return r
    return None


def _rows(ev: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A large cluster's suspects' rows (the check's ``suspect_rows``): each node the check names or could not
    resolve, with every pair it was in, as text cells."""
    out = []
    for row in ev.get("suspect_rows") or []:
        if not isinstance(row, Mapping):
            continue
        pairs = []
        for p in row.get("pairs") or []:
            lat, bw = p.get("latency_us"), p.get("busbw_gbps")
            pairs.append({"peer": str(p.get("peer")), "round": p.get("round"), "status": str(p.get("status")),
                          "slow": bool(p.get("slow")), "failure": p.get("failure"),
                          "latency": format(lat / 1000.0, ".3g") if _number(lat) else "–",
                          "busbw": format(bw, ".3g") if _number(bw) else "–",
                          "ratios": ", ".join(f"{label} {v:.2g}×" for label, v in (("latency", p.get("latency_ratio")),
                                                                                 ("busbw", p.get("busbw_ratio")))
                                              if _number(v))})
        out.append({"node": str(row.get("node")), "state": str(row.get("state")), "pairs": pairs})
    return out


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0


def _shades(values: Sequence[Sequence[Any]], higher_is_worse: bool) -> list[list[float | None]]:
    flat = [v for row in values for v in row if _number(v)]
    if not flat:
        return [[None for _ in row] for row in values]
    lo, hi = math.log(min(flat)), math.log(max(flat))
    span = (hi - lo) or 1.0

    def shade(v: Any) -> float | None:
        if not _number(v):
            return None
        x = (math.log(v) - lo) / span
        return round(x if higher_is_worse else 1.0 - x, 3)

    return [[shade(v) for v in row] for row in values]


def _map(title: str, unit: str, nodes: Sequence[str], values: Sequence[Sequence[Any]], status: Sequence[Sequence[str]],
         fmt: str, higher_is_worse: bool, culprit_nodes: set[str], culprit_pairs: set[frozenset],
         failures: Mapping[frozenset, str]) -> dict[str, Any]:
    shades = _shades(values, higher_is_worse)
    rows = []
    for i, a in enumerate(nodes):
        cells = []
        for j, b in enumerate(nodes):
            key = frozenset((a, b))
            st = status[i][j]
            value = values[i][j]
            culprit = i != j and (a in culprit_nodes or b in culprit_nodes or key in culprit_pairs)
            text = ("·" if st == "self" else "✘" if st == "failed" else
                    format(value, fmt) if _number(value) else "–")
            title = (f"{a} ↔ {b}: " + (failures.get(key, "failed") if st == "failed" else
                                        f"{format(value, fmt)} {unit}" if _number(value) else st)) if i != j else a
            cells.append({"self": st == "self", "failed": st == "failed", "missing": st not in ("ok", "failed", "self"),
                          "text": text, "shade": shades[i][j], "culprit": culprit, "title": title})
        rows.append({"node": a, "culprit": a in culprit_nodes, "cells": cells})
    return {"title": title, "unit": unit, "nodes": list(nodes),
            "header": [{"node": n, "culprit": n in culprit_nodes} for n in nodes], "rows": rows}


def _common(result: Mapping[str, Any], ev: Mapping[str, Any], culprits: Mapping[str, Any]) -> dict[str, Any]:
    """What the view shows above the maps or rows: the verdict, the coverage, the culprits, the thresholds."""
    return {"status": result.get("status"), "summary": result.get("summary"),
            "coverage": (ev.get("coverage") or {}).get("text", ""),
            "culprit_nodes": sorted(str(n) for n in culprits.get("nodes") or []),
            "culprit_links": [list(p) for p in culprits.get("links") or []],
            "failed_links": [list(p) for p in culprits.get("failed") or []],
            "unresolved": [list(p) for p in culprits.get("unresolved") or []],
            "thresholds": ev.get("thresholds") or {}, "worst": ev.get("worst") or []}


def _maps(ev: Mapping[str, Any], culprits: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The two heat maps of the matrix: p50 latency (ms) and busbw (GB/s)."""
    m = ev["matrix"]
    nodes = [str(n) for n in m.get("nodes") or []]
    culprit_nodes = {str(n) for n in culprits.get("nodes") or []}
    culprit_pairs = {frozenset(map(str, p)) for p in (culprits.get("links") or []) + (culprits.get("failed") or [])}
    failures = {frozenset((p.get("a"), p.get("b"))): str(p.get("failure") or "failed")
                for p in ev.get("pairs") or [] if isinstance(p, Mapping) and p.get("status") == "failed"}
    size = ev.get("busbw_bytes")
    latency = [[None if not _number(v) else v / 1000.0 for v in row] for row in m.get("latency_us") or []]
    return [
        _map("p50 latency of a 4 KiB all_reduce", "ms", nodes, latency, m["status"], ".3g", True,
             culprit_nodes, culprit_pairs, failures),
        _map(f"bus bandwidth at {size} bytes (best iteration)", "GB/s", nodes, m.get("busbw_gbps") or [], m["status"],
             ".3g", False, culprit_nodes, culprit_pairs, failures),
    ]


def pairs_view(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The heat maps of the document's pair matrix, or None when it has none."""
    result = _result(doc)
    if result is None:
        return None
    ev = result.get("evidence") or {}
    culprits = ev.get("culprits") or {}
    common = _common(result, ev, culprits)
    if not isinstance(ev.get("matrix"), Mapping):   # a large cluster: the suspects' rows instead of the heat maps
        return {**common, "maps": [], "rows": _rows(ev)}
    return {**common, "maps": _maps(ev, culprits), "rows": None}
