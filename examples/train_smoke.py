"""A smoke-test training script: proves the launcher, torchrun and torch.distributed work on these nodes.

Every rank joins the process group (NCCL on GPUs, gloo without), all_reduces rank+1 and checks the sum,
then rank 0 prints one line. It takes the training command's usual arguments and ignores what it does
not know, so it can stand in for the real script in a dry run of the whole path:

    dsv3-preflight launch --profile cpu -- examples/train_smoke.py
    dsv3-preflight launch --all-nodes --config examples/preflight.toml -- examples/train_smoke.py
"""
import os
import sys


def main() -> int:
    import torch
    import torch.distributed as dist

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.tensor([float(rank + 1)], device="cuda" if backend == "nccl" else "cpu")
    dist.all_reduce(value)
    expected = world * (world + 1) / 2
    ok = value.item() == expected
    if rank == 0:
        print(f"train_smoke: {world} ranks, {backend}, all_reduce sum {value.item():g} "
              f"({'ok' if ok else f'WRONG, expected {expected:g}'})", flush=True)
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
