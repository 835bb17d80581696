"""`dsv3-preflight probe`: run the collective probe on this node, the way the users ran their one-proc probe.

Run it on every node at about the same time (node 0 first: it hosts the rendezvous store). The probe's
outcome becomes this node's `collective` fact, the registered check `dist.allreduce` judges it, and the
result document is rendered like any run's (the ranks' table first). Exit 0 when this node's ranks all
finished with the exact sum, 1 otherwise, 4 on a usage/config error. `--json PATH` writes the document.
"""
from __future__ import annotations

import os
import sys

NAME = "probe"
HELP = "run the collective probe (init + all_reduce, hard timeout) on this node; run it on every node"
CHECK = "dist.allreduce"


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
    group.add_argument("--json", dest="json_path", metavar="PATH", help="write the result document (JSON) here")
    group.add_argument("--log-dir", default=None, metavar="DIR", help="keep each rank's full log and status here")
    group.add_argument("--no-color", action="store_true", help="no colours")


def run(args) -> int:
    import datetime as _dt

    from ..cli import UsageError
    from ..collective.probes.local import probe_by_hand
    from ..console import make_console, render_document
    from ..document import build_document, write_document
    from ..options import resolve_from_options
    from ..registry import load_registry
    from ..reports.probe_text import render_probe_text
    from ..runner import run_this_node

    started = _dt.datetime.now(_dt.timezone.utc)
    profile = resolve_from_options(lambda k: getattr(args, k), os.environ)
    timeout = args.timeout if args.timeout is not None else profile.collective_timeout
    if timeout <= 0:
        raise UsageError("--timeout must be > 0")
    sizes = None
    if args.sweep_sizes:
        try:
            sizes = tuple(int(s) for s in args.sweep_sizes.split(",") if s.strip())
        except ValueError:
            raise UsageError(f"--sweep-sizes {args.sweep_sizes!r}: expected comma-separated byte counts") from None
    spec = load_registry().checks.get(CHECK)
    if spec is None:
        raise UsageError(f"the check {CHECK} is not installed")
    per_node = 1 if args.mode == "one-per-node" else profile.nproc_per_node
    first = profile.node_rank * per_node
    print(f"probe: node {profile.node_rank}/{profile.nnodes}, ranks {first}..{first + per_node - 1} of world "
          f"{profile.nnodes * per_node}, rendezvous {profile.master_addr}:{profile.master_port}, timeout {timeout:g} s",
          file=sys.stderr, flush=True)
    fact = probe_by_hand(profile, mode=args.mode, timeout_s=timeout, sweep=args.sweep, sweep_sizes=sizes,
                         log_dir=args.log_dir)
    # the check's other facts: this node's route (gathered now); port reach is not probed here (the store is gone)
    seeded = {"collective": fact, "port_reach": {"attempted": False, "reason": "not probed by `dsv3-preflight probe`"}}
    outcome = run_this_node(load_registry(), [spec], profile, facts_doc={"facts": seeded}, timeout=30.0)
    doc = build_document(mode="node", profile=profile.to_dict(), nodes=[outcome.entry], results=outcome.results,
                         command=tuple(getattr(args, "argv", ()) or ()), started=started)
    console = make_console(args.no_color)
    console.file.write(render_probe_text(doc))
    render_document(doc, console)
    if args.json_path:
        write_document(doc, args.json_path)
        print(f"wrote {args.json_path}", file=sys.stderr)
    return int(doc["exit_code"])
