"""Benchmark: `lora scan` (header only) vs safetensors' `load_file` over a tree of adapters.

Builds a tree of N checkpoint-<step>/ directories, each with a realistic adapter (default: a 7B
Llama-shaped model, 32 layers, q/k/v/o at rank 8 in bf16, 16.8 MB) written as *sparse* files (the
header of a real safetensors file, then a hole: the data reads as zeros, as a fresh LoRA B would),
plus adapter_config.json from peft's LoraConfig and trainer_state.json. Then, each in its own child
process (so peak RSS is its own): the scanner over the tree, and `safetensors.torch.load_file` on
every adapter (what a "just load it and look" script does). Prints wall time and peak RSS for both.

    .venv/bin/python benchmarks/bench_lora_scan.py [--adapters 500] [--layers 32] [--hidden 4096] [--rank 8]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _build(root: Path, n: int, layers: int, hidden: int, rank: int) -> int:
    import numpy as np
    from peft import LoraConfig
    from safetensors.numpy import save_file

    tensors = {}
    for i in range(layers):
        for m in ("q_proj", "k_proj", "v_proj", "o_proj"):
            base = f"base_model.model.model.layers.{i}.self_attn.{m}"
            # float16 has bf16's size; the scanner only reads shapes, load_file reads every byte
            tensors[f"{base}.lora_A.weight"] = np.zeros((rank, hidden), np.float16)
            tensors[f"{base}.lora_B.weight"] = np.zeros((hidden, rank), np.float16)
    template = root / "template.safetensors"
    save_file(tensors, str(template), metadata={"format": "pt"})
    del tensors
    size = template.stat().st_size
    with open(template, "rb") as fh:
        n_header = int.from_bytes(fh.read(8), "little")
        fh.seek(0)
        head = fh.read(8 + n_header)
    cfg = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]).to_dict()
    cfg["target_modules"] = sorted(cfg["target_modules"])
    cfg["peft_type"] = "LORA"
    cfg_text = json.dumps(cfg, default=str)
    out = root / "output"
    for k in range(n):
        ck = out / f"checkpoint-{(k + 1) * 50}"
        ck.mkdir(parents=True)
        with open(ck / "adapter_model.safetensors", "wb") as fh:
            fh.write(head)
            fh.truncate(size)  # sparse: the zero data is a hole
        (ck / "adapter_config.json").write_text(cfg_text)
        (ck / "trainer_state.json").write_text(json.dumps({"global_step": (k + 1) * 50}))
    template.unlink()
    return size


def worker(kind: str, tree: Path) -> None:
    t0 = time.perf_counter()
    if kind == "scan":
        import peft  # noqa: F401  (the scanner parses adapter_config.json with peft's config class)

        from dsv3_preflight.lora.scan import scan_paths

        t1, rss1 = time.perf_counter(), _maxrss_mib()
        reports, _ = scan_paths([tree])
        bad = sum(r.status == "fail" for r in reports)
        count = len(reports)
    else:
        import peft  # noqa: F401  (same imports on both sides: the loop times compare the work)
        from safetensors.torch import load_file

        t1, rss1 = time.perf_counter(), _maxrss_mib()
        count = bad = 0
        for f in sorted(tree.rglob("adapter_model.safetensors")):
            state = load_file(str(f))
            count += 1
            bad += not state or any(t.numel() == 0 for t in state.values())
            del state
    t2 = time.perf_counter()
    print(json.dumps({"kind": kind, "adapters": count, "bad": bad, "import_s": t1 - t0, "loop_s": t2 - t1,
                      "loop_rss_growth_mib": _maxrss_mib() - rss1}))


def _maxrss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_child(kind: str, tree: Path, timeout: float) -> dict:
    import threading

    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--worker", kind, str(tree)], stdout=subprocess.PIPE, text=True)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    try:
        out = proc.stdout.read()
        _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage: its peak RSS alone
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        timer.cancel()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{kind} worker failed with exit code {proc.returncode}")
    return {**json.loads(out.strip().splitlines()[-1]), "wall_s": wall, "peak_rss_mib": usage.ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adapters", type=int, default=500)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--worker", nargs=2, metavar=("KIND", "TREE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker[0], Path(args.worker[1]))
        return
    root = Path(tempfile.mkdtemp(prefix="bench-lora-"))
    try:
        t = time.perf_counter()
        size = _build(root, args.adapters, args.layers, args.hidden, args.rank)
        print(f"tree: {args.adapters} adapters × {size / 1e6:.1f} MB (sparse) = {args.adapters * size / 1e9:.1f} GB "
              f"apparent, built in {time.perf_counter() - t:.1f}s under {root}")
        rows = [run_child("scan", root / "output", args.timeout), run_child("load_file", root / "output", args.timeout)]
        print(f"{'method':<28}{'adapters':>9}{'wall s':>9}{'import s':>10}{'loop s':>9}{'ms/adapter':>12}"
              f"{'peak RSS MiB':>14}{'loop +MiB':>11}")
        for r in rows:
            name = "dsv3-preflight lora scan" if r["kind"] == "scan" else "safetensors load_file"
            print(f"{name:<28}{r['adapters']:>9}{r['wall_s']:>9.2f}{r['import_s']:>10.2f}{r['loop_s']:>9.2f}"
                  f"{1000 * r['loop_s'] / max(1, r['adapters']):>12.2f}{r['peak_rss_mib']:>14.1f}{r['loop_rss_growth_mib']:>11.1f}")
        print("peak RSS: each child process's own (both import torch+peft, ~350 MiB); loop +MiB: peak growth during "
              "the loop over the adapters (what the method itself costs)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
