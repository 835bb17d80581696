"""lora.deepspeed_config: the DeepSpeed config saves real LoRA adapters under ZeRO-3 and is self-consistent."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.host.facts import EnvFact
from dsv3_preflight.lora.dsconfig import library_findings, lint
from dsv3_preflight.lora.dsconfig_rules import (
    config_unreadable,
    context_of,
    deepspeed_model_rejects,
    evidence_of,
    ok_summary,
)
from dsv3_preflight.lora.facts import LoraDeepspeedConfigFact
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Findings


@check("lora.deepspeed_config", needs=["lora_deepspeed_config", "profile", "env"], tags=["lora", "deepspeed"], timeout=60)
def deepspeed_config(lora_deepspeed_config: LoraDeepspeedConfigFact, profile: Profile, env: EnvFact):
    """ZeRO-3 gathers 16-bit weights on save (else empty adapters); offload pinning, bf16/fp16, batch arithmetic; and
    what the installed transformers, accelerate and DeepSpeed make of the config on the Trainer's way to the engine."""
    facts = lora_deepspeed_config
    if not facts.get("configured"):
        return Result.skipped("the profile names no deepspeed_config (--deepspeed-config / DEEPSPEED_CONFIG)")
    unreadable = config_unreadable(facts)
    if unreadable:
        return Findings([unreadable]).result("config readable", {"path": facts["path"]})
    ctx = context_of(facts, profile, env)
    found = lint(facts["config"], ctx, library=False)
    found.check(deepspeed_model_rejects, facts)
    library_findings(found, facts["config"], ctx)   # what the Trainer's own set-up makes of it, where nothing failed
    evidence = evidence_of(facts, ctx, profile)
    return found.result(ok_summary(facts, evidence), evidence)
