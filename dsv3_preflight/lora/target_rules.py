"""The rules of lora.targets: every lora_target names modules the model has (DeepSeek-V3's MLA has no
q_proj/k_proj/v_proj), and what peft would adapt with them (pure: the ``lora_model_modules`` fact and the profile
in, findings out). :class:`TargetsCase` resolves the targets once; each rule reads it."""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dsv3_preflight.lora import causes, fixes
from dsv3_preflight.lora.facts import LoraModelModulesFact, ModuleTemplate, PeftTargets
from dsv3_preflight.lora.targets import DEFAULT_RANK, built_as_clause, layer_of, matches, remote_build, resolve
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Actor, Finding, failure, warning

_CONFIG_SOURCE = re.compile(r"^training command (?P<file>.+\.(?P<ext>ya?ml|json)) \[(?P<key>\w+)\]$")


def suggested_targets(res: Mapping[str, Any], model_type: str | None) -> list[str]:
    """What to target instead: DeepSeek-V3's MLA projections, else the linear siblings of what matched, else all."""
    if model_type in ("deepseek_v3", "deepseek_v2") and set(fixes.DSV3_MLA_TARGETS) <= set(res["candidates"]):
        return list(fixes.DSV3_MLA_TARGETS)
    return fixes.order_targets(res["siblings"] or res["candidates"])


def config_edit(source: str, key: str, value: str | float, why: str) -> str | None:
    """The line that sets ``key`` in the trainer config file a profile value came from (``source``, as `launch`
    records it), or None when it came from elsewhere."""
    m = _CONFIG_SOURCE.match(source or "")
    if not m or m.group("key") != key:
        return None
    if m.group("ext") == "json":
        return fixes.json_edit(m.group("file"), [([key], value)], why)
    return f"sed -i 's/^{key}:.*/{key}: {value}/' {fixes.quote(m.group('file'))}   {fixes.comment(why)}"


def target_fix(targets: list[str], source: str, model_path: str, why: str) -> str:
    """The fix for the user's own trainer setting: the trainer config file edited in place when lora_target came
    from one, else the flag to use (as a comment) and a re-check with the corrected list."""
    value = ",".join(targets)
    recheck = (f"dsv3-preflight run --only lora.targets --model-path {fixes.quote(model_path)} --lora-targets {value}"
               "   # check the corrected list")
    edit = config_edit(source, "lora_target", value, why)
    if edit:
        return "\n".join([edit, recheck])
    return "\n".join([fixes.comment(why), fixes.comment(f"in the training command: --lora_target {value}"),
                      fixes.comment(f"(with peft directly: LoraConfig(target_modules={targets!r}))"), recheck])


def dropout_fix(profile: Profile, targets: list[str], model_path: str) -> str:
    """The fix for a lora_dropout peft's fused-expert wrappers refuse: 0 in the trainer's own setting (the config file
    edited where it came from one), or targets without the MLP; then a re-check."""
    recheck = (f"dsv3-preflight run --only lora.targets --model-path {fixes.quote(model_path)} --lora-targets "
               f"{','.join(targets)} --lora-dropout 0   # check again")
    why = "peft's wrappers of fused MoE expert weights (target_parameters) refuse a lora_dropout other than 0"
    edit = config_edit(profile.sources.get("lora_dropout", ""), "lora_dropout", 0.0, why)
    first = [edit] if edit else [fixes.comment(why), fixes.comment(
        "in the training command: --lora_dropout 0 (with peft directly: LoraConfig(lora_dropout=0.0))")]
    return "\n".join(first + [fixes.comment("or keep the dropout and target only the attention: --lora_target "
                                             + ",".join(fixes.DSV3_MLA_TARGETS)), recheck])


def past_depth(targets: list[str], depth: int | None) -> str:
    """"; the model has N layers (0-N-1)" when a target names a layer the model does not have, else ""."""
    if not depth:
        return ""
    past = [t for t in targets if (layer_of(t) or 0) >= depth]
    return f"; {', '.join(past)}: the model has {depth} layers (0-{depth - 1})" if past else ""


def model_readable(facts: LoraModelModulesFact) -> Finding | None:
    if not facts.get("error"):
        return None
    return failure(facts["error"],
                   "dsv3-preflight run --only lora.targets --model-path "
                   '"${MODEL_PATH:?the local model directory holding config.json}"',
                   actor=Actor.JOB, cause=causes.MODEL_CONFIG_UNREADABLE)


