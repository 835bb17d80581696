"""What a lora_target list implies for a model (pure): :func:`resolve` matches the targets against the
module templates :func:`dsv3_preflight.lora.probes.model.model_modules` found (a name equal to the target
or ending in ``.target``, as peft matches) and counts the trainable parameters r × (in + out) per adapted
module over the full-size model.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

#: LLaMA-Factory's ``lora_target all`` and peft's ``all-linear``: every linear layer but the output head.
from .facts import ModelModules, ModuleTemplate

ALL = ("all", "all-linear")
DEFAULT_RANK = 8  # peft's and LLaMA-Factory's default r / lora_rank


#: a layer's number in a module name (``model.layers.3.``), and a routed expert's (``.experts.17.``)
LAYER = re.compile(r"(?<![A-Za-z0-9_])(layers|h|blocks)\.(\d+)\.")
EXPERT = re.compile(r"\.experts\.(\d+)\.")
#: a target naming one layer's module (``layers.3.self_attn.q_a_proj``) or a whole layer (``model.layers.3``)
_QUALIFIED = re.compile(r"(?<![A-Za-z0-9_])(?:layers|h|blocks)\.(\d+)(?:\.|$)")


def remote_build(facts: ModelModules, trust_remote_code: bool | None = None) -> dict[str, Any] | None:
    """How the run builds the model when it is not transformers' own code: ``{"code", "declared", "architecture",
    "why"}``. A model type transformers does not have is built with the repo's own code (auto_map) or not at all
    (``code`` None); one it has is built with the repo's code when the trainer sets trust_remote_code and
    config.json's auto_map names it (transformers' auto classes then prefer it). None: transformers' own code."""
    b = facts.get("built_as")
    if b:
        return {"code": b.get("remote_code"), "declared": b["declared"], "architecture": b["architecture"],
                "why": "unknown_type"}
    if trust_remote_code and facts.get("remote_code"):
        return {"code": facts["remote_code"], "declared": facts.get("model_type"),
                "architecture": f"{facts.get('model_type')} code", "why": "trusted"}
    return None


def built_as_clause(facts: ModelModules, trust_remote_code: bool | None = None) -> str:
    """The clause saying the model was judged with transformers' code while the run builds it otherwise (a model
    type this transformers does not know, Kimi-K2's ``kimi_k2``; or trust_remote_code with an auto_map); ''
    when the run builds it with transformers' own code."""
    r = remote_build(facts, trust_remote_code)
    if r is None:
        return ""
    if r["why"] == "trusted":
        return (f"; the run builds {r['declared']} with the repo's own code ({r['code']}: the trainer's "
                f"trust_remote_code is true), judged here with transformers' own {r['declared']} code")
    code = (f"the repo's own code ({r['code']}, trust_remote_code=True)" if r["code"]
            else "nothing: config.json has no auto_map naming the repo's own code")
    return (f"; transformers {facts.get('transformers_version')} has no model type {r['declared']}: judged as its "
            f"{r['architecture']} (the architecture config.json names), while the run builds it with {code}")


def template(name: str) -> str:
    """A module's name with its layer and expert numbers as ``*`` (``model.layers.*.mlp.experts.*.down_proj``)."""
    return EXPERT.sub(".experts.*.", LAYER.sub(lambda m: f"{m.group(1)}.*.", name))


def layer_of(target: str) -> int | None:
    """The layer number a target names (``layers.3.self_attn.q_a_proj`` → 3), None for a name of every layer's
    module (``q_a_proj``, ``self_attn.o_proj``)."""
    m = _QUALIFIED.search(target)
    return int(m.group(1)) if m else None


def matches(target: str, name: str) -> bool:
    """peft's match of a target_modules entry: the module's name or a dotted suffix of it; on templates, a
    layer-qualified target is its template (``layers.3.o_proj`` matches ``model.layers.*.o_proj``)."""
    target = template(target + ".")[:-1]
    return name == target or name.endswith("." + target)


