"""`--probe=pairs` from 3 nodes to 512: rounds, wall time, driver memory and the report, fast schedule beside the
round-robin, in one run.

    .venv/bin/python benchmarks/bench_scale.py --sim-only                 # the simulation, 64..512 nodes
    .venv/bin/python benchmarks/bench_scale.py --sim-only --json rows.json
    .venv/bin/python benchmarks/bench_scale.py --real 3 8 --sim-nodes 64  # real Ray nodes too (root, netns)

(a) Real: `run --all-nodes --probe=pairs` over real Ray nodes in network namespaces (tests/pairs_lab.py), each
    schedule healthy and with one node shaped to 20 mbit: wall time, the driver's peak RSS, rounds, and the driver's
    CPU time per node (user+sys of the CLI process over the node count). The round-robin runs only up to
    --real-all-max nodes (8): at 16 it is 15 rounds of 16 ranks importing torch on this 2-core machine.
(b) Simulated: the REAL driver wave loop (cluster.pairs.run_pairs), schedule, judge (the registered dist.pairs via
    engine.run_cluster_checks), document and HTML renderer, with only the Ray dispatch replaced by
    benchmarks/pairs_sim.py (pair measurements from a recorded real one, at a 200 Gb/s fabric's latencies, with
    noise). Cases: healthy, one bad node, one bad link (a pair of round 1), and a hidden link (a bad link between
    two nodes round 1 does not pair: only --pairs=all tests it). Each (N, case, schedule) runs in a child process
    (its peak RSS is the driver's). wall_s = rounds × ROUND_S (the simulated time of one round on real nodes) + the
    driver's measured compute; render_s: `dsv3-preflight report DOC.json -o x.html`'s work in-process (read + render).
    The round-robin is simulated in full up to --rr-max nodes; above it only its rounds and wall time are given.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE.parent))

SIM_NODES = (64, 128, 256, 512)
SIM_CASES = ("healthy", "node", "link", "hidden_link")
KEYS = ("nodes", "case", "schedule", "rounds", "named_right", "wall_s", "driver_rss_mb", "report_bytes", "render_s")
#: node checks each simulated node reports (PASS), so the report has a node × check matrix like a real run's
NODE_CHECKS = ("host.swap", "host.shm", "gpu.driver", "net.nic_route", "dist.allreduce")


def _profile():
    from dsv3_preflight.profile import Profile

    rec = json.loads((HERE.parent / "tests" / "data" / "collective" / "pairs_6nodes_healthy.json").read_text())
    # the defaults' thresholds (nodes that share no CPU), the recorded run's sizes
    return Profile.from_dict(rec["profile"]).with_values("sim", pairs_latency_ratio=3.0, pairs_busbw_ratio=0.5,
                                                         nnodes=1)


def one(n: int, case: str, schedule: str, seed: int, out: Path, keep: dict | None = None) -> dict:
    """One simulated run in this process: the driver's pairs wave, the cluster check, the document, its HTML.
    ``keep``: write the document next to ``out`` and put its path there (``keep["path"]``) instead of a temp dir."""
    from pairs_sim import ROUND_S, Quiet, SimCluster, payload

    from dsv3_preflight.cluster.pairs import PAIRS_CHECK, run_pairs
    from dsv3_preflight.document import DocumentError, build_document, read_document, write_document
    from dsv3_preflight.engine import run_cluster_checks
    from dsv3_preflight.registry import load_registry
    from dsv3_preflight.result import Result
    from reports.html import render_html

    registry = load_registry([])
    profile = _profile().with_values("sim", nnodes=n)
    sim = SimCluster(n, case, seed)
    ranked = sim.ranked()
    t0 = time.perf_counter()
    node_facts = {x.name: {"facts": {"versions": {"torch": "2.13.0", "nccl": "2.27.3", "driver": "575.57.08"}},
                           "fact_errors": {}} for x in ranked}
    errors, info = run_pairs(ranked, profile, time.monotonic() + 1e6, node_facts, payload, Quiet(), schedule=schedule,
                             dispatch=sim.dispatch)
    node_ranks = {x.name: x.node_rank for x in ranked}
    results = [Result.passed("simulated: passed", {"node": x.name}).stamped(name=name, node=x.name, duration_s=0.01)
               for x in ranked for name in NODE_CHECKS]
    results += errors + run_cluster_checks([registry.checks[PAIRS_CHECK]], profile, node_facts, node_ranks)
    nodes = [{"node": x.name, "node_rank": x.node_rank, "state": "ok", "error": None, "identity": {"ray": x.as_dict()},
              **node_facts[x.name], "fact_timings_s": {}} for x in ranked]
    doc = build_document(mode="cluster", profile=profile.to_dict(), nodes=nodes, results=results,
                         command=["dsv3-preflight", "run", "--all-nodes", "--probe=pairs", f"--pairs={schedule}"],
                         extra={"cluster": {"probe": info, "node_ranks": node_ranks}})
    driver_s = time.perf_counter() - t0
    pairs = next(r for r in doc["results"] if r["name"] == PAIRS_CHECK)
    note = None
    with tempfile.TemporaryDirectory(prefix="d3scale") as tmp:
        path = Path(tmp) / "doc.json" if keep is None else out.with_suffix(".doc.json")
        if keep is not None:
            keep["path"] = path
        write_document(doc, path)
        size = path.stat().st_size
        t1 = time.perf_counter()
        try:
            html = render_html(read_document(path))
            render_s = time.perf_counter() - t1
        except DocumentError as exc:   # over the reader's cap: `dsv3-preflight report` refuses it too
            html, render_s = "", None
            note = str(exc).split(": ", 2)[-1]
    return {"nodes": n, "case": case, "schedule": schedule, "rounds": sim.rounds, "pairs": sim.pairs_run,
            "named_right": sim.named_right(pairs["evidence"]["culprits"]), "status": pairs["status"],
            "wall_s": round(sim.rounds * ROUND_S + driver_s, 2), "driver_s": round(driver_s, 3),
            "report_bytes": size, "html_bytes": len(html.encode()), "render_s": round(render_s, 3),
            "limit": 2 + math.ceil(math.log2(n)), "summary": pairs["summary"][:200], "note": note}


def run_child(n: int, case: str, schedule: str, seed: int) -> dict:
    """``one`` in a child process; its peak RSS is the driver's."""
    with tempfile.NamedTemporaryFile(prefix="d3scale", suffix=".json") as f:
        proc = subprocess.Popen([sys.executable, __file__, "--one", str(n), case, schedule, str(seed), f.name])
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            return {k: None for k in KEYS} | {"nodes": n, "case": case, "schedule": schedule,
                                              "note": f"the simulation exited {proc.returncode}"}
        row = json.loads(Path(f.name).read_text())
    row["driver_rss_mb"] = round(usage.ru_maxrss / 1024, 1)
    return row


