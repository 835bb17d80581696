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


def parse_header(header: bytes, data_len: int, *, max_tensors: int = MAX_TENSORS) -> ParsedHeader:
    """Judge ``header`` (the N bytes after the length) of a file holding ``data_len`` bytes after the header."""
    declared = count_declared(header)
    if declared > max_tensors:
        return ParsedHeader.corrupt(f"the header declares {declared:,} tensors, more than any LoRA adapter holds "
                                    f"(limit {max_tensors:,}); not parsed")
    try:
        text = header.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ParsedHeader.corrupt(f"the header is not UTF-8 (byte {exc.start} of the header)")
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        return ParsedHeader.corrupt("the header JSON is nested too deeply")
    except ValueError as exc:
        return ParsedHeader.corrupt(f"the header is not valid JSON: {exc}")
    if not isinstance(doc, dict):
        return ParsedHeader.corrupt(f"the header is a JSON {type(doc).__name__}, not an object")
    check_strings = "\\u" in text  # a lone surrogate can only come from an escape
    metadata = doc.pop(METADATA_KEY, None)
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(type(v) is str for v in metadata.values()):
            return ParsedHeader.corrupt(f"{METADATA_KEY} is not a map of strings to strings")
        if check_strings and _has_lone_surrogate([*metadata, *metadata.values()]):
            return ParsedHeader.corrupt(f"{METADATA_KEY} holds a lone UTF-16 surrogate")
    if check_strings and _has_lone_surrogate(doc):
        return ParsedHeader.corrupt("a tensor name holds a lone UTF-16 surrogate")
    tensors: dict[str, tuple[str, tuple[int, ...]]] = {}
    spans: list[tuple[int, int, str]] = []
    bits_of, u64 = DTYPE_BITS, U64_MAX
    while doc:  # popped one by one: each parsed entry is freed as soon as it is checked
        name, info = doc.popitem()
        if type(info) is not dict:
            return ParsedHeader.corrupt(f"tensor {name!r}: its entry is a JSON {type(info).__name__}, not an object")
        try:
            dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        except KeyError as exc:
            return ParsedHeader.corrupt(f"tensor {name!r}: missing field {exc.args[0]!r}")
        bits = bits_of.get(dtype) if type(dtype) is str else None
        if bits is None:
            return ParsedHeader.corrupt(f"tensor {name!r}: unknown dtype {dtype!r}")
        if type(shape) is not list:
            return ParsedHeader.corrupt(f"tensor {name!r}: shape {shape!r} is not a list of unsigned integers")
        elements = 1
        for s in shape:
            if type(s) is not int or s < 0 or s > u64:
                return ParsedHeader.corrupt(f"tensor {name!r}: shape {shape!r} is not a list of unsigned integers")
            elements *= s
        if type(offsets) is not list or len(offsets) != 2:
            return ParsedHeader.corrupt(f"tensor {name!r}: data_offsets {offsets!r} is not two unsigned integers")
        begin, end = offsets
        if type(begin) is not int or type(end) is not int or begin < 0 or end < 0 or begin > u64 or end > u64:
            return ParsedHeader.corrupt(f"tensor {name!r}: data_offsets {offsets!r} is not two unsigned integers")
        if len(info) > 3:
            extra = {k: v for k, v in info.items() if k not in ("dtype", "shape", "data_offsets")}
            if _depth(extra, LIBRARY_MAX_DEPTH) + 2 > LIBRARY_MAX_DEPTH:
                return ParsedHeader.corrupt(f"tensor {name!r}: nested deeper than {LIBRARY_MAX_DEPTH} levels")
        nbits = elements * bits
        if elements > u64 or nbits > u64:
            return ParsedHeader.corrupt(f"tensor {name!r}: shape {shape} overflows a 64-bit size")
        if nbits % 8:
            return ParsedHeader.corrupt(f"tensor {name!r}: {elements} elements of {dtype} are not a whole number of bytes")
        if end - begin != nbits >> 3:
            return ParsedHeader.corrupt(f"tensor {name!r}: data_offsets [{begin}, {end}] span {end - begin} bytes but "
                                        f"shape {shape} of {dtype} needs {nbits // 8}")
        tensors[name] = (dtype, tuple(shape))
        spans.append((begin, end, name))
    spans.sort()
    position = 0
    for begin, end, name in spans:
        if begin != position:
            what = "overlaps the previous tensor" if begin < position else f"leaves a gap after byte {position}"
            return ParsedHeader.corrupt(f"tensor {name!r}: data_offsets [{begin}, {end}] {what}")
        position = end
    parsed = ParsedHeader(tensors=tensors, metadata=dict(metadata or {}), data_end=position)
    if position > data_len:
        parsed.error, parsed.kind = (f"truncated: the header declares {position:,} bytes of tensor data but the file holds "
                                     f"{data_len:,} after the header"), "truncated"
    elif position < data_len:
        parsed.error, parsed.kind = (f"{data_len - position:,} bytes after the last tensor's data: the file is not fully "
                                     "covered by its header (safetensors refuses it)"), "corrupt"
    return parsed
