"""benchmarks/bench_doctor.py compares the doctor with `grep -E` running the same patterns; it translates every
signature to POSIX ERE and stops when a translation no longer matches its own example (a signature written with a
construct the translation does not know broke the benchmark once: nccl.bridge_peer's lookahead). Kept here so a new
signature cannot break the benchmark unnoticed."""
import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_doctor.py"


def test_every_signature_translates_to_an_ere_that_matches_its_example(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_doctor", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_doctor"] = module
    try:
        spec.loader.exec_module(module)
        path = module.ere_patterns(tmp_path)   # SystemExit names the signature whose translation fails
    finally:
        sys.modules.pop("bench_doctor", None)
    assert len(path.read_text().splitlines()) == len(module.SIGNATURES) + 1
