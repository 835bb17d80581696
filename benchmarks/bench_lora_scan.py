"""Benchmark: `dsv3-preflight lora scan` over a tree of DeepSeek-V3 LoRA checkpoints, beside the obvious
alternatives, in the same run.

The tree: N ``checkpoint-<step>/`` directories, each holding a DeepSeek-V3-sized adapter (61 layers x the five
MLA projections q_a_proj, q_b_proj, kv_a_proj_with_mqa, kv_b_proj, o_proj at rank 16 in bf16: 610 tensors,
194 MB, the header of 86 KB), written as *sparse* files (the real safetensors header, then a hole that reads
as zeros), with adapter_config.json from peft's LoraConfig and trainer_state.json. Each row runs in a fresh
child process (a cold interpreter; the page cache is warm):

- ``lora scan (CLI, JSON)``: the command a user runs, start to exit, printing JSON;
- ``lora scan (CLI, table)``: the same, printing the table;
- ``lora scan, distinct headers``: the CLI over a tree whose every header differs (per-checkpoint metadata), so
  nothing parsed for one checkpoint serves the next (a run's checkpoints share their header byte for byte);
- ``safe_open header loop``: safetensors' safe_open + every tensor's dtype/shape, the plain header loop;
- ``safetensors load_file``: what a "just load it and look" script does, on the first --load-sample adapters
  (it reads every byte), per adapter.

Each row runs --repeat times (default 3) and the fastest run is shown: the machine is shared.

    .venv/bin/python benchmarks/bench_lora_scan.py [--adapters 400] [--rank 16] [--load-sample 5]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MLA = {"q_a_proj": (7168, 1536), "q_b_proj": (1536, 24576), "kv_a_proj_with_mqa": (7168, 576),
       "kv_b_proj": (512, 32768), "o_proj": (16384, 7168)}
LAYERS = 61


def _header(rank: int, step: int | None) -> tuple[bytes, int]:
    """The safetensors header of a DeepSeek-V3 MLA adapter as safetensors writes it, and its data size."""
    entries, offset = {}, 0
    for i in range(LAYERS):
        for module, (n_in, n_out) in MLA.items():
            base = f"base_model.model.model.layers.{i}.self_attn.{module}"
            for kind, shape in (("lora_A", [rank, n_in]), ("lora_B", [n_out, rank])):
                size = shape[0] * shape[1] * 2
                entries[f"{base}.{kind}.weight"] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + size]}
                offset += size
    meta = {"format": "pt"} if step is None else {"format": "pt", "step": str(step)}
    text = json.dumps({"__metadata__": meta, **entries}, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return len(text).to_bytes(8, "little") + text, offset


def peft_config_text(rank: int) -> str:
    """adapter_config.json as peft writes it, made in a child process (this one stays small: its children's peak
    RSS is measured, and a fork inherits the parent's)."""
    code = ("import json, sys\nfrom peft import LoraConfig\n"
            f"cfg = LoraConfig(r={rank}, lora_alpha={2 * rank}, target_modules={list(MLA)!r}).to_dict()\n"
            "cfg['target_modules'] = sorted(cfg['target_modules'])\ncfg['peft_type'] = 'LORA'\n"
            "print(json.dumps(cfg, default=str))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def build(root: Path, n: int, rank: int, distinct: bool, cfg_text: str) -> int:
    head, data = _header(rank, None)
    for k in range(n):
        step = (k + 1) * 50
        if distinct:
            head, data = _header(rank, step)
        ck = root / f"checkpoint-{step}"
        ck.mkdir(parents=True)
        with open(ck / "adapter_model.safetensors", "wb") as fh:
            fh.write(head)
            fh.truncate(len(head) + data)  # sparse: the bf16 zeros are a hole
        (ck / "adapter_config.json").write_text(cfg_text)
        (ck / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return len(head) + data


def worker(kind: str, tree: Path, sample: int) -> None:
    """One measurement inside a fresh interpreter; prints a JSON line."""
    t0 = time.perf_counter()
    if kind == "safe_open":
        from safetensors import safe_open

        t1 = time.perf_counter()
        files = sorted(tree.rglob("adapter_model.safetensors"))
        bad = 0
        for f in files:
            with safe_open(str(f), framework="numpy") as st:
                shapes = [st.get_slice(k).get_shape() for k in st.keys()]
            bad += not shapes or any(0 in s for s in shapes)
    else:  # load_file
        from safetensors.torch import load_file

        t1 = time.perf_counter()
        files = sorted(tree.rglob("adapter_model.safetensors"))[:sample]
        bad = 0
        for f in files:
            state = load_file(str(f))
            bad += not state or any(t.numel() == 0 for t in state.values())
            del state
    t2 = time.perf_counter()
    print(json.dumps({"adapters": len(files), "bad": bad, "import_s": t1 - t0, "loop_s": t2 - t1}))


def _timed(argv: list[str], timeout: float) -> tuple[float, float, float, str]:
    """Wall time, CPU time (user + system) and the child's own peak RSS (wait4 on that pid)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(argv[:5])} exited {code}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.decode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adapters", type=int, default=400)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--load-sample", type=int, default=5, help="adapters load_file reads (every byte of each)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each row; the fastest is shown (the machine is shared)")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--worker", nargs=3, metavar=("KIND", "TREE", "SAMPLE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker[0], Path(args.worker[1]), int(args.worker[2]))
        return
    root = Path(tempfile.mkdtemp(prefix="bench-lora-"))
    try:
        t = time.perf_counter()
        cfg_text = peft_config_text(args.rank)
        size = build(root / "same", args.adapters, args.rank, distinct=False, cfg_text=cfg_text)
        build(root / "distinct", args.adapters, args.rank, distinct=True, cfg_text=cfg_text)
        print(f"tree: {args.adapters} DeepSeek-V3 MLA adapters (r={args.rank}, bf16, {LAYERS * len(MLA) * 2} tensors) x "
              f"{size / 1e6:.0f} MB (sparse) = {args.adapters * size / 1e9:.1f} GB apparent; built in "
              f"{time.perf_counter() - t:.1f}s under {root}")
        cli = [sys.executable, "-m", "dsv3_preflight", "lora", "scan"]
        me = [sys.executable, __file__, "--worker"]
        rows = []
        for name, argv in (("lora scan (CLI, JSON)", cli + [str(root / "same"), "--json"]),
                           ("lora scan (CLI, table)", cli + [str(root / "same"), "--no-color"]),
                           ("lora scan, distinct headers", cli + [str(root / "distinct"), "--json"])):
            runs = [_timed(argv, args.timeout) for _ in range(args.repeat)]
            wall, cpu, rss, out = min(runs)
            n = len(json.loads(out)["adapters"]) if "--json" in argv else args.adapters
            rows.append((name, n, wall, cpu, None, rss))
        for kind, name in (("safe_open", "safe_open header loop"), ("load_file", "safetensors load_file")):
            runs = [_timed(me + [kind, str(root / "same"), str(args.load_sample)], args.timeout) for _ in range(args.repeat)]
            wall, cpu, rss, out = min(runs)
            r = json.loads(out.strip().splitlines()[-1])
            rows.append((name, r["adapters"], wall, cpu, r["loop_s"], rss))
        print(f"{'method':<30}{'adapters':>9}{'wall s':>9}{'cpu s':>8}{'ms/adapter':>12}{'peak RSS MiB':>14}")
        for name, n, wall, cpu, loop, rss in rows:
            per = 1000 * (loop if loop is not None else wall) / max(1, n)
            print(f"{name:<30}{n:>9}{wall:>9.2f}{cpu:>8.2f}{per:>12.2f}{rss:>14.1f}")
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; fastest of {args.repeat} runs each; "
              "cpu: the child's user + system time; wall: the child process from start to exit (interpreter start and imports included); ms/adapter: for the "
              "lora scan rows wall/adapters, for the safetensors rows the loop alone (imports excluded); "
              f"load_file reads every byte, so it runs on {args.load_sample} adapters")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
