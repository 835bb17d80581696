"""lora.targets: every lora_target names modules the model has (DeepSeek-V3's MLA has no q_proj/k_proj/v_proj)."""
from __future__ import annotations

import re

from dsv3_preflight import Result, check
from dsv3_preflight.lora import causes, fixes
from dsv3_preflight.lora.targets import resolve
from dsv3_preflight.result import Actor, Finding, Findings, failure, warning

DEFAULT_RANK = 8  # peft's and LLaMA-Factory's default r / lora_rank
_CONFIG_SOURCE = re.compile(r"^training command (?P<file>.+\.(?P<ext>ya?ml|json)) \[lora_target\]$")


def suggested_targets(res: dict, model_type: str | None) -> list[str]:
    """What to target instead: DeepSeek-V3's MLA projections, else the linear siblings of what matched, else all."""
    if model_type in ("deepseek_v3", "deepseek_v2") and set(fixes.DSV3_MLA_TARGETS) <= set(res["candidates"]):
        return list(fixes.DSV3_MLA_TARGETS)
    return fixes.order_targets(res["siblings"] or res["candidates"])


def target_fix(targets: list[str], source: str, model_path: str, why: str) -> str:
    """The fix for the user's own trainer setting: the trainer config file edited in place when lora_target came
    from one, else the flag to use (as a comment) and a re-check with the corrected list."""
    value = ",".join(targets)
    recheck = (f"dsv3-preflight run --only lora.targets --model-path {fixes.quote(model_path)} --lora-targets {value}"
               "   # check the corrected list")
    m = _CONFIG_SOURCE.match(source or "")
    if m and m.group("ext") == "json":
        return "\n".join([fixes.json_edit(m.group("file"), [(["lora_target"], value)], why), recheck])
    if m:
        return "\n".join([f"sed -i 's/^lora_target:.*/lora_target: {value}/' {fixes.quote(m.group('file'))}   "
                          f"{fixes.comment(why)}", recheck])
    return "\n".join([fixes.comment(why), fixes.comment(f"in the training command: --lora_target {value}"),
                      fixes.comment(f"(with peft directly: LoraConfig(target_modules={targets!r}))"), recheck])


def model_readable(facts: dict) -> Finding | None:
    if not facts.get("error"):
        return None
    return failure(facts["error"],
                   "dsv3-preflight run --only lora.targets --model-path "
                   '"${MODEL_PATH:?the local model directory holding config.json}"',
                   actor=Actor.JOB, cause=causes.MODEL_CONFIG_UNREADABLE)


def no_target_matches(res: dict, model_type: str, fix: str) -> Finding | None:
    if res["matched"]:
        return None
    bad = res["unmatched"] + list(res["unsupported"])
    return failure(f"no lora_target matches a linear module of {model_type}: {', '.join(bad)} "
                   f"(candidates: {','.join(res['candidates'])})", fix, actor=Actor.JOB, cause=causes.TARGETS_MISSING)


def unsupported_targets(res: dict, model_type: str, fix: str) -> Finding | None:
    if not res["matched"] or not res["unsupported"]:
        return None
    detail = "; ".join(f"{t} → {', '.join(m)}" for t, m in res["unsupported"].items())
    return failure(f"lora_target {', '.join(res['unsupported'])} names modules peft cannot adapt ({detail}); "
                   "peft raises at get_peft_model", fix, actor=Actor.JOB, cause=causes.TARGETS_MISSING)


def unmatched_targets(res: dict, model_type: str, fix: str) -> Finding | None:
    if not res["matched"] or not res["unmatched"]:
        return None
    return warning(f"lora_target {', '.join(res['unmatched'])} match no module of {model_type}; only "
                   f"{', '.join(res['matched'])} will be adapted ({res['trainable_params']:,} trainable parameters at "
                   f"r={res['rank']}); candidates: {','.join(res['candidates'])}", fix, actor=Actor.JOB,
                   cause=causes.TARGETS_MISSING)


@check("lora.targets", needs=["lora_model_modules", "profile"], tags=["lora", "model"], timeout=240)
def targets(lora_model_modules, profile):
    """Each lora_target matches Linear modules of the model (from its config.json); trainable parameters for rank r."""
    facts = lora_model_modules
    if not facts.get("configured"):
        return Result.skipped("the profile names no model_path (--model-path / MODEL_PATH)")
    if facts.get("skipped"):
        return Result.skipped(f"{facts['skipped']} (--lora-targets A,B)")
    unreadable = model_readable(facts)
    if unreadable:
        return Findings([unreadable]).result("model config readable", {"path": facts.get("path")})
    rank = profile.lora_rank or DEFAULT_RANK
    res = resolve(profile.lora_targets, facts, rank)
    model_type = facts.get("model_type") or "the model"
    evidence = {"model_type": facts.get("model_type"), "transformers": facts.get("transformers_version"),
                "targets": list(profile.lora_targets), "rank": rank,
                "rank_source": "profile lora_rank" if profile.lora_rank else f"default {DEFAULT_RANK}",
                "matched": res["matched"], "unmatched": res["unmatched"], "unsupported": res["unsupported"],
                "candidates": res["candidates"], "siblings": res["siblings"], "adapted_modules": res["adapted_modules"],
                "trainable_params": res["trainable_params"],
                "trainable_params_unfused_experts": res["trainable_params_unfused_experts"],
                "fused_expert_params": sorted(facts.get("fused_expert_params", {}))}
    suggestion = suggested_targets(res, facts.get("model_type"))
    why = (f"{model_type}'s attention is MLA (no q_proj/k_proj/v_proj): target its projections"
           if suggestion == list(fixes.DSV3_MLA_TARGETS) else f"linear layers of {model_type} to target")
    fix = target_fix(suggestion, profile.sources.get("lora_targets", ""), facts.get("path") or "", why)
    found = Findings()
    found.check(no_target_matches, res, model_type, fix)
    found.check(unsupported_targets, res, model_type, fix)
    found.check(unmatched_targets, res, model_type, fix)
    extra = ""
    if res["trainable_params_unfused_experts"]:
        extra = (f"; with transformers<5 (per-expert Linear modules) the same targets give "
                 f"{res['trainable_params_unfused_experts']:,}")
    return found.result(f"{len(res['matched'])} lora_targets match {res['adapted_modules']} modules: "
                        f"{res['trainable_params']:,} trainable parameters at r={rank} (compare the trainer's "
                        f"'Number of trainable parameters'){extra}", evidence)
