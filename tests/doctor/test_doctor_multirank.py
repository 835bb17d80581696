"""The first failure under its consequences, on logs written by real multi-process torch.distributed (gloo, CPU)
jobs launched with torchrun: one rank dies or raises, the others get "Connection closed by peer", torchrun sends
SIGTERMs and raises ChildFailedError. Also PyTorch Flight Recorder dumps written by real gloo ranks, read with
torch's own loader."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import python_cli
from ports import free_port

from dsv3_preflight.doctor import triage

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.distributed.is_available(), reason="torch without distributed")

JOB = textwrap.dedent("""
    import datetime, logging, os, signal, sys, time
    import torch, torch.distributed as dist
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "60"))))
    rank = dist.get_rank()
    t = torch.ones(4)
    dist.all_reduce(t)
    logging.info("rank %d step 1 loss 1.0", rank)
    mode = os.environ["FAIL_MODE"]
    store = dist.distributed_c10d._get_default_store()
    stop = []
    if mode == "kill":   # torchrun's SIGTERM must not cut a survivor's report short: note it, end after the report
        signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    if mode == "kill" and rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "segv" and rank == 1:   # a crash in native code: no Python error, the launcher reports the signal
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "stall" and rank == 1:   # stuck outside the collectives (data loading, I/O): the others time out
        time.sleep(120)
    if mode == "sleep":   # every rank waits (a hang the user ends with Ctrl-C)
        time.sleep(120)
    if mode == "two_causes":
        # rank 2 fails first; rank 1 fails once rank 2 has logged (an event, not a guess): the first is the root cause
        if rank == 2:
            logging.error("rank 2 about to fail")
            store.set("rank2_failed", "1")
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if rank == 1:
            store.wait(["rank2_failed"], datetime.timedelta(seconds=60))
            time.sleep(0.01)   # log timestamps have millisecond resolution: make the two distinct
            logging.error("rank 1 about to fail")
            raise ValueError("Target modules ['q_proj'] not found in the base model.")
    try:
        dist.all_reduce(t)
    except Exception:
        if mode != "kill":
            raise
        # a survivor of the killed rank reports the broken connection and lingers (as a real rank blocked in its
        # next collective does) until torchrun sends it the closing SIGTERM. A SIGTERM that comes first (torchrun's
        # monitor can tick right after the kill: a fresh-clone CI run lost rank 0's report so) only sets a flag
        sys.excepthook(*sys.exc_info())   # the report an uncaught error gets (torch's hook prefixes it with [rankN])
        sys.stderr.flush()
        end = time.monotonic() + 120
        while not stop and time.monotonic() < end:
            time.sleep(0.05)
        sys.exit(1)
    logging.info("rank %d done", rank)
