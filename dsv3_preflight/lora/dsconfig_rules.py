"""lora.deepspeed_config: the DeepSpeed config saves real LoRA adapters under ZeRO-3 and is self-consistent."""
from __future__ import annotations

from dsv3_preflight.lora import causes, fixes
from dsv3_preflight.result import Actor, Finding, failure


def deepspeed_model_rejects(facts: dict) -> Finding | None:
    """DeepSpeed's own config model (when DeepSpeed is installed here) refuses zero_optimization."""
    ds = facts.get("deepspeed_check") or {}
    if not ds.get("error"):
        return None
    return failure(f"DeepSpeed's own config model rejects zero_optimization: {ds['error']}",
                   fixes.comment(f"correct the key DeepSpeed names in {facts['path']}, then check again:") + "\n"
                   + f"dsv3-preflight run --only lora.deepspeed_config --deepspeed-config {fixes.quote(facts['path'])}",
                   actor=Actor.JOB, cause=causes.DEEPSPEED_CONFIG_INVALID)
