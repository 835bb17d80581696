"""The rules an adapter_config.json must pass for peft to build and load the adapter it describes (pure).

Each rule mirrors what ``PeftModel.from_pretrained`` does with a field, without importing peft: where
peft raises (``r: null`` compared with 0, a list where it calls ``.keys()``, an invalid regex compiled
at injection, ``layers_pattern`` without ``layers_to_transform``), the rule returns a FAIL saying why.
tests/lora/test_lora_fuzz.py holds these rules to peft itself on mutated configs. Fields peft ignores
(unknown keys from a newer peft) are ignored here too.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..result import Actor, Finding, failure, warning
from . import causes, fixes, patterns, peft_defaults
from .case import CONFIG_NAME, AdapterCase

TASK_TYPES = ("SEQ_CLS", "SEQ_2_SEQ_LM", "CAUSAL_LM", "TOKEN_CLS", "QUESTION_ANS", "FEATURE_EXTRACTION")
BIAS = ("none", "all", "lora_only")
INIT_NAMES = ("gaussian", "olora", "mica")  # compared case-insensitively, as peft does
INIT_EXACT = ("loftq", "eva", "orthogonal", "lora_ga")
INIT_PREFIXES = ("pissa", "corda")
ALL_LINEAR = "all-linear"


def _fail(case: AdapterCase, message: str, fix: str | None = None) -> Finding:
    return failure(f"{CONFIG_NAME}: {message}", fix or fixes.peft_reads(case.directory),
                   actor=Actor.JOB, cause=causes.ADAPTER_CONFIG_INVALID)


def _show(value: Any) -> str:
    text = "null" if value is None else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float))  # peft divides by it; True/False divide too


def _saved_modules(case: AdapterCase) -> list[str]:
    return case.layout.modules if case.layout else []


def _saved_rank(case: AdapterCase) -> int | None:
    """The one rank every lora_A of the weights has, when there is exactly one."""
    if not case.layout:
        return None
    ranks = {kinds["A"][0] for kinds in case.layout.pairs.values() if len(kinds.get("A", ())) >= 2}
    return ranks.pop() if len(ranks) == 1 else None


# ------------------------------------------------------------------------------------------------ the rules
def config_readable(case: AdapterCase) -> Finding | None:
    """adapter_config.json exists beside the weights, is a regular file, and is JSON."""
    if not case.expects_config:
        return None
    why = case.facts.get("config_error")
    if not why:
        return None
    fix = "\n".join([fixes.comment(f"peft writes {CONFIG_NAME} beside the weights: copy the one of the same run "
                                   "(an earlier checkpoint-*), or save the adapter again with save_pretrained"),
                     f"ls -la -- {fixes.quote(case.directory)}"])
    return failure(f"{why}" if why.startswith(CONFIG_NAME) else f"{CONFIG_NAME}: {why}", fix, actor=Actor.JOB,
                   cause=causes.ADAPTER_CONFIG_INVALID)


def config_object(case: AdapterCase) -> Finding | None:
    value = case.facts.get("config")
    if value is None or isinstance(value, dict):
        return None
    return _fail(case, f"holds a JSON {type(value).__name__}, not an object: peft cannot read it")


def peft_type(case: AdapterCase) -> Finding | None:
    """A LoRA adapter's config says LORA; another type makes peft build (and load into) another method."""
    c = case.config
    if c is None:
        return None
    value = c.get("peft_type")
    if value == "LORA":
        return None
    if value is None:
        return _fail(case, "has no peft_type: peft cannot tell which method saved it")
    return _fail(case, f"peft_type is {_show(value)}, not LORA: peft would build another adapter type and "
                       "these LoRA weights would not load into it",
                 fixes.json_edit(case.config_file, [(["peft_type"], "LORA")], "the weights are LoRA's: say so"))


def rank(case: AdapterCase) -> Finding | None:
    """r is a positive integer (peft compares it with 0 and sizes the layers with it)."""
    c = case.config
    if c is None or "r" not in c:
        return None
    value = c["r"]
    if type(value) is int and value > 0:
        return None
    saved = _saved_rank(case)
    fix = (fixes.json_edit(case.config_file, [(["r"], saved)], f"the rank the saved lora_A tensors have ({saved})")
           if saved else None)
    return _fail(case, f"r is {_show(value)}, not a positive integer: peft cannot build the LoRA layers", fix)


