"""Logs as people paste them (the formats: ``PASTES`` in benchmarks/log_formats.py): quoted under ``> `` (a GitHub or
forum reply, a mailing list), or hard-wrapped at a width (GNU ``fold -w``, a terminal or web console copied as it
showed the lines).

Before, a quoted log hid every line-start pattern (a healthy run's C++ teardown frames read as a failure; 9 of 380
recorded logs changed), and a hard wrap cut signatures' words in two (33 of 380 changed at 80 columns, 22 at 120;
now 0, and 8 and 6 of 411).
The doctor now unquotes a log whose lines are nearly all quoted, and joins the pieces of a hard-wrapped one, keeping
the file's own line numbers.
"""
import functools
import gzip
import sys
from pathlib import Path

import pytest

from dsv3_preflight.doctor import triage
from dsv3_preflight.doctor.reader import SNIFF, relining_of
from dsv3_preflight.doctor.reading import LineReader

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from log_formats import PASTES, recorded_logs  # noqa: E402  (shared with bench_doctor_accuracy --formats)

DATA = Path(__file__).resolve().parents[1] / "data" / "doctor"
CORPUS = DATA / "corpus"
LOGS = recorded_logs(DATA)   # the recorded fixtures and the corpus's development part


def triage_needles():
    return LineReader()._needles_all


def _what(doc: dict) -> tuple:
    first = doc.get("first_failure") or {}
    return (doc["verdict"], doc["cause_class"], first.get("finding"))


@functools.cache
def _bare(path: Path) -> tuple:
    """What the doctor says of the recorded log itself, read once per module run (the module runs on one worker)."""
    return _what(triage([str(path)]))


def _changed(fmt: str, tmp_path: Path) -> list:
    changed = []
    for path in LOGS:
        pasted = tmp_path / path.name
        pasted.write_bytes(PASTES[fmt](path.read_bytes().split(b"\n")))
        bare, got = _bare(path), _what(triage([str(pasted)]))
        if got != bare:
            changed.append((str(path.relative_to(DATA)), bare, got))
    return changed


def test_every_recorded_log_reads_the_same_quoted(tmp_path):
    assert len(LOGS) > 300
    assert _changed("quoted", tmp_path) == []


@pytest.mark.parametrize("fmt", ["fold-80", "fold-120"])
def test_recorded_logs_read_the_same_hard_wrapped_but_for_single_cuts_outside_a_signature(fmt, tmp_path):
    # what is left (8 and 6 of 411 when written; 33 and 22 of 380 before unwrapping): a log with one long line, cut
    # once, not inside a signature's words (a wrap is then not told from a log's own next line), and a log already
    # hard-wrapped at a wider width (only the narrower wrap is undone)
    changed = _changed(fmt, tmp_path)
    assert len(changed) <= len(LOGS) // 50, changed


def test_the_recorded_logs_that_are_unquoted_or_unwrapped_as_they_are(tmp_path):
    # three development excerpts were posted hard-wrapped (a word cut across the break: "Timeo|ut(ms)", "indi|cates")
    # and one quoted; no other recorded log is taken for either: nccl-tests' tables, a rich traceback's box, a rank's
    # watchdog lines of one length ending in "timing out.", a DeepSpeed message wrapped at its words are the log's own
    found = {}
    for path in LOGS:
        data = path.read_bytes()
        how = relining_of(data[:SNIFF], len(data) <= SNIFF)
        if how:
            found[str(path.relative_to(CORPUS))] = (how.quoted, how.width)
    assert found == {"gpu_oom/gpu_oom_003.log": (True, None), "nccl_hang/nccl_hang_015.log": (False, 137),
                     "nccl_hang/nccl_hang_051.log": (False, 183), "nccl_hang/nccl_hang_064.log": (False, 116)}


def test_a_folded_log_keeps_its_own_line_numbers_and_the_whole_lines(tmp_path):
    src = DATA / "store_unreachable_torch213.log"   # torch 2.13's store client, retrying a peer with no route
    lines = src.read_bytes().split(b"\n")
    folded = tmp_path / "worker.log"
    folded.write_bytes(PASTES["fold-80"](lines))
    pieces = folded.read_bytes().split(b"\n")
    bare, doc = triage([str(src)]), triage([str(folded)])
    assert doc["files"][0]["lines"] == len(pieces) - 1 > bare["files"][0]["lines"]
    first, was = doc["first_failure"], bare["first_failure"]
    assert (first["finding"], first["text"]) == (was["finding"], was["text"])
    start = pieces[first["line"] - 1]                  # the line number is the folded file's: its first piece
    assert len(start) == 80 and lines[was["line"] - 1].startswith(start)
    for ev in doc["findings"][0]["evidence"]:
        assert ev["text"].encode().startswith(pieces[ev["line"] - 1])


def test_a_message_cut_once_inside_a_signatures_words_is_joined(tmp_path):
    # one line, cut once by a console 72 columns wide in the middle of "connect to": by lengths alone one cut is not
    # told from a log's own next line; the words of the signature it cuts tell it
    line = ("gpu-a:4101:4190 [0] misc/socket.cc:591 NCCL WARN socketStartConnect: connect to 10.1.2.3<45678> failed : "
            "No route to host")
    width = line.index("connect to ") + 3
    log = tmp_path / "rank0.log"
    log.write_text(f"gpu-a:4101:4190 [0] NCCL INFO Bootstrap : Using eth0:10.1.2.4<0>\n{line[:width]}\n{line[width:]}\n")
    data = log.read_bytes()
    assert relining_of(data, True).width is None and relining_of(data, True, triage_needles()).width == width
    doc = triage([str(log)])
    first = doc["first_failure"]
    assert (doc["cause_class"], first["finding"], first["line"], first["text"]) == (
        "nic_iface", "nccl.socket_connect_failed", 2, line), doc["summary"]
    assert doc["files"][0]["lines"] == 3


def test_a_gzipped_log_quoted_twice_in_a_mail_is_read_as_its_text(tmp_path):
    src = DATA / "exit_barrier_after_success" / "node1.log"   # a finished run whose C++ teardown frames are noise
    quoted = b"\n".join(b"> > " + line if line else b"> >" for line in src.read_bytes().split(b"\n"))
    log = tmp_path / "node1.log.gz"
    log.write_bytes(gzip.compress(b"On Mon, Nov 24, 2026 Alice wrote:\n" + quoted))
    doc = triage([str(log)])
    assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0), doc["summary"]


def test_a_log_with_a_few_lines_of_its_own_starting_with_a_chevron_is_not_unquoted():
    # a shell's continuation prompt or a diff's old side in a log is not a quote: nine lines in ten must carry it
    head = b"> python train.py \\\n>   --deepspeed ds.json\nstep 1 loss 2.3\nstep 2 loss 2.1\nstep 3 loss 2.0\n"
    assert not relining_of(head, True)
