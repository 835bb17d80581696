"""What LoRA can target in a model, from its local config.json only, and what a lora_target list implies.

:func:`model_modules` builds the architecture with transformers on the meta device (no memory, no
weights, no network), shrunk to the layers and experts that differ (DeepSeek-V3: the
``first_k_dense_replace`` dense layers plus one MoE layer; two routed experts), and returns every
LoRA-targetable module as a *template* (``model.layers.*.self_attn.o_proj``) with its shape and how
many times it occurs in the full-size model. :func:`resolve` (pure) matches a target list against
those templates the way peft does (a name equal to the target or ending in ``.target``) and counts
the trainable parameters r × (in + out) per adapted module over the full-size model.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

_LAYER = re.compile(r"(?<![A-Za-z0-9_])(layers|h|blocks)\.(\d+)\.")
_EXPERT = re.compile(r"\.experts\.(\d+)\.")
MAX_BUILT_EXPERTS = 2
#: LLaMA-Factory's ``lora_target all`` and peft's ``all-linear``: every linear layer but the output head.
ALL = ("all", "all-linear")


def model_modules(model_path: str | Path) -> dict[str, Any]:
    """Targetable modules of the model whose config.json is in ``model_path`` (plain JSON data).

    Never raises for a bad model dir: returns ``{"error": ...}`` instead.
    """
    path = Path(model_path).expanduser()
    cfg_file = path / "config.json" if path.is_dir() else path
    facts: dict[str, Any] = {"path": str(path), "config_file": str(cfg_file)}
    if not path.exists():
        return {**facts, "error": f"{path} does not exist"}
    try:
        raw = json.loads(cfg_file.read_text())
    except FileNotFoundError:
        return {**facts, "error": f"{cfg_file} is missing (the model directory needs its config.json)"}
    except OSError as exc:
        return {**facts, "error": f"{cfg_file} is unreadable: {exc.strerror or exc}"}
    except ValueError as exc:
        return {**facts, "error": f"{cfg_file} is not valid JSON: {exc}"}
    if not isinstance(raw, dict) or "model_type" not in raw:
        return {**facts, "error": f"{cfg_file} has no model_type"}
    try:
        import torch
        import transformers
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError as exc:
        return {**facts, "error": f"cannot list the model's modules: {exc.name or exc} is not installed "
                "(pip install 'dsv3-preflight[lora]')"}

    facts.update(model_type=raw["model_type"], transformers_version=transformers.__version__)
    raw.pop("quantization_config", None)  # FP8 block quantisation needs kernels; names and shapes do not
    try:
        config = AutoConfig.for_model(**raw)
    except Exception as exc:  # noqa: BLE001 - an unknown model_type or a bad value is the finding
        return {**facts, "error": f"transformers {transformers.__version__} cannot read this config.json: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
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
        return {**facts, "error": f"transformers {transformers.__version__} cannot build {raw['model_type']} from "
                f"config.json: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}

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


def _matches(target: str, template: str) -> bool:
    return template == target or template.endswith("." + target)


def resolve(targets: Iterable[str], facts: dict[str, Any], rank: int) -> dict[str, Any]:
    """Match ``targets`` against the module templates in ``facts``; pure.

    Returns matched templates per target, the targets matching nothing, targets matching only
    modules peft cannot adapt, the candidate names, and the trainable parameter count for ``rank``
    (also the count the same targets gave when routed experts were per-expert Linear modules, as in
    transformers < 5, when the model has fused expert tensors).
    """
    modules: dict[str, dict[str, Any]] = facts.get("modules", {})
    targets = [t.strip() for t in targets if t and t.strip()]
    matched: dict[str, list[str]] = {}
    unmatched: list[str] = []
    unsupported: dict[str, list[str]] = {}
    adapted: set[str] = set()
    for t in targets:
        if t in ALL:
            hits = [n for n, m in modules.items() if m["type"] == "Linear" and not n.endswith("lm_head")]
        else:
            hits = [n for n in modules if _matches(t, n)]
        if hits:
            matched[t] = sorted(hits)
            adapted.update(hits)
        else:
            bad = [n for n in facts.get("other_modules", []) if _matches(t, n)]
            bad += [n.rsplit(".", 1)[0] for n in facts.get("fused_expert_params", {}) if _matches(t, n.rsplit(".", 1)[0])]
            if bad:
                unsupported[t] = sorted(set(bad))
            else:
                unmatched.append(t)
    params = sum(rank * (modules[n]["in"] + modules[n]["out"]) * modules[n]["count"] for n in adapted)
    # transformers < 5 kept routed experts as Linear modules mlp.experts.N.{gate,up,down}_proj.
    unfused_extra = 0
    for name, f in facts.get("fused_expert_params", {}).items():
        pname = name.rsplit(".", 1)[1]
        parts = ["gate_proj", "up_proj"] if pname == "gate_up_proj" else [pname]
        out = f["out"] // len(parts)
        for part in parts:
            if any(t == part or t in ALL for t in targets):
                unfused_extra += rank * (f["in"] + out) * f["experts"] * f["count"]
    leaf_names = sorted({n.rsplit(".", 1)[-1] for n, m in modules.items() if m["type"] == "Linear"} - {"lm_head"})
    # the linear siblings of what did match (o_proj → the rest of self_attn): what the user most likely meant
    parents = {n.rsplit(".", 1)[0] for n in adapted if "." in n}
    siblings = [n.rsplit(".", 1)[-1] for n, m in modules.items()
                if m["type"] == "Linear" and "." in n and n.rsplit(".", 1)[0] in parents]
    return {"rank": rank, "matched": matched, "unmatched": unmatched, "unsupported": unsupported,
            "candidates": leaf_names, "siblings": list(dict.fromkeys(siblings)), "adapted_modules": sum(modules[n]["count"] for n in adapted),
            "trainable_params": params,
            "trainable_params_unfused_experts": params + unfused_extra if unfused_extra else None}
