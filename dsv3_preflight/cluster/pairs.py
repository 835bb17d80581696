"""``--probe=pairs``: every pair of nodes, in rounds of disjoint pairs, each round in parallel through Ray.

The runner only schedules and records: the round-robin schedule (``collective.schedule``), one task pinned
to each node of the round's pairs running the preflight with the check ``dist.pairs`` and the node's part
of its pair in ``$DSV3_PREFLIGHT_PAIR``; there the probe ``collective_pairs`` runs a 2-rank process group
with the partner on the pair's own port under a hard per-pair timeout and returns the measurement as a
fact. The driver appends each round's measurements to the node's one ``collective_pairs`` fact; the
registered cluster check ``dist.pairs`` judges the whole matrix. Wall time ≈ rounds × (per-pair timeout
at worst) + start-up; a round that no longer fits before the run's deadline is not started (its pairs
are reported as not measured).
"""
from __future__ import annotations

import json
import time
from typing import Any, Callable, Mapping, Sequence

from ..collective.schedule import pair_port, round_robin, sample_rounds, total_pairs
from ..engine import error_result
from ..result import Actor, Result
from .dispatch import STARTUP_ALLOWANCE_S, run_pinned, startup_allowance
from .nodes import NodeInfo

PAIRS_CHECK = "dist.pairs"
PAIR_ENV = "DSV3_PREFLIGHT_PAIR"          # read by dsv3_preflight.collective.probes.pairs
PAIRS_FACT = "collective_pairs"
NODE_RUN_CHECK = "cluster.node_run"
#: seconds a round's tasks need beyond the pair's own timeout: start, load the registry, send the facts back
ROUND_MARGIN_S = 15.0
#: the first port of the pairs: MASTER_PORT + this
PORT_OFFSET = 1


def plan(ranked: Sequence[NodeInfo], sample: int | None) -> list[list[tuple[NodeInfo, NodeInfo]]]:
    """The rounds of node pairs (the lower node rank first: it hosts the pair's store)."""
    rounds = sample_rounds(round_robin(len(ranked)), sample)
    return [[(ranked[a], ranked[b]) for a, b in r] for r in rounds]


def run_pairs(ranked: Sequence[NodeInfo], profile: Any, deadline: float, node_facts: Mapping[str, dict[str, Any]],
              payload: Callable[..., dict[str, Any]], say: Any, sample: int | None = None
              ) -> tuple[list[Result], dict[str, Any]]:
    """Run the rounds; (ERROR results of node tasks that failed, what the run did for the document).

    ``node_facts[name]["facts"]["collective_pairs"]`` receives every measurement of the node."""
    started = time.monotonic()
    n = len(ranked)
    rounds = plan(ranked, sample)
    names = [node.name for node in ranked]
    planned = {name: [] for name in names}
    for r in rounds:
        for a, b in r:
            planned[a.name].append([a.name, b.name])
            planned[b.name].append([a.name, b.name])
    base = profile.master_port + PORT_OFFSET
    info: dict[str, Any] = {"kind": "pairs", "nodes": n, "pairs_total": total_pairs(n),
                            "pairs_planned": sum(len(r) for r in rounds), "rounds_planned": len(rounds),
                            "sample": sample, "per_pair_timeout_s": float(profile.pairs_timeout),
                            "startup_allowance_s": STARTUP_ALLOWANCE_S,
                            "iters": profile.pairs_iters, "busbw_bytes": profile.pairs_busbw_bytes,
                            "ports": f"{base}..{base + (n + 1) // 2 * 2 - 1}", "check": PAIRS_CHECK, "rounds": []}
    say.say(f"--probe=pairs: {info['pairs_planned']} of {info['pairs_total']} pairs of {n} nodes in {len(rounds)} "
            f"round(s), up to {profile.pairs_timeout:g} s per pair, {profile.backend}")
    collected: dict[str, dict[str, Any]] = {}
    errors: list[Result] = []
    for index, pairs in enumerate(rounds):
        left = deadline - time.monotonic() - ROUND_MARGIN_S - 5.0
        if left < min(float(profile.pairs_timeout), 5.0):
            say.say(f"pairs round {index + 1}/{len(rounds)}: not started, the run's timeout is near "
                    f"({len(rounds) - index} round(s) left unmeasured)")
            info["rounds"].append({"round": index + 1, "started": False, "pairs": [[a.name, b.name] for a, b in pairs]})
            continue
        timeout_s = min(float(profile.pairs_timeout), left)
        startup_s = startup_allowance(timeout_s, left)
        params: dict[str, dict[str, Any]] = {}
        for slot, (a, b) in enumerate(pairs):
            common = {"round": index + 1, "rounds": len(rounds), "pair": [a.name, b.name],
                      "addrs": {a.name: a.ip, b.name: b.ip}, "port": pair_port(base, index, slot, n),
                      "backend": profile.backend, "timeout_s": timeout_s, "startup_s": startup_s,
                      "iters": profile.pairs_iters,
                      "busbw_bytes": profile.pairs_busbw_bytes, "nodes": names, "sample": sample}
            params[a.node_id] = {**common, "role": 0, "planned": planned[a.name]}
            params[b.node_id] = {**common, "role": 1, "planned": planned[b.name]}
        members = [node for a, b in pairs for node in (a, b)]
        say.say(f"pairs round {index + 1}/{len(rounds)}: " + ", ".join(f"{a.name}↔{b.name}" for a, b in pairs))
        t0 = time.monotonic()
        reports = run_pinned(members, lambda node: payload(node, [PAIRS_CHECK], {PAIR_ENV: json.dumps(params[node.node_id])}),
                             min(deadline, t0 + timeout_s + startup_s + ROUND_MARGIN_S),
                             task_label=f"pairs round {index + 1}")
        for node in members:
            report = reports[node.node_id]
            fact = None if report.value is None else (report.value["entry"].get("facts") or {}).get(PAIRS_FACT)
            if fact is None or not fact.get("requested"):
                why = report.error if report.value is None else \
                    (report.value["entry"].get("fact_errors") or {}).get(PAIRS_FACT, "the node returned no measurement")
                errors.append(error_result(NODE_RUN_CHECK, node.name, f"pairs round {index + 1}: {why}",
                                           {"kind": report.kind, "round": index + 1, "node_id": node.node_id, "ip": node.ip},
                                           f"ray status   # is {node.name} ({node.ip}) alive? then re-run with --probe=pairs",
                                           duration_s=report.elapsed_s, actor=Actor.NODE))
                continue
            mine = collected.setdefault(node.name, {**{k: v for k, v in fact.items() if k != "pairs"}, "pairs": []})
            mine["pairs"] += fact.get("pairs") or []
        elapsed = time.monotonic() - t0
        info["rounds"].append({"round": index + 1, "started": True, "elapsed_s": round(elapsed, 3),
                               "pairs": [[a.name, b.name] for a, b in pairs]})
        say.say(f"pairs round {index + 1}/{len(rounds)} done in {elapsed:.1f} s")
    for name, fact in collected.items():
        entry = node_facts.setdefault(name, {"facts": {}, "fact_errors": {}})
        entry.setdefault("facts", {})[PAIRS_FACT] = fact
        (entry.get("fact_errors") or {}).pop(PAIRS_FACT, None)
    info["elapsed_s"] = round(time.monotonic() - started, 3)
    return errors, info
