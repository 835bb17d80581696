"""Small shared pieces of the GPU checks' wording."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

NOT_EXPECTED = "profile expects no GPUs (gpus_per_node = 0)"


def no_nvml_summary(nvml: Mapping[str, Any]) -> str:
    """``no NVIDIA driver/NVML: NVML Shared Library Not Found`` (NVML's own words)."""
    return f"no NVIDIA driver/NVML: {nvml.get('error') or 'NVML not available'}"


def spans(values: Sequence[int]) -> str:
    """0,1,2,3,5 → '0–3, 5'."""
    values = sorted(set(values))
    out, start, prev = [], None, None
    for v in values:
        if start is None:
            start = prev = v
        elif v == prev + 1:
            prev = v
        else:
            out.append(f"{start}–{prev}" if prev != start else str(start))
            start = prev = v
    if start is not None:
        out.append(f"{start}–{prev}" if prev != start else str(start))
    return ", ".join(out)


def join_problems(problems: Sequence[str]) -> str:
    return problems[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")
