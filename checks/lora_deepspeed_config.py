"""lora.deepspeed_config: the DeepSpeed config saves real LoRA adapters under ZeRO-3 and is self-consistent."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.lora.dsconfig import lint


@check("lora.deepspeed_config", needs=["lora_deepspeed_config", "profile"], tags=["lora", "deepspeed"], timeout=20)
def deepspeed_config(lora_deepspeed_config, profile):
    """ZeRO-3 gathers 16-bit weights on save (else empty adapters); offload pinning, bf16/fp16, batch arithmetic."""
    facts = lora_deepspeed_config
    if not facts.get("configured"):
        return Result.skipped("the profile names no deepspeed_config (--deepspeed-config / DEEPSPEED_CONFIG)")
    path = facts["path"]
    if facts.get("error"):
        return Result.failed(f"DeepSpeed config {facts['error']}", {"path": path},
                             f"dsv3-preflight run --deepspeed-config /path/to/ds_z3_config.json   # a readable JSON file")
    # This suite guards LoRA runs: ZeRO-3 without gathering on save is judged as one even when the profile
    # names no lora_targets/lora_rank.
    # The trainer's batch arguments, when given (--per-device-train-batch-size, or read by `launch` from
    # the training command), must agree with the config's explicit values.
    found = lint(facts["config"], world_size=profile.effective_world_size, lora=True,
                 micro_batch=profile.per_device_train_batch_size, grad_accum=profile.gradient_accumulation_steps)
    ds = facts.get("deepspeed_check") or {}
    if ds.get("error"):
        found.fails.append(f"DeepSpeed's own config model rejects zero_optimization: {ds['error']}")
    trainer = {k: {"value": profile.values[k], "source": profile.sources[k]}
               for k in ("per_device_train_batch_size", "gradient_accumulation_steps") if profile.values.get(k) is not None}
    evidence = {"path": path, "values": found.seen, "trainer_arguments": trainer, "problems": found.fails, "warnings": found.warns,
                "deepspeed_model": ds}
    remediation = "\n".join(dict.fromkeys(found.fixes)) or None
    if found.fails:
        more = f" (+{len(found.fails) - 1} more)" if len(found.fails) > 1 else ""
        return Result.failed(f"{path}: {found.fails[0]}{more}", evidence, remediation)
    if found.warns:
        more = f" (+{len(found.warns) - 1} more)" if len(found.warns) > 1 else ""
        return Result.warned(f"{path}: {found.warns[0]}{more}", evidence, remediation)
    stage = found.seen.get("zero_optimization.stage")
    return Result.passed(f"{path}: ZeRO stage {stage}" + (", 16-bit weights gathered on save" if str(stage) == "3" else ""),
                         evidence)
