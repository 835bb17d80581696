"""Logs as collectors, launchers and editors hand them over (the formats: benchmarks/log_formats.py): Docker's and
kubectl's timestamps, the kubelet's CRI files, kubectl --prefix, docker compose, Docker's json-file records, CRLF,
moreutils' ts, journalctl, UTF-16 from Windows PowerShell; a launcher's rank label on every line (srun, Open MPI, torchrun --tee);
one file for every node under pdsh's or our launcher's prefixes.

The program's own prefixes (``[default3]:``, srun's ``3: ``, a C++ ``frame #2: ``, glog's ``I1124`` severity) are then
no longer at the start of the line. The doctor must read such a log as it reads the bare one: before, a healthy run's
teardown (C++ frames) read as a failure, messages wrapped over two lines were lost, Docker's JSON records were read
with their escapes and UTF-16 was refused as binary.
"""
import functools
import json
import sys
from pathlib import Path

import pytest

from dsv3_preflight.doctor import triage
from dsv3_preflight.doctor.attribution import origin_of, strip_collector, time_of
from dsv3_preflight.doctor.reader import open_log

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from log_formats import COLLECTORS, LABELS, recorded_logs  # noqa: E402  (the formats, shared with bench_doctor_accuracy --formats)

DATA = Path(__file__).resolve().parents[1] / "data" / "doctor"
LOGS = recorded_logs(DATA)   # the recorded fixtures and the corpus's development part


def _output(path: Path) -> list[bytes]:
    """The lines the program printed: a log pasted hard-wrapped or quoted (tests/doctor/test_doctor_pasted.py) is unwrapped
    first, as the reader does, since a collector or a launcher prefixes the program's lines, before anyone pastes."""
    with open_log(str(path)) as stream:
        return stream.read().split(b"\n")


def _what(doc: dict) -> tuple:
    first = doc.get("first_failure") or {}
    return (doc["verdict"], doc["cause_class"], first.get("finding"), first.get("rank"), first.get("local_rank"))


@functools.cache
def _bare(path: Path) -> tuple:
    """What the doctor says of the recorded log itself: the reference every collector's and label's test compares
    with, read once per module run (the module runs on one worker), not once per format (about 20 of them)."""
    return _what(triage([str(path)]))


@pytest.mark.parametrize("collector", sorted(COLLECTORS))
def test_every_recorded_log_reads_the_same_under_a_collectors_prefix(collector, tmp_path):
    wrap = COLLECTORS[collector]
    assert len(LOGS) > 300
    changed = []
    for path in LOGS:
        wrapped = tmp_path / path.name
        wrapped.write_bytes(wrap(_output(path)))
        bare, collected = _bare(path), _what(triage([str(wrapped)]))
        if collected != bare:
            changed.append((str(path.relative_to(DATA)), bare, collected))
    assert changed == []


@pytest.mark.parametrize("label", sorted(LABELS))
def test_every_recorded_log_has_the_same_cause_under_a_launchers_rank_label(label, tmp_path):
    # before: a C++ frame, a wrapped message's second line, "RuntimeError: Broken pipe" alone on its line and a
    # shell's "Killed" were read at the line's start, where the label now is (6-7 of 341 changed)
    changed = []
    for path in LOGS:
        wrapped = tmp_path / path.name
        wrapped.write_bytes(LABELS[label](_output(path)))
        bare, labelled = _bare(path), _what(triage([str(wrapped)]))
        if labelled[:3] != bare[:3]:
            changed.append((str(path.relative_to(DATA)), bare, labelled))
    assert changed == []


def test_a_finished_run_with_its_teardown_backtrace_stays_healthy_in_a_cri_file(tmp_path):
    # the recorded three-node run whose store host left first: node 1's agent printed a C++ backtrace, then the exit
    # barrier's message; read from the kubelet's file it was "cause not recognised" (the frames were matched)
    src = DATA / "exit_barrier_after_success" / "node1.log"
    cri = tmp_path / "0.log"
    cri.write_bytes(COLLECTORS["cri-file"](src.read_bytes().split(b"\n")))
    doc = triage([str(cri)])
    assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0), doc["summary"]


