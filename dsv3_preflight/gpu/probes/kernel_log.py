"""The kernel log's NVIDIA Xid events since boot: the ``kernel_xid`` fact.

Sources, first that answers: the recorded log the run's replay names (``replay.kmsg``: tests, offline
replays; see ``replay.py``), ``/dev/kmsg`` read non-blocking (it ends with EAGAIN; bounded by a record
count and a deadline, so it never waits for new messages), then ``journalctl -k -b`` under a timeout.
``/dev/kmsg`` holds the kernel's ring buffer, which can have overwritten the oldest messages of a long
boot; the fact says how far back it reaches (``oldest``). A log that cannot be read is a finding of its
own (``available: False`` with the reason), never an empty, healthy log.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Any

from dsv3_preflight.facts import LIVE, Replay
from dsv3_preflight.gpu.xid import parse_lines, stamp, summarize
from dsv3_preflight.registry import probe

from .replay import kernel_log_replay

KMSG = "/dev/kmsg"
MAX_RECORDS = 200_000
READ_DEADLINE_S = 3.0
JOURNAL_TIMEOUT_S = 8.0
JOURNAL_LINES = 100_000
KEPT_LINES = 40


def read_kmsg(path: str = KMSG, max_records: int = MAX_RECORDS, deadline_s: float = READ_DEADLINE_S) -> dict[str, Any]:
    """The ring buffer's records from the oldest, without blocking: {records, lines (NVRM only), oldest, truncated}."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    kept: list[str] = []
    records = 0
    oldest = None
    truncated = False
    stop = time.monotonic() + deadline_s
    try:
        while True:
            if records >= max_records or time.monotonic() > stop:
                truncated = True
                break
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break  # EAGAIN: the end of the buffer
            except BrokenPipeError:
                continue  # EPIPE: records overwritten while reading; the next read goes on
            if not record:
                break
            records += 1
            line = record.decode("utf-8", errors="replace").split("\n", 1)[0]
            if oldest is None:
                oldest = stamp(line)
            if "NVRM" in line:
                kept.append(line)
    finally:
        os.close(fd)
    return {"records": records, "lines": kept, "oldest": oldest, "truncated": truncated}


def read_journal(timeout: float = JOURNAL_TIMEOUT_S) -> dict[str, Any]:
    exe = shutil.which("journalctl")
    if exe is None:
        raise OSError("journalctl is not installed")
    proc = subprocess.run([exe, "-k", "-b", "-q", "--no-pager", "-o", "short", "-n", str(JOURNAL_LINES)],
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise OSError(f"journalctl -k -b exited {proc.returncode}: {proc.stderr.strip()[:200]}")
    lines = proc.stdout.splitlines()
    return {"records": len(lines), "lines": [line for line in lines if "NVRM" in line],
            "oldest": stamp(lines[0]) if lines else None, "truncated": len(lines) >= JOURNAL_LINES}


def kernel_xid_facts(source: str, read: dict[str, Any]) -> dict[str, Any]:
    events = parse_lines(read["lines"])
    return {"available": True, "source": source, "error": None, "records": read["records"], "oldest": read.get("oldest"),
            "truncated": read.get("truncated", False), "events": summarize(events),
            "lines": [line for line in read["lines"] if "Xid" in line or "fallen off" in line][-KEPT_LINES:]}


@probe("kernel_xid", needs=["replay"], timeout=15)
def kernel_xid(replay: Replay = LIVE) -> dict[str, Any]:
    """NVIDIA Xid events in the kernel log since boot (/dev/kmsg, else journalctl -k), grouped by GPU and Xid."""
    recorded = kernel_log_replay(replay)
    if recorded is not None:
        source, lines = recorded
        return kernel_xid_facts(source, {"records": len(lines), "lines": [x for x in lines if "NVRM" in x],
                                         "oldest": stamp(lines[0]) if lines else None})
    errors = []
    try:
        return kernel_xid_facts(KMSG, read_kmsg())
    except OSError as exc:
        errors.append(f"{KMSG}: {exc.strerror or exc}")
    try:
        return kernel_xid_facts("journalctl -k -b", read_journal())
    except (OSError, subprocess.TimeoutExpired) as exc:
        errors.append(f"journalctl -k -b: {exc}")
    return {"available": False, "source": None, "error": "; ".join(errors), "events": [], "lines": []}
