"""Streaming log reader: files, directories, stdin and gzip, in bounded memory.

The reader never holds a whole log. It reads fixed-size byte chunks, cuts them at the last line break
(``\\n`` or ``\\r``: a progress bar's ``\\r`` updates are separate segments), and searches each chunk for the
signatures' literal needles with one compiled bytes regex. Only the segments that contain a needle are
decoded (UTF-8, undecodable bytes replaced), stripped of ANSI escape codes and handed on with their line
number (counted in ``\\n``, as an editor shows it).
"""
from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterable, Iterator

CHUNK = 8 << 20          # bytes read at once
MAX_SEGMENT = 16 << 10   # a longer "line" (no break for 16 KiB) is cut around the needle
_FORCE_CUT = 4 * CHUNK   # a chunk with no line break at all is cut anyway (bounded memory)
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
STDIN = "-"
ENGINE_ENV = "DSV3_PREFLIGHT_DOCTOR_ENGINE"   # "python" forces the pure-Python needle search
GREP_TIMEOUT_S = 60                           # per chunk (8 MiB): generous, grep needs milliseconds


class UnreadableLog(Exception):
    """An input that cannot be read (missing, permission denied, corrupt gzip)."""


@dataclass
class FileStats:
    path: str
    lines: int = 0
    bytes: int = 0


def expand_inputs(paths: Iterable[str]) -> tuple[list[str], list[dict]]:
    """Files to read (directories walked recursively, sorted; hidden entries skipped) and the unreadable paths."""
    files: list[str] = []
    unreadable: list[dict] = []
    for raw in paths:
        p = str(raw)
        if p == STDIN:
            files.append(STDIN)
        elif os.path.isdir(p):
            found = []
            for root, dirs, names in os.walk(p, onerror=lambda e: unreadable.append({"path": e.filename, "error": e.strerror})):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found += [os.path.join(root, n) for n in sorted(names) if not n.startswith(".")]
            if not found:
                unreadable.append({"path": p, "error": "directory holds no log files"})
            files += found
        elif os.path.exists(p):
            files.append(p)
        else:
            unreadable.append({"path": p, "error": "no such file or directory"})
    # A file named twice (`doctor logs/ logs/node1.log`, `doctor - -`) is read once: its lines would
    # count twice and stdin cannot be read again.
    seen: set[str] = set()
    unique = []
    for f in files:
        key = f if f == STDIN else os.path.realpath(f)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique, unreadable


def open_log(path: str) -> BinaryIO:
    """A binary stream of the log's bytes, gunzipped when it starts with the gzip magic (whatever its name)."""
    try:
        raw: BinaryIO = sys.stdin.buffer if path == STDIN else open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise UnreadableLog(str(exc.strerror or exc)) from exc
    if not hasattr(raw, "peek"):
        raw = io.BufferedReader(raw)  # type: ignore[arg-type]
    try:
        head = raw.peek(2)[:2]  # type: ignore[attr-defined]
    except OSError as exc:
        raise UnreadableLog(str(exc.strerror or exc)) from exc
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def _gnu_grep() -> str | None:
    """Path of a GNU grep (multi-literal search at memory speed), or None."""
    if os.environ.get(ENGINE_ENV, "auto") == "python":
        return None
    path = shutil.which("grep")
    if not path:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return path if b"GNU grep" in out else None


class NeedleSet:
    """Where literal byte strings occur in a chunk.

    Engine ``grep``: the chunk is piped to GNU ``grep -F -o -b`` (Aho-Corasick style search of all needles at
    once, about a GB/s). Engine ``python``: one ``bytes.find`` pass per needle (~15 MB/s for ~50 needles), used
    when no GNU grep is installed or ``DSV3_PREFLIGHT_DOCTOR_ENGINE=python``. Both give the same positions'
    lines; an alternation regex over the literals would be ~5x slower still.
    """

    def __init__(self, needles: Iterable[bytes]):
        unique = set(needles)
        # a needle containing another is redundant: the shorter one finds the same lines
        self.needles = sorted(n for n in unique if not any(o != n and o in n for o in unique))
        self.grep = _gnu_grep()
        self.engine = "grep" if self.grep else "python"

    def positions(self, body: bytes) -> list[int]:
        if self.grep:
            found = self._grep(body)
            if found is not None:
                return found
        found = []
        for n in self.needles:
            p = body.find(n)
            while p >= 0:
                found.append(p)
                p = body.find(n, p + 1)
        found.sort()
        return found

    def _grep(self, body: bytes) -> list[int] | None:
        argv: list = [self.grep, "-F", "-a", "-o", "-b"]
        for n in self.needles:
            argv += [b"-e", n]
        try:
            p = subprocess.run(argv, input=body, capture_output=True, timeout=GREP_TIMEOUT_S,
                               env={**os.environ, "LC_ALL": "C"})
        except (OSError, subprocess.SubprocessError):
            return None
        if p.returncode not in (0, 1):
            return None
        return [int(line[: line.index(b":")]) for line in p.stdout.splitlines()]


def clean(segment: bytes) -> str:
    """Decoded text of one segment: invalid UTF-8 replaced, ANSI codes removed, trailing blanks dropped."""
    return ANSI_RE.sub("", segment.decode("utf-8", "replace")).rstrip()


def _segment_bounds(body: bytes, pos: int) -> tuple[int, int]:
    start = max(body.rfind(b"\n", 0, pos), body.rfind(b"\r", 0, pos)) + 1
    ends = [e for e in (body.find(b"\n", pos), body.find(b"\r", pos)) if e >= 0]
    end = min(ends) if ends else len(body)
    if end - start > MAX_SEGMENT:  # a giant line: keep a window around the needle
        start, end = max(start, pos - MAX_SEGMENT // 2), min(end, pos + MAX_SEGMENT // 2)
    return start, end


def _chunks(stream: BinaryIO, stats: FileStats) -> Iterator[bytes]:
    carry = b""
    while True:
        try:
            data = stream.read(CHUNK)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise UnreadableLog(str(exc)) from exc
        if not data:
            if carry:
                yield carry
            return
        stats.bytes += len(data)
        buf = carry + data if carry else data
        cut = max(buf.rfind(b"\n"), buf.rfind(b"\r"))
        if cut < 0:
            if len(buf) < _FORCE_CUT:
                carry = buf
                continue
            cut = len(buf) - 1
        carry = buf[cut + 1:]
        yield buf[:cut + 1]


def scan(stream: BinaryIO, needles: NeedleSet, stats: FileStats) -> Iterator[tuple[int, bytes]]:
    """(line number, raw segment) for each line segment that contains a needle; fills ``stats`` as it goes."""
    line_base = 1
    last = b""
    for body in _chunks(stream, stats):
        cur_line, cur_pos, next_allowed = line_base, 0, 0
        for pos in needles.positions(body):
            if pos < next_allowed:
                continue
            start, end = _segment_bounds(body, pos)
            cur_line += body.count(b"\n", cur_pos, start)
            cur_pos = start
            next_allowed = end
            yield cur_line, body[start:end]
        line_base += body.count(b"\n")
        last = body[-1:]
    stats.lines = line_base - 1 + (1 if last and last != b"\n" else 0)


def label_for(path: str) -> str:
    """A node label from a file name: node2.log.gz → node2."""
    if path == STDIN:
        return "stdin"
    name = Path(path).name
    for suffix in (".gz", ".log", ".txt", ".out", ".err"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return name