""")


def _start_torchrun(tmp_path: Path, mode: str, *extra: str, pg_timeout: float = 60, **popen) -> tuple[subprocess.Popen, Path]:
    """torchrun with 3 ranks of JOB in ``mode``, its output in the returned log."""
    job = tmp_path / "job.py"
    job.write_text(JOB)
    log = tmp_path / f"torchrun_{mode}.log"
    # TMPDIR: torchrun without --log-dir makes /tmp/torchelastic_* and never removes it
    env = {**os.environ, "FAIL_MODE": mode, "OMP_NUM_THREADS": "1", "TMPDIR": str(tmp_path), "PG_TIMEOUT": str(pg_timeout)}
    with open(log, "wb") as fh:
        p = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "3", "--master_addr",
                              "127.0.0.1", "--master_port", str(free_port()), *extra, str(job)],
                             stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=tmp_path, **popen)
    return p, log


def _torchrun(tmp_path: Path, mode: str, *extra: str, pg_timeout: float = 60) -> Path:
    p, log = _start_torchrun(tmp_path, mode, *extra, pg_timeout=pg_timeout)
    try:
        p.wait(timeout=240)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=30)
    assert p.returncode != 0, log.read_text()[-2000:]
    return log


def test_sigkilled_rank_is_the_first_failure_and_the_others_are_its_consequences(tmp_path):
    # --monitor-interval: torchrun stops the others only after they have reported the broken connection
    log = _torchrun(tmp_path, "kill", "--monitor-interval", "2")
    doc = triage([str(log)])
    top = doc["findings"][0]
    assert (top["id"], top["class"], top["role"]) == ("host.sigkill", "host_resources", "root_cause"), doc["summary"]
    assert (doc["first_failure"]["rank"], doc["first_failure"]["local_rank"]) == (1, 1)
    consequences = {f["id"] for f in doc["findings"] if f["role"] == "consequence"}
    assert {"net.connection_closed", "elastic.closing_signal", "elastic.child_failed"} <= consequences
    closed = next(f for f in doc["findings"] if f["id"] == "net.connection_closed")
    assert sorted(closed["ranks"]) == [0, 2] and closed["explained_by"] == "host.sigkill"


def test_a_rank_that_stalls_outside_the_collectives_is_a_hang_not_an_unrecognised_traceback(tmp_path):
    # ranks 0 and 2 time out in Gloo's recv and print "[rankN]: Traceback (most recent call last):" before the
    # RuntimeError that names the timeout: the header is part of that known symptom, not an unknown first error
    log = _torchrun(tmp_path, "stall", pg_timeout=5)
    doc = triage([str(log)])
    assert doc["cause_recognised"] and doc["cause_class"] == "nccl_hang", (doc["summary"], doc["error_lines"])
    top = doc["findings"][0]
    assert top["id"] == "gloo.recv_timeout" and top["role"] == "root_cause", doc["summary"]
    assert not any("Traceback" in e["text"] for e in doc["error_lines"]), doc["error_lines"]


def test_a_rank_that_crashes_in_native_code_is_the_first_failure_not_the_launchers_closing_signals(tmp_path):
    # torchrun prints "closing signal SIGTERM" for the survivors before it reports rank 1's exit code -11: those
    # relayed stops are not a stop from outside, and the crash (a known symptom of an unknown cause) comes first
    log = _torchrun(tmp_path, "segv", "--monitor-interval", "2")
    doc = triage([str(log)])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "unrecognised"), doc["summary"]
    first = doc["first_failure"]
    assert (first["finding"], first["rank"]) == ("process.native_crash", 1), (doc["summary"], first)
    assert doc["summary"].startswith("cause not recognised; the first failure: A rank crashed in native code (signal 11)")
    assert not doc["error_lines"], doc["error_lines"]   # the "job.py FAILED" banner is torchrun's summary, not an error


def test_a_run_stopped_with_ctrl_c_is_not_a_failure_of_its_own_and_with_hung_is_a_hang(tmp_path):
    import signal
    import time
    p, log = _start_torchrun(tmp_path, "sleep", start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while log.read_text().count("step 1 loss") < 3 and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.2)
        assert log.read_text().count("step 1 loss") == 3, log.read_text()[-2000:]
        time.sleep(0.5)
        os.killpg(p.pid, signal.SIGINT)   # what Ctrl-C in the terminal sends: the whole foreground group
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)
    doc = triage([str(log)])
    ids = {f["id"] for f in doc["findings"]}
    assert "python.keyboard_interrupt" in ids and doc["exit_code"] == 1 and not doc["cause_recognised"], doc["summary"]
    assert not any("Traceback" in e["text"] for e in doc["error_lines"]), doc["error_lines"]
    # no cause to name and no "first error": the stop is what the log shows first after its progress
    assert doc["cause_class"] == "interrupted" and doc["summary"].startswith("stopped from outside"), doc["summary"]
    assert doc["first_failure"]["finding"] in ("elastic.signal_exception", "python.keyboard_interrupt")
    assert "after progress" in doc["summary"] and not doc["nearest_causes"]
    hung = triage([str(log)], hung=True)
    assert (hung["cause_class"], hung["stalled"]) == ("nccl_hang", True), hung["summary"]
    assert "after it made progress" in hung["findings"][0]["title"], hung["summary"]


def test_first_cause_in_time_wins_over_a_later_one_across_per_rank_log_files(tmp_path):
    logs = tmp_path / "logs"
    # torchrun looks at its workers every --monitor-interval seconds: both ranks fail before it stops them
    _torchrun(tmp_path, "two_causes", "--monitor-interval", "4", "--log-dir", str(logs), "--redirects", "3")
    files = sorted(str(p) for p in logs.rglob("*.log") if p.stat().st_size)
    assert len(files) >= 3
    doc = triage([str(logs)])
    assert doc["cause_class"] == "gpu_oom", doc["summary"]
    assert doc["first_failure"]["rank"] == 2 and doc["first_failure"]["time"]
    later = next(f for f in doc["findings"] if f["id"] == "peft.target_modules_not_found")
    assert later["role"] == "root_cause" and later["rank"] == 1   # a second, independent error, listed after


FR_JOB = textwrap.dedent("""
    import datetime, os, sys
    os.environ["TORCH_FR_BUFFER_SIZE"] = "200"
    import torch, torch.distributed as dist
    rank, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    t = torch.ones(4)
    for _ in range(3):
        dist.all_reduce(t)
    store = dist.distributed_c10d._get_default_store()
    if rank == 0:
        work = dist.broadcast(t, 0, async_op=True)   # rank 1 never issues it: rank 0 waits
    from torch._C._distributed_c10d import _dump_fr_trace
    with open(os.path.join(out, f"rank_{rank}"), "wb") as fh:
        fh.write(_dump_fr_trace(includeStackTraces=False))   # symbolising C++ stacks took 13-60 s; unread
    store.set(f"dumped{rank}", "1")
    store.wait(["dumped0", "dumped1"], datetime.timedelta(seconds=60))   # both dumps written before anyone exits
    os._exit(0)
