"""Benchmark: the collective probe vs a bare torch.distributed script doing the same, in one run.

1. Overhead: wall time of `probe_node` (2 ranks, gloo, loopback: child processes, status files, phases,
   rendezvous check, sum check) vs two bare `python -c` ranks that init_process_group(env://) and
   all_reduce once. Median of --repeat runs, plus the probe's own breakdown (process start, import, init).
2. Bandwidth: the probe's sweep (busbw as nccl-tests defines it) vs the same sweep written directly
   with torch.distributed in the bare script (same sizes, warmup, iterations, timing).

Usage: .venv/bin/python benchmarks/bench_collective.py [--repeat 3] [--world 2] [--backend gloo]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from dsv3_preflight.collective import probe_node  # noqa: E402

BARE = r'''
import json, os, sys, time
import torch, torch.distributed as dist
dist.init_process_group(os.environ["BACKEND"], init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if os.environ["BACKEND"] == "nccl" else torch.device("cpu")
x = torch.full((1024,), float(rank + 1), device=dev)
dist.all_reduce(x)
assert float(x[0]) == world * (world + 1) / 2
rows = []
for nbytes in [int(s) for s in os.environ.get("SIZES", "").split(",") if s]:
    buf = torch.ones(nbytes // 4, device=dev)
    for _ in range(int(os.environ["WARMUP"])):
        dist.all_reduce(buf)
    dist.barrier()
    t = time.perf_counter()
    iters = int(os.environ["ITERS"])
    for _ in range(iters):
        dist.all_reduce(buf)
    if dev.type == "cuda":
        torch.cuda.synchronize()
    el = torch.tensor([(time.perf_counter() - t) / iters], dtype=torch.float64, device=dev)
    dist.all_reduce(el)
    avg = float(el) / world
    algbw = nbytes / avg / 1e9
    rows.append({"size_bytes": nbytes, "time_us": avg * 1e6, "algbw_gbps": algbw, "busbw_gbps": algbw * 2 * (world - 1) / world})
if rank == 0 and rows:
    print("ROWS " + json.dumps(rows), flush=True)
dist.destroy_process_group()
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_bare(world: int, backend: str, sizes: tuple[int, ...] = (), warmup: int = 5, iters: int = 20):
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(BARE)
        script = fh.name
    port = free_port()
    t0 = time.perf_counter()
    procs = []
    for r in range(world):
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(r), WORLD_SIZE=str(world),
                   LOCAL_RANK=str(r), BACKEND=backend, SIZES=",".join(map(str, sizes)), WARMUP=str(warmup),
                   ITERS=str(iters))
        procs.append(subprocess.Popen([sys.executable, script], env=env, stdout=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=300)[0] for p in procs]
    wall = time.perf_counter() - t0
    os.unlink(script)
    if any(p.returncode for p in procs):
        raise SystemExit(f"bare script failed: {[p.returncode for p in procs]}")
    rows = next((json.loads(line[5:]) for out in outs for line in out.splitlines() if line.startswith("ROWS ")), [])
    return wall, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--backend", default="gloo", choices=("gloo", "nccl"))
    ap.add_argument("--sizes", default="4096,65536,1048576,4194304")
    args = ap.parse_args()
    sizes = tuple(int(s) for s in args.sizes.split(","))

    probe_walls, bare_walls, breakdown = [], [], []
    for _ in range(args.repeat):  # interleaved, so both see the same machine load
        t0 = time.perf_counter()
        o = probe_node(master_addr="127.0.0.1", master_port=free_port(), world_size=args.world, node_rank=0,
                       nproc_per_node=args.world, backend=args.backend, timeout_s=120)
        probe_walls.append(time.perf_counter() - t0)
        assert o["ok"], [r["error"] for r in o["ranks"]]
        breakdown.append({k: max(r["timings"][k] for r in o["ranks"]) for k in
                          ("process_start_s", "import_s", "store_connect_s", "rendezvous_s", "init_s",
                           "first_collective_s", "total_s")})
        bare_walls.append(run_bare(args.world, args.backend)[0])

    pm, bm = statistics.median(probe_walls), statistics.median(bare_walls)
    print(f"# overhead: world {args.world}, {args.backend}, loopback, median of {args.repeat} (wall s, spawn to exit)")
    print(f"{'':28}{'probe_node':>12}{'bare script':>13}{'overhead':>11}")
    print(f"{'init + 1 all_reduce':28}{pm:>12.3f}{bm:>13.3f}{pm - bm:>+11.3f}")
    print("# probe breakdown (max over ranks, median over runs, s):")
    for k in breakdown[0]:
        print(f"  {k:22}{statistics.median(b[k] for b in breakdown):>10.4f}")

    o = probe_node(master_addr="127.0.0.1", master_port=free_port(), world_size=args.world, node_rank=0,
                   nproc_per_node=args.world, backend=args.backend, timeout_s=300, sweep=True, sweep_sizes=sizes)
    _, bare_rows = run_bare(args.world, args.backend, sizes)
    print(f"# sweep: all_reduce busbw = algbw * 2(n-1)/n, n={args.world}; 5 warmup + 20 timed iterations, time averaged over ranks")
    print(f"{'size (B)':>12}{'probe time(us)':>16}{'probe busbw':>13}{'bare time(us)':>15}{'bare busbw':>12}{'ratio':>8}")
    for p, b in zip(o["sweep"], bare_rows):
        print(f"{p['size_bytes']:>12}{p['time_us']:>16.1f}{p['busbw_gbps']:>13.4f}{b['time_us']:>15.1f}"
              f"{b['busbw_gbps']:>12.4f}{p['busbw_gbps'] / b['busbw_gbps']:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
