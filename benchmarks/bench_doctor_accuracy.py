"""Accuracy of `dsv3-preflight doctor` on the corpus of real public log excerpts (tests/data/doctor/corpus).

    .venv/bin/python benchmarks/bench_doctor_accuracy.py                 # held-out part, then development part
    .venv/bin/python benchmarks/bench_doctor_accuracy.py --part heldout   # the figures docs/doctor.md states
    .venv/bin/python benchmarks/bench_doctor_accuracy.py --part dev --misses   # also list the development part's misses

The corpus is split by ``int(sha256(url), 16) % 3 == 0`` → held out; every excerpt was committed before any signature
was written for it (``git log -- tests/data/doctor/corpus`` shows each round of excerpts committed first). Signatures
are written from the development part only; the held-out part is for measuring, so this script never lists held-out
file names or their predictions, only the aggregate figures.

The held-out part is reported twice: the **original** held-out set (the rows of the first corpus commit,
``"round": 1`` in the manifest: the 82 excerpts the first figures were measured on, so old and new figures compare
on the same logs) and the **whole** held-out part (every round).

Each excerpt is diagnosed on its own (one file, as a user would pass it). The prediction is the class of the
headline root cause when the doctor says ``failure``; ``healthy`` when it exits 0; ``unrecognised`` for a
failure whose cause is not recognised (exit 1, "cause not recognised"); ``no_progress`` for a log with neither
errors nor progress (exit 5). A healthy excerpt is right only when the doctor exits 0.

``--formats`` measures the same excerpts as they reach the doctor in the field (``log_formats.py``: under Docker's,
kubectl's and the kubelet's prefixes, Docker's json-file records, CRLF, moreutils' ts, UTF-16, a launcher's rank
label on every line): right causes per format, beside the bare excerpts, for this doctor and for the baseline
(default 9d14419, the doctor before it read past those prefixes).

``--baseline COMMIT`` (repeatable; default: a918243, the doctor as issue 17 found it, and 6ec2f56, the doctor of the
first corpus round, before round 2's signature work) runs the doctor of that commit from a ``git archive`` copy on
the same excerpts, its classes mapped onto the new ones; a918243's UNKNOWN verdict exited 0, so it is shown as
``unknown(exit 0)``.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "data" / "doctor" / "corpus"
CLASSES = ("cuda_fabric", "version_drift", "pci_rank_dup", "port_rendezvous", "nic_iface", "nccl_hang",
           "nccl_transport", "gpu_oom", "host_resources", "lora_empty", "config", "healthy")
BASELINES = ("a918243", "6ec2f56")   # the doctor as issue 17 measured it; the doctor after the first corpus round
BASELINE_NAMES = {"a918243": "before issue 17", "6ec2f56": "corpus round 1", "9d14419": "before log formats"}
FORMATS_BASELINE = "9d14419"   # the doctor before it read logs in their collectors' and launchers' formats

# The driver runs inside a subprocess (one per doctor version) with that version's package on sys.path.
DRIVER = r"""
import contextlib, io, json, sys
from dsv3_preflight.doctor import triage
for path in json.loads(sys.stdin.read()):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        doc = triage([path])
    top = doc["findings"][0] if doc.get("findings") else None
    print(json.dumps({"path": path, "verdict": doc["verdict"], "exit_code": doc.get("exit_code"),
                      "cause_class": doc.get("cause_class"),
                      "top_id": top and top["id"], "top_class": top and top["class"], "top_role": top and top["role"]}))
