"""What LoRA can target in a model, from its parsed config.json only (torch and transformers, no file read).

:func:`model_modules` builds the architecture with transformers on the meta device (no memory, no
weights, no network), shrunk to the layers and experts that differ (DeepSeek-V3: the
``first_k_dense_replace`` dense layers plus one MoE layer; two routed experts), and returns every
LoRA-targetable module as a *template* (``model.layers.*.self_attn.o_proj``) with its shape and how
many times it occurs in the full-size model.
"""
from __future__ import annotations

import re
from typing import Any

_LAYER = re.compile(r"(?<![A-Za-z0-9_])(layers|h|blocks)\.(\d+)\.")
_EXPERT = re.compile(r"\.experts\.(\d+)\.")
MAX_BUILT_EXPERTS = 2


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [""])[0][:300]


def model_modules(raw: dict[str, Any]) -> dict[str, Any]:
    """Targetable modules of the model a parsed config.json describes (plain JSON data; no file is read).

    Never raises for a bad config: returns ``{"error": ...}`` instead (the caller names the file).
    """
    try:
        return _model_modules(raw)
    except Exception as exc:  # noqa: BLE001 - a value transformers accepts but the shrinking cannot use
        return {"error": f"cannot be built into a model here: {type(exc).__name__}: {_first_line(exc)}"}


def _model_modules(raw: dict[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    if not isinstance(raw, dict) or "model_type" not in raw:
        return {"error": "has no model_type"}
    raw = dict(raw)
    try:
        import torch
        import transformers
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError as exc:
        return {"error": f"cannot be turned into the model's modules here: {exc.name or exc} is not installed "
                "(pip install 'dsv3-preflight[lora]')"}

    facts.update(model_type=raw["model_type"], transformers_version=transformers.__version__)
    raw.pop("quantization_config", None)  # FP8 block quantisation needs kernels; names and shapes do not
    try:
        config = AutoConfig.for_model(**raw)
    except Exception as exc:  # noqa: BLE001 - an unknown model_type or a bad value is the finding
        return {**facts, "error": f"cannot be read by transformers {transformers.__version__}: "
                f"{type(exc).__name__}: {_first_line(exc)}"}
    full_layers = int(getattr(config, "num_hidden_layers", 1) or 1)
    dense = int(getattr(config, "first_k_dense_replace", 0) or 0)
    built_layers = min(full_layers, dense + 1)
    experts_attr = next((a for a in ("n_routed_experts", "num_local_experts", "num_experts") if getattr(config, a, None)), None)
    full_experts = int(getattr(config, experts_attr)) if experts_attr else 0
    built_experts = min(full_experts, MAX_BUILT_EXPERTS) if experts_attr else 0
    config.num_hidden_layers = built_layers
    if experts_attr:
        setattr(config, experts_attr, built_experts)
        for a in ("num_experts_per_tok", "topk_group", "n_group"):
            if getattr(config, a, None):
                setattr(config, a, min(int(getattr(config, a)), built_experts))
    for a in ("layer_types", "mlp_layer_types"):  # per-layer lists must match the built depth
        if isinstance(getattr(config, a, None), list):
            setattr(config, a, getattr(config, a)[:built_layers])
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except Exception as exc:  # noqa: BLE001
        return {**facts, "error": f"cannot be built into {raw['model_type']} by transformers {transformers.__version__}: "
                f"{type(exc).__name__}: {_first_line(exc)}"}

    def layer_mult(name: str) -> int:
        m = _LAYER.search(name)
        if not m:
            return 1
        return 1 if int(m.group(2)) < built_layers - 1 else full_layers - built_layers + 1

    expert_scale = (full_experts / built_experts) if built_experts else 1
    modules: dict[str, dict[str, Any]] = {}
    fused: dict[str, dict[str, Any]] = {}
    others: set[str] = set()
    for name, mod in model.named_modules():
        if not name:
            continue
        kind = type(mod).__name__
        template = _EXPERT.sub(".experts.*.", _LAYER.sub(lambda m: f"{m.group(1)}.*.", name))
        mult = layer_mult(name) * (expert_scale if _EXPERT.search(name) else 1)
        entry = None
        if isinstance(mod, torch.nn.Linear):
            entry = {"type": "Linear", "in": mod.in_features, "out": mod.out_features}
        elif isinstance(mod, torch.nn.Embedding):
            entry = {"type": "Embedding", "in": mod.num_embeddings, "out": mod.embedding_dim}
        elif isinstance(mod, (torch.nn.Conv1d, torch.nn.Conv2d)):
            entry = {"type": kind, "in": mod.in_channels, "out": mod.out_channels}
        else:
            others.add(template)
            for pname, p in mod.named_parameters(recurse=False):
                if p.dim() == 3 and built_experts:  # fused routed experts: [experts, out, in]
                    key = f"{template}.{pname}"
                    f = fused.setdefault(key, {"experts": full_experts, "out": p.shape[1], "in": p.shape[2], "count": 0})
                    f["count"] += layer_mult(name)
        if entry is not None:
            e = modules.setdefault(template, {**entry, "count": 0})
            e["count"] += int(round(mult))
    return {**facts, "num_hidden_layers": full_layers, "built_layers": built_layers, "experts": full_experts,
            "built_experts": built_experts, "modules": modules, "fused_expert_params": fused,
            "other_modules": sorted(others)}
