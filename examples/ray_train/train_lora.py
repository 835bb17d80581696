"""A LoRA-shaped Ray Train run (tiny, CPU, gloo) with the dsv3-preflight gate in front of it.

The model is a frozen linear layer with a rank-r adapter (W x + B A x, only A and B train), wrapped in DDP; every
epoch reports its loss and saves the adapter as a checkpoint under storage_path, which is where a node-local
storage_path fails in a real run (at the first checkpoint, hours in). The gate stops that run before training.

The gate, either way:

    # without touching this script: Ray Train loads the callback from the environment
    RAY_TRAIN_CALLBACKS=dsv3_preflight.ray_train.PreflightCallback python examples/ray_train/train_lora.py \\
        --storage-path /shared/ray_results

    # in code: RunConfig(callbacks=[PreflightCallback()])
    python examples/ray_train/train_lora.py --gate code --storage-path /shared/ray_results

Options: --address (a running cluster; default: RAY_ADDRESS, else a local Ray), --num-workers, --cpus-per-worker,
--epochs, --rank, --env NAME=VALUE (the workers' runtime env: NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME). The last line is ``TRAINED loss=<x> checkpoint=<path>`` or ``REFUSED <first line>``; the exit code
is 0 or 1. See docs/ray-train.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time


def train_loop(config: dict) -> None:
    """One worker: a frozen base layer, a rank-r adapter, DDP over gloo, a checkpoint of the adapter every epoch."""
    import ray.train
    import ray.train.torch
    import torch
    from ray.train import Checkpoint
    from torch import nn

    marker = config.get("started_marker")
    if marker:  # the tests read it: did any training function start?
        with open(f"{marker}.{ray.train.get_context().get_world_rank()}", "w") as fh:
            fh.write("started\n")

    class LoRALinear(nn.Module):
        def __init__(self, features: int, rank: int) -> None:
            super().__init__()
            self.base = nn.Linear(features, features)
            self.base.requires_grad_(False)
            self.lora_A = nn.Parameter(torch.randn(rank, features) * 0.01)
            self.lora_B = nn.Parameter(torch.zeros(features, rank))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.base(x) + x @ self.lora_A.T @ self.lora_B.T

    torch.manual_seed(0)
    features = 16
    model = ray.train.torch.prepare_model(LoRALinear(features, int(config["rank"])))
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    target = torch.randn(features, features)
    for epoch in range(int(config["epochs"])):
        x = torch.randn(32, features)
        loss = nn.functional.mse_loss(model(x), x @ target.T)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with tempfile.TemporaryDirectory() as tmp:
            adapter = {k: v for k, v in model.state_dict().items() if "lora_" in k}
            torch.save(adapter, os.path.join(tmp, "adapter.pt"))
            ray.train.report({"epoch": epoch, "loss": float(loss.detach())}, checkpoint=Checkpoint.from_directory(tmp))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=os.environ.get("RAY_ADDRESS"))
    parser.add_argument("--storage-path", required=True)
    parser.add_argument("--name", default="lora-example")
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--cpus-per-worker", type=float, default=1.0)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rank", type=int, default=4)
    parser.add_argument("--gate", choices=("env", "code"), default="env",
                        help="env: RAY_TRAIN_CALLBACKS loads the gate (set it yourself); code: RunConfig(callbacks=...)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable of the workers (the job's runtime env), e.g. NCCL_SOCKET_IFNAME=ib0")
    parser.add_argument("--started-marker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    env_vars = dict(item.split("=", 1) for item in args.env)
    ray.init(address=args.address, include_dashboard=False, logging_level="error", log_to_driver=False,
             ignore_reinit_error=True, runtime_env={"env_vars": env_vars} if env_vars else None)
    callbacks = []
    if args.gate == "code":
        from dsv3_preflight.ray_train import PreflightCallback

        callbacks.append(PreflightCallback())
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={"epochs": args.epochs, "rank": args.rank, "started_marker": args.started_marker},
        scaling_config=ScalingConfig(num_workers=args.num_workers, resources_per_worker={"CPU": args.cpus_per_worker}),
        run_config=RunConfig(name=args.name, storage_path=args.storage_path, callbacks=callbacks))
    started = time.monotonic()
    try:
        result = trainer.fit()
    except Exception as exc:  # noqa: BLE001 - the example reports the refusal and exits 1
        print(str(exc), file=sys.stderr)
        first = next((line for line in str(exc).splitlines() if "refused" in line), str(exc).splitlines()[0])
        print(f"REFUSED after {time.monotonic() - started:.1f} s: {first}", flush=True)
        return 1
    print(f"TRAINED loss={result.metrics['loss']:.4f} checkpoint={result.checkpoint.path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