def test_the_pod_is_the_node_the_collectors_time_is_the_lines_time(tmp_path):
    log = tmp_path / "job.log"   # kubectl logs -l job-name=dsv3-lora --prefix --timestamps
    log.write_text(
        "[pod/dsv3-lora-worker-0/pytorch] 2026-11-24T10:10:00.100000000Z [default0]:[rank0]:[E1124 10:10:00.1 "
        "ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=88, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600412 milliseconds before timing out.\n"
        "[pod/dsv3-lora-worker-1/pytorch] 2026-11-24T10:00:01.250000000Z [default1]:[rank9]: torch.OutOfMemoryError: "
        "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79.10 GiB of which 1.06 GiB "
        "is free.\n")
    doc = triage([str(log)])
    first = doc["first_failure"]
    assert (doc["cause_class"], first["node"], first["rank"], first["local_rank"]) == ("gpu_oom", "dsv3-lora-worker-1", 9, 1)
    assert first["time"] == "11-24 10:00:01.250" and first["text"].startswith("[default1]:[rank9]: torch.OutOfMemoryError")


STRIPPED = [
    ("2025-09-02T20:12:55.418123456Z [default5]:[rank13]: torch.OutOfMemoryError: CUDA out of memory.",
     "[default5]:[rank13]: torch.OutOfMemoryError: CUDA out of memory.", None, 13, 5),
    ("2025-09-02T20:12:55.418123456+08:00 stderr F 3: Duplicate GPU detected : rank 3 and rank 0 both on CUDA device 3000",
     "3: Duplicate GPU detected : rank 3 and rank 0 both on CUDA device 3000", None, 3, None),
    ("[pod/trainer-worker-2/pytorch] 2025-09-02T20:12:55Z frame #2: c10::DistNetworkError::DistNetworkError(...)",
     "frame #2: c10::DistNetworkError::DistNetworkError(...)", "trainer-worker-2", None, None),
    ("trainer-2  | [rank1]: torch.cuda.OutOfMemoryError: CUDA out of memory.",
     "[rank1]: torch.cuda.OutOfMemoryError: CUDA out of memory.", "trainer-2", 1, None),
    # DeepSpeed's pdsh runner over a C++ backtrace (the frame rule reads the line's start)
    ("worker-5: frame #2: c10::DistNetworkError::DistNetworkError(...)",
     "frame #2: c10::DistNetworkError::DistNetworkError(...)", "worker-5", None, None),
    ("[pod/trainer-worker-2/pytorch] worker-5: [rank22]: ValueError: bad", "[rank22]: ValueError: bad", "trainer-worker-2", 22, None),
    # a program's own ISO time without a zone, or a table, is the line itself
    ("2020-08-03T10:20:25 | mmf.trainers.core.training_loop: Starting training...",
     "2020-08-03T10:20:25 | mmf.trainers.core.training_loop: Starting training...", None, None, None),
    ("loss   | 0.3412", "loss   | 0.3412", None, None, None),
    # journalctl -u train: the journal's time, host and process[pid]; a time before "CUDA error: ..." is ts's, not one
    ("Sep 02 20:12:55 gpu-node-2 python3[4242]: frame #2: c10::DistNetworkError::DistNetworkError(...)",
     "frame #2: c10::DistNetworkError::DistNetworkError(...)", "gpu-node-2", None, None),
    ("Sep 02 20:12:55 CUDA error: out of memory", "CUDA error: out of memory", None, None, None),
    # the journal's prefix is the last taken off: a systemd unit's "name.service: " is the message, no pdsh host
    ("Feb 24 09:28:28 gpu-node-2 systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited",
     "nvidia-fabricmanager.service: Control process exited, code=exited", "gpu-node-2", None, None),
    # our own console's verdict and CLI errors are not a pdsh host's lines
    ("NO-GO: 1 fail", "NO-GO: 1 fail", None, None, None),
    ("dsv3-preflight: error: refused input x.log", "dsv3-preflight: error: refused input x.log", None, None, None),
    # programs that begin a message with their own name: no host (before, "nvidia-container-cli" was the node)
    ("nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update your driver",
     "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update your driver", None, None, None),
    ("python3: can't open file '/work/train.py': [Errno 2] No such file or directory",
     "python3: can't open file '/work/train.py': [Errno 2] No such file or directory", None, None, None),
    ("x86_64-linux-gnu-gcc: fatal error: Killed signal terminated program cc1plus",
     "x86_64-linux-gnu-gcc: fatal error: Killed signal terminated program cc1plus", None, None, None),
    ("gpu-node-3: python3: can't open file 'x.py'", "python3: can't open file 'x.py'", "gpu-node-3", None, None),
]


