"""Which node or link is it: the pair matrix of `--probe=pairs` and the localisation rules. Pure functions.

From every node's `collective_pairs` fact (one measurement per pair it took part in) :func:`pair_records`
builds one record per planned pair: ``ok`` (p50 latency of the small all_reduce; busbw at the configured
size, nccl-tests' formula, from the best iteration and from the average), ``failed`` (timed out or could not connect: which side, and why) or ``untested`` (neither side
reported). :func:`localise` then names the culprits, with robust statistics (a ratio to a median):

- a pair is *slow* when its p50 latency exceeds ``latency_ratio`` times, or its busbw falls below
  ``busbw_ratio`` times, the median of the **reference pairs**: the healthy pairs that share no node with
  it (so a bad node cannot pull its own reference; with 3 nodes that is the one other pair);
- a **bad node** has at least two tested partners and every one of its pairs is slow against the pairs
  without it, or failed: it is the outlier with every partner (with at least two outliers of one kind, so
  one failed pair plus one noisy measurement is a failed link, not a bad node);
- a **bad link** is a slow or failed pair between two nodes that are not bad themselves, judged against
  the other pairs between good nodes.

A uniformly slow fabric has no outlier: that is what ``min_busbw_gbps`` and the gang probe judge.
"""
from __future__ import annotations

import bisect
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .combine import combine

OK, FAILED, UNTESTED = "ok", "failed", "untested"
#: a pair whose side(s) had not finished starting (Python, importing torch) when its time ran out: the link between
#: the two was not measured, so it is neither ok nor failed (an overloaded node is not a bad link)
NOT_STARTED = "not started"


@dataclass(frozen=True)
class Thresholds:
    latency_ratio: float = 3.0
    busbw_ratio: float = 0.5


@dataclass
class PairRecord:
    """One planned pair: ``a`` hosts the pair's store (the lower node rank), ``b`` connects to it."""

    a: str
    b: str
    round: int | None = None
    status: str = UNTESTED
    latency_us: float | None = None
    busbw_gbps: float | None = None        # the best iteration's (what the path allows)
    busbw_avg_gbps: float | None = None    # nccl-tests' (the average iteration's)
    size_bytes: int | None = None
    store: str | None = None
    failure: str | None = None
    could_not_connect: str | None = None
    timed_out: bool = False
    kinds: list[str] = field(default_factory=list)
    sides: list[str] = field(default_factory=list)   # the nodes whose measurement came back
    slow_start: list[str] = field(default_factory=list)   # NOT_STARTED: the nodes whose rank had not started
    latency_ratio: float | None = None
    busbw_ratio: float | None = None
    latency_ref_us: float | None = None    # the medians it was compared with
    busbw_ref_gbps: float | None = None
    slow: bool = False
    # a pair that connected and answered, then ran out of time in a later phase (a slow link, not a dead one): the
    # figures of the phases it finished are kept, and this says what stopped it
    cut_short: str | None = None
    busbw_iters: int | None = None         # the timed iterations the busbw comes from (fewer than asked: time-limited)
    busbw_bound: bool = False              # no op finished: busbw_gbps is an upper bound (size / the time waited)

    @property
    def key(self) -> tuple[str, str]:
        return (self.a, self.b)

    def involves(self, node: str) -> bool:
        return node in (self.a, self.b)

    def label(self) -> str:
        return f"{self.a}↔{self.b}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- from facts to records --------------------------------------------------------------------------------------

