"""Reading LoRA adapters from disk: discovery, the safetensors header, adapter_config.json, trainer_state.json.

The only code of the LoRA domain that opens adapter files (the torch side, pickles and ``--deep``, is in
:mod:`.tensors`). Every file is opened through :func:`dsv3_preflight.inputs.open_regular` (non-blocking,
fstat on the open descriptor: a FIFO, a device or a directory is refused at once, never read), and only
the header of a weights file is read: 8 bytes of length, then the declared header, never a byte of
tensor data. What is read becomes plain facts (JSON types); what they mean is judged in
:mod:`dsv3_preflight.lora.verdict`.
"""
from __future__ import annotations

import hashlib
import os
import struct
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dsv3_preflight.inputs import MIB, InputError, open_regular, parse_json, read_bytes, read_json
from dsv3_preflight.lora.case import CONFIG_NAME, WEIGHT_NAMES, step_of
from dsv3_preflight.lora.safetensors_header import LIBRARY_MAX_HEADER, parse_header

TRAINER_STATE = "trainer_state.json"
#: a declared header length above this is refused unread (a DeepSeek-V3 adapter's header is well under 1 MB;
#: every linear layer with per-expert modules is ~12 MB); `--header-cap-mib` changes it
DEFAULT_HEADER_CAP = 64 * 1024 * 1024
CONFIG_CAP = 1024 * 1024  # an adapter_config.json is ~1 KB
CONFIG_DEPTH = 100_000  # as deep as Python's JSON parser goes (peft reads what it parses)
STATE_CAP = 64 * 1024 * 1024  # trainer_state.json keeps the whole log history


# ----------------------------------------------------------------------------------------------- discovery
def find_adapters(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Path], list[str], list[dict[str, str]]]:
    """What to judge under ``paths``: (adapters, paths that are neither a file nor a directory, unreadable dirs).

    A file is taken as given; a directory is walked (symlinked directories not followed) for
    ``adapter_model.*`` and for ``adapter_config.json`` without weights beside it. A directory the walk cannot
    list is returned as ``{"path", "error"}``: never skipped in silence. Adapters are sorted by checkpoint
    step, then path. Nothing here opens a file.
    """
    found: list[Path] = []
    missing: list[str] = []
    unreadable: list[dict[str, str]] = []

    def on_error(exc: OSError) -> None:
        unreadable.append({"path": str(exc.filename), "error": exc.strerror or str(exc)})

    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            for root, dirs, files in os.walk(p, onerror=on_error):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                names = set(files)
                weights = [n for n in WEIGHT_NAMES if n in names]
                for n in weights[:1]:  # safetensors wins when both are present (peft loads it first)
                    found.append(Path(root) / n)
                if not weights and CONFIG_NAME in names:
                    found.append(Path(root))
        elif p.is_file():
            found.append(p)
        else:  # nothing there, a dangling link, a device or a FIFO: the caller's usage error
            missing.append(str(raw))
    unique = list(dict.fromkeys(found))
    unique.sort(key=lambda f: (step_of(f) is None, step_of(f) or 0, str(f)))
    unreadable.sort(key=lambda u: (step_of(u["path"]) is None, step_of(u["path"]) or 0, u["path"]))
    return unique, missing, unreadable


