"""A run that printed errors and then succeeded, in the same file, survived them: torchrun restarted its workers, a
script caught and retried. When every error of every file comes before a sign that the run succeeded in that file,
the verdict is healthy (exit 0) and the errors are listed as survived; one error after it, or in a file without it,
and the log is judged as before.

The restart is a real torchrun (--max-restarts, one Gloo worker on 127.0.0.1 that fails a real allocation on its
first attempt); the other lines are from the formats the signatures' sources name."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

from dsv3_preflight.doctor import triage

LOSS = "{'loss': 1.2345, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': 0.9}"
FINISHED = "{'train_runtime': 1234.5, 'train_samples_per_second': 3.2, 'train_steps_per_second': 0.1, 'train_loss': 0.95, 'epoch': 1.0}"
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB "
       "of which 1.00 GiB is free.")
UNKNOWN = "RuntimeError: the reward model returned an empty batch"

WORKER = """\
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
if os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0":
    torch.empty(1 << 50, dtype=torch.uint8)   # a real allocation failure on the first attempt
print({'loss': 1.2345, 'epoch': 1.0}, flush=True)
print({'train_runtime': 1.5, 'train_loss': 1.2345, 'epoch': 1.0}, flush=True)
dist.destroy_process_group()
"""


def _doc(tmp_path, lines: list[str], name: str = "run.log", **kw) -> dict:
    log = tmp_path / name
    log.write_text("\n".join(lines) + "\n")
    return triage([str(log)], **kw)


def _torchrun(tmp_path, restarts: int) -> tuple[int, list[str]]:
    script = tmp_path / "w.py"
    script.write_text(WORKER)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    p = subprocess.run([torchrun, "--nproc_per_node=1", f"--max-restarts={restarts}", "--master_addr=127.0.0.1",
                        f"--master_port={port}", str(script)], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path, env={**os.environ, "LOGLEVEL": "INFO", "TMPDIR": str(tmp_path)})
    return p.returncode, (p.stdout + p.stderr).splitlines()


def test_a_real_torchrun_restart_that_then_succeeded_is_healthy_and_lists_what_it_survived(tmp_path):
    rc, lines = _torchrun(tmp_path, restarts=1)
    assert rc == 0, "\n".join(lines[-30:])
    assert any("will restart worker group" in ln for ln in lines) and any("can't allocate memory" in ln for ln in lines)
    doc = _doc(tmp_path, lines)
    assert (doc["verdict"], doc["exit_code"], doc["cause_class"]) == ("healthy", 0, "healthy"), doc["summary"]
    assert {w["id"]: w["role"] for w in doc["warnings"]} == {"host.cpu_memory": "survived",
                                                             "elastic.worker_failed": "survived"}
    assert all(w["fix"] == "" for w in doc["warnings"])
    assert "printed before the run succeeded (survived, not a failure)" in doc["summary"]
    assert doc["findings"] == [] and doc["error_lines"] == [] and doc["unrecognised"]["count"] == 0


def test_the_same_failure_without_a_restart_is_the_cause(tmp_path):
    rc, lines = _torchrun(tmp_path, restarts=0)
    assert rc != 0
    doc = _doc(tmp_path, lines)
    assert (doc["exit_code"], doc["cause_class"]) == (1, "host_resources"), doc["summary"]
    assert not [w for w in doc["warnings"] if w["role"] == "survived"]


def test_errors_before_the_training_loop_returned_were_survived_recognised_or_not(tmp_path):
    doc = _doc(tmp_path, [OOM, LOSS, UNKNOWN, LOSS, FINISHED])
    assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0), doc["summary"]
    roles = {w["id"]: w["role"] for w in doc["warnings"]}
    assert roles == {"cuda.out_of_memory": "survived", "run.error_survived": "survived"}
    unknown = next(w for w in doc["warnings"] if w["id"] == "run.error_survived")
    assert "the reward model returned an empty batch" in unknown["title"]


def test_an_error_after_the_sign_of_success_is_judged_as_before(tmp_path):
    doc = _doc(tmp_path, [OOM, LOSS, FINISHED, UNKNOWN])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "gpu_oom")
    assert not [w for w in doc["warnings"] if w["role"] == "survived"]


def test_an_error_in_a_file_without_a_sign_of_success_is_judged_as_before(tmp_path):
    (tmp_path / "node0.log").write_text("\n".join([LOSS, FINISHED]) + "\n")
    (tmp_path / "node1.log").write_text("\n".join([LOSS, OOM]) + "\n")
    doc = triage([str(tmp_path / "node0.log"), str(tmp_path / "node1.log")])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "gpu_oom")


def test_an_end_that_is_no_success_excuses_nothing(tmp_path):
    # nccl-tests prints its average after wrong results; torch's exit warning follows a crashed rank's traceback too
    doc = _doc(tmp_path, ["# Out of bounds values : 24 FAILED", "# Avg bus bandwidth    : 95.7821"])
    assert doc["exit_code"] == 1
    exit_warning = ("[rank0]:[W825 13:09:39.967659278 ProcessGroupNCCL.cpp:1538] Warning: WARNING: destroy_process_group() "
                    "was not called before program exit, which can leak resources.")
    doc = _doc(tmp_path, [LOSS, OOM, exit_warning])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "gpu_oom")


def test_a_run_the_user_says_hung_is_not_excused(tmp_path):
    doc = _doc(tmp_path, [OOM, LOSS, FINISHED], hung=True)
    assert doc["exit_code"] == 1


def test_teardown_lines_before_and_after_the_success_are_survived_and_noise(tmp_path):
    heartbeat = ("[rank5]:[W509 02:29:39.508328002 ProcessGroupNCCL.cpp:1771] [PG ID 0 PG GUID 0 Rank 5] Failed to check "
                 "the \"should dump\" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: "
                 "Broken pipe")
    doc = _doc(tmp_path, [LOSS, heartbeat, FINISHED, heartbeat])
    assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0), doc["summary"]


def test_the_survived_count_is_every_unrecognised_line_not_the_few_kept(tmp_path):
    doc = _doc(tmp_path, [f"RuntimeError: the reward model returned an empty batch ({i})" for i in range(20)]
               + [LOSS, FINISHED])
    assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0)
    assert "20 error line(s) printed before the run succeeded" in doc["summary"], doc["summary"]
