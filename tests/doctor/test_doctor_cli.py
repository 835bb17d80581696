"""`dsv3-preflight doctor` as a user runs it: files, directories, stdin, gzip, --json, and the exit codes:
0 progress and no error, 1 a failure (recognised or not), 4 a refused input, 5 neither errors nor progress."""
import gzip
import json
import subprocess
import sys
from pathlib import Path

from conftest import python_cli

DATA = Path(__file__).resolve().parents[1] / "data" / "doctor"


def _run(*args, stdin: bytes | None = None, timeout: int = 60):
    return subprocess.run(python_cli("doctor", *args), input=stdin, capture_output=True, timeout=timeout)


def test_failed_run_exits_1_and_prints_cause_fix_and_check():
    p = _run(str(DATA / "duplicate_gpu.log"))
    out = p.stdout.decode()
    assert p.returncode == 1, p.stderr
    assert "doctor: FAILURE (exit 1)" in out and "Duplicate GPU: rank 11 and rank 8 both on CUDA device 53000" in out
    assert f"{DATA / 'duplicate_gpu.log'}:2" in out
    assert "export CUDA_DEVICE_ORDER=PCI_BUS_ID" in out and "caught before launch by: dsv3-preflight run --only gpu.rank_mapping" in out
    assert "first failure: node gpu-node-1, rank 11" in out


def test_healthy_log_exits_0():
    p = _run(str(DATA / "healthy_run.log"))
    assert p.returncode == 0 and "doctor: HEALTHY" in p.stdout.decode()


def test_unrecognised_failure_exits_1_with_cause_not_recognised_the_lines_and_nearest_causes():
    p = _run(str(DATA / "unrecognised_error.log"))
    out = p.stdout.decode()
    assert p.returncode == 1 and "doctor: FAILURE" in out and "cause not recognised" in out
    assert "TensorBoardCallback requires tensorboard" in out and "nearest known causes" in out


def test_log_without_errors_or_progress_exits_5_never_0():
    p = _run(str(DATA / "no_known_failure.log"))
    assert p.returncode == 5 and "doctor: UNKNOWN" in p.stdout.decode()
    assert "no error and no sign of progress" in p.stdout.decode()


def test_empty_stdin_is_unknown_not_healthy():
    p = _run("-", stdin=b"")
    assert p.returncode == 5


def test_directory_of_node_logs_and_json_output():
    p = _run(str(DATA / "nodes"), "--json")
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    assert doc["verdict"] == "failure" and doc["findings"][0]["node"] == "gpu-node-2" and doc["exit_code"] == 1
    assert len(doc["files"]) == 3


def test_stdin_dash_and_gzip_on_stdin():
    plain = (DATA / "port_in_use.log").read_bytes()
    for data in (plain, gzip.compress(plain)):
        p = _run("-", "--json", stdin=data)
        assert p.returncode == 1, p.stderr
        doc = json.loads(p.stdout)
        assert doc["findings"][0]["id"] == "c10d.address_in_use" and doc["files"][0]["path"] == "-"


def test_gz_file(tmp_path):
    path = tmp_path / "node1.log.gz"
    path.write_bytes(gzip.compress((DATA / "ib_completion.log").read_bytes()))
    p = _run(str(path), "--json")
    assert p.returncode == 1 and json.loads(p.stdout)["findings"][0]["id"] == "nccl.ib_completion_error"


def test_missing_file_exits_4_and_names_it(tmp_path):
    p = _run(str(tmp_path / "nope.log"))
    assert p.returncode == 4
    assert f"refused input {tmp_path / 'nope.log'}: no such file or directory" in p.stderr.decode()
    assert "no readable log" in p.stdout.decode()


def test_corrupt_gzip_exits_4(tmp_path):
    path = tmp_path / "bad.log.gz"
    path.write_bytes(b"\x1f\x8b\x08\x00garbage")
    p = _run(str(path), "--json")
    assert p.returncode == 4 and str(path) in p.stderr.decode()


def test_no_path_is_a_usage_error():
    p = _run()
    assert p.returncode == 4 and b"needs at least one PATH" in p.stderr


def test_list_signatures_shows_the_table():
    p = _run("--list-signatures", "--json")
    rows = json.loads(p.stdout)
    assert p.returncode == 0 and any(r["id"] == "cuda.error_802" and r["check"] == "gpu.cuda_init" for r in rows)
    assert any(r["id"] == "ras.dead" for r in rows)
    text = _run("--list-signatures").stdout.decode()
    assert "fabricmanager.version_mismatch" in text


def test_help_does_not_import_torch_or_ray():
    code = ("import sys\nfrom dsv3_preflight.cli import main\n"
            "try:\n    main(['doctor', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('torch', 'ray', 'deepspeed', 'peft') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip().splitlines()[-1] == "[]"


def test_a_log_run_does_not_import_torch(tmp_path):
    code = ("import sys\nfrom dsv3_preflight.doctor import triage\n"
            f"triage([{str(DATA / 'multirank_interleaved.log')!r}])\n"
            "print(sorted(m for m in ('torch', 'ray', 'deepspeed') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.strip().splitlines()[-1] == "[]", p.stderr


def test_a_file_named_twice_is_read_once():
    # `doctor nodes/ nodes/<file>` and `doctor - -`: lines are not counted twice, stdin is not read twice
    nodes = DATA / "nodes"
    one = sorted(nodes.iterdir())[0]
    p = _run(str(nodes), str(one), str(nodes / ".." / "nodes" / one.name), "--json")
    doc = json.loads(p.stdout)
    assert [f["path"] for f in doc["files"]] == [str(f) for f in sorted(nodes.iterdir())]
    p = _run("-", "-", "--json", stdin=(DATA / "port_in_use.log").read_bytes())
    assert [f["path"] for f in json.loads(p.stdout)["files"]] == ["-"]
