"""The rules of lora.deepspeed_config (pure: facts in, findings out): the DeepSpeed config saves real LoRA adapters
under ZeRO-3 and is self-consistent. The config's own lint is :mod:`.dsconfig`; this module holds what the check
adds around it: the unreadable config, DeepSpeed's own model's refusal, the context the lint judges in, and the
evidence."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsv3_preflight.lora import causes, fixes
from dsv3_preflight.lora.dsconfig import ACCELERATE_GATHER_ENV, ACCELERATE_STAGE_ENV, Context, seen
from dsv3_preflight.lora.facts import LoraDeepspeedConfigFact
from dsv3_preflight.result import Actor, Finding, failure


def config_unreadable(facts: LoraDeepspeedConfigFact) -> Finding | None:
    """The config cannot be read or parsed: the job's configuration names a wrong file."""
    if not facts.get("error"):
        return None
    path = facts["path"]
    return failure(facts["error"],
                   f"ls -la -- {fixes.quote(path)}   # a readable JSON file; then point the run at it:\n"
                   'dsv3-preflight run --only lora.deepspeed_config --deepspeed-config '
                   '"${DEEPSPEED_CONFIG:?the DeepSpeed JSON config of the training run}"',
                   actor=Actor.JOB, cause=causes.DEEPSPEED_CONFIG_UNREADABLE)


def deepspeed_model_rejects(facts: LoraDeepspeedConfigFact) -> Finding | None:
    """DeepSpeed's own config model (when DeepSpeed is installed here) refuses zero_optimization."""
    ds = facts.get("deepspeed_check") or {}
    if not ds.get("error"):
        return None
    return failure(f"DeepSpeed's own config model rejects zero_optimization: {ds['error']}",
                   fixes.comment(f"correct the key DeepSpeed names in {facts['path']}, then check again:") + "\n"
                   + f"dsv3-preflight run --only lora.deepspeed_config --deepspeed-config {fixes.quote(facts['path'])}",
                   actor=Actor.JOB, cause=causes.DEEPSPEED_CONFIG_INVALID)


def context_of(facts: LoraDeepspeedConfigFact, profile: Any, env: Mapping[str, str] | None) -> Context:
    """What the lint judges the config in: the world size, the trainer's batch arguments, what fills "auto".

    This suite guards LoRA runs: ZeRO-3 without gathering on save is judged as one even when the profile names no
    lora_targets/lora_rank. The trainer's batch arguments, when given (--per-device-train-batch-size, or read by
    `launch` from the training command), must agree with the config's explicit values."""
    return Context(path=facts["path"], world_size=profile.effective_world_size, lora=True,
                   micro_batch=profile.per_device_train_batch_size, grad_accum=profile.gradient_accumulation_steps,
                   accelerate_gather=(env or {}).get(ACCELERATE_GATHER_ENV),   # what fills an "auto" gather flag
                   accelerate_stage=(env or {}).get(ACCELERATE_STAGE_ENV),     # and an "auto" stage
                   trainer_save=facts.get("trainer_save"),
                   deepspeed_offload=(facts.get("deepspeed_check") or {}).get("offload"),
                   mixed_precision=profile.mixed_precision, trainer_chain=facts.get("trainer_chain"))


def evidence_of(facts: LoraDeepspeedConfigFact, ctx: Context, profile: Any) -> dict[str, Any]:
    trainer = {k: {"value": profile.values[k], "source": profile.sources[k]}
               for k in ("per_device_train_batch_size", "gradient_accumulation_steps", "mixed_precision")
               if profile.values.get(k) is not None}
    return {"path": facts["path"], "values": seen(facts["config"], ctx), "trainer_arguments": trainer,
            "deepspeed_model": facts.get("deepspeed_check") or {}, "trainer_save": facts.get("trainer_save") or {},
            "trainer_chain": facts.get("trainer_chain") or {}}


def ok_summary(facts: LoraDeepspeedConfigFact, evidence: Mapping[str, Any]) -> str:
    stage = evidence["values"].get("zero_optimization.stage")
    return f"{facts['path']}: ZeRO stage {stage}" + (", 16-bit weights gathered on save" if str(stage) == "3" else "")
