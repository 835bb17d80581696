"""Benchmark: `run --all-nodes` wall time with 1, 2, 4 and 8 simulated Ray nodes, vs one node at a time.

Simulated nodes: ray.cluster_utils.Cluster on this machine (each node its own raylet, object store
and workers, DSV3_PREFLIGHT_NODE_NAME in its environment). For each size, in one process:

* ``parallel``: ``run_all_nodes`` (one pinned task per node, all at once: what the CLI does);
* ``sequential``: the obvious alternative (an ssh-style loop): the same pinned task, one node after
  the other.

Each is run twice, ``cold`` (the first run on the new nodes: Ray starts a worker process per node)
and ``warm``. The goal is near-constant parallel time as nodes grow; the per-node overhead is the
slope (T(max) - T(1)) / (max - 1). On a 2-core machine co-hosted nodes share the cores, so the
slope here is an upper bound of a real cluster's (where each node has its own CPUs).

Usage: .venv/bin/python benchmarks/bench_cluster.py [--sizes 1,2,4,8] [--only 'env.*,host.*,cluster.*']
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,2,4,8")
    parser.add_argument("--only", default="env.*,host.*,net.nic_route,net.mtu,cluster.*")
    parser.add_argument("--probe-latency", type=float, default=1.0,
                        help="seconds one probe on every node waits (a stand-in for NVML/socket/timeouts latency; 0: none)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix="d3b", dir="/tmp")
    os.environ["RAY_DISABLE_USAGE_STATS"] = "1"

    import ray
    from ray.cluster_utils import Cluster

    from dsv3_preflight.cluster.connect import job_runtime_env
    from dsv3_preflight.cluster.dispatch import run_pinned
    from dsv3_preflight.cluster.driver import run_all_nodes
    from dsv3_preflight.cluster.nodes import alive_nodes, assign_node_ranks, unique_names
    from dsv3_preflight.profile import resolve_profile
    from dsv3_preflight.registry import load_registry

    site = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "cluster", "site_checks")
    checks_dirs = [os.path.abspath(site)] if args.probe_latency > 0 else []
    registry = load_registry(checks_dirs)
    only = args.only.split(",") + (["testhook.*"] if checks_dirs else [])
    selected, _ = registry.select(only, [], [])
    node_env = {"DSV3_TEST_SLOW_S": str(args.probe_latency)} if checks_dirs else {}
    mb = 80 * 1024 * 1024
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "object_store_memory": mb, "include_dashboard": False,
        "env_vars": {"DSV3_PREFLIGHT_NODE_NAME": "n0", **node_env}})
    rows = []
    try:
        ray.init(address=cluster.address, runtime_env=job_runtime_env(), include_dashboard=False,
                 log_to_driver=False, logging_level="warning")
        have = 1
        for size in sizes:
            while have < size:
                cluster.add_node(num_cpus=1, object_store_memory=mb, env_vars={"DSV3_PREFLIGHT_NODE_NAME": f"n{have}", **node_env})
                have += 1
            cluster.wait_for_nodes()
            profile = resolve_profile({"nnodes": size}, {}, profile_name="cpu")
            row = {"nodes": size}
            for phase in ("cold", "warm"):
                t = time.monotonic()
                outcome = run_all_nodes(registry, selected, profile, timeout=300, progress=False, checks_dirs=checks_dirs)
                row[f"parallel_{phase}"] = time.monotonic() - t
                assert len(outcome.nodes) == size and all(n["state"] == "ok" for n in outcome.nodes), outcome.nodes
            ranked = assign_node_ranks(unique_names(alive_nodes()), profile.master_addr)
            names = [c.name for c in selected]
            t = time.monotonic()
            for node in ranked:  # the obvious alternative: one node after the other
                payload = {"profile": profile.with_values("bench", node_rank=node.node_rank).to_dict(), "checks": names,
                           "checks_dirs": checks_dirs, "timeout": 120.0, "env": {}}
                reports = run_pinned([node], lambda n, p=payload: p, time.monotonic() + 120)
                assert reports[node.node_id].value is not None, reports[node.node_id].error
            row["sequential_warm"] = time.monotonic() - t
            rows.append(row)
            print(f"  {size} node(s): parallel cold {row['parallel_cold']:.2f} s, warm {row['parallel_warm']:.2f} s; "
                  f"sequential warm {row['sequential_warm']:.2f} s", file=sys.stderr, flush=True)
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()

    print(f"\nrun --all-nodes, checks {','.join(only)!r} ({len(selected)} checks), probe latency {args.probe_latency:g} s "
          f"per node, {os.cpu_count()} CPU cores, nodes co-hosted\n")
    print(f"{'nodes':>5} | {'parallel cold (s)':>17} | {'parallel warm (s)':>17} | {'sequential warm (s)':>19} | {'speed-up':>8}")
    print("-" * 80)
    for r in rows:
        print(f"{r['nodes']:>5} | {r['parallel_cold']:>17.2f} | {r['parallel_warm']:>17.2f} | {r['sequential_warm']:>19.2f} | "
              f"{r['sequential_warm'] / r['parallel_warm']:>7.1f}x")
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        span = last["nodes"] - first["nodes"]
        print(f"\nper-node overhead (slope, warm): parallel {(last['parallel_warm'] - first['parallel_warm']) / span * 1000:.0f} ms/node, "
              f"sequential {(last['sequential_warm'] - first['sequential_warm']) / span * 1000:.0f} ms/node")
    return 0


if __name__ == "__main__":
    sys.exit(main())