@pytest.mark.parametrize("line,rest,node,rank,local_rank", STRIPPED, ids=[r[0][:34] for r in STRIPPED])
def test_a_collectors_prefix_is_taken_off_and_its_node_kept(line, rest, node, rank, local_rank):
    text, collected_on = strip_collector(line)
    o = origin_of(line)
    assert (text, collected_on) == (rest, node)
    assert (o.node, o.rank, o.local_rank) == (node, rank, local_rank)


@pytest.mark.parametrize("style", ["pdsh", "ours"])
def test_the_nodes_of_a_multi_node_fixture_in_one_prefixed_file_read_as_the_files_do(style, tmp_path):
    # one console for all nodes, as DeepSpeed's pdsh runner (`node1: ...`) or our `launch --all-nodes`
    # (`[node 1 node1] ...`) prints it; the finished run's node-1 backtrace was an error under pdsh's prefix
    for fixture in ("exit_barrier_after_success", "rdzv_id_closed_by_node1", "abort_at_exit_then_store_lost", "nodes"):
        files = sorted((DATA / fixture).glob("*.log"))
        one = tmp_path / f"{fixture}-{style}.log"
        one.write_text("".join((f"{f.stem}: " if style == "pdsh" else f"[node {r} {f.stem}] ") + line + "\n"
                               for r, f in enumerate(files) for line in f.read_text(errors="replace").splitlines()))
        by_files, in_one = triage([str(DATA / fixture)]), triage([str(one)])
        assert _what(in_one)[:3] == _what(by_files)[:3], fixture
        assert (in_one["first_failure"] or {}).get("node") == (by_files["first_failure"] or {}).get("node"), fixture


def test_a_gzipped_utf16_log_is_read_as_its_text(tmp_path):
    import gzip
    text = (DATA / "cuda_oom.log").read_text().replace("\n", "\r\n")
    log = tmp_path / "train.log.gz"
    log.write_bytes(gzip.compress(text.encode("utf-16")))
    doc = triage([str(log)])
    assert doc["unreadable"] == [] and doc["cause_class"] == "gpu_oom" and doc["files"][0]["lines"] == text.count("\n")


def test_a_docker_json_file_record_is_its_line_at_its_time(tmp_path):
    from dsv3_preflight.doctor.reader import unwrap_record
    record = json.dumps({"log": "\x1b[31m[rank3]: torch.OutOfMemoryError: CUDA out of memory.\x1b[0m\n",
                         "stream": "stderr", "time": "2026-11-24T09:15:02.5Z"})
    assert unwrap_record(record) == ("[rank3]: torch.OutOfMemoryError: CUDA out of memory.", "2026-11-24T09:15:02.5Z")
    assert unwrap_record('{"log": 1}') == ('{"log": 1}', None) and unwrap_record("plain") == ("plain", None)
    log = tmp_path / "abc-json.log"
    log.write_text(record + "\n")
    first = triage([str(log)])["first_failure"]
    assert (first["rank"], first["time"]) == (3, "11-24 09:15:02.500")


def test_a_needle_docker_escaped_in_its_record_is_found(tmp_path):
    # Go's JSON encoder writes <, > and & as \u003c, \u003e, \u0026: the record's bytes do not hold the words as
    # printed, and the reader looks for words in the bytes before it decodes a line
    line = "No valid <IPv4_or_hostname>:<port> pair found"
    record = json.dumps({"log": line + "\n", "stream": "stderr", "time": "2026-11-24T09:15:02.5Z"}, separators=(",", ":"))
    log = tmp_path / "c0ffee-json.log"
    log.write_text(record.replace("<", "\\u003c").replace(">", "\\u003e") + "\n")
    assert "<" not in log.read_text()
    doc = triage([str(log)])
    assert doc["findings"][0]["id"] == "nccl.comm_id_invalid" and doc["first_failure"]["text"] == line


def test_the_collectors_time_is_read_from_the_whole_line():
    t = time_of("2025-09-02T20:12:55.418123456Z [rank4]:[E1206 18:44:12.755262105 ProcessGroupNCCL.cpp:607] [Rank 4]")
    assert (t.month, t.day) == (9, 2) and abs(t.seconds - (20 * 3600 + 12 * 60 + 55.418123456)) < 1e-6