def simulate(sizes, cases, rr_max: int, seed: int, schedules=("fast", "all")) -> list[dict]:
    from pairs_sim import ROUND_S

    rows = []
    for n in sizes:
        for case in cases:
            for schedule in schedules:
                if schedule == "all" and n > rr_max:
                    rounds = n - 1 if n % 2 == 0 else n
                    row = {k: None for k in KEYS} | {"nodes": n, "case": case, "schedule": schedule, "rounds": rounds,
                                                     "wall_s": round(rounds * ROUND_S, 1), "pairs": n * (n - 1) // 2,
                                                     "simulated": False}
                else:
                    row = run_child(n, case, schedule, seed) | {"simulated": True}
                rows.append(row)
                print(_line(row), flush=True)
    return rows


def _fmt(v, spec):
    return "-" if v is None else format(v, spec)


def _header() -> str:
    return (f"{'nodes':>5} {'case':>11} {'schedule':>8} {'rounds':>6} {'limit':>5} {'pairs':>6} {'named':>6} "
            f"{'wall_s':>8} {'driver_s':>8} {'rss_MB':>7} {'report_B':>10} {'render_s':>8}")


def _line(r: dict) -> str:
    named = "-" if r.get("named_right") is None else ("right" if r["named_right"] else "WRONG")
    return (f"{r['nodes']:>5} {r['case']:>11} {r['schedule']:>8} {_fmt(r['rounds'], 'd'):>6} "
            f"{_fmt(r.get('limit') or 2 + math.ceil(math.log2(r['nodes'])), 'd'):>5} {_fmt(r.get('pairs'), 'd'):>6} "
            f"{named:>6} {_fmt(r['wall_s'], '.1f'):>8} {_fmt(r.get('driver_s'), '.2f'):>8} "
            f"{_fmt(r.get('driver_rss_mb'), '.0f'):>7} {_fmt(r.get('report_bytes'), 'd'):>10} {_fmt(r.get('render_s'), '.2f'):>8}"
            + (f"  ({r['note']})" if r.get("note") else ""))