def no_native_code(facts: LoraModelModulesFact) -> Finding | None:
    """A model_type transformers does not know, and no auto_map naming the repo's own code: the run cannot build
    the model. The fix its makers give (Kimi-K2's deployment guide): declare the architecture's own model_type."""
    b = facts.get("built_as")
    if not b or b.get("remote_code"):
        return None
    cfg = fixes.quote(facts.get("config_file") or "config.json")
    fix = "\n".join([
        fixes.comment(f"{b['declared']} is {b['architecture']} (config.json's architectures): declare its model_type"),
        f"cp {cfg} {cfg}.orig",
        f"sed -i 's/\"model_type\": *\"{b['declared']}\"/\"model_type\": \"{b['model_type']}\"/' {cfg}",
        f"dsv3-preflight run --only 'lora.*' --model-path {fixes.quote(facts.get('path') or '.')}"])
    return failure(f"transformers {facts.get('transformers_version')} cannot build model type {b['declared']} "
                   f"({facts.get('config_file')}): it is not one transformers has, and config.json has no auto_map "
                   f"naming the repo's own code (its architecture {b['architecture']} is transformers' "
                   f"{b['model_type']})", fix, actor=Actor.JOB, cause=causes.MODEL_CONFIG_UNREADABLE)


def code_file(reference: str) -> str:
    """The file of an auto_map class reference: ``modeling_deepseek.DeepseekV3ForCausalLM`` → modeling_deepseek.py
    (``org/repo--modeling_x.Cls``, code of another repo, names its module after ``--``)."""
    return reference.split("--")[-1].rsplit(".", 1)[0].replace(".", "/") + ".py"


def remote_experts(res: Mapping[str, Any], facts: LoraModelModulesFact, trust_remote_code: bool | None) -> Finding | None:
    """Targets that adapt fused expert weights of a model the run builds with its own code: transformers' native
    architecture fuses the routed experts (peft wraps them as target_parameters); the repo's code may keep them as
    Linear modules of their own (DeepSeek-V3's modeling_deepseek.py does), which peft adapts one by one."""
    r = remote_build(facts, trust_remote_code)
    if r is None or not r["code"] or not res.get("adapted_parameters"):
        return None
    per = res.get("trainable_params_unfused_experts")
    other = f" ({per:,} trainable parameters at r={res['rank']})" if per else ""
    judged = "transformers' own code" if r["why"] == "trusted" else f"transformers' {r['architecture']}"
    return warning(f"lora_targets {', '.join(res['matched'])} adapt the routed experts of {r['declared']}, which the "
                   f"run builds with {r['code']}: judged on {judged}, whose experts are fused weights (peft's "
                   f"target_parameters); if that code keeps one Linear module per expert, peft adapts those "
                   f"instead{other}. Compare the trainer's 'Number of trainable parameters'",
                   fixes.comment("print the experts' module names of the code the run uses:") + "\n" +
                   f"grep -n 'experts' {fixes.quote(os.path.join(facts.get('path') or '.', code_file(r['code'])))} | head",
                   actor=Actor.JOB, cause=causes.TARGETS_MISSING)


def no_target_matches(res: Mapping[str, Any], model_type: str, fix: str, depth: int | None = None) -> Finding | None:
    if res["matched"]:
        return None
    bad = res["unmatched"] + list(res["unsupported"])
    return failure(f"no lora_target matches a linear module of {model_type}: {', '.join(bad)}{past_depth(bad, depth)} "
                   f"(candidates: {','.join(res['candidates'])})", fix, actor=Actor.JOB, cause=causes.TARGETS_MISSING)


def unsupported_targets(res: Mapping[str, Any], model_type: str, fix: str) -> Finding | None:
    if not res["matched"] or not res["unsupported"]:
        return None
    detail = "; ".join(f"{t} → {', '.join(m)}" for t, m in res["unsupported"].items())
    return failure(f"lora_target {', '.join(res['unsupported'])} names modules peft cannot adapt ({detail}); "
                   "peft raises at get_peft_model", fix, actor=Actor.JOB, cause=causes.TARGETS_MISSING)


def peft_refuses(peft: PeftTargets, targets: list[str], candidates: list[str], model_type: str, fix: str,
                 dropout: float | None = None, depth: int | None = None) -> Finding:
    """peft itself (get_peft_model on the model built on the meta device) raises for these targets (and dropout):
    its words. Judged only where it refused (:attr:`TargetsCase.refused`: ``peft`` holds its error)."""
    hint = past_depth(targets, depth)
    if list(targets) == ["all-linear"]:
        hint += ("; LLaMA-Factory passes lora_target to peft as a list, where all-linear is a module name, not "
                "peft's keyword: lora_target: all is its every-linear-layer")
    if dropout:
        targets = [f"{','.join(targets)} with lora_dropout {dropout:g}"]
    return failure(f"peft {peft['peft_version']} refuses lora_target {','.join(targets)} on {model_type} at "
                   f"get_peft_model: {peft['error']}{hint} (candidates: {','.join(candidates)})", fix, actor=Actor.JOB,
                   cause=causes.TARGETS_MISSING)


