"""`run --all-nodes --probe=pairs` on real Ray nodes in network namespaces: is the culprit named, run after
run, and how long does it take against rounds × the per-pair time?

    .venv/bin/python benchmarks/bench_pairs.py                       # 3 and 6 nodes, 10 runs each of healthy/node
    .venv/bin/python benchmarks/bench_pairs.py --nodes 3 --runs 2 --scenarios healthy,node,path,drop
    .venv/bin/python benchmarks/bench_pairs.py --record tests/data/collective   # also keep each scenario's facts

Scenarios (tests/pairs_lab.py): healthy (no culprit expected); node (`tc tbf` 20 mbit on the last node's eth0:
that node named); path (HTB + u32 by destination + `tc tbf` on node 1 toward node 2: that link named); drop
(iptables DROP of node 1 on node 2: that pair's timeout, naming both). Needs root (namespaces) and Ray.

Per run it prints the verdict and the wall time; per (nodes, scenario) the share named right, the median
wall time, the median round time (the time of one pair, the pairs of a round running at once), and the
expected wall time: rounds × round time + start-up (connect + the first wave), beside the measured one.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))

from pairs_lab import LAB_PAIRS, RayNetnsLab, pairs_result  # noqa: E402

TRIM_LOG_LINES = 3


def expected(n: int, scenario: str) -> dict:
    last = f"lab-node{n - 1}"
    return {"healthy": {"nodes": [], "links": [], "failed": []},
            "node": {"nodes": [last], "links": [], "failed": []},
            "path": {"nodes": [], "links": [["lab-node1", "lab-node2"]], "failed": []},
            "drop": {"nodes": [], "links": [], "failed": [["lab-node1", "lab-node2"]]}}[scenario]


def apply(lab: RayNetnsLab, scenario: str) -> None:
    n = lab.nodes
    if scenario == "node":
        lab.shape_node(n - 1)
    elif scenario == "path":
        lab.shape_path(1, 2)
    elif scenario == "drop":
        lab.drop_pair(1, 2)


def undo(lab: RayNetnsLab, scenario: str) -> None:
    if scenario == "node":
        lab.clear_shaping(lab.nodes - 1)
    elif scenario == "path":
        lab.clear_shaping(1)
    elif scenario == "drop":
        lab.undrop_pair(1, 2)


def record(doc: dict, path: Path, n: int, scenario: str, extra: list[str]) -> None:
    """The nodes' collective_pairs facts of a real run (log tails cut to a few lines), for the unit tests."""
    facts = {}
    for node in doc["nodes"]:
        fact = json.loads(json.dumps(node["facts"].get("collective_pairs")))
        for m in (fact or {}).get("pairs") or []:
            for r in m["outcome"]["ranks"]:
                r["log_tail"] = r["log_tail"][-TRIM_LOG_LINES:]
        facts[node["node"]] = fact
    out = {"provenance": f"benchmarks/bench_pairs.py --record: a real `run --all-nodes --probe=pairs` over {n} Ray "
                         f"nodes in network namespaces (tests/pairs_lab.py), scenario {scenario!r}, "
                         f"{time.strftime('%Y-%m-%d')}, torch 2.13 CPU, gloo; log tails cut to {TRIM_LOG_LINES} lines",
           "command_extra": extra, "profile": doc["profile"], "node_ranks": doc["cluster"]["node_ranks"],
           "collective_pairs": facts, "judged": pairs_result(doc)["evidence"]["culprits"]}
    path.write_text(json.dumps(out, indent=1) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[3, 6])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--scenarios", default="healthy,node")
    parser.add_argument("--record", type=Path, default=None, help="write each scenario's first run's facts here")
    parser.add_argument("--keep-wrong", type=Path, default=None, help="keep the document of a run that named wrong here")
    args = parser.parse_args()
    rows = []
    for n in args.nodes:
        t0 = time.monotonic()
        with RayNetnsLab(n) as lab:
            print(f"{n} Ray nodes up in {time.monotonic() - t0:.1f} s", flush=True)
            for scenario in args.scenarios.split(","):
                extra = list(LAB_PAIRS) + (["--pairs-timeout", "12"] if scenario == "drop" else [])
                walls, rounds_s, right, startups, nrounds = [], [], 0, [], 0
                apply(lab, scenario)
                try:
                    for i in range(args.runs):
                        with tempfile.TemporaryDirectory(prefix="d3bench") as tmp:
                            proc, doc, wall = lab.run(Path(tmp) / "doc.json", *extra, "--only", "dist.pairs",
                                                      "--timeout", "400")
                            if args.keep_wrong and doc and pairs_result(doc)["evidence"].get("culprits") != expected(n, scenario):
                                args.keep_wrong.mkdir(parents=True, exist_ok=True)
                                (args.keep_wrong / f"{n}nodes_{scenario}_run{i + 1}.json").write_text(json.dumps(doc))
                        r = pairs_result(doc) if doc else {"evidence": {}, "summary": proc.stderr[-300:], "status": "?"}
                        got = r["evidence"].get("culprits")
                        ok = got == expected(n, scenario)
                        right += ok
                        info = doc.get("cluster", {}).get("probe", {})
                        round_times = [x["elapsed_s"] for x in info.get("rounds", []) if x.get("started")]
                        nrounds = len(round_times)
                        rounds_s += round_times
                        startups.append(doc.get("cluster", {}).get("elapsed_s", wall) - info.get("elapsed_s", 0.0))
                        walls.append(wall)
                        print(f"  n={n} {scenario:7} run {i + 1:2}: {'right' if ok else 'WRONG'} {r['status']:4} "
                              f"{wall:5.1f} s  {r['summary'][:150]}", flush=True)
                        if not ok:
                            print(f"      named {json.dumps(got)}; expected {json.dumps(expected(n, scenario))}; "
                                  f"{r['summary']}", flush=True)
                        if args.record and i == 0:
                            record(doc, args.record / f"pairs_{n}nodes_{scenario}.json", n, scenario, extra)
                finally:
                    undo(lab, scenario)
                per_pair = statistics.median(rounds_s) if rounds_s else float("nan")
                startup = statistics.median(startups) if startups else float("nan")
                rows.append((n, scenario, right, args.runs, statistics.median(walls), nrounds, per_pair,
                             nrounds * per_pair, startup, lab.started_s))
    print()
    print(f"{'nodes':>5} {'scenario':>8} {'named right':>11} {'wall (med)':>10} {'rounds':>6} {'per pair':>9} "
          f"{'rounds x per pair':>17} {'+ start-up':>10} {'= expected':>10} {'Ray lab up':>10}")
    for n, scenario, right, runs, wall, nrounds, per_pair, product, startup, lab_s in rows:
        print(f"{n:>5} {scenario:>8} {right:>5} of {runs:<3} {wall:>9.1f}s {nrounds:>6} {per_pair:>8.1f}s "
              f"{product:>16.1f}s {startup:>9.1f}s {product + startup:>9.1f}s {lab_s:>9.1f}s")
    print("(per pair: the median round time, the pairs of a round running at once; rounds = N-1 for even N, N for odd;"
          " start-up: connecting to Ray and the first wave of node tasks; wall: the CLI's whole run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