def real(sizes, runs: int, all_max: int = 8, cases=("healthy", "node")) -> list[dict]:
    """Real Ray nodes in network namespaces: each schedule, healthy and one node shaped; (a) of the docstring."""
    from pairs_lab import LAB_PAIRS, RAY_PORT, RayNetnsLab, pairs_result

    rows = []
    for n in sizes:
        t0 = time.monotonic()
        lab = None
        for attempt in (1, 2):   # a loaded shared machine: a raylet can miss its registration; one more try
            try:
                lab_cm = RayNetnsLab(n)
                lab = lab_cm.__enter__()   # on failure it has stopped what it started
                break
            except Exception as exc:  # noqa: BLE001 - report what did not fit, go on with the rest
                print(f"{n} real Ray nodes, try {attempt}: could not start ({type(exc).__name__}: {str(exc)[:200]})",
                      flush=True)
                why = f"lab did not start: {exc}"[:300]
        if lab is None:
            rows.append({"nodes": n, "case": "-", "schedule": "-", "error": why})
            continue
        try:
            up = time.monotonic() - t0
            print(f"{n} Ray nodes up in {up:.1f} s", flush=True)
            for case in cases:
                if case == "node":
                    lab.shape_node(n - 1)
                try:
                    for schedule in ("fast", "all") if n <= all_max else ("fast",):
                        for i in range(runs):
                            with tempfile.TemporaryDirectory(prefix="d3scale") as tmp:
                                out = Path(tmp) / "doc.json"
                                argv = [sys.executable, "-c", _MEASURE, sys.executable, "-m", "dsv3_preflight", "run",
                                        "--all-nodes", "--ray-address", f"{lab.addr(0)}:{RAY_PORT}", "--profile", "cpu",
                                        "--nnodes", str(n), "--probe=pairs", f"--pairs={schedule}", "--json", str(out),
                                        "--no-report", "--no-color", *LAB_PAIRS, "--only", "dist.pairs",
                                        "--timeout", "590"]
                                t1 = time.monotonic()
                                proc = lab.net.exec(0, argv, timeout=600, env={**lab._node_env(0),
                                                                               "RAY_TMPDIR": os.path.join(lab.tmp, "driver")})
                                wall = time.monotonic() - t1
                                doc = json.loads(out.read_text()) if out.exists() else {}
                            usage = json.loads(proc.stderr.strip().splitlines()[-1]) if proc.stderr.strip() else {}
                            r = pairs_result(doc) if doc else {"evidence": {}, "summary": proc.stderr[-300:], "status": "?"}
                            want = {"nodes": [lab.name(n - 1)] if case == "node" else [], "links": [], "failed": []}
                            probe = (doc.get("cluster") or {}).get("probe") or {}
                            ran = [x for x in probe.get("rounds", []) if x.get("started")]
                            row = {"nodes": n, "case": case, "schedule": schedule, "run": i + 1,
                                   "rounds": len(ran), "named_right": r["evidence"].get("culprits") == want,
                                   "status": r["status"], "wall_s": round(wall, 1),
                                   "pairs_s": probe.get("elapsed_s"), "lab_up_s": round(up, 1),
                                   "driver_rss_mb": usage.get("rss_mb"),
                                   "driver_cpu_per_node_s": round(usage["cpu_s"] / n, 3) if usage.get("cpu_s") else None,
                                   "round_s": [x["elapsed_s"] for x in ran], "summary": r["summary"][:200]}
                            rows.append(row)
                            print(f"  real n={n} {case:7} {schedule:4} run {i + 1}: {'right' if row['named_right'] else 'WRONG'}"
                                  f" {row['status']} rounds {row['rounds']} wall {wall:.1f} s rss {row['driver_rss_mb']} MB"
                                  f" cpu/node {row['driver_cpu_per_node_s']} s rounds {row['round_s']}", flush=True)
                finally:
                    if case == "node":
                        lab.clear_shaping(n - 1)
        finally:
            lab_cm.__exit__(None, None, None)
    return rows