def with_peft(res: Mapping[str, Any], peft: PeftTargets, targets: list[str], modules_facts: dict[str, ModuleTemplate]) -> dict[str, Any]:
    """``resolve``'s answer with what peft adapts in place of its name matching: each target's adapted modules and
    parameters (peft rewrites fused-expert and router names into target_parameters), the targets that adapt
    nothing, and peft's trainable parameters of the full-size model."""
    modules, params = peft["modules"], peft["parameters"]
    kept = peft["peft_target_modules"]
    matched: dict[str, list[str]] = {}
    for t in targets:
        if kept == "all-linear" or list(targets) == ["all"]:
            hits = modules + params
        elif t in kept:   # peft's suffix match, on the module templates (layers.3.o_proj: model.layers.*.o_proj)
            hits = [m for m in modules if matches(t, m)]
        else:   # taken out of target_modules by peft's rewrite: it adapts the fused parameters instead
            hits = list(params)
        if hits:
            matched[t] = hits
    return {**res, "matched": matched, "unmatched": [t for t in targets if t not in matched], "unsupported": {},
            "adapted_modules": peft.get("module_count",
                                        sum(modules_facts.get(m, {}).get("count", 0) for m in modules)),
            "adapted_parameters": params, "trainable_params": peft["trainable_params"],
            # name matching's count over per-expert Linear modules: what transformers 4 builds (held to 4.52.4's peft
            # count in tests/test_lora_transformers4.py), beside peft's count of the fused weights
            "trainable_params_unfused_experts": res["trainable_params_unfused_experts"] if params else None}


def unmatched_targets(res: Mapping[str, Any], model_type: str, fix: str, depth: int | None = None,
                      severity: str = "fail", setting_source: str = "default") -> Finding | None:
    """A named target that matches no module while others do: the run adapts less than it asks for. A FAIL unless
    the profile's ``lora_unmatched_targets`` is ``warn`` (``setting_source`` says where that came from)."""
    if not res["matched"] or not res["unmatched"]:
        return None
    alone = ("; LLaMA-Factory expands all only when it is the whole lora_target, peft takes it as a name"
             if "all" in res["unmatched"] else "") + past_depth(res["unmatched"], depth)
    message = (f"lora_target {', '.join(res['unmatched'])} match no module of {model_type}{alone}; only "
               f"{', '.join(res['matched'])} will be adapted ({res['trainable_params']:,} trainable parameters at "
               f"r={res['rank']}); candidates: {','.join(res['candidates'])}")
    if severity == "warn":
        return warning(f"{message} (a warning: lora_unmatched_targets = warn, from {setting_source})", fix,
                       actor=Actor.JOB, cause=causes.TARGETS_MISSING)
    accept = fixes.comment("or, to accept adapting only the targets that match: lora_unmatched_targets = \"warn\" in "
                           "preflight.toml (or --lora-unmatched-targets warn)")
    return failure(message, f"{fix}\n{accept}", actor=Actor.JOB, cause=causes.TARGETS_MISSING)


def skip_reason(facts: LoraModelModulesFact) -> str | None:
    """Why lora.targets has nothing to judge (no model configured, or the targets were not asked), else None."""
    if not facts.get("configured"):
        return "the profile names no model_path (--model-path / MODEL_PATH)"
    if facts.get("skipped"):
        return f"{facts['skipped']} (--lora-targets A,B)"
    return None


#: what the evidence keeps of peft's answer: who decided (peft itself on the model built on the meta device, or,
#: without peft here, name matching)
PEFT_EVIDENCE = ("available", "peft_version", "reason", "error", "target_modules", "peft_target_modules",
                 "peft_target_parameters")