def _hits(target: str, modules: Mapping[str, ModuleTemplate], depth: int | None) -> list[str]:
    """The module templates one target adapts (every Linear but lm_head for ``all``; none past the last layer)."""
    if target in ALL:
        return [n for n, m in modules.items() if m["type"] == "Linear" and not n.endswith("lm_head")]
    layer = layer_of(target)
    if layer is not None and depth is not None and layer >= depth:
        return []   # no such layer: peft finds no module of that name
    return [n for n in modules if matches(target, n)]


def _not_adaptable(target: str, facts: ModelModules) -> list[str]:
    """The modules a target names that peft cannot adapt (not Linear, or fused expert tensors)."""
    bad = [n for n in facts.get("other_modules", []) if matches(target, n)]
    bad += [n.rsplit(".", 1)[0] for n in facts.get("fused_expert_params", {}) if matches(target, n.rsplit(".", 1)[0])]
    return sorted(set(bad))


def _unfused_extra(targets: list[str], facts: ModelModules, rank: int) -> int:
    """The trainable parameters the same targets add when routed experts are per-expert Linear modules
    ``mlp.experts.N.{gate,up,down}_proj`` (transformers < 5)."""
    extra = 0
    for name, f in facts.get("fused_expert_params", {}).items():
        pname = name.rsplit(".", 1)[1]
        parts = ["gate_proj", "up_proj"] if pname == "gate_up_proj" else [pname]
        out = f["out"] // len(parts)
        for part in parts:
            if any(t == part or t in ALL for t in targets):
                extra += rank * (f["in"] + out) * f["experts"] * f["count"]
    return extra


def resolve(targets: Iterable[str], facts: ModelModules, rank: int) -> dict[str, Any]:
    """Match ``targets`` against the module templates in ``facts``; pure.

    Returns matched templates per target, the targets matching nothing, targets matching only
    modules peft cannot adapt, the candidate names, and the trainable parameter count for ``rank``
    (also the count the same targets gave when routed experts were per-expert Linear modules, as in
    transformers < 5, when the model has fused expert tensors).
    """
    modules: dict[str, ModuleTemplate] = facts.get("modules", {})
    targets = [t.strip() for t in targets if t and t.strip()]
    matched: dict[str, list[str]] = {}
    unmatched: list[str] = []
    unsupported: dict[str, list[str]] = {}
    adapted: set[str] = set()
    once: set[str] = set()   # templates adapted in the one layer a target names, not in every layer
    for t in targets:
        hits = _hits(t, modules, facts.get("num_hidden_layers"))
        if hits:
            matched[t] = sorted(hits)
            (once if layer_of(t) is not None else adapted).update(hits)
        elif _not_adaptable(t, facts):
            unsupported[t] = _not_adaptable(t, facts)
        else:
            unmatched.append(t)
    once -= adapted

    def count(n: str) -> int:   # a template adapted in one layer only: its count in one layer of that kind
        return modules[n]["count"] if n in adapted else max(1, modules[n]["count"] // (modules[n].get("layers") or 1))
    params = sum(rank * (modules[n]["in"] + modules[n]["out"]) * count(n) for n in adapted | once)
    unfused_extra = _unfused_extra(targets, facts, rank)
    leaf_names = sorted({n.rsplit(".", 1)[-1] for n, m in modules.items() if m["type"] == "Linear"} - {"lm_head"})
    # the linear siblings of what did match (o_proj → the rest of self_attn): what the user most likely meant
    parents = {n.rsplit(".", 1)[0] for n in adapted | once if "." in n}
    siblings = [n.rsplit(".", 1)[-1] for n, m in modules.items()
                if m["type"] == "Linear" and "." in n and n.rsplit(".", 1)[0] in parents]
    return {"rank": rank, "matched": matched, "unmatched": unmatched, "unsupported": unsupported,
            "candidates": leaf_names, "siblings": list(dict.fromkeys(siblings)), "adapted_modules": sum(count(n) for n in adapted | once),
            "trainable_params": params,
            "trainable_params_unfused_experts": params + unfused_extra if unfused_extra else None}
