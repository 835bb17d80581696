"""Bounded, streaming log reader: regular files, directories, stdin and gzip.

Inputs are checked before they are read (``expand_inputs``, ``open_log``): a path that is not a regular file
(a FIFO nobody writes, ``/dev/zero``, ``/dev/urandom``, a socket, a block device) is refused without being
opened for reading, so the doctor cannot block or read forever; so is a file whose first bytes are not text
(NUL or control bytes: an archive, a core dump, random data; UTF-16 with a byte order mark is text, read as UTF-8),
an xz/zstd/bzip2 file (only gzip is read), a
corrupt or truncated gzip, and a gzip that inflates beyond ``MAX_RATIO`` times its size or ``MAX_BYTES``. A
refused input is an ``InputError`` naming the file; ``dsv3-preflight doctor`` turns it into exit 4.

The reader never holds a whole log. It reads fixed-size byte chunks, cuts them at the last line break (``\\n``
or ``\\r``: a progress bar's ``\\r`` updates are separate segments), and searches each chunk for the
signatures' literal needles. Only the segments that contain a needle are decoded (UTF-8, undecodable bytes
replaced), stripped of ANSI escape codes and handed on with their line number (counted in ``\\n``).
Memory: about ``4 * CHUNK`` at most, whatever the input.
"""
from __future__ import annotations

import bisect
import functools
import gzip
import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from dsv3_preflight.inputs import InputError as SharedInputError
from dsv3_preflight.inputs import kind_of, open_regular

CHUNK = 8 << 20          # bytes read at once
MAX_SEGMENT = 16 << 10   # a longer "line" (no break for 16 KiB) is cut around the needle
_FORCE_CUT = 4 * CHUNK   # a chunk with no line break at all is cut anyway (bounded memory)
MAX_BYTES = 64 << 30     # bytes read from one input (after gunzip)
MAX_RATIO = 200          # a gzip inflating more than this many times its size is refused (a bomb, not a log)
SNIFF = 64 << 10         # bytes looked at to tell text from binary
ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
STDIN = "-"
ENGINE_ENV = "DSV3_PREFLIGHT_DOCTOR_ENGINE"   # "python" / "grep" force one needle search; "auto" (default) picks
GREP_MIN_BYTES = 256 << 10                    # auto: below this a chunk is searched in Python (no grep process)
GREP_TIMEOUT_S = 60                           # per chunk (8 MiB): generous, grep needs milliseconds
_TEXT_CONTROLS = set(b"\t\n\r\x0b\x0c\x1b\x08\x07")
_BLANK = frozenset(b" \t\n\r\x0b\x0c")   # what bytes.rstrip() strips
_OTHER_COMPRESSION = ((b"\xfd7zXZ\x00", "xz"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"BZh", "bzip2"), (b"PK\x03\x04", "zip"))


class InputError(Exception):
    """An input that is refused or cannot be read; ``path`` names it. The CLI maps it to exit 4."""

    def __init__(self, path: str, reason: str):
        super().__init__(reason)
        self.path = path
        self.reason = reason


UnreadableLog = InputError   # the name this module had before


@dataclass
class FileStats:
    path: str
    lines: int = 0
    bytes: int = 0
    #: the file's last line that is not blank (a terminal's last redraw after ``\r``), at most MAX_SEGMENT bytes
    tail: bytes = b""


def _kind(mode: int) -> str | None:
    """None for a regular file, else what the path is (for the refusal message)."""
    return None if stat.S_ISREG(mode) else kind_of(mode)


