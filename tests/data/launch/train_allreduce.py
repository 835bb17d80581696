"""A tiny training script for the launcher's tests: every rank all_reduces its rank+1 over gloo; rank 0 writes the sum.

Started by torchrun (it reads RANK/WORLD_SIZE/MASTER_ADDR/... from torchrun's environment).
--out PATH: rank 0 writes JSON {"world_size", "sum", "ifname": GLOO_SOCKET_IFNAME, "args"} there.
--fail-on-node N: the ranks of node N (torchrun's GROUP_RANK) exit 3 before joining the group.
--alloc-on-rank R: rank R asks torch for 1 PiB of host memory after joining the group; torch's real
  "DefaultCPUAllocator: can't allocate memory" error is raised under torchrun's @record, which writes it to the
  rank's error file in torchrun's --log-dir.
--stall-on-node N: the ranks of node N join the group, then sleep (a data loader that never returns) instead of
  entering the all_reduce; the others' all_reduce times out after --pg-timeout seconds (Gloo's own timeout).
"""
import argparse
import datetime
import json
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
parser.add_argument("--fail-on-node", type=int, default=None)
parser.add_argument("--x", default=None)
parser.add_argument("--alloc-on-rank", type=int, default=None)
parser.add_argument("--stall-on-node", type=int, default=None)
parser.add_argument("--pg-timeout", type=float, default=1800.0)
args = parser.parse_args()

node = int(os.environ.get("GROUP_RANK", "0"))
print(f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} on node {node} starting", flush=True)
if args.fail_on_node is not None and node == args.fail_on_node:
    print(f"node {node}: failing on purpose", flush=True)
    sys.exit(3)

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


@record
def allocate() -> None:
    torch.empty(1 << 50, dtype=torch.uint8)


dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.pg_timeout))
if args.alloc_on_rank is not None and dist.get_rank() == args.alloc_on_rank:
    allocate()
if args.stall_on_node is not None and node == args.stall_on_node:
    print(f"node {node}: stalling before the all_reduce", flush=True)
    time.sleep(600)
value = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(value)
if dist.get_rank() == 0:
    with open(args.out + ".tmp", "w") as fh:
        json.dump({"world_size": dist.get_world_size(), "sum": value.item(),
                   "ifname": os.environ.get("GLOO_SOCKET_IFNAME"), "args": sys.argv[1:]}, fh)
    os.replace(args.out + ".tmp", args.out)
print(f"rank {dist.get_rank()} all_reduce sum {value.item():g}", flush=True)
dist.destroy_process_group()
