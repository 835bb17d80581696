"""The shapes of the LoRA domain's facts about the model, as its probes return them (``probes/facts.py``:
``lora_model_modules`` and ``lora_base_model``, both built from ``probes/model.py``'s module map of the model on
the meta device, and ``saved_adapters``).

A fact is plain JSON data: these are :class:`~typing.TypedDict` shapes, so a rule's annotations say which keys it
reads. ``total=False`` throughout: a fact stops early (no model configured, a config that cannot be read: then
``error``), and peft adds its keys only when it is importable.
"""
from __future__ import annotations

from typing import Any, TypedDict

#: One module template of the model (``model.layers.*.self_attn.q_a_proj``): its kind, its widths (``in``:
#: in_features, num_embeddings or in_channels; ``out`` likewise), and how many such modules the full-size model has
#: (``layers``: in how many layers). The functional form: ``in`` is a Python keyword.
ModuleTemplate = TypedDict("ModuleTemplate", {"type": str, "in": int, "out": int, "count": int, "layers": int},
                           total=False)


#: A fused expert tensor (transformers 5's ``mlp.experts.gate_up_proj``): every routed expert's weight in one.
FusedExpertParam = TypedDict("FusedExpertParam", {"experts": int, "in": int, "out": int, "count": int})


class PeftTargets(TypedDict, total=False):
    """What peft itself adapts for the profile's lora_targets at its rank, on the model built on the meta device
    (``available`` False: peft is not importable or the model cannot be built; ``error``: peft refused)."""

    available: bool
    reason: str
    peft_version: str
    full_depth: bool
    target_modules: list[str] | str
    error: str
    modules: list[str]
    module_count: int
    parameters: list[str]
    peft_target_modules: list[str] | str
    peft_target_parameters: list[str]
    trainable_params: int


class ModelModules(TypedDict, total=False):
    """The model's module map (``probes/model.py``): read from config.json, built on the meta device."""

    path: str
    config_file: str
    error: str
    model_type: str
    transformers_version: str
    remote_code: str | None
    built_as: dict[str, Any]
    num_hidden_layers: int
    built_layers: int
    experts: int
    built_experts: int
    modules: dict[str, ModuleTemplate]
    fused_expert_params: dict[str, FusedExpertParam]
    module_params: dict[str, list[dict[str, Any]]]
    other_modules: list[str]


class LoraModelModulesFact(ModelModules, total=False):
    """The fact ``lora_model_modules``: the model's module map and peft's answer for the profile's lora_targets
    (``configured`` False: no model_path; ``skipped``: no lora_targets to judge)."""

    configured: bool
    skipped: str
    peft: PeftTargets


class LoraBaseModelFact(ModelModules, total=False):
    """The fact ``lora_base_model``: the model's module map when saved adapters need comparing with it
    (``needed`` False: none does), and what peft's load converts each adapter's keys to."""

    configured: bool
    needed: bool
    conversions: dict[str, dict[str, Any]]


class SavedAdaptersFact(TypedDict, total=False):
    """The fact ``saved_adapters``: the newest adapters already in the output dir (header only)."""

    scanned: bool
    reason: str
    total: int
    adapters: list[dict[str, Any]]
    unreadable: list[dict[str, Any]]


class DeepspeedModelCheck(TypedDict, total=False):
    """DeepSpeed's own config model over zero_optimization (``available`` False: DeepSpeed is not importable here;
    ``error``: it refused; ``offload``: what it makes of the offload sections, defaults included)."""

    available: bool
    reason: str
    error: str | None
    offload: dict[str, dict[str, Any]]


class LoraDeepspeedConfigFact(TypedDict, total=False):
    """The fact ``lora_deepspeed_config``: the DeepSpeed JSON config the profile names, parsed (or why it cannot
    be), DeepSpeed's own verdict on it, where the Trainer saves, and what the installed transformers, accelerate and
    DeepSpeed make of it step by step (``trainer_chain``)."""

    configured: bool
    path: str
    error: str
    config: dict[str, Any]
    deepspeed_check: DeepspeedModelCheck
    trainer_save: dict[str, Any]
    trainer_chain: dict[str, Any]
