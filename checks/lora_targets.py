"""lora.targets: every lora_target names modules the model has (DeepSeek-V3's MLA has no q_proj/k_proj/v_proj)."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.lora.targets import resolve

DEFAULT_RANK = 8  # peft's and LLaMA-Factory's default r / lora_rank


@check("lora.targets", needs=["lora_model_modules", "profile"], tags=["lora", "model"], timeout=240)
def targets(lora_model_modules, profile):
    """Each lora_target matches Linear modules of the model (from its config.json); trainable parameters for rank r."""
    facts = lora_model_modules
    if not facts.get("configured"):
        return Result.skipped("the profile names no model_path (--model-path / MODEL_PATH)")
    if facts.get("skipped"):
        return Result.skipped(f"{facts['skipped']} (--lora-targets A,B)")
    if facts.get("error"):
        return Result.failed(f"model {facts['error']}", {"path": facts.get("path")},
                             "dsv3-preflight run --model-path /local/model/dir   # the directory holding config.json")
    rank = profile.lora_rank or DEFAULT_RANK
    res = resolve(profile.lora_targets, facts, rank)
    candidates = ",".join(res["candidates"])
    evidence = {"model_type": facts.get("model_type"), "transformers": facts.get("transformers_version"),
                "targets": list(profile.lora_targets), "rank": rank,
                "rank_source": "profile lora_rank" if profile.lora_rank else f"default {DEFAULT_RANK}",
                "matched": res["matched"], "unmatched": res["unmatched"], "unsupported": res["unsupported"],
                "candidates": res["candidates"], "siblings": res["siblings"], "adapted_modules": res["adapted_modules"],
                "trainable_params": res["trainable_params"],
                "trainable_params_unfused_experts": res["trainable_params_unfused_experts"],
                "fused_expert_params": sorted(facts.get("fused_expert_params", {}))}
    n = f"{res['trainable_params']:,}"
    fix = f"--lora_target {candidates}   # LoRA-targetable linear layers of {facts.get('model_type')}"
    if res["unmatched"] and res["siblings"]:
        fix = (f"--lora_target {','.join(res['siblings'])}   # every projection beside {', '.join(res['matched'])} "
               f"in {facts.get('model_type')}; all linear layers: {candidates}")
    bad = res["unmatched"] + list(res["unsupported"])
    detail = "; ".join(f"{t} → {', '.join(m)}" for t, m in res["unsupported"].items())
    if not res["matched"]:
        return Result.failed(f"no lora_target matches a linear module of {facts.get('model_type')}: {', '.join(bad)} "
                             f"(candidates: {candidates})", evidence, fix)
    if res["unsupported"]:
        return Result.failed(f"lora_target {', '.join(res['unsupported'])} names modules peft cannot adapt ({detail}); "
                             "peft raises at get_peft_model", evidence, fix)
    if res["unmatched"]:
        return Result.warned(f"lora_target {', '.join(res['unmatched'])} match no module of {facts.get('model_type')}; "
                             f"only {', '.join(res['matched'])} will be adapted ({n} trainable parameters at r={rank}); "
                             f"candidates: {candidates}", evidence, fix)
    extra = ""
    if res["trainable_params_unfused_experts"]:
        extra = (f"; with transformers<5 (per-expert Linear modules) the same targets give "
                 f"{res['trainable_params_unfused_experts']:,}")
    return Result.passed(f"{len(res['matched'])} lora_targets match {res['adapted_modules']} modules: {n} trainable "
                         f"parameters at r={rank} (compare the trainer's 'Number of trainable parameters'){extra}", evidence)
