"""Benchmark: `dsv3-preflight doctor` on a synthetic 1 GB log vs `grep -E` with the same patterns, in one run.

    .venv/bin/python benchmarks/bench_doctor.py            # 1024 MB (a few minutes on a loaded 2-core box)
    .venv/bin/python benchmarks/bench_doctor.py --size-mb 100 --python-engine
    .venv/bin/python benchmarks/bench_doctor.py --excerpts 200   # short logs: each needle search, one triage each

The log mixes what a 24-rank torchrun + DeepSpeed run prints (NCCL INFO, trainer loss lines, tqdm bars with
carriage returns, Python frames, ANSI colours) and ends with a real failure (one rank's CUDA OOM, the other
ranks' watchdog timeouts). `grep -E` gets every signature's pattern, translated to POSIX ERE (each
translation is first checked to match its signature's example line), and only counts matching lines; the
doctor also classifies, attributes and orders them. The generated log is deleted at the end.

"CPU s" is user+system time of the process and its children (grep): on the shared 2-core machine the wall time
moves with the other sessions' load, the CPU time much less.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dsv3_preflight.doctor.signatures import ERROR_RE, SIGNATURES  # noqa: E402

NOISE = [
    "gpu-node-{n}:{pid}:{tid} [{d}] NCCL INFO Channel {c:02d}/0 : {r}[{d}] -> {r2}[{d}] [send] via NET/Socket/{c}",
    "gpu-node-{n}:{pid}:{tid} [{d}] NCCL INFO Connected all rings",
    "[default{d}]:[INFO|trainer.py:2409] 2025-09-02 20:12:55,418 >> {{'loss': {loss:.4f}, 'grad_norm': 0.51, 'learning_rate': 1e-05, 'epoch': 0.01}}",
    "[default{d}]:[rank{r}]:   File \"/usr/lib/python3/dist-packages/torch/nn/modules/module.py\", line 1532, in _wrapped_call_impl",
    "[2025-09-02 20:13:{c:02d},112] [INFO] [logging.py:96:log_dist] [Rank {r}] step={c}, skipped=0, lr=[1e-05], mom=[(0.9, 0.98)]",
    "\x1b[32m[default{d}]:[rank{r}]: [2025-09-02 20:13:01] INFO trainer: Saving model checkpoint to /host_home/out/checkpoint-50\x1b[0m",
    "{bar}",
]
FAILURE = [
    "[default5]:[rank13]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.39 GiB. GPU 5 has a total capacity of 79.32 GiB of which 2.40 GiB is free.",
    "[default0]:[rank8]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 8] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.",
    "[default3]:[rank11]: ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
]


def _bar(rng: random.Random) -> str:
    start = rng.randrange(0, 90)
    return "\r".join(f" {p:3d}%|{'#' * (p // 10):<10}| {p * 20}/2000 [10:00<12:13,  1.50it/s]" for p in range(start, start + 10, 2))


def _block(rng: random.Random, size: int) -> bytes:
    lines, total = [], 0
    while total < size:
        t = rng.choice(NOISE)
        line = t.format(n=rng.randrange(3), pid=rng.randrange(1000, 9999), tid=rng.randrange(1000, 9999), d=rng.randrange(8),
                        c=rng.randrange(32), r=rng.randrange(24), r2=rng.randrange(24), loss=rng.random(), bar=_bar(rng))
        lines.append(line)
        total += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


def generate(path: Path, size_mb: int) -> None:
    rng = random.Random(7)
    blocks = [_block(rng, 4 << 20) for _ in range(4)]
    target, written, i = size_mb << 20, 0, 0
    with open(path, "wb") as fh:
        while written < target:
            if not FAILURE_WRITTEN[0] and (written > target * 0.9 or written + len(blocks[i % 4]) >= target):
                fh.write(("\n".join(FAILURE) + "\n").encode())
                FAILURE_WRITTEN[0] = True
            fh.write(blocks[i % 4])
            written += len(blocks[i % 4])
            i += 1


FAILURE_WRITTEN = [False]


def to_ere(pattern: str) -> str:
    """Python regex (the subset the signatures use) → POSIX ERE."""
    cls = {"d": "[0-9]", "w": "[[:alnum:]_]", "W": "[^[:alnum:]_]", "s": "[[:space:]]", "S": "[^[:space:]]"}
    inner = {"d": "0-9", "w": "[:alnum:]_", "s": "[:space:]", "n": ""}   # grep works per line: no newline in a class
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith(("(?=", "(?!", "(?<=", "(?<!"), i):   # lookarounds: not in ERE, dropped (same lines)
            depth, j = 0, i
            while True:
                if pattern[j] == "\\":
                    j += 2
                    continue
                if pattern[j] == "[":   # a bracket may hold parentheses: skip it whole
                    j = pattern.index("]", j + 2) + 1
                    continue
                depth += {"(": 1, ")": -1}.get(pattern[j], 0)
                j += 1
                if depth == 0:
                    break
            i = j
        elif pattern.startswith("(?P<", i):
            out.append("(")
            i = pattern.index(">", i) + 1
        elif pattern.startswith("(?:", i):
            out.append("(")
            i += 3
        elif pattern[i] == "\\":
            nxt = pattern[i + 1]
            out.append(cls.get(nxt, "\\" + nxt))
            i += 2
        elif pattern[i] in "*+?" and pattern[i + 1:i + 2] == "?":  # lazy → greedy (same lines match)
            out.append(pattern[i])
            i += 2
        elif pattern[i] == "[":
            j, negate, items = i + 1, False, []
            if pattern[j] == "^":
                negate, j = True, j + 1
            while pattern[j] != "]":
                if pattern[j] == "\\":
                    items.append(inner.get(pattern[j + 1], pattern[j + 1]))
                    j += 2
                else:
                    items.append(pattern[j])
                    j += 1
            close = ["]"] if "]" in items else []  # a literal ] must come first in an ERE bracket
            out.append("[" + ("^" if negate else "") + "".join(close + [x for x in items if x != "]"]) + "]")
            i = j + 1
        else:
            out.append(pattern[i])
            i += 1
    return "".join(out)


def ere_patterns(workdir: Path) -> Path:
    pats = [to_ere(s.pattern) for s in SIGNATURES] + [to_ere(ERROR_RE.pattern)]
    examples = workdir / "examples.txt"
    for s, ere in zip(SIGNATURES, pats):  # the translation must still match the signature's real example
        if s.requires:   # matched only in a context (a frame of DeepSpeed's config code) grep cannot know
            continue
        examples.write_text(s.example + "\n")
        p = subprocess.run(["grep", "-E", "-c", "-e", ere, str(examples)], capture_output=True, text=True, timeout=30)
        if p.stdout.strip() != "1":
            raise SystemExit(f"ERE translation of {s.id} does not match its example: {ere!r} ({p.stderr.strip()})")
    path = workdir / "patterns.ere"
    path.write_text("\n".join(pats) + "\n")
    return path


def run_doctor(log: Path, engine: str) -> dict:
    code = ("import json, resource, sys, time\nfrom dsv3_preflight.doctor import triage\n"
            "t = time.perf_counter(); doc = triage([sys.argv[1]]); dt = time.perf_counter() - t\n"
            "s = resource.getrusage(resource.RUSAGE_SELF); c = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
            "print(json.dumps({'seconds': dt, 'cpu_s': s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime,"
            " 'peak_rss_mb': s.ru_maxrss / 1024,"
            " 'verdict': doc['verdict'], 'top': doc['findings'][0]['id'] if doc['findings'] else None,"
            " 'lines': doc['files'][0]['lines']}))")
    env = {**os.environ, "DSV3_PREFLIGHT_DOCTOR_ENGINE": engine, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, env=env, timeout=3600)
    if p.returncode:
        raise SystemExit(p.stderr)
    return json.loads(p.stdout)


def run_grep(log: Path, patterns: Path) -> dict:
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(["grep", "-E", "-a", "-c", "-f", str(patterns), str(log)], capture_output=True, text=True,
                       env={**os.environ, "LC_ALL": "C"}, timeout=3600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"seconds": time.perf_counter() - t, "cpu_s": cpu, "matching_lines": int(p.stdout.strip() or 0)}


def run_excerpts(files: list[str], engine: str) -> float:
    """Seconds per file for one process that diagnoses each short log on its own (as the CLI does per run)."""
    code = ("import sys, time\nfrom dsv3_preflight.doctor import triage\n"
            "triage([sys.argv[1]])\n"   # imports and first-use caches are paid once, outside the timing
            "t = time.perf_counter()\nfor f in sys.argv[1:]: triage([f])\nprint(time.perf_counter() - t)")
    env = {**os.environ, "DSV3_PREFLIGHT_DOCTOR_ENGINE": engine, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-c", code, *files], capture_output=True, text=True, env=env, timeout=3600)
    if p.returncode:
        raise SystemExit(p.stderr)
    return float(p.stdout.strip().splitlines()[-1]) / len(files)


def excerpts(n: int) -> None:
    corpus = REPO / "tests" / "data" / "doctor" / "corpus"
    rows = [json.loads(line) for line in (corpus / "manifest.jsonl").read_text().splitlines() if line.strip()]
    files = [str(corpus / r["file"]) for r in rows if r["split"] == "dev"][:n]
    kib = sum(os.path.getsize(f) for f in files) / len(files) / 1024
    print(f"{len(files)} development corpus excerpts, {kib:.1f} KiB on average; load average {os.getloadavg()[0]:.1f}")
    print(f"\n{'needle search':44} {'ms per log':>10}")
    for name, engine in (("auto (Python below 256 KiB)", "auto"), ("GNU grep -E for every chunk", "grep"),
                         ("pure Python", "python")):
        print(f"{name:44} {1000 * run_excerpts(files, engine):10.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-mb", type=int, default=1024)
    ap.add_argument("--python-engine", action="store_true", help="also time the pure-Python needle search")
    ap.add_argument("--dir", default=None, help="where to write the log (default: a temp dir)")
    ap.add_argument("--excerpts", type=int, default=0, help="instead: time N short corpus logs with each needle search")
    args = ap.parse_args()
    if args.excerpts:
        return excerpts(args.excerpts)
    if not shutil.which("grep"):
        raise SystemExit("grep is needed for the comparison")
    workdir = Path(tempfile.mkdtemp(prefix="bench_doctor_", dir=args.dir))
    log = workdir / "synthetic.log"
    try:
        t = time.perf_counter()
        generate(log, args.size_mb)
        size_mb = log.stat().st_size / 2**20
        print(f"generated {size_mb:.0f} MiB synthetic log in {time.perf_counter() - t:.1f}s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        patterns = ere_patterns(workdir)
        rows = [("doctor (grep -E needles + python regex)", run_doctor(log, "auto"))]
        if args.python_engine:
            rows.append(("doctor (pure python needles)", run_doctor(log, "python")))
        g = run_grep(log, patterns)
        print(f"\n{'tool':44} {'seconds':>8} {'MiB/s':>8} {'CPU s':>7} {'peak RSS MiB':>13}  result")
        for name, r in rows:
            print(f"{name:44} {r['seconds']:8.1f} {size_mb / r['seconds']:8.1f} {r['cpu_s']:7.1f} {r['peak_rss_mb']:13.0f}  "
                  f"verdict={r['verdict']} root cause={r['top']} ({r['lines']} lines)")
        print(f"{f'grep -E -c (same {len(SIGNATURES) + 1} patterns, LC_ALL=C)':44} {g['seconds']:8.1f} "
              f"{size_mb / g['seconds']:8.1f} {g['cpu_s']:7.1f} {'-':>13}  {g['matching_lines']} matching lines (no classification)")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
