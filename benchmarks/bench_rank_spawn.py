"""Benchmark: the collective probe's ranks forked from one zygote vs each exec'd as a fresh interpreter, in one run.

The zygote (dsv3_preflight/collective/probes/zygote.py) imports torch once per process and forks every rank from it;
the obvious alternative, and the fallback, starts each rank with `python -m dsv3_preflight.collective.probes.worker`
(DSV3_PREFLIGHT_RANK_SPAWN=exec), which imports torch again in every rank. Each case runs in a fresh child process
(as a CLI run or a Ray worker would): ``calls`` probe_node calls of ``ranks`` local ranks on 127.0.0.1, gloo:

- 2 ranks x 1 call: `run --profile cpu`'s local probe;
- 1 rank x 5 calls: one node's side of five rounds of the pairwise probe;
- 8 ranks x 1 call: an 8-GPU node's local probe (gloo here).

Wall is the child's whole run (interpreter start included); CPU is the child's and all its descendants' user+system
time (the zygote reaps its ranks and is reaped by the child at exit, so theirs is counted). Median of --repeat.

Usage: .venv/bin/python benchmarks/bench_rank_spawn.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

CHILD = r'''
import socket, sys
from dsv3_preflight.collective import probe_node
ranks, calls = int(sys.argv[1]), int(sys.argv[2])
for _ in range(calls):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = probe_node(master_addr="127.0.0.1", master_port=port, world_size=ranks, node_rank=0, nproc_per_node=ranks,
                     backend="gloo", timeout_s=60)
    assert out["ok"], out
print(out["spawn"]["mode"])
'''


def one(mode: str, ranks: int, calls: int) -> tuple[float, float]:
    env = {**os.environ, "DSV3_PREFLIGHT_RANK_SPAWN": mode, "PYTHONPATH": REPO}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CHILD, str(ranks), str(calls)], env=env, capture_output=True,
                         text=True, timeout=600)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode or out.stdout.strip() != mode:
        raise SystemExit(f"{mode} {ranks}x{calls} failed: {out.stdout[-2000:]}{out.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, python {sys.version.split()[0]}, median of {args.repeat}")
    print(f"{'case':<16} {'exec wall s':>11} {'zygote wall s':>13} {'exec CPU s':>10} {'zygote CPU s':>12} {'CPU saved':>9}")
    for ranks, calls in ((2, 1), (1, 5), (8, 1)):
        got = {}
        for mode in ("exec", "zygote"):
            runs = [one(mode, ranks, calls) for _ in range(args.repeat)]
            got[mode] = (statistics.median(w for w, _ in runs), statistics.median(c for _, c in runs))
        (ew, ec), (zw, zc) = got["exec"], got["zygote"]
        print(f"{f'{ranks} ranks x {calls}':<16} {ew:>11.2f} {zw:>13.2f} {ec:>10.2f} {zc:>12.2f} {1 - zc / ec:>8.0%}")


if __name__ == "__main__":
    main()
