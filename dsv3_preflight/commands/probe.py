"""`dsv3-preflight probe`: run the collective probe on this node, the way the users ran their one-proc probe.

Run it on every node at about the same time (node 0 first: it hosts the rendezvous store); each
prints its ranks' phases, timings and, on failure, the decoded cause. Exit 0 when this node's ranks
all finished with the exact sum, 1 otherwise, 4 on a usage/config error.
"""
from __future__ import annotations

import json
import os
import sys

NAME = "probe"
HELP = "run the collective probe (init + all_reduce, hard timeout) on this node; run it on every node"


def add_arguments(parser) -> None:
    from ..options import add_profile_options

    add_profile_options(parser)
    group = parser.add_argument_group("probe")
    group.add_argument("--mode", choices=("one-per-node", "full"), default="one-per-node",
                       help="one-per-node: 1 rank per node, world = nnodes (the users' probe); "
                            "full: nproc_per_node ranks per node, one per GPU")
    group.add_argument("--timeout", type=float, default=None, metavar="S",
                       help="hard time limit in seconds (default: profile collective_timeout)")
    group.add_argument("--sweep", action="store_true", help="also run the all_reduce bandwidth sweep (algbw/busbw)")
    group.add_argument("--sweep-sizes", default=None, metavar="BYTES,...", help="message sizes of the sweep")
    group.add_argument("--json", dest="json_path", metavar="PATH", help="write this node's outcome (JSON) here")
    group.add_argument("--log-dir", default=None, metavar="DIR", help="keep each rank's full log and status here")


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.3f}s"


def run(args) -> int:
    from ..cli import UsageError
    from ..collective import combine, probe_node
    from ..options import resolve_from_options
    from ..collective.probes.local import choose_backend

    profile = resolve_from_options(lambda k: getattr(args, k), os.environ)
    per_node = 1 if args.mode == "one-per-node" else profile.nproc_per_node
    world = profile.nnodes * per_node
    timeout = args.timeout if args.timeout is not None else profile.collective_timeout
    if timeout <= 0:
        raise UsageError("--timeout must be > 0")
    sizes = None
    if args.sweep_sizes:
        try:
            sizes = tuple(int(s) for s in args.sweep_sizes.split(",") if s.strip())
        except ValueError:
            raise UsageError(f"--sweep-sizes {args.sweep_sizes!r}: expected comma-separated byte counts") from None
    backend, note = choose_backend(profile)
    if note:
        print(f"note: {note}", file=sys.stderr)
    ranks = f"{profile.node_rank * per_node}..{profile.node_rank * per_node + per_node - 1}"
    print(f"probe: node {profile.node_rank}/{profile.nnodes}, ranks {ranks} of world {world}, {backend}, "
          f"rendezvous {profile.master_addr}:{profile.master_port}, timeout {timeout:g} s", flush=True)
    outcome = probe_node(master_addr=profile.master_addr, master_port=profile.master_port, world_size=world,
                         node_rank=profile.node_rank, nproc_per_node=per_node, backend=backend, timeout_s=timeout,
                         sweep=args.sweep or profile.min_busbw_gbps is not None, sweep_sizes=sizes,
                         log_dir=args.log_dir)
    verdict = combine([outcome], world, assume_absent=False)
    for r in outcome["ranks"]:
        t = r["timings"]
        line = (f"  rank {r['rank']:>3} pid {r['pid']} {r['host'] or '?'} {r['device'] or ''}"
                f"{' ' + r['pci_bus_id'] if r['pci_bus_id'] else ''}: last phase {r['last_phase']}; "
                f"init {_fmt(t['init_s'])} first {_fmt(t['first_collective_s'])} steady {_fmt(t['steady_s'])}")
        if r["sum_ok"] is not None:
            line += f"; sum {r['got_sum']:g} (expected {r['expected_sum']:g}) {'ok' if r['sum_ok'] else 'WRONG'}"
        if r["killed"]:
            line += f"; {r['killed']}"
        print(line)
        for iface in r["nccl_interfaces"]:
            print(f"      NCCL uses {iface['ifname']} ({iface['address']}) [{iface['source']}]")
        if r["error"]:
            print(f"      error in phase {r['error']['phase']}: {r['error']['exc_type']}: {r['error']['message'][:300]}")
    if outcome.get("sweep"):
        print(f"  {'size (B)':>12} {'time (us)':>12} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}")
        for row in outcome["sweep"]:
            print(f"  {row['size_bytes']:>12} {row['time_us']:>12.1f} {row['algbw_gbps']:>13.4f} {row['busbw_gbps']:>13.4f}")
    ok = outcome["ok"] and not verdict["never_joined"]
    if ok:
        print(f"PASS: {verdict['summary']} (this node's view; {outcome['elapsed_s']:.2f} s)")
    else:
        print(f"FAIL: {verdict['summary']} ({outcome['elapsed_s']:.2f} s of {timeout:g} s)")
        for f in verdict["findings"]:
            print(f"  cause [{f['kind']}] seen by rank(s) {', '.join(map(str, f['ranks']))}: {f['cause']}")
            print(f"    seen: {f['line'][:200]}")
            print(f"    fix:  {f['remediation']}")
        if not verdict["findings"]:
            for r in outcome["ranks"]:
                if r["last_phase"] != "done":
                    print(f"  log tail of rank {r['rank']}:")
                    for line in r["log_tail"][-10:]:
                        print(f"    {line}")
    if args.json_path:
        with open(args.json_path, "w", encoding="utf-8") as fh:
            json.dump({"outcome": outcome, "verdict": verdict}, fh, indent=2)
        print(f"wrote {args.json_path}")
    return 0 if ok else 1