""")


@pytest.fixture(scope="module")
def fr_dumps(tmp_path_factory):
    d = tmp_path_factory.mktemp("fr")
    job = d / "fr_job.py"
    job.write_text(FR_JOB)
    dumps = d / "dumps"
    dumps.mkdir()
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, str(job), str(r), port, str(dumps)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) for r in (0, 1)]
    for p in procs:
        p.wait(timeout=180)
    if sorted(os.listdir(dumps)) != ["rank_0", "rank_1"]:
        pytest.skip("this torch build wrote no Flight Recorder dumps for gloo: "
                    + b"".join(p.stdout.read() for p in procs).decode()[-500:])
    return dumps


def test_flight_recorder_dumps_name_the_rank_that_never_entered_the_collective(fr_dumps):
    doc = triage([], flight_recorder=str(fr_dumps))
    assert doc["verdict"] == "failure" and doc["cause_class"] == "nccl_hang", doc["summary"]
    top = doc["findings"][0]
    assert top["id"] == "fr.rank_behind" and top["rank"] == 1
    assert "broadcast" in top["title"] and doc["flight_recorder"]["behind"][0]["ahead"] == [0]


def test_flight_recorder_cli_flag(fr_dumps):
    p = subprocess.run(python_cli("doctor", "--flight-recorder", str(fr_dumps), "--json"), capture_output=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["first_failure"]["rank"] == 1


def test_flight_recorder_directory_that_is_not_dumps_is_a_usage_error(tmp_path):
    (tmp_path / "rank_0").write_bytes(b"not a pickle")
    p = subprocess.run(python_cli("doctor", "--flight-recorder", str(tmp_path)), capture_output=True, timeout=120)
    assert p.returncode == 4 and str(tmp_path).encode() in p.stderr


def test_a_store_lost_after_the_run_started_is_a_consequence_not_a_rendezvous_cause():
    # recorded here (SOURCES.md): the ranks trained, a process of node 0 aborted at exit, node 0's agent (the c10d
    # rendezvous store's host) went down and nodes 1-2 raised RendezvousConnectionError. The store answered at the
    # start, so the port is not the problem: the first failure is node 0's abort
    doc = triage([str(Path(__file__).parents[1] / "data" / "doctor" / "abort_at_exit_then_store_lost")])
    assert (doc["exit_code"], doc["cause_recognised"]) == (1, False), doc["summary"]
    assert "terminate called without an active exception" in doc["first_failure"]["text"], doc["first_failure"]
    assert doc["first_failure"]["node"] == "node0", doc["first_failure"]
    lost = [f for f in doc["findings"] if f["id"] == "store.lost_after_start"]
    assert len(lost) == 1 and lost[0]["role"] == "consequence" and lost[0]["class"] is None, doc["summary"]
    assert lost[0]["nodes"] and set(lost[0]["nodes"]) <= {"node1", "node2"}, lost[0]
    assert not [f for f in doc["findings"] if f["class"] == "port_rendezvous"], doc["summary"]


def test_a_rendezvous_closed_by_the_node_that_timed_out_first_is_a_consequence_of_that_timeout():
    # recorded here (SOURCES.md): node 2 joined another rendezvous id; node 1's agent timed out first and closed the
    # rendezvous, so node 0 never printed the timeout itself: its RendezvousClosedError is the consequence
    doc = triage([str(Path(__file__).parents[1] / "data" / "doctor" / "rdzv_id_closed_by_node1")])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "port_rendezvous"), doc["summary"]
    roots = [(f["id"], f["nodes"]) for f in doc["findings"] if f["role"] == "root_cause"]
    assert roots == [("elastic.rendezvous_timeout", ["node1", "node2"])], doc["summary"]
    closed = [f for f in doc["findings"] if f["id"] == "elastic.rendezvous_closed"]
    assert closed and closed[0]["role"] == "consequence" and closed[0]["nodes"] == ["node0"], doc["summary"]


@pytest.mark.parametrize("fixture", ["rdzv_id_closed_by_node1", "abort_at_exit_then_store_lost", "exit_barrier_after_success",
                                     "nodes"])
def test_the_first_failure_does_not_depend_on_the_order_the_files_are_given_in(fixture):
    # `doctor node2.log node0.log node1.log` and `doctor logs/` name the same node: events without a time are
    # ordered by file name, not by argument order (rdzv_id_closed_by_node1's two timeouts carry no time: the
    # reversed order named node2 before)
    files = sorted(str(p) for p in (Path(__file__).parents[1] / "data" / "doctor" / fixture).glob("*.log"))
    seen = set()
    for order in (files, files[::-1], files[1:] + files[:1]):
        doc = triage(order)
        first = doc["first_failure"] or {}
        seen.add((doc["cause_class"], first.get("finding"), first.get("node"), first.get("rank"), first.get("line")))
    assert len(seen) == 1, seen


def test_two_store_errors_after_the_start_are_one_consequence(tmp_path):
    log = tmp_path / "node1.log"
    log.write_text("{'loss': 1.2345, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': 0.1}\n"
                   "torch.distributed.DistStoreError: Stop_waiting response is expected\n"
                   "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d "
                   "store has failed. See inner exception for details.\n")
    doc = triage([str(log)])
    assert [f["id"] for f in doc["findings"]] == ["store.lost_after_start"], doc["summary"]
    assert doc["findings"][0]["count"] == 2 and len(doc["findings"][0]["evidence"]) == 2


def test_a_store_that_never_answered_stays_the_rendezvous_cause(tmp_path):
    # the same error before any sign of the run: the store was never reached
    log = tmp_path / "node1.log"
    log.write_text("torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d "
                   "store has failed. See inner exception for details.\n")
    doc = triage([str(log)])
    assert (doc["exit_code"], doc["cause_class"], doc["findings"][0]["id"]) == (1, "port_rendezvous",
                                                                               "elastic.rendezvous_connection")


def test_agents_closing_the_rendezvous_after_the_heads_agent_exited_are_the_end_of_a_run_that_worked(tmp_path):
    # recorded here (SOURCES.md): the fixed C10d job of test_doctor_netns exited 0 on all three nodes, but node 1's
    # agent shut the rendezvous down after node 0's agent (hosting the store) had gone: two teardown lines, no
    # end-of-run line (torchrun logs that at INFO). The doctor called it "cause not recognised" (exit 1) and a CI failed
    fixture = Path(__file__).parents[1] / "data" / "doctor" / "c10d_agents_close_late"
    doc = triage([str(fixture)])
    assert (doc["exit_code"], doc["verdict"]) == (0, "healthy"), doc["summary"]
    assert sorted(w["id"] for w in doc["warnings"] if w["role"] == "teardown") == [
        "c10d.store_closed", "elastic.rendezvous_teardown"]
    # the same lines beside a failure are no teardown: node 0's worker raised after its step
    for n in range(3):
        (tmp_path / f"node{n}.log").write_text((fixture / f"node{n}.log").read_text())
    with open(tmp_path / "node0.log", "a") as fh:
        fh.write("ValueError: Target modules {'q_proj', 'v_proj'} not found in the base model. Please check the target "
                 "modules and try again.\n")
    doc = triage([str(tmp_path)])
    assert doc["exit_code"] == 1 and doc["cause_class"] == "lora_empty", doc["summary"]
    # and the lines of one file alone (one node, no peer) are not set aside
    doc = triage([str(fixture / "node1.log")])
    assert doc["exit_code"] == 1, doc["summary"]
