"""The streaming reader copes with real logs: gzip, ANSI colours, progress-bar carriage returns, partial lines,
non-UTF-8 bytes, needles across chunk boundaries, giant lines and big files in bounded memory."""
import gzip
import tracemalloc
from pathlib import Path

import pytest

from dsv3_preflight.doctor import reader, triage
from dsv3_preflight.doctor.attribution import local_stamp, stamp_text

OOM = b"torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.15 GiB"
DUP = b"gpu-node-1:29880:30398 [3] init.cc:497 NCCL WARN Duplicate GPU detected : rank 11 and rank 8 both on CUDA device 53000"
FILLER = b"gpu-node-0:97:176 [0] NCCL INFO Channel 00/0 : 0[7000] -> 1[1b000] [send] via NET/Socket/0\n"
DATA = Path(__file__).resolve().parents[1] / "data" / "doctor"


def _top(doc):
    return doc["findings"][0]


def test_gzip_is_detected_by_content_whatever_the_name(tmp_path):
    plain = (DATA / "cuda_oom.log").read_bytes()
    for name in ("rank9.log.gz", "rank9.log"):
        path = tmp_path / name
        path.write_bytes(gzip.compress(plain))
        top = _top(triage([str(path)]))
        assert top["id"] == "cuda.out_of_memory" and top["evidence"][0]["line"] == 2


def test_truncated_gzip_is_refused_input(tmp_path):
    path = tmp_path / "cut.log.gz"
    path.write_bytes(gzip.compress(FILLER * 1000 + OOM)[:200])
    doc = triage([str(path)])
    assert doc["unreadable"] and doc["unreadable"][0]["path"] == str(path)


def test_ansi_colours_are_stripped_from_matching_and_evidence(tmp_path):
    path = tmp_path / "colour.log"
    path.write_bytes(b"\x1b[1;31m" + OOM + b"\x1b[0m\n")
    ev = _top(triage([str(path)]))["evidence"][0]
    assert "\x1b" not in ev["text"] and ev["text"].startswith("torch.cuda.OutOfMemoryError")


def test_progress_bar_carriage_returns_keep_editor_line_numbers(tmp_path):
    bar = b"\r".join(b"Epoch 0:  %d%%|##  | %d/500" % (p, p * 5) for p in range(0, 100, 5))
    path = tmp_path / "bar.log"
    path.write_bytes(FILLER * 2 + bar + b"\r" + DUP + b"\r\n" + FILLER)
    doc = triage([str(path)])
    ev = _top(doc)["evidence"][0]
    assert ev["line"] == 3 and ev["text"].startswith("gpu-node-1:29880")
    assert doc["files"][0]["lines"] == 4


def test_error_printed_after_a_progress_bar_on_the_same_segment_is_found(tmp_path):
    # the real pattern of https://github.com/pytorch/pytorch/issues/118369: tqdm text then the watchdog error
    path = tmp_path / "tqdm.log"
    path.write_bytes(b"Epoch 0:   6%|##   | 32040/500150 [6:28:43<94:39:17,  1.37it/s][E ProcessGroupNCCL.cpp:458] [Rank 0] "
                     b"Watchdog caught collective operation timeout: WorkNCCL(SeqNum=96120, OpType=ALLREDUCE, "
                     b"Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out.\n")
    top = _top(triage([str(path)]))
    assert top["id"] == "nccl.watchdog_timeout" and top["rank"] == 0
    assert top["title"] == "Collective ALLREDUCE timed out (SeqNum 96120)"


def test_non_utf8_bytes_and_a_partial_last_line_are_read(tmp_path):
    path = tmp_path / "bytes.log"
    path.write_bytes(b"caf\xe9 \xff\xfe\n" + OOM)  # latin-1 byte, invalid bytes, no final newline
    doc = triage([str(path)])
    assert _top(doc)["evidence"][0]["line"] == 2 and doc["files"][0]["lines"] == 2


def test_needle_across_a_chunk_boundary_is_found_with_its_line_number(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "CHUNK", 37)  # every needle crosses a boundary somewhere
    path = tmp_path / "small_chunks.log"
    path.write_bytes(FILLER * 7 + DUP + b"\n" + FILLER * 3 + OOM + b"\n")
    doc = triage([str(path)])
    lines = {f["id"]: f["evidence"][0]["line"] for f in doc["findings"]}
    assert lines == {"nccl.duplicate_gpu": 8, "cuda.out_of_memory": 12}
    assert doc["files"][0]["lines"] == 12


def test_a_giant_line_without_breaks_is_cut_around_the_needle(tmp_path):
    path = tmp_path / "giant.log"
    path.write_bytes(b"x" * (3 * reader.MAX_SEGMENT) + OOM + b"y" * (3 * reader.MAX_SEGMENT) + b"\n")
    ev = _top(triage([str(path)]))["evidence"][0]
    assert ev["line"] == 1 and "CUDA out of memory" in ev["text"]