#: runs the CLI as a child and prints its peak RSS and CPU time as the last line of stderr
_MEASURE = ("import json, os, subprocess, sys\n"
            "p = subprocess.Popen(sys.argv[1:])\n"
            "_, st, u = os.wait4(p.pid, 0)\n"
            "print(json.dumps({'rss_mb': round(u.ru_maxrss / 1024, 1), 'cpu_s': round(u.ru_utime + u.ru_stime, 2),"
            " 'rc': os.waitstatus_to_exitcode(st)}), file=sys.stderr)\n")


def _real_table(rows: list[dict]) -> None:
    print(f"\n{'nodes':>5} {'case':>8} {'schedule':>8} {'rounds':>6} {'named':>6} {'wall_s':>7} {'pairs_s':>7} "
          f"{'rss_MB':>7} {'cpu/node_s':>10} {'lab_up_s':>8}  round times (s)")
    for r in rows:
        if r.get("error"):
            print(f"{r['nodes']:>5} {r['error']}")
            continue
        print(f"{r['nodes']:>5} {r['case']:>8} {r['schedule']:>8} {r['rounds']:>6} "
              f"{'right' if r['named_right'] else 'WRONG':>6} {r['wall_s']:>7.1f} {_fmt(r.get('pairs_s'), '.1f'):>7} "
              f"{_fmt(r.get('driver_rss_mb'), '.0f'):>7} {_fmt(r.get('driver_cpu_per_node_s'), '.3f'):>10} "
              f"{r['lab_up_s']:>8.1f}  {r['round_s']}")
    print("(real Ray nodes in network namespaces on this 2-core machine, the lab's settings (tests/pairs_lab.py "
          "LAB_PAIRS); wall: the CLI's whole run; pairs_s: the pairs waves; rss: the CLI process's peak; cpu/node: "
          "its user+sys CPU time over the node count)\n", flush=True)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        n, case, schedule, seed, out = sys.argv[2:7]
        Path(out).write_text(json.dumps(one(int(n), case, schedule, int(seed), Path(out))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sim-only", action="store_true", help="the simulation alone (no Ray, no namespaces)")
    parser.add_argument("--real-only", action="store_true", help="the real Ray nodes alone")
    parser.add_argument("--sim-nodes", type=int, nargs="+", default=list(SIM_NODES))
    parser.add_argument("--cases", default=",".join(SIM_CASES))
    parser.add_argument("--schedules", default="fast,all")
    parser.add_argument("--rr-max", type=int, default=64, help="simulate the round-robin in full up to this many nodes")
    parser.add_argument("--real", type=int, nargs="*", default=[3, 8, 16], help="real Ray node counts")
    parser.add_argument("--runs", type=int, default=1, help="real runs per (nodes, case, schedule)")
    parser.add_argument("--real-cases", default="healthy,node", help="real cases: healthy (nothing shaped), node "
                                                                     "(the last node's eth0 at 20 mbit)")
    parser.add_argument("--real-all-max", type=int, default=8,
                        help="real runs of the round-robin only up to this many nodes (16 nodes: 15 rounds of 16 "
                             "processes importing torch on this 2-core machine, about 10 minutes a run)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None, help="write one row per (N, case, schedule) here")
    args = parser.parse_args()
    rows: list[dict] = []
    if not args.sim_only and args.real:
        rows += real(args.real, args.runs, args.real_all_max, tuple(args.real_cases.split(",")))
    if args.real_only:
        _real_table(rows)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1) + "\n")
        return 0
    if rows:
        _real_table(rows)
    print(_header(), flush=True)
    sim = simulate(args.sim_nodes, args.cases.split(","), args.rr_max, args.seed, tuple(args.schedules.split(",")))
    rows += sim
    print("\n" + _header())
    for r in sim:
        print(_line(r))
    print(f"(limit = 2+ceil(log2 N); wall_s = rounds x {__import__('pairs_sim').ROUND_S:g} s per simulated round + the "
          "driver's measured compute; rss: the driver process's peak; report_B: the JSON document; render_s: reading it "
          "and rendering the HTML; '-': the round-robin not simulated in full above --rr-max)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
        print(f"wrote {len(rows)} rows to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