# ----------------------------------------------------------------------------------------------- reading
def _read_exactly(fh: Any, n: int, counter: list[int]) -> bytearray:
    """``n`` bytes (fewer at the end of the file) read unbuffered into one buffer: a buffered reader would read
    ahead into the tensor data, and joined chunks would hold the header twice."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = fh.raw.readinto(view[got:])
        if not k:
            break
        got += k
    view.release()
    counter[0] += got
    if got < n:
        del buf[got:]
    return buf


class _Memo:
    """The last few distinct inputs and what was made of them, found again by byte equality (a run's checkpoints
    share their header and config byte for byte: each is parsed once; a differing one costs a length compare)."""

    def __init__(self, size: int = 16, max_bytes: int = 4 * MIB) -> None:
        self.entries: OrderedDict[int, tuple[Any, bytes, Any]] = OrderedDict()
        self.size, self.max_bytes, self.next = size, max_bytes, 0

    def get(self, data: bytes | bytearray, make: Any, tag: Any = None) -> Any:
        for key, (seen_tag, seen, value) in reversed(self.entries.items()):
            if seen_tag == tag and seen == data:
                self.entries.move_to_end(key)
                return value
        value = make()
        if len(data) <= self.max_bytes:  # a big header is parsed again rather than kept
            self.entries[self.next] = (tag, bytes(data), value)
            self.next += 1
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
        return value


_HEADERS = _Memo()
_CONFIGS = _Memo()


def read_header(path: str | os.PathLike[str], cap: int = DEFAULT_HEADER_CAP) -> dict[str, Any]:
    """Facts of one safetensors file's header; never raises for a bad file, never reads tensor data.

    Returns ``{"size", "bytes_read", "declared_len", "error", "kind", "tensors": {name: [dtype, shape]},
    "metadata"}`` where ``kind`` is None, "unreadable" (not a regular file, permission), "truncated" or
    "corrupt". At most ``8 + min(cap, declared length)`` bytes are read, counted in ``bytes_read``.
    """
    facts: dict[str, Any] = {"size": None, "bytes_read": 0, "declared_len": None, "error": None, "kind": None,
                             "tensors": {}, "metadata": {}}
    counter = [0]
    try:
        fh = open_regular(path, what="adapter weights")
    except InputError as exc:
        return {**facts, "error": str(exc), "kind": "unreadable"}
    try:
        with fh:
            size = os.fstat(fh.fileno()).st_size
            facts["size"] = size
            prefix = _read_exactly(fh, 8, counter)
            if len(prefix) < 8:
                return {**facts, "bytes_read": counter[0], "kind": "truncated",
                        "error": f"truncated: {len(prefix)} bytes, shorter than the 8-byte header length"}
            (n,) = struct.unpack("<Q", prefix)
            facts["declared_len"] = n
            limit = min(cap, LIBRARY_MAX_HEADER)
            if n > limit:
                why = ("safetensors' own limit" if limit == LIBRARY_MAX_HEADER else "the cap (--header-cap-mib)")
                return {**facts, "bytes_read": counter[0], "kind": "corrupt",
                        "error": f"declared header length {n:,} bytes is beyond {why} of {limit:,} bytes"}
            if 8 + n > size:
                return {**facts, "bytes_read": counter[0], "kind": "truncated",
                        "error": f"truncated: the header declares {n:,} bytes but the file has only "
                                 f"{max(0, size - 8):,} after the length"}
            header = _read_exactly(fh, n, counter)
    except OSError as exc:
        return {**facts, "bytes_read": counter[0], "kind": "unreadable",
                "error": f"adapter weights {os.fspath(path)}: cannot read: {exc.strerror or exc}"}
    facts["bytes_read"] = counter[0]
    if len(header) < n:  # the file shrank under us
        return {**facts, "kind": "truncated", "error": f"truncated: the file ended {n - len(header):,} bytes into the header"}
    data_len = size - 8 - n
    def digest_and_parse(header: Any = header) -> tuple[str, Any]:
        return hashlib.sha256(header).hexdigest(), parse_header(header, data_len)

    digest, parsed = _HEADERS.get(header, digest_and_parse, tag=data_len)
    facts["sha"] = digest
    del header, digest_and_parse
    # {name: (dtype, shape)}: tuples, written to JSON as lists
    facts.update(error=parsed.error, kind=parsed.kind, metadata=parsed.metadata, data_end=parsed.data_end,
                 tensors=parsed.tensors if parsed.kind != "corrupt" else {})
    return facts


def read_config(directory: str | os.PathLike[str]) -> tuple[Any, str | None]:
    """(the parsed adapter_config.json, None) or (None, why): missing, not a regular file, too big or deep, not JSON.

    The value is returned whatever JSON type it is: what it must be is the judge's business.
    """
    path = Path(directory) / CONFIG_NAME
    try:
        data = read_bytes(path, what="adapter config", max_bytes=CONFIG_CAP)
        return _CONFIGS.get(data, lambda: _parse_config(data, path)), None
    except InputError as exc:
        text = str(exc)
        if text.endswith("no such file"):
            return None, f"{CONFIG_NAME} is missing"
        return None, text


def _parse_config(data: bytes, path: Path) -> Any:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"adapter config {path}: not UTF-8 text (byte {exc.start}); is it a binary file?") from None
    return parse_json(text, source=str(path), what="adapter config", max_depth=CONFIG_DEPTH)


def read_trainer_step(directory: str | os.PathLike[str]) -> tuple[int | None, str | None]:
    """(global_step from trainer_state.json, None), (None, None) when there is none, or (None, why)."""
    path = Path(directory) / TRAINER_STATE
    if not os.path.lexists(path):
        return None, None
    try:
        data = read_json(path, what="trainer state", max_bytes=STATE_CAP)
    except InputError as exc:
        return None, str(exc)
    step = data.get("global_step") if isinstance(data, dict) else None
    return (step if type(step) is int else None), None


def base_model_type(config: Any) -> str | None:
    """The model_type of the base model an adapter config names, when base_model_name_or_path is a local directory
    holding a readable config.json (what peft fills a null target_modules from); None otherwise (a hub id, no
    such directory, an unreadable config)."""
    base = config.get("base_model_name_or_path") if isinstance(config, dict) else None
    if not isinstance(base, str) or not base or not os.path.isdir(base):
        return None
    try:
        data = read_json(Path(base) / "config.json", what="base model config", max_bytes=CONFIG_CAP)
    except InputError:
        return None
    model_type = data.get("model_type") if isinstance(data, dict) else None
    return model_type if isinstance(model_type, str) else None


def read_adapter(path: str | os.PathLike[str], *, cap: int = DEFAULT_HEADER_CAP) -> dict[str, Any]:
    """Every fact the judge needs about one adapter: its weights file (or its directory when it has none).

    ``format`` is "safetensors", "pickle" (read by :func:`.tensors.read_pickle`, which needs torch) or
    "missing" (adapter_config.json without weights).
    """
    p = Path(path)
    is_dir = p.is_dir()
    directory = p if is_dir else p.parent
    facts: dict[str, Any] = {"path": str(p), "dir": str(directory), "step": step_of(p), "format": "safetensors",
                             "name": p.name, "config": None, "config_error": None, "header": None, "pickle": None}
    if is_dir:
        facts["format"] = "missing"
    elif p.suffix in (".bin", ".pt"):
        facts["format"] = "pickle"
        from .tensors import read_pickle

        facts["pickle"] = read_pickle(p)
    else:
        facts["header"] = read_header(p, cap)
    facts["has_config_beside"] = os.path.lexists(directory / CONFIG_NAME)
    if is_dir or p.name in WEIGHT_NAMES or facts["has_config_beside"]:
        facts["config"], facts["config_error"] = read_config(directory)
        if isinstance(facts["config"], dict) and facts["config"].get("target_modules") is None:
            facts["base_model_type"] = base_model_type(facts["config"])
    return facts