@dataclass(frozen=True)
class TargetsCase:
    """The profile's lora_targets resolved against the model once: what they match, what peft says of them, and
    the fix every rule of lora.targets shares."""

    facts: LoraModelModulesFact
    profile: Profile
    targets: list[str]
    rank: int
    res: Mapping[str, Any]
    peft: PeftTargets
    model_type: str
    fix: str

    @classmethod
    def of(cls, facts: LoraModelModulesFact, profile: Profile) -> TargetsCase:
        rank = profile.lora_rank or DEFAULT_RANK
        targets_ = list(profile.lora_targets)
        res = resolve(targets_, facts, rank)
        peft = facts.get("peft") or {"available": False, "reason": "not asked"}
        if peft.get("available") and not peft.get("error"):
            res = with_peft(res, peft, targets_, facts.get("modules", {}))
        model_type = facts.get("model_type") or "the model"
        suggestion = suggested_targets(res, facts.get("model_type"))
        why = (f"{model_type}'s attention is MLA (no q_proj/k_proj/v_proj): target its projections"
               if suggestion == list(fixes.DSV3_MLA_TARGETS) else f"linear layers of {model_type} to target")
        fix = target_fix(suggestion, profile.sources.get("lora_targets", ""), facts.get("path") or "", why)
        return cls(facts, profile, targets_, rank, res, peft, model_type, fix)

    @property
    def refused(self) -> bool:
        """peft was asked and refused these targets (it raised building the LoRA model)."""
        return bool(self.peft.get("available") and self.peft.get("error"))

    @property
    def depth(self) -> int | None:
        return self.facts.get("num_hidden_layers")

    @property
    def trust(self) -> bool | None:
        trust: bool | None = self.profile.trust_remote_code
        return trust

    def evidence(self) -> dict[str, Any]:
        res, facts, profile = self.res, self.facts, self.profile
        return {"model_type": facts.get("model_type"), "transformers": facts.get("transformers_version"),
                "built_as": facts.get("built_as"), "remote_code": facts.get("remote_code"),
                "trust_remote_code": self.trust,
                "targets": self.targets, "rank": self.rank, "lora_dropout": profile.lora_dropout,
                "rank_source": "profile lora_rank" if profile.lora_rank else f"default {DEFAULT_RANK}",
                "matched": res["matched"], "unmatched": res["unmatched"], "unsupported": res["unsupported"],
                "candidates": res["candidates"], "siblings": res["siblings"], "adapted_modules": res["adapted_modules"],
                "adapted_parameters": res.get("adapted_parameters", []),
                "trainable_params": res["trainable_params"],
                "trainable_params_unfused_experts": res["trainable_params_unfused_experts"],
                "fused_expert_params": sorted(facts.get("fused_expert_params", {})),
                "peft": {k: v for k, v in self.peft.items() if k in PEFT_EVIDENCE}}


def peft_refusal(case: TargetsCase) -> Finding:
    """peft refuses the targets: its message, with the dropout fix when the dropout is what it refused, and only a
    warning when it refused transformers' build of a model the run builds from its own code."""
    fix = case.fix
    if "lora_dropout" in case.peft["error"]:
        fix = dropout_fix(case.profile, case.targets, case.facts.get("path") or "")
    said = peft_refuses(case.peft, case.targets, case.res["candidates"], case.model_type, fix,
                        case.profile.lora_dropout, case.depth)
    if remote_build(case.facts, case.trust) is not None:   # peft refused transformers' build, not the code the run uses
        said = warning(said.message + built_as_clause(case.facts, case.trust), said.fix, actor=said.actor,
                       cause=said.cause)
    return said


def _adapted_words(case: TargetsCase) -> str:
    """What the targets adapt, in words: the modules, and the fused expert weights peft adapts as parameters."""
    res, peft, targets_ = case.res, case.peft, case.targets
    params = res.get("adapted_parameters") or []
    what = " and ".join(x for x in (
        res["adapted_modules"] and f"{res['adapted_modules']} modules",
        params and f"the fused weights {', '.join(p.split('.', 3)[-1] for p in params)} of every MoE layer") if x)
    rewritten = [t for t in targets_ if peft.get("available") and isinstance(peft.get("peft_target_modules"), list)
                 and t not in peft["peft_target_modules"] and t in res["matched"] and targets_ != ["all"]]
    if params and (rewritten or targets_ == ["all"]):
        what += (" (with this transformers, peft turns the names of fused experts and routers into target_parameters:"
                 " Linear modules of the same names, in dense layers or shared experts, are not adapted)")
    return what


def ok_summary(case: TargetsCase) -> str:
    res, peft = case.res, case.peft
    extra = ""
    if res["trainable_params_unfused_experts"]:
        extra = (f"; with transformers<5 (per-expert Linear modules) the same targets give "
                 f"{res['trainable_params_unfused_experts']:,}")
    who = (f"peft {peft['peft_version']} on the model built on the meta device" if peft.get("available")
           else f"matched by name: peft is not importable here ({peft.get('reason')})")
    return (f"{len(res['matched'])} lora_targets adapt {_adapted_words(case)}: {res['trainable_params']:,} trainable "
            f"parameters at r={case.rank} ({who}; compare the trainer's 'Number of trainable parameters')"
            f"{extra}{built_as_clause(case.facts, case.trust)}")
