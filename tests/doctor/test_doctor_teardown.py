"""A run that finished, then printed teardown noise while its processes exited, is healthy (exit 0): the lines a
process prints while it exits (NCCL's proxy closing, torch's heartbeat finding the store gone, CUDA shutting down)
are warnings once the log says the run finished, and stay failures everywhere else.

Lines are from public logs (DeepEP#41, nccl-tests#188, vLLM/torchtitan threads quoting torch 2.3+'s heartbeat
monitor) and the format strings the signatures' sources name."""
from __future__ import annotations

import subprocess
from pathlib import Path

from conftest import python_cli

from dsv3_preflight.doctor import triage

LOSS = "{'loss': 1.2345, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': 0.9}"
FINISHED = "{'train_runtime': 1234.5, 'train_samples_per_second': 3.2, 'train_steps_per_second': 0.1, 'train_loss': 0.95, 'epoch': 1.0}"
PROXY_CLOSE = "0bc8f5b83646:2374:2994 [0] proxy.cc:1521 NCCL WARN [Proxy Service 0] Failed to execute operation Close from rank 0, retcode 3"
PROXY_ACCEPT = "0bc8f5b83646:2374:2994 [0] proxy.cc:1458 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable"
HEARTBEAT = ("[rank5]:[W509 02:29:39.508328002 ProcessGroupNCCL.cpp:1771] [PG ID 0 PG GUID 0 Rank 5] Failed to check the "
             "\"should dump\" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: Broken pipe")
SEND_FAILED = ("[W522 11:47:46.952883182 TCPStore.cpp:106] [c10d] sendBytes failed on SocketImpl(fd=77, "
               "addr=[::ffff:127.0.0.1]:39732, remote=[::ffff:127.0.0.1]:29600): Broken pipe")
DRIVER_DOWN = "user:16899:16961 [1] include/alloc.h:250 NCCL WARN Cuda failure 'driver shutting down'"
TEARDOWN = [PROXY_ACCEPT, PROXY_CLOSE, HEARTBEAT, SEND_FAILED, DRIVER_DOWN]


def _doc(tmp_path, lines: list[str], name: str = "run.log") -> dict:
    log = tmp_path / name
    log.write_text("\n".join(lines) + "\n")
    return triage([str(log)])


def test_a_finished_run_with_teardown_noise_is_healthy_and_lists_the_noise(tmp_path):
    doc = _doc(tmp_path, [LOSS, FINISHED, *TEARDOWN])
    assert (doc["verdict"], doc["exit_code"], doc["cause_class"]) == ("healthy", 0, "healthy")
    assert doc["findings"] == [] and doc["error_lines"] == []
    assert {w["id"]: w["role"] for w in doc["warnings"]} == {
        "nccl.proxy_teardown": "teardown", "torch.heartbeat_store_gone": "teardown", "c10d.store_closed": "teardown",
        "cuda.driver_shutting_down": "teardown"}
    assert "train.completed" in {h["id"] for h in doc["healthy_signs"]}
    assert "5 line(s) printed at teardown after it finished" in doc["summary"]
    assert all(w["fix"] == "" and w["check"] is None and "destroy_process_group()" in w["root_cause"]
               for w in doc["warnings"])   # no store or network fix for the noise of a run that worked


def test_the_same_lines_without_a_sign_that_the_run_finished_are_a_failure(tmp_path):
    doc = _doc(tmp_path, [LOSS, *TEARDOWN])          # progress, but the run never said it finished
    assert (doc["verdict"], doc["exit_code"]) == ("failure", 1)
    assert not [w for w in doc["warnings"] if w["role"] == "teardown"]
    doc = _doc(tmp_path, TEARDOWN)                   # nothing else at all
    assert (doc["verdict"], doc["exit_code"]) == ("failure", 1)


def test_teardown_lines_before_a_sign_that_only_a_process_ended_stay_a_failure(tmp_path):
    # torch's exit warning ends a process (ends_run), but a rank that crashed prints it too: it says nothing of success
    exit_warning = ("[rank0]:[W825 13:09:39.967659278 ProcessGroupNCCL.cpp:1538] Warning: WARNING: destroy_process_group() "
                    "was not called before program exit, which can leak resources.")
    doc = _doc(tmp_path, [LOSS, HEARTBEAT, exit_warning])
    assert (doc["verdict"], doc["exit_code"]) == ("failure", 1)
    assert "torch.heartbeat_store_gone" in [f["id"] for f in doc["findings"]]


def test_teardown_lines_before_the_run_succeeded_in_the_same_file_were_survived(tmp_path):
    # the training loop returned after them (train_runtime): listed as survived, not teardown and not a failure
    doc = _doc(tmp_path, [LOSS, HEARTBEAT, FINISHED])
    assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0)
    assert {w["id"]: w["role"] for w in doc["warnings"]} == {"torch.heartbeat_store_gone": "survived"}


def test_a_real_failure_after_the_finish_is_still_the_cause(tmp_path):
    doc = _doc(tmp_path, [LOSS, FINISHED, "OSError: [Errno 28] No space left on device", PROXY_CLOSE, HEARTBEAT])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "host_resources")
    assert {w["id"] for w in doc["warnings"] if w["role"] == "teardown"} == {"nccl.proxy_teardown", "torch.heartbeat_store_gone"}
    # an error no signature knows, after the finish, is not excused either
    doc = _doc(tmp_path, [LOSS, FINISHED, "RuntimeError: push_to_hub failed: 401 Unauthorized"])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "unrecognised")


