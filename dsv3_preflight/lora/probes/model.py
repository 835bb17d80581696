"""What LoRA can target in a model, from its parsed config.json only (torch and transformers, no file read).

:func:`model_modules` builds the architecture with transformers on the meta device (no memory, no
weights, no network), shrunk to the layers and experts that differ (DeepSeek-V3: the
``first_k_dense_replace`` dense layers plus one MoE layer; two routed experts), and returns every
LoRA-targetable module as a *template* (``model.layers.*.self_attn.o_proj``) with its shape and how
many times it occurs in the full-size model; and, for the other modules, the 2-D and 3-D parameters
``target_parameters`` can wrap (fused experts ``[experts, d1, d2]``, a router's weight), in the order
the module registers them, with the full-size expert count and transformers' ``is_transposed`` layout.
"""
from __future__ import annotations

from typing import Any

from ..targets import EXPERT as _EXPERT
from ..targets import LAYER as _LAYER
from ..targets import layer_of
from ..targets import template as _template

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


def _build(raw: dict[str, Any], experts: int = MAX_BUILT_EXPERTS, full_depth: bool = False) -> dict[str, Any]:
    """The model ``raw`` describes, built on the meta device and shrunk to the layers that differ (the dense ones
    and one MoE layer; every layer when ``full_depth``) and at most ``experts`` routed experts: ``{"model", "facts",
    "full_layers", "built_layers", "full_experts", "built_experts"}``, or the facts with an ``error``."""
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
    facts["remote_code"] = remote_code(raw)
    native = native_architecture(raw)
    if native is not None:
        facts["built_as"] = native
        raw["model_type"] = native["model_type"]
    try:
        config = AutoConfig.for_model(**raw)
    except Exception as exc:  # noqa: BLE001 - an unknown model_type or a bad value is the finding
        return {**facts, "error": f"cannot be read by transformers {transformers.__version__}: "
                f"{type(exc).__name__}: {_first_line(exc)}"}
    full_layers = int(getattr(config, "num_hidden_layers", 1) or 1)
    dense = int(getattr(config, "first_k_dense_replace", 0) or 0)
    built_layers = full_layers if full_depth else min(full_layers, dense + 1)
    experts_attr = next((a for a in ("n_routed_experts", "num_local_experts", "num_experts") if getattr(config, a, None)), None)
    full_experts = int(getattr(config, experts_attr)) if experts_attr else 0
    built_experts = min(full_experts, experts) if experts_attr else 0
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
    return {"model": model, "facts": facts, "full_layers": full_layers, "built_layers": built_layers,
            "full_experts": full_experts, "built_experts": built_experts}


def remote_code(raw: dict[str, Any]) -> str | None:
    """The model class of the repo's own code config.json's auto_map names (``modeling_deepseek.DeepseekV3ForCausalLM``):
    what transformers builds with trust_remote_code=True, whatever model types it has itself."""
    auto_map = raw.get("auto_map") if isinstance(raw.get("auto_map"), dict) else {}
    code = auto_map.get("AutoModelForCausalLM") or auto_map.get("AutoModel")
    return code if isinstance(code, str) and code else None


