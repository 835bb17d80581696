"""A training script for the stall watch's tests, started by torchrun: gloo ranks that all_reduce once a step and
print "step N loss=X" (a progress line the doctor knows).

--steps N             steps to run (then exit 0)
--step-s S            seconds each step sleeps before its all_reduce (a slow step)
--load-s L            seconds of work before the first step (half on the CPU), in a loop over several functions (a model loading)
--stuck-rank R        rank R stops before the all_reduce of step --stuck-at ...
--stuck-how HOW       ... sleeping (sleep) or reading a FIFO that no one writes (fifo: the path is --fifo)
"""
import argparse
import datetime
import hashlib
import time

import torch
import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--step-s", type=float, default=0.0)
parser.add_argument("--load-s", type=float, default=0.0)
parser.add_argument("--stuck-rank", type=int, default=None)
parser.add_argument("--stuck-at", type=int, default=2)
parser.add_argument("--stuck-how", choices=("sleep", "fifo"), default="sleep")
parser.add_argument("--fifo", default=None)
parser.add_argument("--payload", type=int, default=1)   # floats each all_reduce carries (a large one fills TCP queues)
parser.add_argument("--out", default=None)   # the launch tests' common option; unused here
args = parser.parse_args()


def digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def mix(data: bytes) -> bytes:
    return bytes(reversed(digest(data)))


def load(seconds: float) -> None:
    """Work whose stack keeps changing, for ``seconds``: on the CPU half the time and waiting the other half, as a
    model's loading reads and deserialises. The watch must see it working either way (its stacks change; its CPU
    time grows far above the watch's 5 % share). Half, not all: two ranks busy for the whole load cost the suite's
    two cores a second test's worth of CPU."""
    end, data = time.monotonic() + seconds, b"x"
    while time.monotonic() < end:
        busy = time.monotonic() + 0.025
        while time.monotonic() < busy:
            for _ in range(200):
                data = mix(digest(data))
        time.sleep(0.025)


def stuck() -> None:
    if args.stuck_how == "sleep":
        time.sleep(3600)   # STUCK_SLEEP
    else:
        with open(args.fifo) as fh:   # STUCK_FIFO
            fh.read()


dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=1800))
rank = dist.get_rank()
load(args.load_s)
for step in range(args.steps):
    time.sleep(args.step_s)
    if rank == args.stuck_rank and step == args.stuck_at:
        stuck()
    value = torch.full((args.payload,), float(rank + 1))
    dist.all_reduce(value)   # ALL_REDUCE
    print(f"[rank{rank}]: step {step} loss={1.0 / (step + 1):.4f} sum={value[0].item():g}", flush=True)
dist.destroy_process_group()
