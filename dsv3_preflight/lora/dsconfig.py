"""Lint a DeepSpeed JSON config for a LoRA run under the HF Trainer (pure; "auto" values allowed).

The HF Trainer fills "auto" for batch sizes, precision and a few ZeRO buckets from its arguments; it
does not fill ``stage3_gather_16bit_weights_on_model_save``, which must be literally true for a
ZeRO-3 LoRA run, or every saved adapter holds only partitioned (empty) tensors.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

GATHER_KEY = "stage3_gather_16bit_weights_on_model_save"
LEGACY_GATHER_KEY = "stage3_gather_fp16_weights_on_model_save"  # DeepSpeed's older name, still accepted
OFFLOAD_DEVICES = ("cpu", "nvme")


@dataclass
class Lint:
    fails: list[str] = field(default_factory=list)
    warns: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    seen: dict[str, Any] = field(default_factory=dict)


def _is_true(v: Any) -> bool:
    return v is True or (isinstance(v, str) and v.strip().lower() == "true")


def _num(v: Any) -> int | None:
    if isinstance(v, bool) or v is None or v == "auto":
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f == int(f) else None


def lint(config: dict[str, Any], *, world_size: int, lora: bool = True,
         micro_batch: int | None = None, grad_accum: int | None = None) -> Lint:
    """Findings for ``config``. ``micro_batch``/``grad_accum`` are the trainer's arguments when known."""
    out = Lint()
    zero = config.get("zero_optimization") or {}
    if not isinstance(zero, dict):
        out.fails.append(f"zero_optimization is a {type(zero).__name__}, not an object")
        out.fixes.append(f'"zero_optimization": {{"stage": 3, "{GATHER_KEY}": true}}   # an object of ZeRO settings')
        zero = {}
    stage = _num(zero.get("stage", 0))
    out.seen["zero_optimization.stage"] = zero.get("stage", 0)
    gather = zero.get(GATHER_KEY, zero.get(LEGACY_GATHER_KEY))
    out.seen[f"zero_optimization.{GATHER_KEY}"] = gather
    if stage == 3 and lora and not _is_true(gather):
        where = ""
        if GATHER_KEY in config or LEGACY_GATHER_KEY in config:
            where = " (it is set at the top level, where DeepSpeed ignores it: it belongs inside zero_optimization)"
        elif gather == "auto":
            where = " (\"auto\" is not filled in by the HF Trainer for this key)"
        elif gather is not None:
            where = f" (it is {gather!r})"
        else:
            where = " (it is not set; DeepSpeed's default is false)"
        out.fails.append(f"ZeRO stage 3 with LoRA but zero_optimization.{GATHER_KEY} is not true{where}: every "
                         "adapter save writes partitioned, empty tensors")
        out.fixes.append(f'"zero_optimization": {{ ..., "{GATHER_KEY}": true }}')

    devices = {}
    pinned = {}
    for part in ("offload_optimizer", "offload_param"):
        sec = zero.get(part)
        if isinstance(sec, dict):
            devices[part] = str(sec.get("device", "none")).lower()
            pinned[part] = _is_true(sec.get("pin_memory"))
    out.seen["offload"] = {p: {"device": devices[p], "pin_memory": pinned[p]} for p in devices}
    offloaded = [p for p, d in devices.items() if d in OFFLOAD_DEVICES]
    if len(offloaded) == 2 and not all(pinned[p] for p in offloaded):
        unpinned = [p for p in offloaded if not pinned[p]]
        out.warns.append(f"both offload_optimizer and offload_param go to {'/'.join(sorted({devices[p] for p in offloaded}))} "
                         f"but {', '.join(unpinned)} {'has' if len(unpinned) == 1 else 'have'} no pinned memory: "
                         "host↔GPU copies run at pageable-memory speed")
        out.fixes += [f'"zero_optimization": {{"{p}": {{"device": "{devices[p]}", "pin_memory": true}}}}' for p in unpinned]
    if stage is not None and stage not in (0, 1, 2, 3):
        out.fails.append(f"zero_optimization.stage is {zero.get('stage')!r}; DeepSpeed knows stages 0-3")

    bf16 = (config.get("bf16") or {}).get("enabled") if isinstance(config.get("bf16"), dict) else None
    fp16 = (config.get("fp16") or {}).get("enabled") if isinstance(config.get("fp16"), dict) else None
    out.seen["bf16.enabled"], out.seen["fp16.enabled"] = bf16, fp16
    if _is_true(bf16) and _is_true(fp16):
        out.fails.append("bf16.enabled and fp16.enabled are both true: DeepSpeed refuses to start")
        out.fixes.append('"fp16": {"enabled": false}   # or "auto", and pass only --bf16 to the trainer')

    tbs, mb, ga = (config.get(k) for k in ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"))
    out.seen.update({"train_batch_size": tbs, "train_micro_batch_size_per_gpu": mb, "gradient_accumulation_steps": ga,
                     "world_size": world_size})
    n_tbs, n_mb, n_ga = _num(tbs), _num(mb), _num(ga)
    for key, value, trainer, flag in (("train_micro_batch_size_per_gpu", n_mb, micro_batch, "--per_device_train_batch_size"),
                                      ("gradient_accumulation_steps", n_ga, grad_accum, "--gradient_accumulation_steps")):
        if value is not None and trainer is not None and value != trainer:
            out.fails.append(f"{key} is {value} in the DeepSpeed config but the trainer has {flag} {trainer}")
            out.fixes.append(f'"{key}": "auto"')
    n_mb = n_mb if n_mb is not None else micro_batch
    n_ga = n_ga if n_ga is not None else grad_accum
    if n_tbs is not None:
        if n_mb is not None and n_ga is not None and n_tbs != n_mb * n_ga * world_size:
            out.fails.append(f"train_batch_size {n_tbs} ≠ micro batch {n_mb} × gradient accumulation {n_ga} × world size "
                             f"{world_size} = {n_mb * n_ga * world_size}")
            out.fixes.append('"train_batch_size": "auto"')
        elif n_mb is not None and n_tbs % (n_mb * world_size):
            out.fails.append(f"train_batch_size {n_tbs} is not a multiple of micro batch {n_mb} × world size {world_size}")
            out.fixes.append('"train_batch_size": "auto"')
        elif n_ga is not None and n_tbs % (n_ga * world_size):
            out.fails.append(f"train_batch_size {n_tbs} is not a multiple of gradient accumulation {n_ga} × world size {world_size}")
            out.fixes.append('"train_batch_size": "auto"')
    return out
