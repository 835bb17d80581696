"""lora.adapter_base: the adapters already saved in the output dir fit the profile's model (their LoRA matrices take
its layer widths and name modules it has), or resuming from one fails in peft with "size mismatch"."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.lora.adapter_base_rules import (
    compare_saved,
    does_not_fit,
    evidence_of,
    model_unreadable,
    nothing_compared,
    ok_summary,
    skip_reason,
)
from dsv3_preflight.lora.facts import LoraBaseModelFact, SavedAdaptersFact
from dsv3_preflight.result import Findings


@check("lora.adapter_base", needs=["output_dir", "saved_adapters", "lora_base_model"], tags=["lora", "model"],
       timeout=240)
def adapter_base(output_dir, saved_adapters: SavedAdaptersFact, lora_base_model: LoraBaseModelFact):
    """The adapters already in the output dir fit the profile's model: each lora_A/lora_B takes the width of the
    module it adapts, and every adapted module exists in the model."""
    model = lora_base_model
    skip = skip_reason(model, saved_adapters)
    if skip:
        return Result.skipped(skip)
    unreadable = model_unreadable(model, output_dir)
    if unreadable:
        return Findings([unreadable]).result("model config readable", {"path": model.get("path")})
    out = output_dir.get("path") or ""
    comparison = compare_saved(saved_adapters, model, out)
    found = Findings()
    for res, cases in comparison.groups.values():
        found.check(does_not_fit, cases, res, model, out)
    evidence = evidence_of(model, comparison)
    if not found and not comparison.compared_modules:
        return Result.skipped(nothing_compared(comparison, model), evidence)
    return found.result(ok_summary(comparison, model), evidence)
