"""lora.deepspeed_config: the DeepSpeed config saves real LoRA adapters under ZeRO-3 and is self-consistent."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.lora import causes, fixes
from dsv3_preflight.lora.dsconfig import (
    ACCELERATE_GATHER_ENV,
    ACCELERATE_STAGE_ENV,
    Context,
    library_findings,
    lint,
    seen,
)
from dsv3_preflight.lora.dsconfig_rules import deepspeed_model_rejects
from dsv3_preflight.result import Actor


@check("lora.deepspeed_config", needs=["lora_deepspeed_config", "profile", "env"], tags=["lora", "deepspeed"], timeout=60)
def deepspeed_config(lora_deepspeed_config, profile, env):
    """ZeRO-3 gathers 16-bit weights on save (else empty adapters); offload pinning, bf16/fp16, batch arithmetic; and
    what the installed transformers, accelerate and DeepSpeed make of the config on the Trainer's way to the engine."""
    facts = lora_deepspeed_config
    if not facts.get("configured"):
        return Result.skipped("the profile names no deepspeed_config (--deepspeed-config / DEEPSPEED_CONFIG)")
    path = facts["path"]
    if facts.get("error"):
        return Result.failed(facts["error"], {"path": path},
                             f"ls -la -- {fixes.quote(path)}   # a readable JSON file; then point the run at it:\n"
                             'dsv3-preflight run --only lora.deepspeed_config --deepspeed-config '
                             '"${DEEPSPEED_CONFIG:?the DeepSpeed JSON config of the training run}"',
                             actor=Actor.JOB, cause=causes.DEEPSPEED_CONFIG_UNREADABLE)
    # This suite guards LoRA runs: ZeRO-3 without gathering on save is judged as one even when the profile
    # names no lora_targets/lora_rank. The trainer's batch arguments, when given (--per-device-train-batch-size,
    # or read by `launch` from the training command), must agree with the config's explicit values.
    ctx = Context(path=path, world_size=profile.effective_world_size, lora=True,
                  micro_batch=profile.per_device_train_batch_size, grad_accum=profile.gradient_accumulation_steps,
                  accelerate_gather=(env or {}).get(ACCELERATE_GATHER_ENV),   # what fills an "auto" gather flag
                  accelerate_stage=(env or {}).get(ACCELERATE_STAGE_ENV),     # and an "auto" stage
                  trainer_save=facts.get("trainer_save"),
                  deepspeed_offload=(facts.get("deepspeed_check") or {}).get("offload"),
                  mixed_precision=profile.mixed_precision, trainer_chain=facts.get("trainer_chain"))
    found = lint(facts["config"], ctx, library=False)
    found.check(deepspeed_model_rejects, facts)
    library_findings(found, facts["config"], ctx)   # what the Trainer's own set-up makes of it, where nothing failed
    trainer = {k: {"value": profile.values[k], "source": profile.sources[k]}
               for k in ("per_device_train_batch_size", "gradient_accumulation_steps", "mixed_precision")
               if profile.values.get(k) is not None}
    evidence = {"path": path, "values": seen(facts["config"], ctx), "trainer_arguments": trainer,
                "deepspeed_model": facts.get("deepspeed_check") or {}, "trainer_save": facts.get("trainer_save") or {},
                "trainer_chain": facts.get("trainer_chain") or {}}
    stage = evidence["values"].get("zero_optimization.stage")
    return found.result(f"{path}: ZeRO stage {stage}" + (", 16-bit weights gathered on save" if str(stage) == "3" else ""),
                        evidence)
