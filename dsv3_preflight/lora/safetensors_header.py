"""The safetensors header, read by the rules the safetensors library itself applies (pure: bytes in).

A safetensors file is an 8-byte little-endian header length N, N bytes of UTF-8 JSON, then the tensor
data. safetensors (Rust, serde) accepts the header when it is JSON without NaN, lone surrogates or
trailing characters (spaces may pad it); it is an object whose ``__metadata__`` (optional) maps strings
to strings and whose every other entry names a tensor ``{"dtype", "shape", "data_offsets"}`` with a
known dtype, a shape of unsigned integers and exactly two offsets; sorted by offset, the tensors tile
the data from 0 with no gap or overlap, each spans exactly ``prod(shape) x dtype bits / 8`` bytes, and
the last one ends where the file ends.

:func:`parse_header` applies those rules to the bytes the probe read, so what it accepts is what
``safetensors.safe_open`` and ``load_file`` (peft's loader) accept: tests/lora/test_lora_fuzz.py holds the two
to each other on mutated files. It needs neither the library nor a mapping of the file, and never a
byte of tensor data.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

#: safetensors refuses a header longer than this (its MAX_HEADER_SIZE)
LIBRARY_MAX_HEADER = 100_000_000
#: more tensors than any LoRA adapter holds (DeepSeek-V3, every linear layer targeted with one module per
#: routed expert as transformers < 5 builds it, DoRA on top: ~135,000); refused before the JSON is parsed,
#: so a hostile header cannot make the parser build millions of objects
MAX_TENSORS = 250_000
U64_MAX = (1 << 64) - 1
#: bits per element of every dtype safetensors knows
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32,
    "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}
METADATA_KEY = "__metadata__"
#: serde_json's recursion limit: a header nested deeper is refused by the library
LIBRARY_MAX_DEPTH = 128


@dataclass
class ParsedHeader:
    """The tensors a header declares (name -> (dtype, shape)), its metadata, or why it is not a valid header.

    ``kind`` is "truncated" when the header is sound but the file ends before the data it declares, and
    "corrupt" for everything else the library would refuse.
    """

    tensors: dict[str, tuple[str, tuple[int, ...]]] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    data_end: int = 0
    error: str | None = None
    kind: str | None = None

    @classmethod
    def corrupt(cls, why: str) -> ParsedHeader:
        return cls(error=why, kind="corrupt")


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not valid JSON")


def _has_lone_surrogate(values: Any) -> bool:
    for text in values:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
    return False


def _depth(value: Any, limit: int) -> int:
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if level > limit:
                return level
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def count_declared(header: bytes) -> int:
    """An upper bound of the tensors a header declares, counted without parsing it."""
    return header.count(b'"data_offsets"')


class _Corrupt(Exception):
    """A header safetensors refuses; the message says why."""


def _load(header: bytes, max_tensors: int) -> tuple[dict[str, Any], str]:
    """The header's JSON object and its text (raises :class:`_Corrupt`)."""
    declared = count_declared(header)
    if declared > max_tensors:
        raise _Corrupt(f"the header declares {declared:,} tensors, more than any LoRA adapter holds "
                       f"(limit {max_tensors:,}); not parsed")
    try:
        text = header.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Corrupt(f"the header is not UTF-8 (byte {exc.start} of the header)") from None
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise _Corrupt("the header JSON is nested too deeply") from None
    except ValueError as exc:
        raise _Corrupt(f"the header is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise _Corrupt(f"the header is a JSON {type(doc).__name__}, not an object")
    return doc, text


def _check_metadata(metadata: Any, check_strings: bool) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict) or not all(type(v) is str for v in metadata.values()):
        raise _Corrupt(f"{METADATA_KEY} is not a map of strings to strings")
    if check_strings and _has_lone_surrogate([*metadata, *metadata.values()]):
        raise _Corrupt(f"{METADATA_KEY} holds a lone UTF-16 surrogate")


def _unsigned(value: Any) -> bool:
    return type(value) is int and 0 <= value <= U64_MAX