def requested_facts(facts: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {node: f for node, f in facts.items() if isinstance(f, Mapping) and f.get("requested")}


def schedule_of(facts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The schedule the nodes were given: node order, planned pairs, rounds, sample, kind ("fast" or "all", from the
    driver's note in each node's fact; "all" when absent) and the fast schedule's round limit (the union over nodes)."""
    nodes: dict[str, None] = {}
    planned: dict[tuple[str, str], None] = {}
    rounds, sample, kind, max_rounds = 0, None, None, None
    for f in facts.values():
        for n in f.get("nodes") or []:
            nodes.setdefault(n, None)
        for a, b in f.get("planned") or []:
            planned.setdefault((a, b), None)
        rounds = max(rounds, int(f.get("rounds") or 0))
        sample = f.get("sample") if f.get("sample") is not None else sample
        note = f.get("schedule") if isinstance(f.get("schedule"), Mapping) else {}
        kind = note.get("kind") or kind
        max_rounds = note.get("max_rounds") or max_rounds
    return {"nodes": list(nodes), "planned": list(planned), "rounds": rounds, "sample": sample,
            "kind": kind or "all", "max_rounds": max_rounds}


def _latency_us(outcomes: Sequence[Mapping[str, Any]]) -> float | None:
    values = [r["timings"].get("steady_s") for o in outcomes for r in o.get("ranks", [])
              if (r.get("timings") or {}).get("steady_s") is not None]
    return round(max(values) * 1e6, 3) if values else None


def _busbw(outcomes: Sequence[Mapping[str, Any]]) -> tuple[float | None, float | None, int | None]:
    """(busbw of the pair's best iteration, nccl-tests' busbw of the average iteration, size).

    The best iteration measures the path; on a busy host the average mostly measures who else had the CPU
    (6 lab nodes on 2 cores: the average spread 6×, the best 2.3× across healthy pairs), while a shaped or
    lossy path bounds every iteration, the best one too."""
    for o in outcomes:
        for row in o.get("sweep") or []:
            best = row.get("busbw_best_gbps") or row["busbw_gbps"]
            return float(best), float(row["busbw_gbps"]), int(row["size_bytes"])
    return None, None, None


def _sweep_row(outcomes: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((row for o in outcomes for row in o.get("sweep") or []), None)


def _bytes_done(outcomes: Sequence[Mapping[str, Any]]) -> tuple[float | None, int | None, int, bool]:
    """(busbw, size, ops, bound) from the bandwidth phase's progress when no row came back (a rank stopped in it):
    the ops both sides finished over the time they took; with none finished, the size over the time waited, an
    upper bound. For 2 ranks busbw = algbw = size / time per op."""
    progress = [r.get("sweep_progress") for o in outcomes for r in o.get("ranks", []) if r.get("sweep_progress")]
    if not progress:
        return None, None, 0, False
    size = int(progress[0]["size_bytes"])
    ops = min(int(p.get("ops") or 0) for p in progress)
    if ops > 0:
        seconds = max(float(p["seconds"]) * ops / max(int(p["ops"]), 1) for p in progress)
        return (round(size * ops / seconds / 1e9, 12) if seconds > 0 else None), size, ops, False
    waited = max(float(p.get("waited_s") or 0.0) for p in progress)
    return (round(size / waited / 1e9, 12) if waited > 0 else None), size, 0, True


def _within(sides: Mapping[int, Mapping[str, Any]]) -> str:
    """The pair's timeout as the sides recorded it, as text: ' within 30 s' ('' when none did)."""
    timeout_s = next((m.get("timeout_s") for m in sides.values() if m.get("timeout_s")), None)
    return f" within {timeout_s:g} s" if timeout_s else ""


def _failure(a: str, b: str, sides: Mapping[int, Mapping[str, Any]], combined: Mapping[str, Any],
             store: str | None) -> tuple[str, str | None, bool]:
    """(what happened, the node that could not connect or None, timed out) for a pair that did not finish."""
    ranks = {int(r["rank"]): r for m in sides.values() for r in (m.get("outcome") or {}).get("ranks", [])}
    never = set(combined.get("never_joined") or [])
    timed_out = any("hard deadline" in (r.get("killed") or "") or (r.get("error") or {}).get("exc_type") in
                    ("DeadlineExceeded", "TimeoutError", "DistStoreError") for r in ranks.values()) or \
        any(f["kind"] in ("store_connect_timeout", "store_wait_timeout", "collective_timeout", "ranks_missing")
            for f in combined.get("findings") or [])
    within = _within(sides)
    cause = next((f["cause"] for f in combined.get("findings") or []
                  if f["kind"] in ("store_connect_timeout", "store_connect_refused", "store_port_in_use", "no_route",
                                   "gloo_full_mesh_connect", "master_unresolvable")), None)
    why = f" ({cause})" if cause else ""
    if 0 not in sides:
        return (f"{a}'s side never ran (its task failed), so {b} found no rendezvous at {store}{why}", a, timed_out)
    if 1 not in sides:
        return (f"{b}'s side never ran (its task failed); {a} waited for it at {store}{within}", b, timed_out)
    if 1 in never and 0 not in never:
        return (f"{b} could not connect to {a}'s rendezvous at {store}{within}; {a} waited for it{why}", b, timed_out)
    if 0 in never and 1 not in never:
        return (f"{a} could not reach its own rendezvous at {store}{within}{why}", a, timed_out)
    if 0 in never and 1 in never:
        return (f"neither {a} nor {b} reached the rendezvous at {store}{within}{why}", None, timed_out)
    stuck = combined.get("stuck_labels") or {}
    if stuck:
        phase = min(stuck.values())
        if all(v == "all ranks joined the store" for v in stuck.values()):
            return (f"{a} and {b} met in the store at {store} but could not open their own connections to each other"
                    f"{within} (ports other than the store's blocked between them){why}", None, timed_out)
        return (f"the all_reduce between {a} and {b} stalled (last phase: {phase}){within}", None, timed_out)
    return (f"the all_reduce between {a} and {b} returned a wrong sum", None, False)


def pair_records(facts: Mapping[str, Any]) -> tuple[dict[str, Any], list[PairRecord]]:
    """(schedule, one record per planned pair in round order) from every node's `collective_pairs` fact."""
    requested = requested_facts(facts)
    schedule = schedule_of(requested)
    by_pair: dict[tuple[str, str], dict[int, Mapping[str, Any]]] = {}
    rounds: dict[tuple[str, str], int] = {}
    for f in requested.values():
        for m in f.get("pairs") or []:
            key = (m["pair"][0], m["pair"][1])
            by_pair.setdefault(key, {})[int(m["role"])] = m
            rounds[key] = m.get("round")
    records = []
    planned = set(schedule["planned"])
    for key in schedule["planned"] + [k for k in by_pair if k not in planned]:
        a, b = key
        sides = by_pair.get(key, {})
        rec = PairRecord(a, b, round=rounds.get(key))
        records.append(rec)
        if not sides:
            continue
        rec.sides = [m["me"] for _, m in sorted(sides.items())]
        rec.store = next(iter(sides.values())).get("store")
        outcomes = [m["outcome"] for _, m in sorted(sides.items())]
        combined = combine(outcomes, 2, assume_absent=True)
        rec.kinds = [f["kind"] for f in combined.get("findings") or []]
        # every phase's figures are kept, whatever a later phase did
        rec.latency_us = _latency_us(outcomes)
        rec.busbw_gbps, rec.busbw_avg_gbps, rec.size_bytes = _busbw(outcomes)
        row = _sweep_row(outcomes)
        if row is not None:
            rec.busbw_iters = int(row.get("iters") or 0) or None
        else:
            rec.busbw_gbps, rec.size_bytes, ops, rec.busbw_bound = _bytes_done(outcomes)
            rec.busbw_iters = ops or None
        if combined["ok"]:
            rec.status = OK
            if row is not None and row.get("time_limited"):
                rec.cut_short = (f"the bandwidth phase was bounded by time: {row.get('iters')} of "
                                 f"{row.get('iters_asked')} iterations{' (warm-up only)' if row.get('from_warmup') else ''}")
            if rec.latency_us is None or rec.busbw_gbps is None:
                rec.status = FAILED
                rec.failure = f"the pair {a}↔{b} finished without its timings"
        elif slow := _slow_start(a, b, sides):
            rec.status, rec.slow_start, rec.timed_out = NOT_STARTED, slow, True
            rec.failure = _slow_start_text(a, b, slow, sides)
        else:
            failure, could_not, timed_out = _failure(a, b, sides, combined, rec.store)
            if _answered(outcomes, len(sides)) and timed_out:
                # it connected and answered (its latency was measured), then ran out of time: slow, not dead
                rec.status, rec.cut_short, rec.timed_out = OK, failure, True
                if rec.busbw_gbps is None:   # not one byte of the bandwidth phase: nothing to say it is slow or fast
                    rec.status, rec.failure = FAILED, failure
            else:
                rec.status = FAILED
                rec.failure, rec.could_not_connect, rec.timed_out = failure, could_not, timed_out
    return schedule, records


def _answered(outcomes: Sequence[Mapping[str, Any]], sides: int) -> bool:
    """Both sides ran and measured the latency phase (steady-state all_reduces, correct sums): the pair connected
    and answers."""
    ranks = [r for o in outcomes for r in o.get("ranks", [])]
    return sides == 2 and len(ranks) >= 2 and all(
        (r.get("timings") or {}).get("steady_s") is not None and r.get("sum_ok") is not False for r in ranks)


def _slow_start(a: str, b: str, sides: Mapping[int, Mapping[str, Any]]) -> list[str]:
    """The pair's nodes whose rank was still starting (Python, importing torch) when it was stopped at its deadline
    or gave up on it: the pair's time ran out before it could measure the link."""
    slow = []
    for m in sides.values():
        for r in (m.get("outcome") or {}).get("ranks", []):
            out_of_time = "hard deadline" in (r.get("killed") or "") or \
                (r.get("error") or {}).get("exc_type") == "DeadlineExceeded"   # its watchdog: no progress in time
            if r.get("last_phase") in (None, "started") and out_of_time:   # not a crash at start: still starting
                slow.append((a, b)[int(r["rank"])])
    return sorted(set(slow), key=(a, b).index)


def _slow_start_text(a: str, b: str, slow: Sequence[str], sides: Mapping[int, Mapping[str, Any]]) -> str:
    startup_s = next((m.get("startup_s") for m in sides.values() if m.get("startup_s")), None)
    limit = _within(sides) + (f" after a {startup_s:g} s start-up allowance" if startup_s else "")
    who = " and ".join(slow)
    return (f"{who} had not finished starting (Python, importing torch){limit}: the link between {a} and {b} was not "
            f"measured ({'that node was' if len(slow) == 1 else 'those nodes were'} overloaded or slow to start)")


# -- statistics and localisation -----------------------------------------------------------------------------

def _median(values: Iterable[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _mad(values: Iterable[float]) -> float | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    m = statistics.median(values)
    return statistics.median(abs(v - m) for v in values)


def summary_stats(records: Sequence[PairRecord]) -> dict[str, Any]:
    ok = [r for r in records if r.status == OK]
    lat, bw = [r.latency_us for r in ok], [r.busbw_gbps for r in ok]
    return {"pairs_ok": len(ok), "latency_us_median": _median(lat), "latency_us_mad": _mad(lat),
            "busbw_gbps_median": _median(bw), "busbw_gbps_mad": _mad(bw)}


def _ratios(rec: PairRecord, lat: float | None, bw: float | None, th: Thresholds) -> bool:
    rec.latency_ref_us, rec.busbw_ref_gbps = lat, bw   # the medians it was compared with, kept for the summary
    rec.latency_ratio = round(rec.latency_us / lat, 3) if lat and rec.latency_us is not None else None
    rec.busbw_ratio = round(rec.busbw_gbps / bw, 4) if bw and rec.busbw_gbps is not None else None
    return bool((rec.latency_ratio is not None and rec.latency_ratio > th.latency_ratio)
                or (rec.busbw_ratio is not None and rec.busbw_ratio < th.busbw_ratio))


def compare(rec: PairRecord, reference: Sequence[PairRecord], th: Thresholds) -> bool | None:
    """Is ``rec`` slow against the median of ``reference``? Sets its ratios; None when there is no reference."""
    ref = [r for r in reference if r.status == OK and r.key != rec.key]
    if rec.status != OK or not ref:
        return None
    return _ratios(rec, _median(r.latency_us for r in ref), _median(r.busbw_gbps for r in ref), th)


def _kth(values: Sequence[float], removed: Sequence[float], k: int) -> float:
    """The k-th smallest (from 0) of the multiset ``values`` less ``removed`` (both sorted; ``removed`` a part of it)."""
    lo, hi = 0, len(values) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        v = values[mid]
        if bisect.bisect_right(values, v) - bisect.bisect_right(removed, v) >= k + 1:
            hi = mid
        else:
            lo = mid + 1
    return values[lo]


class Reference:
    """The median of the healthy pairs, less a few: the reference of a pair or a node without scanning every pair
    again (O(log² P) per question, after an O(P log P) index), so judging P pairs costs O(P log² P), not O(P²)."""

    def __init__(self, records: Iterable[PairRecord]):
        self.ok = [r for r in records if r.status == OK]
        self.lat = sorted(r.latency_us for r in self.ok if r.latency_us is not None)
        self.bw = sorted(r.busbw_gbps for r in self.ok if r.busbw_gbps is not None)
        self.by_node: dict[str, list[PairRecord]] = {}
        for r in self.ok:
            self.by_node.setdefault(r.a, []).append(r)
            self.by_node.setdefault(r.b, []).append(r)

    @staticmethod
    def _median(values: Sequence[float], removed: Sequence[float]) -> float | None:
        m = len(values) - len(removed)
        if m <= 0:
            return None
        lo, hi = _kth(values, removed, (m - 1) // 2), _kth(values, removed, m // 2)
        return lo if lo == hi else (lo + hi) / 2

    def without(self, excluded: Iterable[PairRecord]) -> tuple[float | None, float | None, int]:
        """(median p50 latency, median busbw, how many pairs) of the healthy pairs other than ``excluded``."""
        gone = {id(r): r for r in excluded if r.status == OK}
        lat = sorted(r.latency_us for r in gone.values() if r.latency_us is not None)
        bw = sorted(r.busbw_gbps for r in gone.values() if r.busbw_gbps is not None)
        return self._median(self.lat, lat), self._median(self.bw, bw), len(self.ok) - len(gone)

    def without_nodes(self, *nodes: str) -> tuple[float | None, float | None, int]:
        """The reference of the pairs that share no node with ``nodes``."""
        return self.without(r for n in nodes for r in self.by_node.get(n, ()))

    def slow(self, rec: PairRecord, th: Thresholds, *, without: Iterable[PairRecord]) -> bool | None:
        """``compare`` against this index less ``without``: sets the ratios; None when there is no reference."""
        if rec.status != OK:
            return None
        lat, bw, count = self.without(without)
        if count <= 0:
            return None
        return _ratios(rec, lat, bw, th)


@dataclass
class Localisation:
    bad_nodes: dict[str, list[PairRecord]] = field(default_factory=dict)   # node -> its pairs (all outliers)
    slow_links: list[PairRecord] = field(default_factory=list)
    failed_links: list[PairRecord] = field(default_factory=list)
    judged_nodes: list[str] = field(default_factory=list)               # nodes with 2+ tested partners
    #: pairs that are slow or failed where a node at either end was not proven good by another pair (a schedule that
    #: stopped before it could tell the node from the link)
    unresolved: list[PairRecord] = field(default_factory=list)

    def culprits(self) -> dict[str, Any]:
        out = {"nodes": sorted(self.bad_nodes), "links": [list(r.key) for r in self.slow_links],
               "failed": [list(r.key) for r in self.failed_links]}
        if self.unresolved:  # only the fast schedule, stopped before it told the node from the link
            out["unresolved"] = [list(r.key) for r in self.unresolved]
        return out


def _by_node(records: Iterable[PairRecord]) -> dict[str, list[PairRecord]]:
    out: dict[str, list[PairRecord]] = {}
    for r in records:
        out.setdefault(r.a, []).append(r)
        out.setdefault(r.b, []).append(r)
    return out


def localise(nodes: Sequence[str], records: Sequence[PairRecord], th: Thresholds, *,
             resolve_links: bool = False) -> Localisation:
    """Name the bad nodes, then the bad links between the others (see the module docstring).

    Linear in the pairs tested (times a log²): each node looks at its own pairs only, and the references come from
    one sorted index. ``resolve_links`` (the fast schedule, where most nodes meet one partner): a slow or failed pair
    is a bad link only when both its nodes were proven good by another pair; otherwise it is ``unresolved``."""
    tested = [r for r in records if r.status in (OK, FAILED)]
    out = Localisation()
    _bad_nodes(nodes, tested, th, out)
    bad = set(out.bad_nodes)
    good = [r for r in tested if r.a not in bad and r.b not in bad]
    _bad_links(good, th, out, resolve_links)
    for recs in out.bad_nodes.values():
        for rec in recs:
            rec.slow = True
    return out


def _bad_nodes(nodes: Sequence[str], tested: Sequence[PairRecord], th: Thresholds, out: Localisation) -> None:
    """The nodes that are the outlier with every partner, by at least two outliers of one kind: one failed pair and
    one noisy measurement never condemn a node (that is a failed link, and a pair within the noise)."""
    mine_of = _by_node(tested)
    ref = Reference(tested)
    for node in nodes:
        mine = mine_of.get(node) or []
        if len(mine) < 2:
            continue
        out.judged_nodes.append(node)
        failed = sum(1 for r in mine if r.status == FAILED)
        slow = sum(1 for r in mine if r.status == OK and ref.slow(r, th, without=ref.by_node.get(node, ())))
        if failed + slow == len(mine) and (failed >= 2 or slow >= 2):
            out.bad_nodes[node] = mine


def _bad_links(good: Sequence[PairRecord], th: Thresholds, out: Localisation, resolve_links: bool) -> None:
    """Among the pairs of nodes not bad: the slow links (against the other pairs), the failed links, and with
    ``resolve_links`` those whose nodes are not both proven good by another pair (unresolved)."""
    good_ref = Reference(good)
    for rec in good:
        if rec.status == OK:
            rec.slow = bool(good_ref.slow(rec, th, without=(rec,)))
    cleared = {n for r in good if r.status == OK and not r.slow for n in (r.a, r.b)} if resolve_links else set()
    for rec in good:
        if rec.status != FAILED and not rec.slow:
            continue
        if resolve_links and not (rec.a in cleared and rec.b in cleared):
            out.unresolved.append(rec)
        elif rec.status == FAILED:
            out.failed_links.append(rec)
        else:
            out.slow_links.append(rec)


def node_states(nodes: Sequence[str], records: Sequence[PairRecord], th: Thresholds) -> dict[str, str]:
    """What the pairs so far say of each node, for the fast schedule's next round and the coverage:

    - ``good``: in a healthy pair that is not slow against the pairs sharing no node with it (a bad node is slow
      with every partner, so one such pair proves the node);
    - ``bad``: not good, and an outlier (slow or failed) with at least two partners of one kind;
    - ``untested``: in no pair that ran; ``suspect``: the rest (only slow, failed or unmeasured pairs so far).

    Linear in the pairs (times a log²)."""
    ref = Reference(records)
    good: set[str] = set()
    outliers: dict[str, dict[str, int]] = {}
    seen: set[str] = set()
    for rec in records:
        if rec.status == UNTESTED:
            continue
        seen.update((rec.a, rec.b))
        verdict = None
        if rec.status == OK:
            verdict = ref.slow(rec, th, without=[*ref.by_node.get(rec.a, ()), *ref.by_node.get(rec.b, ())])
            if verdict is False:
                good.update((rec.a, rec.b))
        if rec.status == FAILED or verdict:
            kind = "failed" if rec.status == FAILED else "slow"
            for n in (rec.a, rec.b):
                outliers.setdefault(n, {"failed": 0, "slow": 0})[kind] += 1
    states = {}
    for n in nodes:
        if n in good:
            states[n] = "good"
        elif max((outliers.get(n) or {"": 0}).values()) >= 2:
            states[n] = "bad"
        else:
            states[n] = "suspect" if n in seen else "untested"
    return states


def partners_met(records: Iterable[PairRecord]) -> dict[str, set[str]]:
    """{node: the partners it has been paired with} (any outcome)."""
    met: dict[str, set[str]] = {}
    for r in records:
        met.setdefault(r.a, set()).add(r.b)
        met.setdefault(r.b, set()).add(r.a)
    return met


def matrix(nodes: Sequence[str], records: Sequence[PairRecord]) -> dict[str, Any]:
    """Node × node tables (symmetric; None on the diagonal and for pairs not measured)."""
    index = {n: i for i, n in enumerate(nodes)}
    size = len(nodes)
    lat = [[None] * size for _ in range(size)]
    bw = [[None] * size for _ in range(size)]
    status = [["self" if i == j else "not planned" for j in range(size)] for i in range(size)]
    for r in records:
        if r.a not in index or r.b not in index:
            continue
        i, j = index[r.a], index[r.b]
        for x, y in ((i, j), (j, i)):
            lat[x][y], bw[x][y], status[x][y] = r.latency_us, r.busbw_gbps, r.status
    return {"nodes": list(nodes), "latency_us": lat, "busbw_gbps": bw, "status": status}
