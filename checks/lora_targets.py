"""lora.targets: every lora_target names modules the model has (DeepSeek-V3's MLA has no q_proj/k_proj/v_proj)."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.lora.facts import LoraModelModulesFact
from dsv3_preflight.lora.target_rules import (
    TargetsCase,
    model_readable,
    no_native_code,
    no_target_matches,
    ok_summary,
    peft_refusal,
    remote_experts,
    skip_reason,
    unmatched_targets,
    unsupported_targets,
)
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Findings


@check("lora.targets", needs=["lora_model_modules", "profile"], tags=["lora", "model"], timeout=240)
def targets(lora_model_modules: LoraModelModulesFact, profile: Profile):
    """Each lora_target matches Linear modules of the model (from its config.json); trainable parameters for rank r."""
    facts = lora_model_modules
    skip = skip_reason(facts)
    if skip:
        return Result.skipped(skip)
    unreadable = model_readable(facts) or no_native_code(facts)
    if unreadable:
        return Findings([unreadable]).result("model config readable", {"path": facts.get("path")})
    case = TargetsCase.of(facts, profile)
    found = Findings()
    if case.refused:
        found.add(peft_refusal(case), rule="peft_refuses")
        return found.result(f"peft {case.peft['peft_version']} refuses these lora_targets", case.evidence())
    found.check(no_target_matches, case.res, case.model_type, case.fix, case.depth)
    found.check(unsupported_targets, case.res, case.model_type, case.fix)
    found.check(unmatched_targets, case.res, case.model_type, case.fix, case.depth, profile.lora_unmatched_targets,
                profile.sources.get("lora_unmatched_targets", "default"))
    found.check(remote_experts, {**case.res, "rank": case.rank}, facts, case.trust)
    return found.result(ok_summary(case), case.evidence())