def expand_inputs(paths: Iterable[str]) -> tuple[list[str], list[dict]]:
    """Files to read and the refused inputs (``{"path", "error"}``).

    Directories are walked (sorted, hidden entries and symlinked directories skipped); a non-regular entry inside
    a directory is refused like a named one. A file named twice is read once (its lines would count twice and
    stdin cannot be read again).
    """
    files: list[str] = []
    refused: list[dict] = []
    for raw in paths:
        p = str(raw)
        if p == STDIN:
            files.append(STDIN)
            continue
        try:
            st = os.stat(p)
        except FileNotFoundError:
            refused.append({"path": p, "error": "no such file or directory"})
            continue
        except OSError as exc:
            refused.append({"path": p, "error": str(exc.strerror or exc)})
            continue
        if stat.S_ISDIR(st.st_mode):
            found: list[str] = []
            for root, dirs, names in os.walk(p, onerror=lambda e: refused.append({"path": e.filename, "error": e.strerror})):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for n in sorted(names):
                    if n.startswith("."):
                        continue
                    full = os.path.join(root, n)
                    try:
                        kind = _kind(os.stat(full).st_mode)
                    except OSError as exc:
                        refused.append({"path": full, "error": str(exc.strerror or exc)})
                        continue
                    if kind:
                        refused.append({"path": full, "error": f"{kind}, not a log file: refused"})
                    else:
                        found.append(full)
            if not found:
                refused.append({"path": p, "error": "directory holds no log files"})
            files += found
            continue
        kind = _kind(st.st_mode)
        if kind:
            refused.append({"path": p, "error": f"{kind}, not a log file: refused (only regular files, directories and '-' are read)"})
            continue
        files.append(p)
    seen: set[str] = set()
    unique = []
    for f in files:
        key = f if f == STDIN else os.path.realpath(f)
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique, refused


class StreamFilter(io.RawIOBase):
    """A readable stream over ``self.inner``, which it closes with itself."""
    inner: Any

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        try:
            self.inner.close()
        finally:
            super().close()


class _Bounded(StreamFilter):
    """A stream that refuses to give more than ``limit`` bytes (gzip bombs, endless inputs)."""

    def __init__(self, inner: BinaryIO, path: str, limit: int, why: str):
        self.inner, self.path, self.left, self.why = inner, path, limit, why

    def readinto(self, b) -> int:  # type: ignore[override]
        want = min(len(b), max(self.left, 0) + 1)
        try:
            if hasattr(self.inner, "readinto"):   # straight into the caller's buffer: no copy of the chunk
                n = self.inner.readinto(memoryview(b)[:want]) or 0
            else:
                data = self.inner.read(want)
                n = len(data)
                b[:n] = data
        except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise InputError(self.path, f"corrupt or truncated input: {exc}") from exc
        if n > self.left:
            raise InputError(self.path, self.why)
        self.left -= n
        return n


def open_log(path: str, needles: NeedleSet | None = None) -> BinaryIO:
    """A bounded binary stream of the log's text, gunzipped when it starts with the gzip magic (whatever its name).

    Raises ``InputError`` for anything that is not a readable text log (see the module docstring).
    """
    size = None
    if path == STDIN:
        raw: BinaryIO = sys.stdin.buffer
    else:
        try:  # non-blocking open and fstat on the descriptor: a path swapped for a FIFO never makes us wait
            raw = open_regular(path, what="log")
        except SharedInputError as exc:
            reason = exc.reason.removeprefix("is ").replace(", not a regular file", ", not a log file: refused")
            raise InputError(path, reason) from None
        size = os.fstat(raw.fileno()).st_size
    if not hasattr(raw, "peek"):
        raw = io.BufferedReader(raw)  # type: ignore[arg-type]
    try:
        head = raw.peek(8)[:8]  # type: ignore[attr-defined]
    except OSError as exc:
        raise InputError(path, str(exc.strerror or exc)) from exc
    if head[:2] == b"\x1f\x8b":
        limit = MAX_BYTES if size is None else min(MAX_BYTES, max(size * MAX_RATIO, 1 << 20))
        why = (f"gzip inflates beyond {MAX_RATIO}x its size ({size} bytes compressed): refused as a decompression bomb"
               if size is not None and limit < MAX_BYTES else f"more than {MAX_BYTES >> 30} GiB of text: refused")
        stream: BinaryIO = io.BufferedReader(_Bounded(gzip.GzipFile(fileobj=raw, mode="rb"), path, limit, why), SNIFF)  # type: ignore[arg-type]
        return _sniffed(stream, path, True, needles)
    for magic, name in _OTHER_COMPRESSION:
        if head.startswith(magic):
            raw.close()
            raise InputError(path, f"{name} compressed: only plain text and gzip are read (decompress it first)")
    stream = io.BufferedReader(_Bounded(raw, path, MAX_BYTES, f"more than {MAX_BYTES >> 30} GiB: refused"), SNIFF)  # type: ignore[arg-type]
    return _sniffed(stream, path, False, needles)


