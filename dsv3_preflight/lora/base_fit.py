"""Does a saved adapter fit a base model? Its LoRA matrices against the model's layer widths (pure).

peft saves, for every adapted module, ``lora_A`` of shape ``[r, in]`` and ``lora_B`` of shape ``[out, r]`` (the
embedding forms ``lora_embedding_A`` ``[r, num_embeddings]`` and ``lora_embedding_B`` ``[dim, r]``; a convolution's
A and B keep ``in`` and ``out`` as their second and first dimension). ``PeftModel.from_pretrained`` copies them into
layers built from the base model, so a width that differs is torch's "size mismatch for ...lora_A...: copying a
param with shape torch.Size([16, 7168]) from checkpoint, the shape in current model is torch.Size([16, 4096])",
and a module the model does not have is peft's "Target modules ... not found in the base model".

A ``target_parameters`` entry is a ``ParamWrapper`` around one parameter of a module (peft 0.21,
``tuners/lora/layer.py``): for a 3-D parameter ``[E, d1, d2]`` (fused experts) peft reads in = d1 and
out = d2, then swaps them unless the module ``is_transposed`` (transformers' ``[E, out, in]`` layout:
DeepSeek-V3's ``gate_up_proj [E, 2·inter, hidden]`` takes ``hidden`` in); a 2-D one (a router's
weight ``[E, hidden]``) is ``[out, in]`` with E = 1. Its lora_A is ``[r·E, in]`` and lora_B ``[out, r·E]``,
so an adapter of a model with other expert counts or widths is the same "size mismatch". Several wrappers of
one module nest in the order it registers the parameters peft wraps: the last one outermost, each earlier
one a ``.base_layer`` deeper.

:func:`compare` reads only the adapter's key layout (:mod:`.layout`) and the module widths of
:func:`dsv3_preflight.lora.probes.model.model_modules` (the model built from its config.json on the meta device).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .layout import Layout, template
from .patterns import PatternError
from .rules import named
from .selection import Targets, reachable, unwrap

#: how many differing modules a message names
MAX_SHOWN = 3


def _widths(model: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The model's modules by the same template as a saved module (every number as ``*``)."""
    return {template(name): m for name, m in (model.get("modules") or {}).items()}


def wrapper_widths(param: Mapping[str, Any]) -> tuple[int, int, int]:
    """(E, in, out) of peft's ParamWrapper around a parameter the model probe recorded (``shape``, ``transposed``)."""
    shape = param["shape"]
    if len(shape) == 3:
        experts, d1, d2 = shape
        experts = max(experts, 1)   # a zero-size stack: no division by it below
        return (experts, d1, d2) if param.get("transposed") else (experts, d2, d1)
    return 1, shape[1], shape[0]


def wrapped_param(base: str, depth: int, saved: int, params: Sequence[Mapping[str, Any]],
                  targets: Targets | None) -> Mapping[str, Any] | None:
    """The parameter the wrapper ``depth`` deep around module ``base`` holds (``saved`` wrappers of it were saved),
    or None when it cannot be told: the parameters target_parameters reaches (all of them without a config) in the
    module's order, the last outermost; a count that differs from the saved one is the selection rules' finding."""
    if targets is not None and targets.parameters:
        names = {name for name, _pinned in reachable(targets, base)}
        params = [p for p in params if p["name"] in names]
    if saved != len(params) or depth >= len(params):
        return None
    return params[len(params) - 1 - depth]


def _rank(targets: Targets | None, key: str) -> int | None:
    """The rank peft gives the wrapper of ``key``; None unknown (no config, or a rank_pattern the config rules
    report as invalid)."""
    try:
        return targets.rank_for(key) if targets is not None else None
    except PatternError:
        return None