def test_per_rank_files_rank0_finished_the_others_print_teardown(tmp_path):
    (tmp_path / "rank0.log").write_text("\n".join([LOSS, FINISHED]) + "\n")
    (tmp_path / "rank5.log").write_text("\n".join([LOSS, HEARTBEAT, SEND_FAILED]) + "\n")
    doc = triage([str(tmp_path / "rank0.log"), str(tmp_path / "rank5.log")])
    assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0)
    assert {w["id"] for w in doc["warnings"]} == {"torch.heartbeat_store_gone", "c10d.store_closed"}


def test_completion_signs_are_read_after_the_first_progress_line(tmp_path):
    # once progress is seen its frequent needles are dropped; the signs that a run finished are always read
    lines = [LOSS] * 50 + ["  5%|▌         | 10/200 [00:10<03:10,  1.00it/s]"] * 20
    for finish in ("Process 1555224 exits successfully.", "`Trainer.fit` stopped: `max_epochs=1` reached.",
                   "# Avg bus bandwidth    : 95.7821", "***** train metrics *****", "Training complete! Final step: 1190",
                   "[after training is done] datetime: 2024-05-08 08:47:31"):
        doc = _doc(tmp_path, [*lines, finish, PROXY_CLOSE])
        assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0), finish


def test_a_store_send_that_breaks_is_a_consequence_not_a_rendezvous_cause(tmp_path):
    # the store's host went away (it failed, or finished first); the TCPStore line does not say the rendezvous failed
    doc = _doc(tmp_path, [LOSS, SEND_FAILED])
    assert (doc["exit_code"], doc["cause_class"], doc["findings"][0]["id"]) == (1, "unrecognised", "c10d.store_closed")


def test_the_cli_prints_teardown_noise_as_such(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("\n".join([LOSS, FINISHED, PROXY_CLOSE, HEARTBEAT]) + "\n")
    p = subprocess.run(python_cli("doctor", str(log)), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("doctor: HEALTHY (exit 0)")
    assert "teardown noise, printed after the log says the run finished:" in p.stdout
    assert f"  - NCCL's proxy service lost a local rank while closing  {log}:3" in p.stdout
    assert f"  - torch's heartbeat monitor lost the rendezvous store  {log}:4" in p.stdout
    assert p.stdout.count("destroy_process_group()") == 1


def test_an_agent_failing_its_exit_barrier_after_its_workers_succeeded_keeps_a_finished_run_healthy(tmp_path):
    # recorded here (SOURCES.md): three torchrun nodes trained and exited 0; node 0, the store's host, left first, and
    # node 1's agent logged the store's 'Failed to recv, got 0 bytes', a C++ backtrace naming DistNetworkError, and
    # 'Error waiting on exit barrier'. torchrun reaches that barrier only when its workers have succeeded
    recorded = Path(__file__).parents[1] / "data" / "doctor" / "exit_barrier_after_success"
    doc = triage([str(recorded)])
    assert (doc["exit_code"], doc["verdict"]) == (0, "healthy"), doc["summary"]
    assert {w["id"] for w in doc["warnings"] if w["role"] == "teardown"} == {"c10d.store_closed",
                                                                            "elastic.exit_barrier_failed"}
    # the barrier's failure does not excuse a failure of the run: the same lines after a worker's own error
    node1 = (recorded / "node1.log").read_text().splitlines()
    broken = [line.replace("rank 1 step 1 loss 0.4213 allreduce [3.0, 3.0, 3.0, 3.0]", "torch.OutOfMemoryError: CUDA out of "
                        "memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB") for line in node1]
    doc = _doc(tmp_path, broken)
    assert (doc["exit_code"], doc["cause_class"]) == (1, "gpu_oom"), doc["summary"]


def test_torchrun_saying_its_workers_succeeded_makes_their_exit_lines_teardown_noise(tmp_path):
    # a real torchrun (one Gloo worker on 127.0.0.1, LOGLEVEL=INFO) logs its agent's lines; the workers' exit-time lines
    # come before them in the node's log, yet after the workers finished: noise of that node (workers_done)
    import os
    import socket
    import sys

    script = tmp_path / "train.py"
    script.write_text("import torch.distributed as dist\ndist.init_process_group('gloo')\n"
                      "print({'loss': 1.2345, 'epoch': 1.0}, flush=True)\ndist.destroy_process_group()\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    torchrun = os.path.join(os.path.dirname(sys.executable), "torchrun")
    p = subprocess.run([torchrun, "--nproc_per_node=1", "--master_addr=127.0.0.1", f"--master_port={port}", str(script)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path,
                       env={**os.environ, "LOGLEVEL": "INFO", "TMPDIR": str(tmp_path)})
    assert p.returncode == 0, p.stderr[-2000:]
    out = p.stdout + p.stderr
    assert "worker group successfully finished" in out
    lines = out.splitlines()
    agent = next(i for i, ln in enumerate(lines) if "worker group successfully finished" in ln)
    doc = _doc(tmp_path, lines[:agent] + [PROXY_CLOSE, DRIVER_DOWN] + lines[agent:])
    assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0), doc["summary"]
    assert "elastic.workers_succeeded" in {h["id"] for h in doc["healthy_signs"]}
    assert {w["role"] for w in doc["warnings"]} == {"teardown"}
    # without the agent's line the same exit-time lines are a failure
    assert _doc(tmp_path, lines[:agent] + [PROXY_CLOSE, DRIVER_DOWN])["exit_code"] == 1