def test_interleaved_writes_of_many_ranks_are_attributed_per_line(tmp_path):
    lines = []
    for step in range(50):
        for r in range(8):
            lines.append(b"[default%d]:[rank%d]: {'loss': 1.0, 'step': %d}" % (r, 8 + r, step))
    lines.insert(173, b"[default5]:[rank13]: " + OOM)
    path = tmp_path / "ranks.log"
    path.write_bytes(b"\n".join(lines) + b"\n")
    top = _top(triage([str(path)]))
    assert (top["rank"], top["local_rank"], top["evidence"][0]["line"]) == (13, 5, 174)


def test_big_file_is_streamed_in_bounded_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(reader, "CHUNK", 1 << 20)
    path = tmp_path / "big.log"
    block = FILLER * 10000  # ~0.9 MB
    with open(path, "wb") as fh:
        for i in range(24):
            fh.write(block)
            if i == 20:
                fh.write(OOM + b"\n")
    tracemalloc.start()
    doc = triage([str(path)])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert path.stat().st_size > 20 << 20
    assert peak < 8 << 20, f"peak {peak / 2**20:.1f} MiB for a {path.stat().st_size / 2**20:.0f} MiB log"
    assert _top(doc)["evidence"][0]["line"] == 21 * 10000 + 1


@pytest.mark.parametrize("name,expected", [("node2.log.gz", "node2"), ("gpu-node-1.log", "gpu-node-1"),
                                           ("worker-3.out", "worker-3"), ("-", "stdin"),
                                           ("run/attempt_0/3/stderr.log", "3/stderr"),
                                           # our launcher's logs (launch/ray_launch.py, launch/gate.py)
                                           ("reports/launch-20261124-083103-node1-lab-node1.log", "lab-node1"),
                                           ("launch-20261124-083103-gpu-node-3.log", "gpu-node-3")])
def test_node_label_comes_from_the_file_name(name, expected):
    assert reader.label_for(name) == expected


@pytest.mark.skipif(reader._gnu_grep() is None, reason="GNU grep is not installed: only the python engine exists here")
@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.log")))
def test_grep_and_python_engines_find_the_same_evidence(name, monkeypatch):
    monkeypatch.setenv(reader.ENGINE_ENV, "grep")   # auto searches chunks this small in Python
    with_grep = triage([str(DATA / name)])
    monkeypatch.setenv(reader.ENGINE_ENV, "python")
    pure = triage([str(DATA / name)])
    assert with_grep == pure


def test_python_engine_is_used_when_asked(monkeypatch):
    monkeypatch.setenv(reader.ENGINE_ENV, "python")
    assert reader.NeedleSet([b"x"]).engine == "python"


def test_auto_searches_a_small_chunk_in_python_and_a_large_one_with_grep(monkeypatch):
    if reader._gnu_grep() is None:
        pytest.skip("GNU grep is not installed: only the python engine exists here")
    needles = reader.NeedleSet([b"NCCL WARN", b"out of memory"])
    assert needles.engine_for(100) == "python" and needles.engine_for(reader.GREP_MIN_BYTES) == "grep"
    small = b"step 1\nCUDA out of memory\n"
    large = small + b"x" * reader.GREP_MIN_BYTES   # the same find by either search
    assert needles.positions(small) == needles.positions(large) == [(12, b"out of memory")]
    monkeypatch.setenv(reader.ENGINE_ENV, "grep")
    assert reader.NeedleSet([b"x"]).engine_for(1) == "grep"
    monkeypatch.setenv(reader.ENGINE_ENV, "python")
    assert reader.NeedleSet([b"x"]).engine_for(1 << 30) == "python"