def compare(layout: Layout, model: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The adapter's pairs against the model's widths, by module template.

    Returns ``{"compared": [templates], "mismatched": [{"module", "matrix", "saved", "dim", "want", "side",
    "model_shape"}], "absent": [templates], "not_compared": [templates]}``: ``absent`` are modules the model does
    not have at all; ``not_compared`` are modules the model has but not as a Linear, Embedding or convolution,
    where the parameter a saved target_parameters wrapper holds cannot be told (``config``: the adapter's
    adapter_config.json, for its target_parameters and ranks), and pairs with an empty ([0]) tensor, which the
    empty-adapter rules judge. A wrapper is named ``<module template>.<parameter>``; its side ``experts`` is lora_A's
    rows (lora_B's columns): r times the model's experts. For an adapter peft converts as it loads it, ``config`` is
    the one peft converts it with (the probe's ``config`` of the conversion).
    """
    widths = _widths(model)
    others = {template(name) for name in model.get("other_modules") or []}
    params = model.get("module_params") or {}
    targets = Targets.of(config) if isinstance(config, Mapping) else None
    saved: dict[str, int] = {}
    for module in layout.pairs:
        base, depth = unwrap(module)
        saved[base] = max(saved.get(base, 0), depth + 1)
    compared: set[str] = set()
    absent: set[str] = set()
    not_compared: set[str] = set()
    mismatched: dict[tuple[str, str], dict[str, Any]] = {}
    for module, pair in layout.pairs.items():
        base, depth = unwrap(module)   # a target_parameters wrapper nested as <module>.base_layer: <module>
        tmpl = template(base)
        a, b = pair.get("A"), pair.get("B")
        m = widths.get(tmpl)
        param = None
        if m is None and tmpl in params:
            param = wrapped_param(base, depth, saved[base], params[tmpl], targets)
        if m is None and param is None:
            (not_compared if tmpl in others else absent).add(tmpl)
            continue
        if not a or not b or len(a) < 2 or len(b) < 2 or 0 in a or 0 in b:
            not_compared.add(tmpl)
            continue
        #: (matrix, its saved shape, the dimension judged, the width the model wants there, which side it is)
        wants: tuple[tuple[str, tuple[int, ...], int, int | str | None, str], ...]
        per: dict[str, Any]
        kind: str | None
        if param is not None:
            name = f"{tmpl}.{param['name']}"
            experts, fan_in, fan_out = wrapper_widths(param)
            rank = _rank(targets, f"{base}.{param['name']}")
            rows = rank * experts if rank else (a[0] if a[0] % experts == 0 else None)
            wants = (("lora_A", a, 1, fan_in, "in"), ("lora_B", b, 0, fan_out, "out"),
                     ("lora_A", a, 0, rows, "experts"), ("lora_B", b, 1, rows, "experts"))
            model_shape, kind, per = list(param["shape"]), "ParamWrapper", {"experts": experts, "r": rank}
        elif m is not None:
            name = tmpl
            wants = (("lora_A", a, 1, m["in"], "in"), ("lora_B", b, 0, m["out"], "out"))
            model_shape, kind, per = [m["out"], m["in"]], m.get("type"), {}
        else:   # neither the model's module nor a wrapper's parameter: counted above
            continue
        compared.add(name)
        for matrix, shape, dim, want, side in wants:
            if want is None and side == "experts":
                want = f"a multiple of {per['experts']}"
            if shape[dim] != want and (name, matrix) not in mismatched:
                mismatched[(name, matrix)] = {
                    "module": name, "matrix": matrix, "saved": list(shape), "dim": dim, "want": want, "side": side,
                    "model_shape": model_shape, "type": kind, **per}
    compared -= {k[0] for k in mismatched}
    return {"compared": sorted(compared), "mismatched": [mismatched[k] for k in sorted(mismatched)],
            "absent": sorted(absent), "not_compared": sorted(not_compared)}


def describe(found: Mapping[str, Any], model_type: str) -> str:
    """One clause naming what does not fit: the first differing matrices with both widths, the absent modules."""
    parts = []
    for mm in found["mismatched"][:MAX_SHOWN]:
        if mm["side"] == "experts":
            r = f"r {mm['r']} x " if mm.get("r") else "r x "
            width = f"{r}{mm['experts']} experts"
        else:
            width = "in-features" if mm["side"] == "in" else "out-features"
        parts.append(f"{mm['module']}.{mm['matrix']} {mm['saved']} (the model's {width}: {mm['want']})")
    more = len(found["mismatched"]) - MAX_SHOWN
    if more > 0:
        parts.append(f"{more} more")
    if found["absent"]:
        parts.append(f"{model_type} has no {named(found['absent'], MAX_SHOWN)}")
    return "; ".join(parts)
