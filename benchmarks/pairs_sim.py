"""Simulated pairs for the scale benchmark (and the tests of the schedule at scale): a cluster of N nodes whose
ground truth is one bad node, one bad link or nothing, and a stand-in for the driver's Ray dispatch that answers a
round's tasks with the `collective_pairs` facts the probe would have returned.

Only the measurement is simulated: each pair's side is a copy of a real one recorded by
``benchmarks/bench_pairs.py --record`` (``tests/data/collective/pairs_6nodes_healthy.json``) with the p50 latency
and the best-iteration busbw set from the ground truth, with noise. Everything above it is the project's own code:
the driver's wave loop (``cluster.pairs.run_pairs``), the schedule, the judge and the renderers.
"""
from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dsv3_preflight.cluster.dispatch import NodeReport
from dsv3_preflight.cluster.node_side import NodeAnswer
from dsv3_preflight.cluster.nodes import NodeInfo
from dsv3_preflight.cluster.pairs import PAIRS_FACT
from dsv3_preflight.wave import Wave

RECORDED = Path(__file__).resolve().parent.parent / "tests" / "data" / "collective" / "pairs_6nodes_healthy.json"
#: "link": a bad link between two nodes the fast schedule's round 1 pairs (the link a node's traffic takes to that
#: partner); "hidden_link": a bad link between two nodes round 1 does not pair, which only ``--pairs=all`` tests
CASES = ("healthy", "node", "link", "hidden_link")
#: a healthy pair: p50 latency of a 4 KiB all_reduce (µs) and busbw (GB/s) at the message size, as on a 200 Gb/s
#: RoCE fabric with nccl (order of magnitude); the noise is a uniform factor in [1/NOISE, NOISE]
LATENCY_US, BUSBW_GBPS, NOISE = 30.0, 20.0, 1.3
#: how much worse the bad node's or the bad link's pairs are (a port negotiated at a tenth of its speed)
SLOW_BUSBW, SLOW_LATENCY = 0.1, 3.0
#: the simulated time of one round: the ranks' start-up (Python, importing torch on a real node) plus the pair's
#: rendezvous and its 2 × iters collectives; the pairs of a round run at once on nodes that share no CPU
ROUND_S = 6.0


def _template() -> dict[str, Any]:
    doc = json.loads(RECORDED.read_text())
    side = next(iter(doc["collective_pairs"].values()))["pairs"][0]
    for rank in side["outcome"]["ranks"]:
        rank["log_tail"] = []
    return side


@dataclass
class SimCluster:
    """N simulated nodes; ``case``: one of CASES."""

    n: int
    case: str = "healthy"
    seed: int = 0
    rounds: int = 0
    pairs_run: int = 0
    template: dict[str, Any] = field(default_factory=_template)

    def __post_init__(self) -> None:
        rng = random.Random(self.seed * 1000 + self.n)
        self.rng = rng
        self.names = [f"node{i:03d}" for i in range(self.n)]
        self.bad_node = self.names[rng.randrange(self.n)] if self.case == "node" else None
        if self.case == "link":
            a = 2 * rng.randrange(self.n // 2)
            self.bad_link = frozenset((self.names[a], self.names[a + 1]))
        elif self.case == "hidden_link":
            while True:
                a, b = rng.sample(range(self.n), 2)
                if a // 2 != b // 2:
                    break
            self.bad_link = frozenset((self.names[a], self.names[b]))
        else:
            self.bad_link = None

    def ranked(self) -> list[NodeInfo]:
        return [NodeInfo(node_id=f"{i:056x}", ip=f"10.88.{i // 250}.{i % 250 + 2}", hostname=name, is_head=i == 0, is_driver=i == 0,
                         name=name, node_rank=i) for i, name in enumerate(self.names)]

    def truth(self) -> dict[str, Any]:
        return {"nodes": [self.bad_node] if self.bad_node else [],
                "links": [sorted(self.bad_link)] if self.bad_link else []}

    def named_right(self, culprits: Mapping[str, Any]) -> bool:
        """The judge named exactly the ground truth: the bad node, or the bad link, or nothing."""
        links = sorted(sorted(x) for x in (culprits.get("links") or []) + (culprits.get("failed") or []))
        return (sorted(culprits.get("nodes") or []) == self.truth()["nodes"] and links == self.truth()["links"]
                and not culprits.get("unresolved"))

    def measure(self, a: str, b: str) -> tuple[float, float]:
        """(p50 latency µs, best busbw GB/s) of the pair a↔b."""
        lat = LATENCY_US * self.rng.uniform(1 / NOISE, NOISE)
        bw = BUSBW_GBPS * self.rng.uniform(1 / NOISE, NOISE)
        if self.bad_node in (a, b) or (self.bad_link is not None and frozenset((a, b)) == self.bad_link):
            lat, bw = lat * SLOW_LATENCY, bw * SLOW_BUSBW
        return lat, bw

    def _side(self, params: Mapping[str, Any], lat_us: float, bw: float) -> dict[str, Any]:
        side = copy.deepcopy(self.template)
        first, second = params["pair"]
        role = int(params["role"])
        side.update({"round": params["round"], "pair": [first, second], "role": role,
                     "me": (first, second)[role], "peer": (second, first)[role], "addrs": params["addrs"],
                     "store": f"{params['addrs'][first]}:{params['port']}", "timeout_s": params["timeout_s"],
                     "startup_s": params.get("startup_s"), "iters": params["iters"], "busbw_bytes": params["busbw_bytes"]})
        outcome = side["outcome"]
        outcome["node_rank"] = role
        outcome["ranks"] = [r for r in outcome["ranks"] if int(r["rank"]) == role] or outcome["ranks"][:1]
        for r in outcome["ranks"]:
            r["rank"] = role
            r["timings"]["steady_s"] = lat_us / 1e6
            for row in r.get("sweep") or []:
                row.update(size_bytes=params["busbw_bytes"], busbw_best_gbps=bw, busbw_gbps=bw * 0.8)
        for row in outcome.get("sweep") or []:
            row.update(size_bytes=params["busbw_bytes"], busbw_best_gbps=bw, busbw_gbps=bw * 0.8)
        return side

    def dispatch(self, members: Sequence[NodeInfo], payload_for: Callable[[NodeInfo], dict[str, Any]],
                 deadline: float, *, task_label: str = "", **_: Any) -> dict[str, NodeReport]:
        """What ``run_pinned`` returns for a round, each node's fact built from its part of the pair (its wave)."""
        self.rounds += 1
        by_pair: dict[tuple[str, str], tuple[float, float]] = {}
        reports = {}
        for node in members:
            part = payload_for(node)["wave"].pair
            params = {**asdict(part), "pair": list(part.pair)}
            key = tuple(params["pair"])
            if key not in by_pair:
                by_pair[key] = self.measure(*key)
                self.pairs_run += 1
            fact = {"requested": True, "pairs": [self._side(params, *by_pair[key])], "planned": params["planned"],
                    "nodes": params["nodes"], "rounds": params["rounds"], "sample": params["sample"]}
            answer = NodeAnswer(node_name=node.name, entry={"facts": {PAIRS_FACT: fact}, "fact_errors": {}})
            reports[node.node_id] = NodeReport(node, value=answer, elapsed_s=ROUND_S)
        return reports


def payload(node: NodeInfo, checks: Sequence[str], wave: Wave) -> dict[str, Any]:
    """The driver's node task, as the simulated dispatch reads it."""
    return {"checks": list(checks), "wave": wave}


class Quiet:
    """The driver's progress, kept (not printed)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def say(self, text: str) -> None:
        self.lines.append(text)