def native_architecture(raw: dict[str, Any]) -> dict[str, Any] | None:
    """For a model_type transformers does not know whose config.json names an architecture it has (Kimi-K2:
    ``"model_type": "kimi_k2"``, ``"architectures": ["DeepseekV3ForCausalLM"]``, the repo's own code in
    ``auto_map``): ``{"declared", "model_type", "architecture", "remote_code"}``, the native model type to build it
    as. None when transformers knows the model_type, or no named architecture is native."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    declared = raw.get("model_type")
    if not isinstance(declared, str) or declared in CONFIG_MAPPING:
        return None
    named = raw.get("architectures")
    for arch in named if isinstance(named, list) else []:
        for model_type, cls in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items():
            if cls == arch and model_type in CONFIG_MAPPING:
                return {"declared": declared, "model_type": model_type, "architecture": arch,
                        "remote_code": remote_code(raw)}
    return None


def _layer_mult(name: str, built_layers: int, full_layers: int) -> int:
    """How many layers of the full-size model a module of the shrunk one stands for (the last built layer: all
    the MoE layers)."""
    m = _LAYER.search(name)
    if not m:
        return 1
    return 1 if int(m.group(2)) < built_layers - 1 else full_layers - built_layers + 1


def _model_modules(raw: dict[str, Any]) -> dict[str, Any]:
    built = _build(raw)
    if "model" not in built:
        return built
    facts, model, full_layers, built_layers = built["facts"], built["model"], built["full_layers"], built["built_layers"]
    full_experts, built_experts = built["full_experts"], built["built_experts"]
    import torch

    def layer_mult(name: str) -> int:
        return _layer_mult(name, built_layers, full_layers)

    expert_scale = (full_experts / built_experts) if built_experts else 1
    modules: dict[str, dict[str, Any]] = {}
    fused: dict[str, dict[str, Any]] = {}
    params: dict[str, list[dict[str, Any]]] = {}   # what target_parameters can wrap, by module template
    others: set[str] = set()
    in_layers: dict[str, set[int]] = {}   # a template's built layers: how many full-size layers hold it
    for name, mod in model.named_modules():
        if not name:
            continue
        kind = type(mod).__name__
        template = _template(name)
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
            first = template not in params
            for pname, p in mod.named_parameters(recurse=False):
                if p.dim() == 3 and built_experts:  # fused routed experts: [experts, out, in]
                    key = f"{template}.{pname}"
                    f = fused.setdefault(key, {"experts": full_experts, "out": p.shape[1], "in": p.shape[2], "count": 0})
                    f["count"] += layer_mult(name)
                if first and p.dim() in (2, 3):
                    shape = list(p.shape)
                    if built_experts and shape[0] == built_experts:   # the experts (or a router's rows): full size
                        shape[0] = full_experts
                    params.setdefault(template, []).append(
                        {"name": pname, "shape": shape, "transposed": bool(getattr(mod, "is_transposed", False))})
        if entry is not None:
            e = modules.setdefault(template, {**entry, "count": 0})
            e["count"] += int(round(mult))
            if (m := _LAYER.search(name)) is not None:
                in_layers.setdefault(template, set()).add(int(m.group(2)))
    for template, built in in_layers.items():
        modules[template]["layers"] = sum(_layer_mult(f"layers.{i}.", built_layers, full_layers) for i in built)
    return {**facts, "num_hidden_layers": full_layers, "built_layers": built_layers, "experts": full_experts,
            "built_experts": built_experts, "modules": modules, "fused_expert_params": fused,
            "module_params": params, "other_modules": sorted(others)}


def linear_leaf_names(model: Any) -> list[str]:
    """LLaMA-Factory's ``lora_target: all`` (model_utils/misc.py find_all_linear_modules, for a text model): the last
    name part of every module whose class is a Linear, but the output head."""
    names = set()
    for name, module in model.named_modules():
        if "lm_head" in name:
            continue
        kind = type(module).__name__
        if "Linear" in kind and "Embedding" not in kind:
            names.add(name.split(".")[-1])
    return sorted(names)


def peft_targets(raw: dict[str, Any], targets: list[str], rank: int, all_linear_as_string: bool = True,
                 dropout: float = 0.0) -> dict[str, Any]:
    """What peft itself does with ``targets`` on the model ``raw`` describes: ``get_peft_model`` run on the shrunk
    model on the meta device (no memory, no weights), as the trainer will run it.

    ``targets`` are a ``lora_target`` list as LLaMA-Factory passes it: ``all`` alone is every linear leaf name;
    anything else goes to peft as a list (peft matches each name or dotted suffix; with transformers 5 it rewrites
    names of fused MoE experts and routers, DeepSeek-V3's gate_proj/up_proj/down_proj/gate, into
    ``target_parameters``). ``all-linear`` alone is peft's own string when ``all_linear_as_string`` (peft used
    directly), a name like any other in a list (LLaMA-Factory). Returns peft's refusal (``error``) or the adapted
    module and parameter templates, the names peft was left with, and the trainable parameters of the full-size
    model: counted on two builds with different expert counts (LoRA grows linearly with the experts) and scaled
    to the full depth. ``dropout`` is the run's lora_dropout: peft's wrappers of fused-expert parameters refuse any
    but 0."""
    try:
        import peft
        from peft import LoraConfig, get_peft_model
    except ImportError as exc:
        return {"available": False, "reason": f"{exc.name or exc} is not installed"}
    import warnings

    out: dict[str, Any] = {"available": True, "peft_version": peft.__version__}
    # a target naming one layer's module (layers.3.self_attn.q_a_proj) needs that layer, as it is in the full-size
    # model: every layer is built then (meta device; a few seconds more for DeepSeek-V3's 61), each counted once
    full_depth = any(layer_of(t) is not None for t in targets)
    out["full_depth"] = full_depth
    builds = []
    for experts in (MAX_BUILT_EXPERTS, 2 * MAX_BUILT_EXPERTS):
        built = _build(raw, experts, full_depth)
        if "model" not in built:
            return {**out, "available": False, "reason": built.get("error", "the model cannot be built")}
        if builds and built["built_experts"] == builds[0]["built_experts"]:
            break   # the model has no more experts than the first build: it is the full count already
        builds.append(built)
    given: Any = list(targets)
    if given == ["all"]:
        given = linear_leaf_names(builds[0]["model"])
    elif given == ["all-linear"] and all_linear_as_string:
        given = "all-linear"
    out["target_modules"] = given
    totals = []
    for i, built in enumerate(builds):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pm = get_peft_model(built["model"], LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=given,
                                                                  lora_dropout=dropout))
        except Exception as exc:  # noqa: BLE001 - peft's refusal is what the trainer will meet
            return {**out, "error": f"{type(exc).__name__}: {_first_line(exc)}"}
        full, layers = built["full_layers"], built["built_layers"]
        totals.append(sum(p.numel() * _layer_mult(n, layers, full) for n, p in pm.named_parameters() if "lora_" in n))
        if i == 0:
            base, cfg = pm.base_model, pm.peft_config["default"]
            out["modules"] = sorted({_template(n) for n in base.targeted_module_names})
            # the adapted modules of the full-size model: each built one stands for its layers and experts
            scale = built["full_experts"] / built["built_experts"] if built["built_experts"] else 1
            out["module_count"] = int(round(sum(_layer_mult(n, layers, full) * (scale if _EXPERT.search(n) else 1)
                                                for n in base.targeted_module_names)))
            out["parameters"] = sorted({_template(n) for n in getattr(base, "targeted_parameter_names", [])})
            kept = cfg.target_modules
            out["peft_target_modules"] = kept if isinstance(kept, str) else sorted(kept or [])
            out["peft_target_parameters"] = sorted(getattr(cfg, "target_parameters", None) or [])
    if len(totals) == 2:   # a + b × experts, through the two builds, at the model's own expert count
        e1, e2 = builds[0]["built_experts"], builds[1]["built_experts"]
        per_expert = (totals[1] - totals[0]) // (e2 - e1)
        totals[0] += per_expert * (builds[0]["full_experts"] - e1)
    out["trainable_params"] = totals[0]
    return out


def peft_converted_tensors(raw: dict[str, Any], adapter_config: dict[str, Any] | None,
                           tensors: dict[str, Any]) -> dict[str, Any]:
    """What peft does to a saved adapter's keys when it loads it on the model ``raw`` describes: with transformers 5,
    ``PeftModel.load_adapter`` (the Trainer's resume, ``PeftModel.from_pretrained``) runs transformers' checkpoint
    conversion of the architecture on the adapter (peft.utils.transformers_weight_conversion): an adapter saved with
    transformers 4, whose routed experts were per-expert Linear modules (``mlp.experts.7.gate_proj``), becomes
    adapters of the fused expert weights. Run here on meta tensors of the saved shapes (``tensors``: {name: (dtype,
    shape)}). Returns ``{"converted": False}`` when nothing changes, ``{"converted": True, "tensors": {name: (dtype,
    shape)}, "config", "peft_version"}`` when it does (``config``: :func:`_converted_config`), or ``{"available":
    False, "reason"}``."""
    try:
        import peft
        import torch
        from peft import LoraConfig
        from peft.utils.transformers_weight_conversion import convert_peft_adapter_state_dict_for_transformers
    except ImportError as exc:   # no peft, or transformers < 5 (the module imports transformers 5's conversion)
        return {"available": False, "reason": f"peft's weight conversion is not importable here: {exc}"}
    import dataclasses
    import warnings

    built = _build(raw)
    if "model" not in built:
        return {"available": False, "reason": built.get("error", "the model cannot be built")}
    config = adapter_config or {}
    if str(config.get("peft_type", "LORA")).upper() != "LORA":
        return {"converted": False}
    fields = {f.name for f in dataclasses.fields(LoraConfig)}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lora = LoraConfig(**{k: v for k, v in config.items() if k in fields and k != "peft_type"})
            meta = {name: torch.empty(tuple(shape), device="meta") for name, (_dtype, shape) in tensors.items()}
            out = convert_peft_adapter_state_dict_for_transformers(built["model"], lora, meta)
    except Exception as exc:  # noqa: BLE001 - peft refusing the adapter is what the load will meet
        return {"available": True, "converted": False, "error": f"{type(exc).__name__}: {_first_line(exc)}"}
    if set(out) == set(meta):
        return {"converted": False}
    dtypes = {name: dtype for name, (dtype, _shape) in tensors.items()}
    common = next(iter(dtypes.values()), "F32")
    return {"converted": True, "peft_version": peft.__version__, "config": _converted_config(lora, built["model"]),
            "tensors": {name: [dtypes.get(name, common), list(t.shape)] for name, t in out.items()}}


def _converted_config(lora: Any, model: Any) -> dict[str, Any] | None:
    """The adapter config as peft rewrites it for the converted keys (``convert_peft_config_for_transformers``, run
    when the adapter is injected): the fused names in target_parameters, and the ranks of fused pairs (gate_proj and
    up_proj become gate_up_proj of rank 2r, a rank_pattern entry). None when peft refuses it."""
    import copy
    import warnings

    try:
        from peft.utils.transformers_weight_conversion import (
            convert_peft_config_for_transformers,
            get_model_conversion_mapping,
        )

        config = copy.deepcopy(lora)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            convert_peft_config_for_transformers(config, model=model, conversions=get_model_conversion_mapping(model))
    except Exception:  # noqa: BLE001 - the state-dict conversion already succeeded; widths are then read without it
        return None

    def names(value: Any) -> Any:
        return sorted(value) if isinstance(value, (set, list, tuple)) else value

    return {"r": config.r, "rank_pattern": dict(config.rank_pattern or {}),
            "target_modules": names(config.target_modules), "target_parameters": names(config.target_parameters)}
