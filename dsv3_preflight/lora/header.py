"""Read a safetensors header without the tensor data, with a cap on the declared header length.

The only bytes this module reads itself are the 8-byte little-endian length prefix (to refuse a
declared length beyond the cap, or beyond the file, before anything else reads it). The header is
then parsed by the safetensors library (``safe_open`` maps the file and reads only the header).
"""
from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Any

#: safetensors itself refuses headers over 100 MB; an adapter's header is far smaller (DeepSeek-V3 with
#: every linear targeted is a few MB), so a larger declared length means a corrupt file.
DEFAULT_HEADER_CAP = 64 * 1024 * 1024


@dataclass
class Header:
    """What the header of one safetensors file says, or why it could not be read."""

    path: str
    size: int = 0
    declared_len: int | None = None
    tensors: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {"dtype", "shape"}
    metadata: dict[str, str] = field(default_factory=dict)
    error: str | None = None  # a reason the file is corrupt / unreadable
    unreadable: bool = False  # an OS error (permission, vanished), not a format problem
    bytes_examined: int = 0  # upper bound of file bytes read: 8 + declared_len (never above 8 + cap)


def read_header(path: str | os.PathLike[str], cap: int = DEFAULT_HEADER_CAP) -> Header:
    """Read a safetensors header. Never raises for a bad file; never reads beyond ``8 + cap`` bytes."""
    p = os.fspath(path)
    h = Header(path=p)
    try:
        with open(p, "rb") as fh:
            h.size = os.fstat(fh.fileno()).st_size
            prefix = fh.read(8)
    except OSError as exc:
        h.error, h.unreadable = f"cannot read: {exc.strerror or exc}", True
        return h
    h.bytes_examined = len(prefix)
    if len(prefix) < 8:
        h.error = f"truncated: {h.size} bytes, shorter than the 8-byte header length"
        return h
    (n,) = struct.unpack("<Q", prefix)
    h.declared_len = n
    if n > cap:
        h.error = f"declared header length {n} bytes is beyond the cap of {cap} bytes"
        return h
    if 8 + n > h.size:
        h.error = f"truncated: the header declares {n} bytes but the file has only {h.size - 8} after the length"
        return h
    h.bytes_examined = 8 + n
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(p, framework="numpy") as st:
            h.metadata = dict(st.metadata() or {})
            for name in st.keys():
                sl = st.get_slice(name)
                h.tensors[name] = {"dtype": sl.get_dtype(), "shape": list(sl.get_shape())}
    except SafetensorError as exc:
        msg = str(exc)
        if "not fully covered" in msg or "incomplete" in msg:
            h.error = f"truncated: {msg}"
        else:
            h.error = f"corrupt header: {msg}"
    except OSError as exc:
        h.error, h.unreadable = f"cannot read: {exc.strerror or exc}", True
    except Exception as exc:  # noqa: BLE001 - any other library complaint is a corrupt file, not our crash
        h.error = f"corrupt header: {type(exc).__name__}: {exc}"
    return h
