"""Reading tensor data, which needs torch: a pickled ``adapter_model.bin`` (names, dtypes, shapes) and the
``--deep`` pass over a safetensors file's data (NaN/Inf, all-zero lora_B), streamed in bounded chunks.

Facts only (what was found, by tensor name); the rules in :mod:`dsv3_preflight.lora.rules` judge them.
"""
from __future__ import annotations

import os
from typing import Any

from dsv3_preflight.inputs import InputError, open_regular

CHUNK_BYTES = 16 * 1024 * 1024
_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
             "U16": 2, "U32": 4, "U64": 8}
_TORCH_BOILERPLATE = ("Weights only load failed", "Please file an issue", "Check the documentation",
                      "Re-running `torch.load`")


def pickle_refusal(exc: BaseException) -> str:
    """Why torch.load(weights_only=True) refused a pickle: its specific reason, never torch's boilerplate
    suggesting a re-run with weights_only=False (which executes whatever the pickle holds)."""
    text = str(exc)
    if type(exc).__name__ == "UnpicklingError" and "weights_only" in text:
        reason = " ".join(ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(_TORCH_BOILERPLATE))
        return ("torch pickle refused by weights_only=True: it is not a plain tensor dict (corrupt, or it holds "
                f"objects/code; do not load it with weights_only=False unless you trust it): {reason[:200] or 'no reason given'}")
    return f"torch pickle not loadable with weights_only=True: {type(exc).__name__}: {(text.splitlines() or [''])[0][:200]}"


def read_pickle(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Names, dtypes and shapes of a torch pickle, loaded only with ``weights_only=True`` (memory-mapped).

    Returns ``{"size", "tensors": {name: [dtype, shape]}, "non_tensors": [names], "error", "kind"}``.
    """
    out: dict[str, Any] = {"size": None, "tensors": {}, "non_tensors": [], "error": None, "kind": None}
    try:
        fh = open_regular(path, what="adapter weights")
    except InputError as exc:
        return {**out, "error": str(exc), "kind": "unreadable"}
    with fh:
        out["size"] = os.fstat(fh.fileno()).st_size
        try:
            import torch
        except ImportError:
            return {**out, "error": "a torch pickle (adapter_model.bin) needs torch to be read: pip install torch",
                    "kind": "unreadable"}
        # the descriptor checked to be a regular file, reopened by path so torch can map it
        same_file = f"/proc/self/fd/{fh.fileno()}"
        try:
            try:
                state = torch.load(same_file, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as exc:
                if "mmap" not in str(exc):
                    raise
                fh.seek(0)
                state = torch.load(fh, map_location="cpu", weights_only=True)
        except Exception as exc:  # noqa: BLE001 - a refused or broken pickle is a fact about the file
            return {**out, "error": pickle_refusal(exc), "kind": "corrupt"}
    if not isinstance(state, dict):
        return {**out, "error": f"torch pickle holds a {type(state).__name__}, not a state dict", "kind": "corrupt"}
    dtype_names = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
                   torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
                   torch.bool: "BOOL"}
    for k, v in state.items():
        if isinstance(v, torch.Tensor):
            out["tensors"][str(k)] = [dtype_names.get(v.dtype, str(v.dtype).removeprefix("torch.")), list(v.shape)]
        else:
            out["non_tensors"].append(f"{k!s} ({type(v).__name__})")
    return out


def deep_facts(path: str | os.PathLike[str], tensors: dict[str, Any]) -> dict[str, Any]:
    """Stream every tensor's data (at most ~CHUNK_BYTES in memory at once): the names holding NaN/Inf, and the
    lora_B tensors that are all zeros. Returns ``{"nan_inf", "zero_lora_b", "lora_b", "error"}``."""
    out: dict[str, Any] = {"nan_inf": [], "zero_lora_b": [], "lora_b": 0, "error": None}
    try:
        import torch
        from safetensors import safe_open
    except ImportError as exc:
        return {**out, "error": f"--deep needs torch and safetensors: {exc.name or exc} is not installed"}
    b_names = {n for n in tensors if ".lora_B" in n or ".lora_embedding_B" in n}
    out["lora_b"] = len(b_names)
    try:
        fh = open_regular(path, what="adapter weights")
    except InputError as exc:
        return {**out, "error": str(exc)}
    with fh:
        try:
            with safe_open(f"/proc/self/fd/{fh.fileno()}", framework="pt") as st:
                for name, (dtype, shape) in tensors.items():
                    if not shape or 0 in shape or dtype not in _ITEMSIZE:
                        continue
                    row_bytes = _ITEMSIZE[dtype]
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
                        out["nan_inf"].append(name)
                    if name in b_names and not nonzero:
                        out["zero_lora_b"].append(name)
        except Exception as exc:  # noqa: BLE001 - the library's complaint about this file is the fact
            return {**out, "error": f"cannot stream the tensor data: {type(exc).__name__}: {str(exc)[:200]}"}
    return out