class _Transcoded(StreamFilter):
    """A stream of what ``_more`` makes of ``inner``, piece by piece (b"" at its end)."""
    pending = b""

    def _more(self) -> bytes:
        raise NotImplementedError

    def readinto(self, b) -> int:  # type: ignore[override]
        while not self.pending:
            self.pending = self._more()
            if not self.pending:
                return 0
        n = min(len(b), len(self.pending))
        b[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


class _Utf16(_Transcoded):
    """UTF-16 text with its byte order mark (what Windows PowerShell 5's ``>`` and ``Out-File`` write, as in
    ``kubectl logs pod > train.log`` on a laptop) given as UTF-8 bytes; undecodable units are replaced."""

    def __init__(self, inner: BinaryIO):
        self.inner = io.TextIOWrapper(inner, encoding="utf-16", errors="replace", newline="")  # type: ignore[arg-type]

    def _more(self) -> bytes:
        return self.inner.read(CHUNK // 4).encode("utf-8")


_QUOTE_RE = re.compile(rb"^[ \t]{0,3}(?:>[ \t]?)+")
_WORD = re.compile(r"\w")
_DIGITS = re.compile(r"\d")
_SPAN = 96   # bytes each side of a line break in which a needle cut by it is looked for
_SPAN_TRIES = 64   # line breaks after a longest line looked at so (a table of rows of one length has many)
WRAPPED_LINES = 2   # different lines cut at the width, each continued by the next: a hard wrap


@dataclass(frozen=True)
class Relining:
    """How a log's lines were cut or marked by whoever pasted it: ``quoted``, every line under a Markdown or email
    quote (``> `` from a GitHub reply, a forum post, a mailing list); ``width``, every line longer than it hard-wrapped
    at that many characters (``fold -w``, a terminal or web console copied as shown, a pager's screen)."""
    quoted: bool = False
    width: int | None = None
    unit: str = "chars"

    def __bool__(self) -> bool:
        return self.quoted or self.width is not None


def relining_of(head: bytes, complete: bool, needles: NeedleSet | None = None) -> Relining:
    """Tell from a log's first bytes whether it was quoted or hard-wrapped (``complete``: ``head`` is the whole
    log, so its last line is whole too).

    Quoted: at least 3 lines, and 90% of the lines that are not blank, start with ``>`` (a program's own lines
    rarely do; a quoted log's all do). Hard-wrapped at W (bytes, as GNU fold counts, or characters, as a terminal
    does): no line is longer than W (W >= 60), and either two different lines of exactly W are each cut inside a
    word (a word character each side of the break) and followed by a line that does not start as they start (digits
    aside: a rank's, a host's, a time's next line is the log's own), or a line of W is cut inside a signature's words
    (``needles``: a message cut once). A log's own longest lines that share a length end a message ("timing out.",
    a table's border or column) or are followed by the log's next line of the same shape.
    """
    lines = re.split(rb"\r?\n|\r", head)
    if not complete and len(lines) > 1:
        lines = lines[:-1]   # the sniff's last line may be cut: its length says nothing
    filled = [line for line in lines if line.strip()]
    quoted = len(filled) >= 3 and sum(1 for line in filled if _QUOTE_RE.match(line)) >= 0.9 * len(filled)
    if quoted:
        lines = [_QUOTE_RE.sub(b"", line, count=1) for line in lines]
    if max(map(len, lines), default=0) < 60:   # (bytes: never fewer than the characters) nothing as long as a wrap
        return Relining(quoted)
    text = [line.decode("utf-8", "replace") for line in lines]
    for unit, sizes in (("bytes", [len(line) for line in lines]), ("chars", [len(t) for t in text])):
        # GNU fold counts bytes; a terminal, characters
        width = max(sizes, default=0)
        if width < 60:
            break
        cut = {t for i, (t, after) in enumerate(zip(text, text[1:]))   # cut inside a word, and not a new line's start
               if sizes[i] == width and _WORD.match(t[-1]) and _WORD.match(after[:1])
               and _DIGITS.sub("0", after[:8]) != _DIGITS.sub("0", t[:8])}
        longest = [i for i in range(len(lines) - 1) if sizes[i] == width][:_SPAN_TRIES]
        if len(cut) >= WRAPPED_LINES or (needles is not None and any(_spanned(needles, lines[i], lines[i + 1])
                                                                     for i in longest)):
            return Relining(quoted, width, unit)
    return Relining(quoted)


def _spanned(needles: NeedleSet, line: bytes, after: bytes) -> bool:
    """Whether a signature's words run on from ``line`` into ``after``: a message cut in two by a wrap."""
    left, right = line[-_SPAN:], after[:_SPAN]
    return any(pos < len(left) < pos + len(n) for pos, n in needles.positions(left + right))


class _Relined(_Transcoded):
    """The log's lines as they were before they were quoted or hard-wrapped (``Relining``): a wrapped line's pieces
    are joined into one line. ``physical`` turns a line number of what it gives back into the file's own (the first
    piece's). Lines are read whole up to ``MAX_SEGMENT`` bytes; a longer one is passed on in pieces."""

    def __init__(self, inner: BinaryIO, how: Relining):
        self.inner, self.how, self.held = inner, how, b""
        self.breaks = 0          # line breaks taken out of the line being joined
        self.given = 1           # the number of the line being given back (its breaks counted)
        self.joined: list[int] = []   # for each joined line, in order: its number as given back
        self.taken: list[int] = []    # ... and the breaks taken out up to and with it

    def physical(self, line: int) -> int:
        """The file's line number of given-back line ``line``."""
        k = bisect.bisect_left(self.joined, line)
        return line + (self.taken[k - 1] if k else 0)

    def _line(self, line: bytes) -> bytes:
        body = line.rstrip(b"\r\n")
        end = line[len(body):]
        if self.how.quoted:
            body = _QUOTE_RE.sub(b"", body, count=1)
        if self.how.width is None:
            return body + end
        size = len(body) if self.how.unit == "bytes" else len(body.decode("utf-8", "replace"))
        if end and size == self.how.width and len(self.held) < MAX_SEGMENT:
            self.held += body     # cut at the width: the next line continues it
            self.breaks += 1
            return b""
        out, self.held = self.held + body + end, b""
        if self.breaks:
            self.joined.append(self.given)
            self.taken.append((self.taken[-1] if self.taken else 0) + self.breaks)
            self.breaks = 0
        self.given += out.count(b"\n")
        return out

    def _more(self) -> bytes:
        while True:   # a wrapped line's pieces give nothing until its last
            line = self.inner.readline(MAX_SEGMENT)
            if not line and not self.held:
                return b""
            out = self._line(line)
            if out:
                return out


def relined(stream: BinaryIO) -> _Relined | None:
    """The filter that unquoted or unwrapped ``stream`` (``open_log``'s), if one did."""
    raw = getattr(stream, "raw", None)
    return raw if isinstance(raw, _Relined) else None


def _sniffed(stream: BinaryIO, path: str, compressed: bool, needles: NeedleSet | None = None) -> BinaryIO:
    """Refuse a stream whose first bytes are not text: NUL bytes, or many control bytes. UTF-16 with a byte order
    mark is text: it is read as UTF-8; UTF-8's byte order mark is skipped (else the first line's start is not its
    text's)."""
    try:
        head = stream.peek(SNIFF)[:SNIFF]  # type: ignore[attr-defined]
        if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
            stream = io.BufferedReader(_Utf16(stream), SNIFF)  # type: ignore[arg-type]
            head = stream.peek(SNIFF)[:SNIFF]  # type: ignore[attr-defined]
        elif head[:3] == b"\xef\xbb\xbf":   # UTF-8's byte order mark (Notepad, PowerShell 5's Out-File -Encoding utf8)
            stream.read(3)
            head = head[3:]
    except InputError:
        stream.close()
        raise
    if looks_binary(head):
        stream.close()
        what = "gzip of binary data" if compressed else "binary data"
        raise InputError(path, f"{what} (NUL/control bytes), not a text log: refused")
    how = relining_of(head, len(head) < SNIFF, needles)
    if how:
        stream = io.BufferedReader(_Relined(stream, how), SNIFF)  # type: ignore[arg-type]
    return stream


def looks_binary(head: bytes) -> bool:
    if not head:
        return False
    nul = head.count(0)
    controls = sum(1 for b in head if b < 32 and b not in _TEXT_CONTROLS) + head.count(0x7f)
    return nul > max(1, len(head) // 1000) or controls > len(head) // 20


@functools.lru_cache(maxsize=8)
def _pruned(unique: frozenset[bytes]) -> tuple[bytes, ...]:
    """The needles without the redundant ones: a needle containing another finds no line the shorter one misses.
    Quadratic in the needles (about 150 ms for the signatures' ~480), so computed once per set, not per triage."""
    return tuple(sorted(n for n in unique if not any(o != n and o in n for o in unique)))


def _gnu_grep() -> str | None:
    """Path of a GNU grep (multi-literal search at memory speed), or None."""
    path = shutil.which("grep")
    if not path:
        return None
    try:
        out = subprocess.run([path, "--version"], capture_output=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return path if b"GNU grep" in out else None


_GREP_CACHE: list = []


class NeedleSet:
    """Where literal byte strings occur in a chunk.

    Engine ``grep``: the chunk is piped to GNU ``grep -E -o -b`` with one alternation of all the (escaped)
    needles, which GNU grep runs as a DFA. Engine ``python``: one ``bytes.find`` pass per needle, used when no
    GNU grep is installed or ``DSV3_PREFLIGHT_DOCTOR_ENGINE=python``. Both give the same lines.
    """

    def __init__(self, needles: Iterable[bytes]):
        self.needles = _pruned(frozenset(needles))
        if not _GREP_CACHE:
            _GREP_CACHE.append(_gnu_grep())
        choice = os.environ.get(ENGINE_ENV, "auto")
        self.grep = _GREP_CACHE[0] if choice != "python" else None
        self.engine = "grep" if self.grep else "python"
        # starting grep costs ~15 ms, more than Python's search of a small chunk (a log excerpt, a rank's short log)
        self._grep_min = 0 if choice == "grep" else GREP_MIN_BYTES
        self._pattern: bytes | None = None

    def engine_for(self, size: int) -> str:
        """The search a chunk of ``size`` bytes gets: grep when installed and the chunk is large enough."""
        return "grep" if self.grep and size >= self._grep_min else "python"

    def positions(self, body: bytes) -> list[tuple[int, bytes]]:
        """(offset, needle) of every needle occurrence, by offset."""
        if self.engine_for(len(body)) == "grep":
            found = self._grep(body)
            if found is not None:
                return found
        found = []
        for n in self.needles:
            p = body.find(n)
            while p >= 0:
                found.append((p, n))
                p = body.find(n, p + 1)
        found.sort()
        return found

    def _grep(self, body: bytes) -> list[tuple[int, bytes]] | None:
        # one ERE alternation of the escaped literals: GNU grep runs it as a DFA, about twice as fast as -F's
        # multi-literal search once there are a few hundred needles (same matches, checked in the tests)
        if self._pattern is None:
            self._pattern = b"|".join(_ere_literal(n) for n in self.needles)
        argv: list = [self.grep, "-E", "-a", "-o", "-b", "-e", self._pattern]
        try:
            p = subprocess.run(argv, input=body, capture_output=True, timeout=GREP_TIMEOUT_S,
                               env={**os.environ, "LC_ALL": "C"})
        except (OSError, subprocess.SubprocessError):
            return None
        if p.returncode not in (0, 1):
            return None
        out = []
        for line in p.stdout.splitlines():
            cut = line.index(b":")
            out.append((int(line[:cut]), line[cut + 1:]))
        return out


def _ere_literal(needle: bytes) -> bytes:
    """A POSIX ERE matching exactly ``needle`` (special characters in brackets)."""
    out = []
    for c in needle.decode("latin-1"):
        if c == "]":
            out.append("[]]")
        elif c == "^":
            out.append("\\^")
        elif c == "\\":
            out.append("[\\]")
        elif c in ".[()*+?{}|$":
            out.append("[" + c + "]")
        else:
            out.append(c)
    return "".join(out).encode("latin-1")


def clean(segment: bytes) -> str:
    """Decoded text of one segment: invalid UTF-8 replaced, ANSI codes removed, trailing blanks dropped."""
    return plain(segment.decode("utf-8", "replace"))


def plain(text: str) -> str:
    """Text without its ANSI codes and trailing blanks."""
    return ANSI_RE.sub("", text).rstrip()


def unwrap_record(text: str) -> tuple[str, str | None]:
    """``(the line, the time it was logged)`` of a Docker json-file record (``/var/lib/docker/containers/<id>/
    <id>-json.log``: ``{"log": "<line>\\n", "stream": "stderr", "time": "<RFC 3339>"}``, one a line, the line's
    quotes, tabs and ANSI escapes JSON-escaped); any other text as it is, with no time."""
    if not (text.startswith('{"log":') and text.endswith("}")):
        return text, None
    try:
        record = json.loads(text)
    except ValueError:
        return text, None
    line = record.get("log") if isinstance(record, dict) else None
    if not isinstance(line, str):
        return text, None
    when = record.get("time")
    return plain(line), when if isinstance(when, str) else None


def _segment_bounds(body: bytes, pos: int) -> tuple[int, int]:
    start = max(body.rfind(b"\n", 0, pos), body.rfind(b"\r", 0, pos)) + 1
    ends = [e for e in (body.find(b"\n", pos), body.find(b"\r", pos)) if e >= 0]
    end = min(ends) if ends else len(body)
    if end - start > MAX_SEGMENT:  # a giant line: keep a window around the needle
        start, end = max(start, pos - MAX_SEGMENT // 2), min(end, pos + MAX_SEGMENT // 2)
    return start, end


def _last_line(body: bytes) -> bytes:
    """The last line segment of ``body`` that is not blank (b"" when there is none). Called on every 8 MiB chunk:
    the blank end is walked back byte by byte (``rstrip`` would copy the chunk)."""
    end = len(body)
    while end and body[end - 1] in _BLANK:
        end -= 1
    if not end:
        return b""
    start = max(body.rfind(b"\n", 0, end), body.rfind(b"\r", 0, end)) + 1
    return body[max(start, end - MAX_SEGMENT):end]


def _chunks(stream: BinaryIO, stats: FileStats) -> Iterator[bytes]:
    carry = b""
    while True:
        try:
            data = stream.read(CHUNK)
        except InputError:
            raise
        except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise InputError(stats.path, f"corrupt or truncated input: {exc}") from exc
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


def scan(stream: BinaryIO, needles, stats: FileStats, skip=None,
         unwrapped: _Relined | None = None) -> Iterator[tuple[int, bytes, bytes]]:
    """(line number, raw segment, the raw segment after it) for each line segment that contains a needle; fills
    ``stats`` as it goes. The next segment lets the triage read a message wrapped over two lines (issue
    threads and terminals wrap long lines); it is empty at a chunk's end.

    ``needles`` is a NeedleSet or a callable returning the NeedleSet to use for the next chunk (the triage drops
    the progress needles once it has seen progress). ``skip``, a callable returning a set of needles, drops the
    segments in which every needle found is in that set (progress lines after the first, inside a chunk).
    ``unwrapped``: the filter that joined a hard-wrapped log's lines in ``stream``; line numbers are then the file's.
    """
    physical = unwrapped.physical if unwrapped is not None else (lambda n: n)
    line_base = 1
    last = b""
    for body in _chunks(stream, stats):
        ns = needles() if callable(needles) else needles
        cur_line, cur_pos, next_allowed = line_base, 0, 0
        found = ns.positions(body)
        for k, (pos, needle) in enumerate(found):
            if pos < next_allowed:
                continue
            start, end = _segment_bounds(body, pos)
            if skip is not None:
                dropped = skip()
                if dropped and needle in dropped:
                    j = k + 1
                    while j < len(found) and found[j][0] < end and found[j][1] in dropped:
                        j += 1
                    if j >= len(found) or found[j][0] >= end:   # only dropped needles in this segment
                        next_allowed = end
                        continue
            cur_line += body.count(b"\n", cur_pos, start)
            cur_pos = start
            next_allowed = end
            nxt = b""
            if end < len(body):
                after = end + (2 if body[end:end + 2] == b"\r\n" else 1)   # a CRLF line break is one break
                n_end = body.find(b"\n", after, after + MAX_SEGMENT)
                nxt = body[after:n_end if n_end >= 0 else min(len(body), after + MAX_SEGMENT)]
            yield physical(cur_line), body[start:end], nxt
        line_base += body.count(b"\n")
        last = body[-1:]
        stats.tail = _last_line(body) or stats.tail
    stats.lines = line_base - 1 + (1 if last and last != b"\n" else 0)
    if unwrapped is not None and unwrapped.taken:
        stats.lines += unwrapped.taken[-1]


def label_for(path: str) -> str:
    """A node label from a file name: node2.log.gz → node2."""
    if path == STDIN:
        return "stdin"
    p = Path(path)
    name = p.name
    for suffix in (".gz", ".log", ".txt", ".out", ".err"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    if name in _GENERIC_NAMES and p.parent.name:   # logs/node1/train.log → node1/train
        name = f"{p.parent.name}/{name}"
    return launched_node(name) or name


def launched_node(name: str) -> str | None:
    """The node of our launcher's log or log directory (``launch-<stamp>-[node<N>-]<name>``, as its lines'
    "[node N name]" prefix says); None for any other name."""
    m = _LAUNCH_LOG.fullmatch(name)
    return m.group("name") if m else None


# launch/gate.py launch_log_path: launch-<stamp>-<node>.log; launch/ray_launch.py: launch-<stamp>-node<N>-<name>.log
_LAUNCH_LOG = re.compile(r"launch-\d{8}-\d{6}-(?:node\d+-)?(?P<name>.+)")


_GENERIC_NAMES = frozenset({"stdout", "stderr", "output", "error", "log", "console", "train", "std"})


# torchrun --log-dir D --redirects/--tee: D/<run id>/attempt_<n>/<local rank>/{stdout,stderr}.log (elastic/multiprocessing)
_ATTEMPT = re.compile(r"attempt_\d+")


def labels_for(paths: list[str]) -> dict[str, tuple[str | None, int | None]]:
    """The node (and local rank) each of several files speaks for, from their paths: ``(node, local_rank)``.

    A file's own name labels it (``label_for``). Files of torchrun's ``--log-dir`` layout are one local rank's
    output: the node is the directory above the run's (relative to the files' common directory: each node's
    log directory collected under ``logs/node1/…``; our launcher's ``launch-<stamp>-[node<N>-]<name>/`` beside its
    launch log: ``<name>``), or the run's own directory when the nodes' runs sit side by side,
    or none when they are one node's; the local rank is the rank's directory. Other files whose labels collide
    (``a/out.log``, ``b/out.log``) are told apart by their directories relative to the common one. One file: no
    label (its lines name their origin or there is one node), only the local rank of a ``--log-dir`` file."""
    real = {p: Path(os.path.abspath(p)) for p in paths if p != STDIN}
    logdir = {}
    for p, q in real.items():
        if (q.name.split(".")[0] in ("stdout", "stderr", "error") and q.parent.name.isdigit()
                and _ATTEMPT.fullmatch(q.parent.parent.name)):
            logdir[p] = (q.parent.parent.parent, int(q.parent.name))
    if len(paths) < 2:
        return {p: (None, logdir[p][1] if p in logdir else None) for p in paths}
    common = Path(os.path.commonpath(list(real.values()))) if real else Path("/")
    if common in real.values():   # one file besides stdin: its directory
        common = common.parent
    runs = {run for run, _ in logdir.values()}
    out: dict[str, tuple[str | None, int | None]] = {}
    for p, (run, local_rank) in logdir.items():
        above = os.path.relpath(run.parent, common)   # "." or "../..": the files are below one run's directory
        node = above if not above.startswith(".") else (run.name if len(runs) > 1 else None)
        # our launcher's --log-dir is its launch log's node
        out[p] = ((launched_node(Path(node).name) if node else None) or node, local_rank)
    plain = {p: label_for(p) for p in paths if p not in logdir}
    seen = Counter(plain.values())
    for p, label in plain.items():
        if seen[label] > 1 and p != STDIN:
            rel = os.path.relpath(real[p].parent, common)
            label = label if rel == "." or label.startswith(rel + "/") else f"{rel}/{label}"
        out[p] = (label, None)
    return out