def alpha(case: AdapterCase) -> Finding | None:
    c = case.config
    if c is None or "lora_alpha" not in c or _is_number(c["lora_alpha"]):
        return None
    return _fail(case, f"lora_alpha is {_show(c['lora_alpha'])}, not a number: peft divides it by r")


def dropout(case: AdapterCase) -> Finding | None:
    c = case.config
    if c is None or "lora_dropout" not in c:
        return None
    value = c["lora_dropout"]
    if _is_number(value) and 0 <= value <= 1:
        return None
    return _fail(case, f"lora_dropout is {_show(value)}, not a probability between 0 and 1")


def _check_pattern(case: AdapterCase, field: str, pattern: Any, wrap: Callable[[Any], object] | None = None
                   ) -> Finding | None:
    try:
        if wrap:
            wrap(pattern)
        else:
            patterns.check(pattern)
    except patterns.PatternError as exc:
        return _fail(case, f"{field} {_show(pattern)} {exc}")
    return None


def target_modules(case: AdapterCase) -> Finding | list[Finding] | None:
    """target_modules is a list of module names or one regex peft can compile (and match in bounded time)."""
    c = case.config
    if c is None:
        return None
    value = c.get("target_modules")
    if value is None:
        if c.get("target_parameters"):
            return None
        return null_target_modules(case)
    if isinstance(value, str):
        if value == ALL_LINEAR:
            return None
        found = _check_pattern(case, "target_modules regex", value)
        if found:
            return found
        try:
            patterns.fullmatch_any(value, _saved_modules(case))
        except patterns.PatternError as exc:
            return _fail(case, f"target_modules regex {_show(value)} {exc}")
        return None
    if isinstance(value, (list, dict)):
        if not value and not (isinstance(c.get("target_parameters"), list) and c["target_parameters"]):
            return _fail(case, "target_modules is empty (and no target_parameters): peft finds nothing to adapt")
        bad = [v for v in value if not isinstance(v, str)]
        if bad:
            return _fail(case, f"target_modules holds {_show(bad[0])} ({type(bad[0]).__name__}), not a module name")
        return None
    return _fail(case, f"target_modules is a {type(value).__name__}, not a list of module names or a regex")


#: how many model types must share a default target set before a null target_modules on an unknown base is a warning
COMMON_DEFAULT_TYPES = 3


def null_target_modules(case: AdapterCase) -> Finding:
    """target_modules null: peft fills in its default targets for the base model's type at load. Where the saved
    modules are exactly those defaults (Llama's q_proj, v_proj), the adapter loads intact on a model of such a type:
    a warning naming them; any other saved modules load wrong (dropped, or layers left untrained): a FAIL."""
    saved = sorted({m.rpartition(".")[2] for m in _saved_modules(case)})
    fix = (fixes.json_edit(case.config_file, [(["target_modules"], saved)], "the modules the saved weights adapt")
           if saved and case.directory else None)
    known = case.facts.get("base_model_type")
    types = peft_defaults.model_types_defaulting_to(set(saved)) if saved else []
    if known:   # base_model_name_or_path is a local model: peft's defaults for its type are what it builds
        defaults = peft_defaults.DEFAULT_TARGETS.get(known)
        if known in types:
            return warning(f"{CONFIG_NAME}: target_modules is null: peft fills in its default targets for "
                           f"{known} (the base model's type) at load, which are the saved modules "
                           f"({', '.join(saved)}): it loads intact; name them in target_modules all the same",
                           fix or fixes.peft_reads(case.directory), actor=Actor.JOB,
                           cause=causes.ADAPTER_CONFIG_INVALID)
        what = (f"peft's default targets for {known} are {defaults if isinstance(defaults, str) else ', '.join(defaults)}"
                if defaults else f"peft has no default targets for {known} and refuses to load it")
        return _fail(case, f"target_modules is null: {what}, not the saved modules ({', '.join(saved)}): the "
                           "adapter loads wrong (weights dropped, or layers left untrained)", fix)
    # base type unknown: a saved set that is the default of many model types (q_proj, v_proj: Llama, Mistral, Qwen2
    # and most others) most likely loads intact; one that is the default of a rare few only (q_proj, k_proj,
    # v_proj, o_proj: nemotron_h alone) loads wrong on the Llama-family model it was most likely trained on
    if len(types) >= COMMON_DEFAULT_TYPES:
        return warning(f"{CONFIG_NAME}: target_modules is null: peft fills in its default targets for the base "
                       f"model's type at load; the saved modules ({', '.join(saved)}) are the defaults of "
                       f"{', '.join(types[:6])}{' and others' if len(types) > 6 else ''}, so the adapter loads intact "
                       "on such a model (and wrong on any other): name them in target_modules",
                       fix or fixes.peft_reads(case.directory), actor=Actor.JOB, cause=causes.ADAPTER_CONFIG_INVALID)
    rare = (f"; they are peft's defaults for {', '.join(types)} only, and load wrong on any other model"
            if types else "")
    return _fail(case, "target_modules is not set: peft would guess the targets from the model type, not the "
                       f"modules these weights were trained on{' (' + ', '.join(saved) + ')' if saved else ''}{rare}",
                 fix)