def test_torchrun_log_dir_files_of_several_nodes_are_labelled_by_node_and_local_rank(tmp_path):
    # torchrun --log-dir logs/nodeN --redirects 3 on three nodes, collected in one directory (the layout recorded in
    # the network-namespace lab, torch 2.13): <node>/<run id>/attempt_0/<local rank>/{stdout,stderr}.log
    paths = [str(tmp_path / f"node{n}" / f"none_{n}x" / "attempt_0" / str(lr) / f"{s}.log")
             for n in range(3) for lr in range(2) for s in ("stdout", "stderr")]
    labels = reader.labels_for(paths)
    assert labels[paths[0]] == ("node0", 0) and labels[paths[-1]] == ("node2", 1), labels
    assert {labels[p] for p in paths} == {(f"node{n}", lr) for n in range(3) for lr in range(2)}
    # the nodes' run directories side by side: the run directory is the node
    side = [str(tmp_path / run / "attempt_1" / "0" / "stderr.log") for run in ("none_a1", "none_b2")]
    assert [reader.labels_for(side)[p] for p in side] == [("none_a1", 0), ("none_b2", 0)]
    # one node's log directory: the ranks are told apart, the node is not named
    one = [str(tmp_path / "none_a1" / "attempt_0" / str(lr) / "stderr.log") for lr in range(2)]
    assert [reader.labels_for(one)[p] for p in one] == [(None, 0), (None, 1)]
    # plain files: their names, and their directories where the names collide
    plain = [str(tmp_path / "a" / "out.log"), str(tmp_path / "b" / "out.log"), str(tmp_path / "gpu-node-1.log")]
    assert [reader.labels_for(plain)[p] for p in plain] == [("a/out", None), ("b/out", None), ("gpu-node-1", None)]
    assert reader.labels_for([plain[0]]) == {plain[0]: (None, None)}
    assert reader.labels_for([one[1]]) == {one[1]: (None, 1)}   # one rank's file alone: no node, its local rank
    # our launcher's reports directory: torchrun's --log-dir is named as the node's launch log; both are the node's
    launched = [str(tmp_path / "launch-20261124-101500-node1-gpu-1.log"), str(tmp_path / "launch-20261124-101500-cluster.log"),
                str(tmp_path / "launch-20261124-101500-node1-gpu-1" / "7f3e_ab12" / "attempt_0" / "3" / "error.json")]
    assert [reader.labels_for(launched)[p] for p in launched] == [("gpu-1", None), ("cluster", None), ("gpu-1", 3)]


def _record_failure(error_file: Path, fail) -> None:
    """What a rank under torchrun's ``@record`` (HF's and DeepSpeed's entry points) leaves when ``fail`` raises:
    torch's own ErrorHandler writes ``error_file`` (``TORCHELASTIC_ERROR_FILE``)."""
    import os

    from torch.distributed.elastic.multiprocessing.errors import record
    error_file.parent.mkdir(parents=True)
    before = os.environ.get("TORCHELASTIC_ERROR_FILE")
    os.environ["TORCHELASTIC_ERROR_FILE"] = str(error_file)
    try:
        record(fail)()
    except Exception:   # record() writes the file and raises again, as in the rank
        pass
    finally:
        if before is None:
            del os.environ["TORCHELASTIC_ERROR_FILE"]
        else:
            os.environ["TORCHELASTIC_ERROR_FILE"] = before


def test_a_ranks_torchrun_error_file_is_read_as_the_traceback_it_holds(tmp_path):
    import json
    from datetime import datetime

    import torch

    def load_shards():   # a frame of the rank's own code, as a real traceback has
        torch.empty(1 << 50)   # torch's real DefaultCPUAllocator error
    error_file = tmp_path / "none_x1" / "attempt_0" / "1" / "error.json"
    _record_failure(error_file, load_shards)
    written = json.loads(error_file.read_text())
    assert error_file.read_text().count("\n") <= 1   # one JSON line: the traceback's lines are escaped in it
    stamp = int(written["message"]["extraInfo"]["timestamp"])

    doc = triage([str(error_file)])
    first = doc["first_failure"]
    assert _top(doc)["id"] == "host.cpu_memory" and doc["cause_recognised"]
    # the exception's own line of the decoded traceback, not the JSON document
    assert first["text"].startswith("RuntimeError: [enforce fail") and "DefaultCPUAllocator" in first["text"], first
    assert first["line"] > 3 and first["local_rank"] == 1   # its directory is the local rank
    assert first["time"] == stamp_text(local_stamp(stamp)) == datetime.fromtimestamp(stamp).strftime("%m-%d %H:%M:%S.000")
    assert doc["unrecognised"]["count"] == 0   # the traceback's header belongs to the exception it ends in


def test_the_other_shape_of_a_torchrun_error_file_and_json_that_is_not_one(tmp_path):
    # torchrun's ProcessFailure also reads {"message": "<text>", "timestamp": N} (error_file_data's "new message
    # format", torch/distributed/elastic/multiprocessing/errors/__init__.py)
    flat = tmp_path / "error.json"
    flat.write_text('{"message": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. '
                    'GPU 3 has a total capacity of 79.15 GiB", "timestamp": 1764000000}')
    doc = triage([str(flat)])
    assert _top(doc)["id"] == "cuda.out_of_memory" and doc["first_failure"]["text"].startswith("torch.OutOfMemoryError")
    assert doc["first_failure"]["time"] == stamp_text(local_stamp(1764000000))
    # another tool's JSON (a key torchrun does not write) is read as the text it is, as before
    other = tmp_path / "events.json"
    other.write_text('{"message": "torch.OutOfMemoryError: CUDA out of memory.", "step": 10}')
    doc = triage([str(other)])
    assert _top(doc)["id"] == "cuda.out_of_memory" and doc["first_failure"]["text"].startswith('{"message"')
