"""lora.targets: every lora_target names modules the model has (DeepSeek-V3's MLA has no q_proj/k_proj/v_proj)."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.lora import fixes
from dsv3_preflight.lora.target_rules import (
    dropout_fix,
    model_readable,
    no_native_code,
    no_target_matches,
    peft_refuses,
    remote_experts,
    suggested_targets,
    target_fix,
    unmatched_targets,
    unsupported_targets,
    with_peft,
)
from dsv3_preflight.lora.targets import DEFAULT_RANK, built_as_clause, remote_build, resolve
from dsv3_preflight.result import Findings, warning


@check("lora.targets", needs=["lora_model_modules", "profile"], tags=["lora", "model"], timeout=240)
def targets(lora_model_modules, profile):
    """Each lora_target matches Linear modules of the model (from its config.json); trainable parameters for rank r."""
    facts = lora_model_modules
    if not facts.get("configured"):
        return Result.skipped("the profile names no model_path (--model-path / MODEL_PATH)")
    if facts.get("skipped"):
        return Result.skipped(f"{facts['skipped']} (--lora-targets A,B)")
    unreadable = model_readable(facts) or no_native_code(facts)
    if unreadable:
        return Findings([unreadable]).result("model config readable", {"path": facts.get("path")})
    rank = profile.lora_rank or DEFAULT_RANK
    targets_ = list(profile.lora_targets)
    trust = profile.trust_remote_code
    res = resolve(targets_, facts, rank)
    peft = facts.get("peft") or {"available": False, "reason": "not asked"}
    refused = peft.get("available") and peft.get("error")
    if peft.get("available") and not refused:
        res = with_peft(res, peft, targets_, facts.get("modules", {}))
    model_type = facts.get("model_type") or "the model"
    depth = facts.get("num_hidden_layers")
    evidence = {"model_type": facts.get("model_type"), "transformers": facts.get("transformers_version"),
                "built_as": facts.get("built_as"), "remote_code": facts.get("remote_code"),
                "trust_remote_code": trust,
                "targets": targets_, "rank": rank, "lora_dropout": profile.lora_dropout,
                "rank_source": "profile lora_rank" if profile.lora_rank else f"default {DEFAULT_RANK}",
                "matched": res["matched"], "unmatched": res["unmatched"], "unsupported": res["unsupported"],
                "candidates": res["candidates"], "siblings": res["siblings"], "adapted_modules": res["adapted_modules"],
                "adapted_parameters": res.get("adapted_parameters", []),
                "trainable_params": res["trainable_params"],
                "trainable_params_unfused_experts": res["trainable_params_unfused_experts"],
                "fused_expert_params": sorted(facts.get("fused_expert_params", {})),
                # who decided: peft itself on the model built on the meta device, or (without peft here) name matching
                "peft": {k: v for k, v in peft.items() if k in ("available", "peft_version", "reason", "error",
                                                                "target_modules", "peft_target_modules",
                                                                "peft_target_parameters")}}
    suggestion = suggested_targets(res, facts.get("model_type"))
    why = (f"{model_type}'s attention is MLA (no q_proj/k_proj/v_proj): target its projections"
           if suggestion == list(fixes.DSV3_MLA_TARGETS) else f"linear layers of {model_type} to target")
    fix = target_fix(suggestion, profile.sources.get("lora_targets", ""), facts.get("path") or "", why)
    found = Findings()
    if refused:
        if "lora_dropout" in peft["error"]:
            fix = dropout_fix(profile, targets_, facts.get("path") or "")
        said = peft_refuses(peft, targets_, res["candidates"], model_type, fix, profile.lora_dropout, depth)
        if remote_build(facts, trust) is not None:   # peft refused transformers' build, not the code the run uses
            said = warning(said.message + built_as_clause(facts, trust), said.fix, actor=said.actor, cause=said.cause)
        found.add(said, rule="peft_refuses")
        return found.result(f"peft {peft['peft_version']} refuses these lora_targets", evidence)
    found.check(no_target_matches, res, model_type, fix, depth)
    found.check(unsupported_targets, res, model_type, fix)
    found.check(unmatched_targets, res, model_type, fix, depth, profile.lora_unmatched_targets,
                profile.sources.get("lora_unmatched_targets", "default"))
    found.check(remote_experts, {**res, "rank": rank}, facts, trust)
    extra = ""
    if res["trainable_params_unfused_experts"]:
        extra = (f"; with transformers<5 (per-expert Linear modules) the same targets give "
                 f"{res['trainable_params_unfused_experts']:,}")
    params = res.get("adapted_parameters") or []
    what = " and ".join(x for x in (
        res["adapted_modules"] and f"{res['adapted_modules']} modules",
        params and f"the fused weights {', '.join(p.split('.', 3)[-1] for p in params)} of every MoE layer") if x)
    rewritten = [t for t in targets_ if peft.get("available") and isinstance(peft.get("peft_target_modules"), list)
                 and t not in peft["peft_target_modules"] and t in res["matched"] and targets_ != ["all"]]
    if params and (rewritten or targets_ == ["all"]):
        what += (" (with this transformers, peft turns the names of fused experts and routers into target_parameters:"
                 " Linear modules of the same names, in dense layers or shared experts, are not adapted)")
    who = (f"peft {peft['peft_version']} on the model built on the meta device" if peft.get("available")
           else f"matched by name: peft is not importable here ({peft.get('reason')})")
    return found.result(f"{len(res['matched'])} lora_targets adapt {what}: {res['trainable_params']:,} trainable "
                        f"parameters at r={rank} ({who}; compare the trainer's 'Number of trainable parameters')"
                        f"{extra}{built_as_clause(facts, trust)}", evidence)
