"""``--deep``: stream an adapter's tensor data in bounded chunks; flag NaN/Inf, and an all-zero lora_B
when trainer_state.json says training steps were taken (peft initialises lora_B to zero, so after
steps an all-zero lora_B means the weights saved are the initial ones, not the trained ones)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

CHUNK_BYTES = 16 * 1024 * 1024
_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1}


def deep_scan(path: Path, tensors: dict[str, dict[str, Any]], report: Any, global_step: int | None) -> None:
    """Add nan_inf / zero_lora_b findings to ``report``; at most ~CHUNK_BYTES of tensor data in memory at once."""
    import torch
    from safetensors import safe_open

    bad: list[str] = []
    zero_b: list[str] = []
    b_names = [n for n in tensors if ".lora_B" in n or ".lora_embedding_B" in n]
    with safe_open(str(path), framework="pt") as st:
        for name, info in tensors.items():
            shape = info["shape"]
            if not shape or 0 in shape:
                continue
            if info["dtype"] not in _ITEMSIZE:
                continue
            row_bytes = _ITEMSIZE[info["dtype"]]
            for s in shape[1:]:
                row_bytes *= s
            rows = max(1, CHUNK_BYTES // max(1, row_bytes))
            sl = st.get_slice(name)
            finite, nonzero = True, False
            for start in range(0, shape[0], rows):
                chunk = sl[start:start + rows]
                if chunk.is_floating_point():
                    finite = finite and bool(torch.isfinite(chunk).all())
                nonzero = nonzero or bool(chunk.any())
                del chunk
            if not finite:
                bad.append(name)
            if name in b_names and not nonzero:
                zero_b.append(name)
    from .scan import _named

    if bad:
        report.add("fail", "nan_inf", f"{len(bad)} tensors hold NaN or Inf: {_named(bad)}")
    if zero_b and global_step:
        every = len(zero_b) == len(b_names)
        which = f"every lora_B ({len(b_names)})" if every else f"{len(zero_b)} of {len(b_names)} lora_B"
        names = "" if every else f": {_named(zero_b, 3)}"
        report.add("fail", "zero_lora_b", f"{which} all zeros after {global_step} training steps (trainer_state.json): "
                   f"the saved weights are the untrained initial ones{names}")