"""

OLD_CLASS = {"cuda_init": "cuda_fabric", "rank_mapping": "pci_rank_dup", "rendezvous": "port_rendezvous",
             "nic_selection": "nic_iface", "collective_timeout": "nccl_hang", "transport": "nccl_transport",
             "lora_save": "lora_empty", "process_exit": "unrecognised"}
OLD_ID = {"cuda.out_of_memory": "gpu_oom", "host.oom_killer": "host_resources"}


def load_manifest() -> list[dict]:
    rows = [json.loads(line) for line in (CORPUS / "manifest.jsonl").read_text().splitlines() if line.strip()]
    for r in rows:   # the split is a pure function of the URL: a row that disagrees is a corrupted manifest
        want = "heldout" if int(hashlib.sha256(r["url"].encode()).hexdigest(), 16) % 3 == 0 else "dev"
        if r["split"] != want:
            raise SystemExit(f"{r['file']}: split {r['split']!r} but sha256(url) % 3 says {want!r}")
    return rows


def run_driver(pythonpath: Path, files: list[str]) -> dict[str, dict]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    p = subprocess.run([sys.executable, "-c", DRIVER], input=json.dumps(files), capture_output=True, text=True,
                       env=env, timeout=1800, cwd=str(pythonpath))
    if p.returncode:
        raise SystemExit(f"doctor driver failed ({pythonpath}):\n{p.stderr[-3000:]}")
    out = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            out[r["path"]] = r
    return out


def predict_current(r: dict) -> str:
    if r["exit_code"] is None:   # a doctor without cause_class/exit_code in its document: the old mapping
        return predict_old(r)
    return r["cause_class"] or "unrecognised"


def predict_old(r: dict) -> str:
    if r["verdict"] == "healthy":
        return "healthy"
    if r["verdict"] != "failure":
        return "unknown(exit 0)"
    return OLD_ID.get(r["top_id"]) or OLD_CLASS.get(r["top_class"], "unrecognised")


def baseline_tree(commit: str, into: Path) -> Path:
    data = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit, "dsv3_preflight"],
                          capture_output=True, check=True, timeout=120).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def score(rows: list[dict], preds: dict[str, str]) -> dict:
    truth = {r["file"]: r["class"] for r in rows}
    right = sum(1 for f, c in truth.items() if preds[f] == c)
    per = {}
    for c in CLASSES:
        tp = sum(1 for f, t in truth.items() if t == c and preds[f] == c)
        n_true = sum(1 for t in truth.values() if t == c)
        n_pred = sum(1 for p in preds.values() if p == c)
        per[c] = {"n": n_true, "tp": tp, "recall": tp / n_true if n_true else None,
                  "precision": tp / n_pred if n_pred else None, "predicted": n_pred}
    healthy_failed = sum(1 for f, t in truth.items() if t == "healthy" and preds[f] not in ("healthy", "no_progress",
                                                                                            "unknown(exit 0)"))
    failed_called_ok = sum(1 for f, t in truth.items() if t != "healthy" and preds[f] in ("healthy", "unknown(exit 0)"))
    confusion = Counter((truth[f], preds[f]) for f in truth)
    # read as neither an error nor progress: rule 2 makes those exit 5, whatever their thread's cause was, so
    # a doctor that keeps the rule and reads them the same way can be right on the others at most
    for c in CLASSES:
        per[c]["no_progress"] = confusion.get((c, "no_progress"), 0)
    no_progress = sum(per[c]["no_progress"] for c in CLASSES)
    return {"n": len(rows), "right": right, "rate": right / len(rows) if rows else 0.0, "per_class": per,
            "healthy_called_failed": healthy_failed, "failure_exit_0": failed_called_ok, "confusion": confusion,
            "no_progress": no_progress}


def fmt(x) -> str:
    return "  -  " if x is None else f"{100 * x:5.1f}"


def print_report(title: str, s: dict, bases: list[tuple[str, dict]]) -> None:
    print(f"\n=== {title}: {s['n']} excerpts ===")
    head = f"{'class':16} {'n':>3} {'recall%':>8} {'prec%':>7}"
    for name, _ in bases:
        head += f"   | {name[:16]:>16} recall% prec%"
    print(head)
    for c in CLASSES:
        p = s["per_class"][c]
        line = f"{c:16} {p['n']:3d} {fmt(p['recall']):>8} {fmt(p['precision']):>7}"
        for _, b in bases:
            line += f"   | {'':16} {fmt(b['per_class'][c]['recall']):>7} {fmt(b['per_class'][c]['precision']):>5}"
        print(line)
    print(_overall("this doctor", s))
    for name, b in bases:
        print(_overall(name, b))
    below = [c for c in CLASSES if s["per_class"][c]["n"] and s["per_class"][c]["recall"] < 0.75]
    print("classes below 75% recall: " + (", ".join(below) if below else "none"))
    if s["n"]:
        capped = [c for c in CLASSES if s["per_class"][c]["n"]
                  and (s["per_class"][c]["n"] - s["per_class"][c]["no_progress"]) < 0.75 * s["per_class"][c]["n"]]
        print(f"read as no error and no progress (exit 5 by rule 2): {s['no_progress']}; at most "
              f"{s['n'] - s['no_progress']}/{s['n']} = {100 * (s['n'] - s['no_progress']) / s['n']:.1f}% with them read "
              f"so; classes that could not reach 75%: " + (", ".join(capped) if capped else "none"))
    cols = list(CLASSES) + sorted({p for (_, p) in s["confusion"]} - set(CLASSES))
    short = {c: c[:7] for c in cols}
    print("\nconfusion matrix (rows: true class, columns: predicted)")
    print(f"{'':16}" + "".join(f"{short[c]:>8}" for c in cols))
    for t in CLASSES:
        print(f"{t:16}" + "".join(f"{(s['confusion'].get((t, c)) or '.'):>8}" for c in cols))


def _overall(name: str, s: dict) -> str:
    worst = min((s["per_class"][c]["recall"] or 0.0 for c in CLASSES if s["per_class"][c]["n"]), default=0.0)
    return (f"{name + ':':24} right cause {s['right']}/{s['n']} = {100 * s['rate']:.1f}%   lowest class recall "
            f"{100 * worst:.1f}%   healthy called failed {s['healthy_called_failed']}   failures that exit 0 "
            f"{s['failure_exit_0']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("heldout", "dev", "both"), default="both")
    ap.add_argument("--baseline", action="append", default=None,
                    help=f"commit whose doctor is measured beside (repeatable; default {' and '.join(BASELINES)})")
    ap.add_argument("--no-baseline", action="store_true")
    ap.add_argument("--misses", action="store_true", help="list the development part's misses (never the held-out's)")
    ap.add_argument("--round", dest="rounds", type=int, action="append", default=None,
                    help="only the manifest rows of this corpus round (repeatable): a new round's first measurement")
    ap.add_argument("--json", dest="as_json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--formats", action="store_true",
                    help="right causes with every excerpt in each field format (log_formats.py), beside the bare ones")
    args = ap.parse_args()
    if args.formats:
        formats_report(args)
        return
    baselines = [] if args.no_baseline else (args.baseline or list(BASELINES))
    rows = load_manifest()
    parts = ["heldout", "dev"] if args.part == "both" else [args.part]
    rows = [r for r in rows if r["split"] in parts and (not args.rounds or r.get("round", 1) in args.rounds)]
    files = [str(CORPUS / r["file"]) for r in rows]
    cur = run_driver(REPO, files)
    preds = {r["file"]: predict_current(cur[str(CORPUS / r["file"])]) for r in rows}
    base_preds: list[tuple[str, dict]] = []
    for commit in baselines:
        with tempfile.TemporaryDirectory(prefix="doctor_baseline_") as tmp:
            old = run_driver(baseline_tree(commit, Path(tmp)), files)
        name = f"{commit} ({BASELINE_NAMES[commit]})" if commit in BASELINE_NAMES else commit
        base_preds.append((name, {r["file"]: predict_current(old[str(CORPUS / r["file"])]) for r in rows}))
    sets = []
    if "heldout" in parts and args.rounds:
        sets.append(("heldout_rounds", f"HELD-OUT, round(s) {', '.join(map(str, args.rounds))} only",
                     [r for r in rows if r["split"] == "heldout"]))
    elif "heldout" in parts:
        sets.append(("heldout_original", "HELD-OUT, original set (round-1 manifest rows; never used to write signatures)",
                     [r for r in rows if r["split"] == "heldout" and r.get("round", 1) == 1]))
        sets.append(("heldout_all", "HELD-OUT, whole part (all rounds; never used to write signatures)",
                     [r for r in rows if r["split"] == "heldout"]))
    if "dev" in parts:
        sets.append(("dev", "DEVELOPMENT part (signatures were written from these: optimistic)",
                     [r for r in rows if r["split"] == "dev"]))
    out = {}
    for key, label, sub in sets:
        s = score(sub, {r["file"]: preds[r["file"]] for r in sub})
        bs = [(name, score(sub, {r["file"]: bp[r["file"]] for r in sub})) for name, bp in base_preds]
        out[key] = (s, bs)
        if not args.as_json:
            print_report(label, s, bs)
    if args.as_json:
        def plain(s: dict) -> dict:
            return {k: v for k, v in s.items() if k != "confusion"} | {
                "confusion": {f"{t}->{q}": n for (t, q), n in s["confusion"].items()}}
        print(json.dumps({k: {"current": plain(s), "baselines": {name: plain(b) for name, b in bs}}
                          for k, (s, bs) in out.items()}, indent=2))
    if args.misses and "dev" in parts:
        print("\ndevelopment misses (true → predicted):")
        for r in rows:
            if r["split"] == "dev" and preds[r["file"]] != r["class"]:
                print(f"  {r['file']}: {r['class']} → {preds[r['file']]}")


def formats_report(args) -> None:
    """Right causes per part with every excerpt written in each field format, for this doctor and the baseline."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from log_formats import FORMATS

    baselines = [] if args.no_baseline else (args.baseline or [FORMATS_BASELINE])
    rows = [r for r in load_manifest() if args.part == "both" or r["split"] == args.part]
    parts = [p for p in ("heldout", "dev") if any(r["split"] == p for r in rows)]
    with tempfile.TemporaryDirectory(prefix="doctor_formats_") as tmp:
        trees = [("this doctor", REPO)] + [(c, baseline_tree(c, Path(tmp) / f"base-{c}")) for c in baselines]
        written: dict[str, dict[str, str]] = {"bare": {r["file"]: str(CORPUS / r["file"]) for r in rows}}
        for name, wrap in FORMATS.items():
            written[name] = {}
            for r in rows:
                out = Path(tmp) / name / r["file"]
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(wrap((CORPUS / r["file"]).read_bytes().split(b"\n")))
                written[name][r["file"]] = str(out)
        table = {}
        for tree_name, tree in trees:
            for fmt_name, paths in written.items():
                got = run_driver(tree, list(paths.values()))
                preds = {f: predict_current(got[p]) for f, p in paths.items()}
                for part in parts:
                    sub = [r for r in rows if r["split"] == part]
                    table[(tree_name, fmt_name, part)] = score(sub, {r["file"]: preds[r["file"]] for r in sub})
    names = [n for n, _ in trees]
    for part in parts:
        print(f"\n=== {'HELD-OUT' if part == 'heldout' else 'DEVELOPMENT'} part: right causes in each format "
              f"({sum(r['split'] == part for r in rows)} excerpts) ===")
        print(f"{'format':28s}" + "".join(f"{n[:30]:>32s}" for n in names))
        for fmt_name in written:
            cells = []
            for n in names:
                s = table[(n, fmt_name, part)]
                cells.append(f"{s['right']:4d} ({100 * s['rate']:5.1f}%) healthy→failed {s['healthy_called_failed']:2d}")
            print(f"{fmt_name:28s}" + "".join(f"{c:>32s}" for c in cells))


if __name__ == "__main__":
    main()
