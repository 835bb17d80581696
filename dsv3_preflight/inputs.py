"""One bounded way to read every input the tool is given: configs, DeepSpeed and model configs, result
and facts documents, trainer configs, logs, adapters' JSON.

Contract:
- only regular files (or ``-`` for stdin where the caller allows it): a directory, a FIFO, a device
  (``/dev/zero``), a socket is refused at once, never opened for a blocking read;
- a size cap: a file larger than ``max_bytes`` is refused without reading it whole;
- a nesting bound for JSON/TOML/YAML documents;
- every refusal or decode error is an :class:`InputError` (a usage error, exit 4) naming the file.

Streaming readers (the doctor's logs) use :func:`open_regular` and read in bounded chunks themselves.
"""
from __future__ import annotations

import io
import json
import os
import stat
import sys
from pathlib import Path
from typing import IO, Any

MIB = 1 << 20
#: a config or document larger than this is not a config (16 MiB holds any real DeepSpeed/TOML/YAML file)
DEFAULT_MAX_BYTES = 16 * MIB
#: nesting deeper than this is not a config either (real ones nest < 10 levels)
DEFAULT_MAX_DEPTH = 64
STDIN = "-"


class InputError(Exception):
    """An input cannot be read safely: not a regular file, too large, too deep, or not decodable (the CLI: exit 4).

    ``str(exc)`` is "WHAT PATH: REASON"; ``exc.path`` and ``exc.reason`` hold the parts."""

    def __init__(self, message: str, *, path: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.path, self.reason = path, reason or message


def _error(what: str, path: object, reason: str) -> InputError:
    return InputError(f"{what} {path}: {reason}", path=str(path), reason=reason)


def _too_large(what: str, path: object, max_bytes: int) -> InputError:
    size = f"{max_bytes // MIB} MiB" if max_bytes >= MIB else f"{max_bytes} bytes"
    return _error(what, os.fspath(path), f"larger than {size}: not a {what} this tool reads")


def kind_of(mode: int) -> str:
    """What a file of this st_mode is, for a refusal message ("a FIFO (named pipe)", "a directory", ...)."""
    if stat.S_ISREG(mode):
        return "a regular file"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_regular(path: str | os.PathLike, *, what: str = "input", allow_stdin: bool = False) -> IO[bytes]:
    """Open a regular file for reading in binary, never blocking on a FIFO or a device.

    The file is opened non-blocking and checked with fstat on the open descriptor (no race between a check
    and the open); anything but a regular file is an InputError naming it. ``-`` is stdin when allowed.
    """
    text = os.fspath(path)
    if text == STDIN:
        if not allow_stdin:
            raise InputError(f"{what}: '-' (stdin) is not accepted here")
        return sys.stdin.buffer
    try:
        fd = os.open(text, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise _error(what, text, "no such file") from None
    except IsADirectoryError:
        raise _error(what, text, "is a directory, not a file") from None
    except OSError as exc:
        raise _error(what, text, f"cannot open: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _error(what, text, f"is {kind_of(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike, *, what: str = "input", max_bytes: int = DEFAULT_MAX_BYTES,
               allow_stdin: bool = False) -> bytes:
    """The whole content of a regular file (or stdin), refused when it is larger than ``max_bytes``."""
    fh = open_regular(path, what=what, allow_stdin=allow_stdin)
    try:
        if fh is not sys.stdin.buffer and os.fstat(fh.fileno()).st_size > max_bytes:
            raise _too_large(what, path, max_bytes)  # refused from its size, before a byte is read
        data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise _error(what, os.fspath(path), f"cannot read: {exc.strerror or exc}") from None
    finally:
        if fh is not sys.stdin.buffer:
            fh.close()
    if len(data) > max_bytes:
        raise _too_large(what, path, max_bytes)
    return data


def read_text(path: str | os.PathLike, *, what: str = "input", max_bytes: int = DEFAULT_MAX_BYTES,
              allow_stdin: bool = False) -> str:
    """UTF-8 text of a regular file; a binary file is an InputError naming where decoding failed."""
    data = read_bytes(path, what=what, max_bytes=max_bytes, allow_stdin=allow_stdin)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _error(what, os.fspath(path), f"not UTF-8 text (byte {exc.start}: {data[exc.start:exc.start + 1]!r}); "
                                            "is it a binary file?") from None


def depth(value: Any, limit: int = DEFAULT_MAX_DEPTH) -> int:
    """Nesting depth of a parsed document, counted iteratively and no further than ``limit + 1``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            deepest = max(deepest, level)
            if level > limit:
                return level
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, level + 1) for child in children)
    return deepest


def _bounded(value: Any, path: str, what: str, max_depth: int) -> Any:
    if depth(value, max_depth) > max_depth:
        raise _error(what, path, f"nested deeper than {max_depth} levels: not a {what} this tool reads")
    return value


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not valid JSON")


def read_json(path: str | os.PathLike, *, what: str = "JSON file", max_bytes: int = DEFAULT_MAX_BYTES,
              max_depth: int = DEFAULT_MAX_DEPTH, allow_stdin: bool = False, allow_nan: bool = False) -> Any:
    """A JSON document from a regular file: bounded in size and nesting; NaN/Infinity refused unless allowed."""
    text = read_text(path, what=what, max_bytes=max_bytes, allow_stdin=allow_stdin)
    return parse_json(text, source=os.fspath(path), what=what, max_depth=max_depth, allow_nan=allow_nan)


def parse_json(text: str | bytes, *, source: str, what: str = "JSON", max_depth: int = DEFAULT_MAX_DEPTH,
               allow_nan: bool = False) -> Any:
    """Parse JSON text already in memory with the same bounds (depth, NaN) as :func:`read_json`."""
    try:
        value = json.loads(text, parse_constant=None if allow_nan else _no_constant)
    except RecursionError:
        raise _error(what, source, "nested too deeply to parse") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise _error(what, source, f"not valid JSON: {exc}") from None
    return _bounded(value, source, what, max_depth)


def read_toml(path: str | os.PathLike, *, what: str = "TOML file", max_bytes: int = DEFAULT_MAX_BYTES,
              max_depth: int = DEFAULT_MAX_DEPTH) -> dict[str, Any]:
    """A TOML document from a regular file, bounded like :func:`read_json`."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    text = read_text(path, what=what, max_bytes=max_bytes)
    try:
        value = tomllib.loads(text)
    except RecursionError:
        raise _error(what, os.fspath(path), "nested too deeply to parse") from None
    except tomllib.TOMLDecodeError as exc:
        raise _error(what, os.fspath(path), f"invalid TOML: {exc}") from None
    return _bounded(value, os.fspath(path), what, max_depth)


def read_yaml(path: str | os.PathLike, *, what: str = "YAML file", max_bytes: int = DEFAULT_MAX_BYTES,
              max_depth: int = DEFAULT_MAX_DEPTH) -> Any:
    """A YAML document (safe loader) from a regular file, bounded like :func:`read_json`."""
    import yaml

    text = read_text(path, what=what, max_bytes=max_bytes)
    try:
        value = yaml.safe_load(io.StringIO(text))
    except RecursionError:
        raise _error(what, os.fspath(path), "nested too deeply to parse") from None
    except yaml.YAMLError as exc:
        raise _error(what, os.fspath(path), f"invalid YAML: {str(exc).splitlines()[0]}") from None
    return _bounded(value, os.fspath(path), what, max_depth)


def is_regular(path: str | os.PathLike) -> bool:
    """True when ``path`` is a regular file (following symlinks); never opens it."""
    try:
        return stat.S_ISREG(Path(path).stat().st_mode)
    except OSError:
        return False