def _elements(name: str, shape: Any) -> int:
    """The number of elements of a shape that is a list of unsigned integers."""
    if type(shape) is not list or not all(_unsigned(s) for s in shape):
        raise _Corrupt(f"tensor {name!r}: shape {shape!r} is not a list of unsigned integers")
    elements = 1
    for s in shape:
        elements *= s
    return elements


def _tensor(name: str, info: Any) -> tuple[str, tuple[int, ...], int, int]:
    """One tensor entry checked as safetensors checks it: ``(dtype, shape, begin, end)``."""
    if type(info) is not dict:
        raise _Corrupt(f"tensor {name!r}: its entry is a JSON {type(info).__name__}, not an object")
    try:
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    except KeyError as exc:
        raise _Corrupt(f"tensor {name!r}: missing field {exc.args[0]!r}") from None
    bits = DTYPE_BITS.get(dtype) if type(dtype) is str else None
    if bits is None:
        raise _Corrupt(f"tensor {name!r}: unknown dtype {dtype!r}")
    elements = _elements(name, shape)
    if type(offsets) is not list or len(offsets) != 2 or not all(_unsigned(o) for o in offsets):
        raise _Corrupt(f"tensor {name!r}: data_offsets {offsets!r} is not two unsigned integers")
    begin, end = offsets
    if len(info) > 3:
        extra = {k: v for k, v in info.items() if k not in ("dtype", "shape", "data_offsets")}
        if _depth(extra, LIBRARY_MAX_DEPTH) + 2 > LIBRARY_MAX_DEPTH:
            raise _Corrupt(f"tensor {name!r}: nested deeper than {LIBRARY_MAX_DEPTH} levels")
    nbits = elements * bits
    if elements > U64_MAX or nbits > U64_MAX:
        raise _Corrupt(f"tensor {name!r}: shape {shape} overflows a 64-bit size")
    if nbits % 8:
        raise _Corrupt(f"tensor {name!r}: {elements} elements of {dtype} are not a whole number of bytes")
    if end - begin != nbits >> 3:
        raise _Corrupt(f"tensor {name!r}: data_offsets [{begin}, {end}] span {end - begin} bytes but "
                       f"shape {shape} of {dtype} needs {nbits // 8}")
    return dtype, tuple(shape), begin, end


def _data_end(spans: list[tuple[int, int, str]]) -> int:
    """Where the tensors' data ends, when they tile it from byte 0 without gap or overlap."""
    spans.sort()
    position = 0
    for begin, end, name in spans:
        if begin != position:
            what = "overlaps the previous tensor" if begin < position else f"leaves a gap after byte {position}"
            raise _Corrupt(f"tensor {name!r}: data_offsets [{begin}, {end}] {what}")
        position = end
    return position


def parse_header(header: bytes, data_len: int, *, max_tensors: int = MAX_TENSORS) -> ParsedHeader:
    """Judge ``header`` (the N bytes after the length) of a file holding ``data_len`` bytes after the header."""
    try:
        doc, text = _load(header, max_tensors)
        check_strings = "\\u" in text  # a lone surrogate can only come from an escape
        metadata = doc.pop(METADATA_KEY, None)
        _check_metadata(metadata, check_strings)
        if check_strings and _has_lone_surrogate(doc):
            raise _Corrupt("a tensor name holds a lone UTF-16 surrogate")
        tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
        spans: list[tuple[int, int, str]] = []
        while doc:  # popped one by one: each parsed entry is freed as soon as it is checked
            name, info = doc.popitem()
            dtype, shape, begin, end = _tensor(name, info)
            tensors[name] = (dtype, shape)
            spans.append((begin, end, name))
        position = _data_end(spans)
    except _Corrupt as exc:
        return ParsedHeader.corrupt(str(exc))
    parsed = ParsedHeader(tensors=tensors, metadata=dict(metadata or {}), data_end=position)
    if position > data_len:
        parsed.error, parsed.kind = (f"truncated: the header declares {position:,} bytes of tensor data but the file holds "
                                     f"{data_len:,} after the header"), "truncated"
    elif position < data_len:
        parsed.error, parsed.kind = (f"{data_len - position:,} bytes after the last tensor's data: the file is not fully "
                                     "covered by its header (safetensors refuses it)"), "corrupt"
    return parsed