def target_parameters(case: AdapterCase) -> Finding | None:
    c = case.config
    if c is None or c.get("target_parameters") is None:
        return None
    value = c["target_parameters"]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return None
    return _fail(case, f"target_parameters is {_show(value)}, not a list of parameter names")


def exclude_modules(case: AdapterCase) -> Finding | None:
    c = case.config
    if c is None or not c.get("exclude_modules"):
        return None
    value = c["exclude_modules"]
    if isinstance(value, str):
        return _check_pattern(case, "exclude_modules regex", value)
    if isinstance(value, (list, dict)) and all(isinstance(v, str) for v in value):
        return None
    return _fail(case, f"exclude_modules is {_show(value)}, not a list of module names or a regex")


def _pattern_field(case: AdapterCase, field: str, what: str, valid: Callable[[Any], bool]
                   ) -> list[Finding] | Finding | None:
    c = case.config
    if c is None or field not in c:
        return None
    value = c[field]
    if value is None:
        return warning(f"{CONFIG_NAME}: {field} is null: peft reads it as empty for the MoE models whose checkpoints "
                       "transformers 5 converts (DeepSeek-V3, Mixtral) and fails with AttributeError on the others",
                       fixes.json_edit(case.config_file, [([field], {})], f"an empty {field}, which every model reads"),
                       actor=Actor.JOB, cause=causes.ADAPTER_CONFIG_INVALID)
    if not isinstance(value, dict):
        return _fail(case, f"{field} is {_show(value)}, not an object of module pattern -> {what}: peft calls "
                           f".keys() on it", fixes.json_edit(case.config_file, [([field], {})], f"an empty {field}"))
    found = []
    for key in value:
        bad = _check_pattern(case, f"{field} key", key, wrap=patterns.check_pattern_key)
        if bad:
            found.append(bad)
    if found:
        return found
    # peft reads a value only for the modules its key matches first
    def matches() -> dict[str, list[str]] | str:
        used: dict[str, list[str]] = {}
        try:
            for module in _saved_modules(case):
                key = patterns.pattern_key(list(value), module)
                if key is not None:
                    used.setdefault(key, []).append(module)
        except patterns.PatternError as exc:
            return str(exc)
        return used

    used = case.layout.derived((field, json.dumps(list(value))), matches) if case.layout else matches()
    if isinstance(used, str):
        return _fail(case, f"{field} key {used}")
    for key, modules in used.items():
        if not valid(value[key]):
            found.append(_fail(case, f"{field}[{_show(key)}] is {_show(value[key])}, not {what} (it applies to "
                                     f"{len(modules)} saved modules, e.g. {modules[0]})"))
    return found or None


def rank_pattern(case: AdapterCase) -> list[Finding] | Finding | None:
    return _pattern_field(case, "rank_pattern", "a positive integer rank", lambda v: type(v) is int and v > 0)


def alpha_pattern(case: AdapterCase) -> list[Finding] | Finding | None:
    return _pattern_field(case, "alpha_pattern", "a number", _is_number)


def modules_to_save(case: AdapterCase) -> Finding | None:
    c = case.config
    if c is None or c.get("modules_to_save") is None:
        return None
    value = c["modules_to_save"]
    if isinstance(value, str):
        # peft iterates it (measured on the tiny DeepSeek-V3 with "lm_head": peft 0.22.0 wraps no module and loads the
        # adapter without it; peft 0.21.2 wraps the decoder, its norms and lm_head, and refuses to load it)
        return _fail(case, f"modules_to_save is the string {_show(value)}, not a list of module names: peft matches "
                     f"modules against its characters, not against {_show(value)} (peft 0.22 wraps no module for it, "
                     "so it is neither trained nor saved; peft 0.21 wraps whatever modules a character names)")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return _fail(case, f"modules_to_save is {_show(value)}, not a list of module names")
    for name in value:
        bad = _check_pattern(case, "modules_to_save entry", rf"(^|.*\.){name}($|\..*)")
        if bad:
            return bad
    return None


