"""Judging the per-node outcomes of the probe together: who never joined, who got stuck where, and why."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .phases import PHASES

PHASE_LABEL = {
    None: "never started (no status written)",
    "started": "process started",
    "imported": "torch imported",
    "store_connected": "connected to the rendezvous store",
    "all_joined": "all ranks joined the store",
    "pg_up": "process group up",
    "first_collective": "first all_reduce done",
    "steady_state": "steady-state all_reduces done",
    "sweep_done": "bandwidth sweep done",
    "done": "done",
}


def _phase_index(phase: str | None) -> int:
    return PHASES.index(phase) if phase in PHASES else -1


def _s(value: float | None) -> str:
    return "?" if value is None else f"{value:.3f} s"


def _ranges(ranks: Iterable[int]) -> str:
    ranks = sorted(set(ranks))
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return ",".join(parts)


Ranks = dict[int, Mapping[str, Any]]
TIMING_KEYS = ("process_start_s", "import_s", "store_connect_s", "rendezvous_s", "init_s", "first_collective_s",
               "steady_s", "total_s")


def _by_rank(outcomes: list[Mapping[str, Any]]) -> Ranks:
    ranks: Ranks = {}
    for outcome in outcomes:
        for r in outcome.get("ranks", []):
            ranks[int(r["rank"])] = r
    return ranks


def _never_joined(ranks: Ranks, not_run: list[int], assume_absent: bool) -> list[int]:
    """Ranks no outcome covers (when absent means never joined), seen missing from the store by any rank, or that
    never connected to it."""
    reported_missing: set[int] = set()
    for r in ranks.values():
        reported_missing.update(int(x) for x in (r.get("never_joined") or []))
    early = {k for k, r in ranks.items() if _phase_index(r.get("last_phase")) < _phase_index("store_connected")}
    return sorted((set(not_run) if assume_absent else set()) | reported_missing | early)


def _findings(ranks: Ranks) -> dict[str, dict[str, Any]]:
    """Each decoded cause once, with the ranks that printed it."""
    findings: dict[str, dict[str, Any]] = {}
    for k, r in sorted(ranks.items()):
        for f in r.get("findings") or []:
            entry = findings.setdefault(f["kind"], {**f, "ranks": []})
            entry["ranks"].append(k)
    return findings


def _timings(ranks: Ranks) -> dict[str, float | None]:
    """Each timing's maximum over the ranks."""
    def top(key: str) -> float | None:
        vals = [r["timings"][key] for r in ranks.values() if r.get("timings") and r["timings"].get(key) is not None]
        return round(max(vals), 6) if vals else None

    return {key: top(key) for key in TIMING_KEYS}


def _rank_map(ranks: Ranks) -> list[dict[str, Any]]:
    """(rank, host, pci_bus_id, device) as the ranks observed them, else as each rank said of itself."""
    observed = next((r.get("rank_map") for r in ranks.values() if r.get("rank_map")), None) or {}
    rows = []
    for k in sorted(set(ranks) | {int(x) for x in observed}):
        row = observed.get(str(k)) or {}
        r = ranks.get(k, {})
        rows.append({"rank": k, "host": row.get("host") or r.get("host"),
                     "pci_bus_id": row.get("pci_bus_id") or r.get("pci_bus_id"),
                     "device": row.get("device") or r.get("device")})
    return rows


def _interfaces(ranks: Ranks) -> dict[str, list]:
    interfaces: dict[str, list] = {}
    for r in ranks.values():
        for entry in r.get("nccl_interfaces") or []:
            lst = interfaces.setdefault(r.get("host") or "?", [])
            if entry not in lst:
                lst.append(entry)
    return interfaces


def _summary(expected_world: int, never_joined: list[int], wrong_sum: list[int], stuck: Mapping[str, Any],
             timings: Mapping[str, float | None], findings: Mapping[str, Mapping[str, Any]], ok: bool) -> str:
    """One line: the sum and timings when all is well, else the first of: who never joined, who summed wrong, who
    stopped where; with the first telling cause."""
    if ok:
        return (f"all_reduce over {expected_world} ranks correct (sum {expected_world * (expected_world + 1) // 2}); "
                f"init {_s(timings['init_s'])}, first collective {_s(timings['first_collective_s'])}, "
                f"steady {_s(timings['steady_s'])}")
    if never_joined:
        summary = f"rank(s) {_ranges(never_joined)} of {expected_world} never joined the rendezvous"
    elif wrong_sum:
        summary = f"all_reduce returned a wrong sum on rank(s) {_ranges(wrong_sum)}"
    else:
        worst = min(stuck.items(), key=lambda kv: _phase_index(kv[1]))
        summary = (f"rank(s) {_ranges(int(k) for k in stuck)} did not finish; rank {worst[0]} stopped after: "
                   f"{PHASE_LABEL.get(worst[1], worst[1])}")
    telling = [f for f in findings.values() if f["kind"] not in ("ranks_missing", "store_wait_timeout", "peer_crashed")]
    if telling:
        summary += f" — {telling[0]['cause']}"
    return summary


def combine(outcomes: list[Mapping[str, Any]], expected_world: int, *, assume_absent: bool = True) -> dict[str, Any]:
    """The verdict data of one probe from all nodes' outcomes (those that came back).

    Returns (JSON types): ``ok``; ``summary`` (one line); ``never_joined`` (ranks no node ran or that
    never registered in the store, as seen by any rank); ``not_run`` (ranks no outcome covers);
    ``stuck`` ({rank: last phase} for ranks that did not finish); ``sum_ok``; ``findings`` (decoded
    causes with the ranks that printed them); ``timings`` (max over ranks); ``rank_map`` rows
    (rank, host, pci_bus_id) as observed; ``nccl_interfaces`` by host; ``sweep`` (rank 0's).

    ``assume_absent=False`` judges one node's view (``dsv3-preflight probe`` on one node): ranks that no
    outcome covers count as never joined only when a rank saw them missing from the store.
    """
    ranks = _by_rank(outcomes)
    not_run = sorted(set(range(expected_world)) - set(ranks))
    never_joined = _never_joined(ranks, not_run, assume_absent)
    stuck = {str(k): r.get("last_phase") for k, r in sorted(ranks.items()) if r.get("last_phase") != "done"}
    sums = [r.get("sum_ok") for r in ranks.values() if r.get("sum_ok") is not None]
    sum_ok = bool(sums) and all(sums) and len(sums) == len(ranks)
    wrong_sum = sorted(k for k, r in ranks.items() if r.get("sum_ok") is False)
    findings = _findings(ranks)
    timings = _timings(ranks)
    ok = not never_joined and not stuck and sum_ok
    return {
        "ok": ok,
        "summary": _summary(expected_world, never_joined, wrong_sum, stuck, timings, findings, ok),
        "expected_world": expected_world,
        "ranks_reported": sorted(ranks),
        "not_run": not_run,
        "never_joined": never_joined,
        "stuck": stuck,
        "stuck_labels": {k: PHASE_LABEL.get(v, v) for k, v in stuck.items()},
        "sum_ok": sum_ok,
        "wrong_sum": wrong_sum,
        "findings": list(findings.values()),
        "timings": timings,
        "rank_map": _rank_map(ranks),
        "nccl_interfaces": _interfaces(ranks),
        "sweep": next((o.get("sweep") for o in outcomes if o.get("sweep")), None),
        "deadline_hit_on_nodes": [o.get("node_rank") for o in outcomes if o.get("deadline_hit")],
    }