def _reads_layers(case: AdapterCase) -> bool:
    """peft reads layers_to_transform and layers_pattern only for a module key a target_modules name ends: a name
    equal to a saved module's whole path returns first, and target_parameters are never filtered by layer."""
    tm = (case.config or {}).get("target_modules")
    if not isinstance(tm, (list, dict)):
        return True
    saved = set(_saved_modules(case))
    return any(t not in saved for t in tm)


def layers(case: AdapterCase) -> Finding | None:
    """layers_to_transform / layers_pattern as peft's LoraConfig accepts them."""
    c = case.config
    if c is None:
        return None
    ltt, pattern, tm = c.get("layers_to_transform"), c.get("layers_pattern"), c.get("target_modules")
    if isinstance(tm, str) and ltt is not None:
        return _fail(case, "layers_to_transform cannot be used when target_modules is a regex (peft refuses it)")
    if isinstance(tm, str) and pattern is not None:
        return _fail(case, "layers_pattern cannot be used when target_modules is a regex (peft refuses it)")
    if pattern and ltt is None:
        return _fail(case, "layers_pattern is set without layers_to_transform (peft refuses it)")
    if ltt is None or ltt == [] or not _reads_layers(case):
        return None
    if not (type(ltt) is int or (isinstance(ltt, list) and all(type(i) is int for i in ltt))):
        return _fail(case, f"layers_to_transform is {_show(ltt)}, not a layer number or a list of them")
    if pattern is not None and not (isinstance(pattern, str) or (isinstance(pattern, list)
                                                                 and all(isinstance(p, str) for p in pattern))):
        return _fail(case, f"layers_pattern is {_show(pattern)}, not a name or a list of names")
    for p in [pattern] if isinstance(pattern, str) else pattern or []:
        found = _check_pattern(case, "layers_pattern", p, wrap=lambda x: patterns.check(patterns.layer_pattern(x)))
        if found:  # peft builds its layer regex around the name
            return found
    return None


def bias(case: AdapterCase) -> Finding | None:
    c = case.config
    if c is None or "bias" not in c or c["bias"] in BIAS:
        return None
    return _fail(case, f"bias is {_show(c['bias'])}, not one of {', '.join(BIAS)} (peft raises NotImplementedError)")


def task_type(case: AdapterCase) -> Finding | None:
    c = case.config
    if c is None or c.get("task_type") is None or c["task_type"] in TASK_TYPES:
        return None
    return _fail(case, f"task_type is {_show(c['task_type'])}, not one of peft's task types ({', '.join(TASK_TYPES)})")


def init_weights(case: AdapterCase) -> Finding | None:
    c = case.config
    if c is None or "init_lora_weights" not in c:
        return None
    value = c["init_lora_weights"]
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        if value == "loftq" and not (isinstance(c.get("loftq_config"), dict) and c["loftq_config"]):
            return _fail(case, "init_lora_weights is 'loftq' without a loftq_config (peft refuses it)")
        if value.lower() in INIT_NAMES or value in INIT_EXACT or value.startswith(INIT_PREFIXES):
            return None
    return _fail(case, f"init_lora_weights is {_show(value)}, which peft does not know")


def variants(case: AdapterCase) -> Finding | None:
    c = case.config
    if c is None:
        return None
    if c.get("use_dora") and c.get("lora_bias"):
        return _fail(case, "use_dora and lora_bias are both true (peft refuses DoRA with lora_bias)")
    if c.get("lora_bias") and c.get("init_lora_weights", True) not in (True, False):
        return _fail(case, f"lora_bias needs init_lora_weights true or false, not {_show(c.get('init_lora_weights'))} "
                           "(peft refuses it)")
    if c.get("use_dora") and c.get("megatron_config"):
        return _fail(case, "use_dora with megatron_config (peft refuses DoRA with megatron)")
    return None


def peft_rejects(case: AdapterCase) -> Finding | None:
    """With --deep: peft's own config class refuses adapter_config.json."""
    check = case.facts.get("peft_check") or {}
    if not check.get("error"):
        return None
    return _fail(case, f"peft's own config class rejects it: {check['error']}")


#: every config rule, in the order their findings are shown
RULES = (config_readable, config_object, peft_type, rank, alpha, dropout, target_modules, target_parameters,
         exclude_modules, rank_pattern, alpha_pattern, modules_to_save, layers, bias, task_type, init_weights, variants,
         peft_rejects)
