"""The rules a saved LoRA adapter's keys and tensors must pass for peft to load them as the adapter its config
describes (pure: each is a small function of one :class:`~dsv3_preflight.lora.case.AdapterCase` returning
a finding, several, or None).

What peft does, and so what the rules hold a file to: ``load_file`` refuses a header safetensors refuses
(truncated, corrupt); ``set_peft_model_state_dict`` maps each saved key to a parameter of the adapter
built from the config (keys it cannot map are dropped, parameters no key fills keep their initial
values); ``load_state_dict`` refuses a shape that differs from the layer's. Beyond peft: integer or
boolean LoRA weights are not trained weights, an empty or zero-element save is what ZeRO-3 writes
without gathering, and a target_modules entry that adapted nothing means modules silently left
untrained (DeepSeek-V3's MLA has no q_proj/k_proj/v_proj). Which layer peft builds for each saved module (a
module LoRA, or the wrapper of a target_parameters entry) is :mod:`.selection`'s reading of the config.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..result import Actor, Finding, failure, warning
from . import causes, fixes, patterns, peft_versions, selection
from .case import CONFIG_NAME, AdapterCase
from .layout import PREFIX, Layout, template

#: dtypes of trained LoRA weights; 8-bit floats are lossy but load (a warning); anything else cannot be one
FLOAT_DTYPES = frozenset({"F16", "BF16", "F32", "F64"})
LOW_PRECISION = frozenset({"F8_E4M3", "F8_E5M2", "F8_E4M3FNUZ", "F8_E5M2FNUZ"})
MAX_NAMED = 6
ALL_LINEAR = "all-linear"


def named(items: Iterable[str], limit: int = MAX_NAMED) -> str:
    """Names for a one-line message, peft's ``base_model.model.`` prefix dropped; the count says how many."""
    items = [i.removeprefix(PREFIX) for i in items]
    head = ", ".join(items[:limit])
    return head + (f" and {len(items) - limit} others" if len(items) > limit else "")


def keys_fail(message: str, case: AdapterCase, fix: str | None = None) -> Finding:
    return failure(message, fix or "\n".join([
        fixes.comment("save the adapter with peft's own save_pretrained (or the Trainer), not a hand-written "
                      "state_dict; then check it again"),
        fixes.rescan(case.path)]), actor=Actor.JOB, cause=causes.ADAPTER_KEYS_INVALID)


def gather_fix() -> str:
    return "\n".join([
        fixes.comment("ZeRO-3 saved this adapter without gathering its weights: in the DeepSpeed config, set "
                      '"stage3_gather_16bit_weights_on_model_save": true inside zero_optimization; check it with:'),
        'dsv3-preflight run --only lora.deepspeed_config --deepspeed-config '
        '"${DEEPSPEED_CONFIG:?the DeepSpeed JSON config of the training run}"'])


# -------------------------------------------------------------------------------------- what the tensors are
def empty_adapter(case: AdapterCase) -> Finding | None:
    if case.layout is None or case.layout.tensors:
        return None
    return failure("empty adapter: the file holds no tensors (only a header/metadata): the ZeRO-3 save did not "
                   "gather the LoRA weights", gather_fix(), actor=Actor.JOB, cause=causes.GATHER_FLAG_OFF)


def zero_element(case: AdapterCase) -> Finding | None:
    lay = case.layout
    if not lay or not lay.zero_element:
        return None
    tensors = case.weights.get("tensors", {}) if case.weights else {}
    shapes = sorted({str(list(tensors[k][1])) for k in lay.zero_element if k in tensors})
    whole = " (every tensor)" if len(lay.zero_element) == lay.tensors else ""
    return failure(f"{len(lay.zero_element)} of {lay.tensors} tensors have zero elements{whole}, shape "
                   f"{'/'.join(shapes)}: partitioned ZeRO-3 parameters saved without gathering: "
                   f"{named(sorted(lay.zero_element), 2)}", gather_fix(), actor=Actor.JOB, cause=causes.GATHER_FLAG_OFF)


def weight_dtypes(case: AdapterCase) -> list[Finding]:
    """Trained LoRA weights are floating point: integer/bool weights are no trained adapter; FP8 is lossy."""
    lay = case.layout
    if not lay:
        return []
    found = []
    bad = {d: names for d, names in lay.by_dtype.items() if d not in FLOAT_DTYPES and d not in LOW_PRECISION}
    if bad:
        listing = "; ".join(f"{d}: {named(sorted(n), 2)}" for d, n in sorted(bad.items()))
        found.append(keys_fail(f"{sum(map(len, bad.values()))} tensors are not floating point ({listing}): LoRA "
                                "weights are F16/BF16/F32; these are not trained weights", case))
    low = {d: names for d, names in lay.by_dtype.items() if d in LOW_PRECISION}
    if low:
        found.append(warning(f"{sum(map(len, low.values()))} tensors are 8-bit floats ({', '.join(sorted(low))}): "
                             "peft casts them into the layers' dtype, with FP8's precision",
                             fixes.comment("save LoRA weights in bf16 or fp32 (the Trainer's --bf16), not FP8"),
                             actor=Actor.JOB, cause=causes.ADAPTER_KEYS_INVALID))
    return found


def _saved_module_keys(case: AdapterCase, lay: Layout) -> tuple[list[str], list[str]]:
    """(keys that are parameters of modules_to_save, keys that are not) among the layout's unclassified keys.

    peft saves a module of modules_to_save as ``<module path>.<parameter>``, the path ending in the listed name.
    """
    names = (case.config or {}).get("modules_to_save") or []
    names = [n for n in names if isinstance(n, str)] if isinstance(names, list) else []
    if not names:
        return [], list(lay.other)
    saved: list[str] = []
    rest: list[str] = []
    for key in lay.other:
        module = key[len(PREFIX):].rpartition(".")[0]
        (saved if module and _ends_with(module, names) else rest).append(key)
    return saved, rest


def keys_without_prefix(case: AdapterCase) -> Finding | None:
    lay = case.layout
    if not lay or not lay.no_prefix:
        return None
    return keys_fail(f"{len(lay.no_prefix)} keys lack peft's '{PREFIX}' prefix, so peft cannot map them to the "
                      f"model (they are dropped at load): {named(sorted(lay.no_prefix))}", case)


def keys_not_peft(case: AdapterCase) -> Finding | None:
    """Keys that are no parameter peft saves: renamed lora_A/lora_B, base weights, anything else."""
    lay = case.layout
    if not lay:
        return None
    _, rest = _saved_module_keys(case, lay)
    base = [k for m, keys in lay.base_layer.items() if m not in lay.embedding_modules for k in keys]
    odd = sorted(rest + lay.malformed + base)
    if not odd:
        return None
    return keys_fail(f"{len(odd)} keys are not LoRA parameters peft loads (lora_A/lora_B, DoRA magnitudes, "
                      f"modules_to_save): {named(odd)}", case)


def keys_other_adapter(case: AdapterCase) -> Finding | None:
    lay = case.layout
    if not lay or not lay.other_adapter:
        return None
    names = sorted(lay.other_adapter)
    keys = [k for n in names for k in lay.other_adapter[n]]
    return keys_fail(f"{len(keys)} keys carry the adapter name {', '.join(map(repr, names))}: peft loads an "
                      f"adapter's keys without its name (or with 'default'), so these are dropped: {named(keys, 3)}", case)


def keys_collide(case: AdapterCase) -> list[Finding]:
    """Two keys naming one adapter parameter (``…q_proj.lora_A.weight`` and ``…q_proj.lora_A.default.weight``): peft
    maps both onto the same parameter and loads whichever its key order puts last. Of another shape, that is
    torch's "size mismatch for …" (or, in the other order, a key silently dropped): a FAIL. Of the same shape, peft
    loads one and ignores the other: a WARN."""
    lay = case.layout
    if not lay or not lay.collisions:
        return []
    differ = {p: keys for p, keys in lay.collisions.items() if len({shape for _, shape in keys}) > 1}
    same = [p for p in lay.collisions if p not in differ]
    found = []
    if differ:
        shown = "; ".join(" and ".join(f"{k.removeprefix(PREFIX)} {list(shape)}" for k, shape in keys)
                          for keys in list(differ.values())[:3])
        found.append(keys_fail(f"{len(differ)} adapter parameters are saved under two keys of different shapes "
                               f"({shown}{'; …' if len(differ) > 3 else ''}): peft maps both onto one parameter and "
                               "loads the one its key order puts last, refusing the adapter ('size mismatch for …') "
                               "when that one has the wrong shape", case))
    if same:
        found.append(warning(f"{len(same)} adapter parameters are saved twice with the same shape "
                             f"({named(sorted(k for p in same for k, _ in lay.collisions[p]), 4)}): peft loads one "
                             "of each pair and ignores the other",
                             "\n".join([fixes.comment("save the adapter with peft's own save_pretrained (or the "
                                                       "Trainer), not a hand-written state_dict; then check it again"),
                                         fixes.rescan(case.path)]), actor=Actor.JOB, cause=causes.ADAPTER_KEYS_INVALID))
    return found


def unpaired(case: AdapterCase) -> Finding | None:
    lay = case.layout
    if not lay:
        return None
    lone = sorted(f"{m}.lora_{'A' if 'A' in k else 'B'} without its lora_{'B' if 'A' in k else 'A'}"
                  for m, k in lay.pairs.items() if len(k) == 1)
    if not lone:
        return None
    return keys_fail(f"{len(lone)} LoRA modules are unpaired: {named(lone)}", case)


def _ends_with(module: str, names: Iterable[str]) -> bool:
    return any(module == n or module.endswith("." + n) for n in names)


def config_key(*values: Any) -> str:
    """A hashable description of config values a derived result depends on."""
    return json.dumps(values, sort_keys=True, default=repr)


def saved_ranks(lay: Layout) -> list[int]:
    """The ranks the saved lora_A tensors have."""
    found: list[int] = lay.derived("saved_ranks", lambda: sorted({k["A"][0] for k in lay.pairs.values()
                                                                   if len(k.get("A", ())) >= 2}))
    return found


#: the adapter_config.json fields peft selects modules and parameters (and their ranks) with
SELECTION_FIELDS = ("target_modules", "target_parameters", "exclude_modules", "modules_to_save", "layers_to_transform",
                    "layers_pattern", "r", "rank_pattern")


def peft_layers(case: AdapterCase) -> tuple[selection.Targets, selection.Selection] | None:
    """What peft builds for each saved module (:func:`selection.classify`), once per layout and config; None
    without a usable target_modules/target_parameters or with a pattern the config rules report."""
    lay, config = case.layout, case.config
    if not lay or config is None:
        return None
    targets = selection.Targets.of(config)
    if targets is None:
        return None

    def compute() -> tuple[selection.Targets, selection.Selection] | None:
        try:
            return targets, selection.classify(targets, lay.pairs)
        except patterns.PatternError:
            return None

    built: tuple[selection.Targets, selection.Selection] | None = lay.derived(
        ("selection", config_key(*(config.get(f) for f in SELECTION_FIELDS))), compute)
    return built


def ranks(case: AdapterCase) -> Finding | None:
    """lora_A's rank equals lora_B's, and the config's r (or the rank_pattern entry peft picks for the module)."""
    lay = case.layout
    if not lay or not lay.pairs:
        return None
    config = case.config or {}
    key = ("ranks", config_key(*(config.get(f) for f in SELECTION_FIELDS), bool(config)))
    bad = lay.derived(key, lambda: selection.rank_problems(lay.pairs, config, peft_layers(case)))
    if not bad:
        return None
    saved = saved_ranks(lay)
    fix = None
    if len(saved) == 1 and case.directory and not config.get("rank_pattern"):
        fix = fixes.json_edit(case.config_file, [(["r"], saved[0])],
                              "the rank the saved weights have (or save the adapter again with the config it was trained with)")
    return keys_fail(f"{len(bad)} LoRA modules disagree with the rank in {CONFIG_NAME} (peft refuses the shapes): "
                      f"{named(bad)}", case, fix)


def _shape_outliers(lay: Layout) -> list[str]:
    seen: dict[tuple[str, str], dict[tuple[int, ...], list[str]]] = {}
    for module, kinds in lay.pairs.items():
        t = template(module)
        for kind, shape in kinds.items():
            if len(shape) < 2:
                continue
            outer = shape[1:] if kind == "A" else shape[:1] + shape[2:]
            seen.setdefault((t, kind), {}).setdefault(outer, []).append(module)
    odd = []
    for (t, kind), shapes in sorted(seen.items()):
        if len(shapes) > 1:
            rare = min(shapes.items(), key=lambda kv: len(kv[1]))
            odd.append(f"{t}.lora_{kind} is {list(rare[0])} in {named(rare[1], 2)} but "
                       f"{' / '.join(str(list(s)) for s in shapes if s != rare[0])} elsewhere")
    return odd


def shapes_consistent(case: AdapterCase) -> Finding | None:
    """The same module in every layer has one LoRA shape; a different one in one layer is a damaged save
    (a WARN: a few models do vary their layers' widths)."""
    lay = case.layout
    if not lay or len(lay.pairs) < 2:
        return None
    odd = lay.derived("shape_outliers", lambda: _shape_outliers(lay))
    if not odd:
        return None
    return warning(f"LoRA shapes differ between layers of the same module: {'; '.join(odd[:3])}"
                   + (f"; and {len(odd) - 3} others" if len(odd) > 3 else ""),
                   "\n".join([fixes.comment("on DeepSeek-V3 and Llama every layer has the same widths: a differing "
                                            "shape is a damaged save; peft refuses it at load"), fixes.rescan(case.path)]),
                   actor=Actor.JOB, cause=causes.ADAPTER_KEYS_INVALID)


def dora_keys(case: AdapterCase) -> Finding | None:
    lay, config = case.layout, case.config
    if not lay or config is None:
        return None
    if config.get("use_dora"):
        lacking = sorted(m for m in lay.pairs if m not in lay.magnitude)
        if lacking:
            return keys_fail(f"use_dora is true but {len(lacking)} modules have no lora_magnitude_vector: "
                              f"{named(lacking)}", case)
    elif lay.magnitude:
        # peft builds no DoRA layer without use_dora: it ignores these keys and loads every LoRA tensor intact
        # (tests/lora/test_lora_scan.py holds it to peft's own load)
        return warning(f"{len(lay.magnitude)} DoRA lora_magnitude_vector keys but use_dora is not true in "
                       f"{CONFIG_NAME}: peft ignores them (the LoRA weights load intact, without DoRA): "
                       f"{named(sorted(lay.magnitude), 3)}",
                       "\n".join([fixes.comment("if the adapter was trained with DoRA, set use_dora to true in "
                                                 f"{CONFIG_NAME}; else the magnitudes are leftovers peft ignores"),
                                   fixes.rescan(case.path)]), actor=Actor.JOB, cause=causes.ADAPTER_KEYS_INVALID)
    return None


def bias_keys(case: AdapterCase) -> Finding | None:
    lay, config = case.layout, case.config
    if not lay or config is None:
        return None
    if config.get("lora_bias"):
        lacking = sorted(m for m in lay.pairs if m not in lay.bias_b and m not in lay.embedding_modules)
        if lacking:
            return keys_fail(f"lora_bias is true but {len(lacking)} modules have no lora_B.bias: {named(lacking)}", case)
    elif lay.bias_b:
        return keys_fail(f"{len(lay.bias_b)} lora_B.bias keys but lora_bias is not true in {CONFIG_NAME}: peft drops "
                          "them", case)
    return None


def saved_modules_present(case: AdapterCase) -> Finding | None:
    """Every modules_to_save entry has its saved weights (peft fails to load an adapter without them)."""
    lay, config = case.layout, case.config
    names = (config or {}).get("modules_to_save")
    if not lay or not isinstance(names, list) or not lay.tensors:
        return None
    saved, _ = _saved_module_keys(case, lay)
    modules = [k[len(PREFIX):].rpartition(".")[0] for k in saved]
    lacking = [n for n in names if isinstance(n, str) and not _ends_with_any(n, modules)]
    if not lacking:
        return None
    return keys_fail(f"modules_to_save names {', '.join(lacking)} but no weights of {'it' if len(lacking) == 1 else 'them'} "
                      "were saved: peft cannot load the adapter", case)


def target_coverage(case: AdapterCase) -> list[Finding]:
    """Saved modules are the ones peft builds a layer for (target_modules, or a wrapper of target_parameters), and
    every target adapted something (unless exclude_modules or modules_to_save leave it out on purpose)."""
    lay, config = case.layout, case.config
    if not lay or not lay.pairs or config is None or config.get("target_modules") == ALL_LINEAR:
        return []
    got = peft_layers(case)
    if got is None:
        return []
    t, sel = got
    found = []
    outside = sel.modules(selection.UNMATCHED, selection.EXCLUDED)
    if outside:
        found.append(keys_fail(f"{len(outside)} saved modules are not selected by target_modules or target_parameters "
                                f"(or are excluded): peft builds no layer for them and drops their weights: "
                                f"{named(outside)}", case))
    try:
        found += _targets_adapted(case, lay, t, sel)
    except patterns.PatternError:
        pass  # the config rule reports the pattern
    return found


def _targets_adapted(case: AdapterCase, lay: Layout, t: selection.Targets, sel: selection.Selection) -> list[Finding]:
    modules = lay.modules
    built = sel.modules(selection.TARGETED, selection.WRAPPER)
    found = []
    params = selection.parameter_coverage(t, sel)
    if params:
        found.append(failure(f"target_parameters {'; '.join(params)}: peft wraps only the parameters the model has, so "
                             "the others adapted nothing", _params_fix(case), actor=Actor.JOB,
                             cause=causes.TARGETS_MISSING))
    targets = t.modules
    if isinstance(targets, str):
        if not built:
            found.append(failure(f"no saved module matches the target_modules regex {targets!r}",
                                 _targets_fix(), actor=Actor.JOB, cause=causes.TARGETS_MISSING))
            return found
        names = patterns.finite_names(targets)
        if names is not None:
            suffix, listed = names
            missing = sorted(n for n in listed if not (_ends_with_any(n, modules) if suffix else n in modules))
            if missing:
                found.append(failure(f"the target_modules regex {targets!r} also selects {named(missing)}, which no "
                                     "saved key covers: peft builds those layers and leaves them untrained at load",
                                     _targets_fix(), actor=Actor.JOB, cause=causes.TARGETS_MISSING))
        return found
    if not targets:
        return found
    parents = sorted({m.rpartition(".")[0] for m in sel.modules(selection.TARGETED) or modules})
    held = {p for b in sel.wrappers for p, _ in selection.reachable(t, b)}
    uncovered = sorted(n for n in targets if not _ends_with_any(n, modules)
                       and not selection.fully_excluded(t, n, parents) and not (n in t.parameters and n in held))
    if uncovered and len(uncovered) == len(list(targets)):
        found.append(failure(f"no saved key covers any target_modules: {named(uncovered)}",
                             _targets_fix(), actor=Actor.JOB, cause=causes.TARGETS_MISSING))
    elif uncovered:
        adapted = sorted(n for n in targets if n not in uncovered)
        found.append(failure(f"target_modules {named(uncovered)} are covered by no key (only {named(adapted)} "
                             f"{'was' if len(adapted) == 1 else 'were'} adapted): these names are not modules of the "
                             "model, so those layers were never trained",
                             _targets_fix(), actor=Actor.JOB, cause=causes.TARGETS_MISSING))
    return found


#: what peft's ParamWrapper (the layer of a target_parameters entry) refuses: (field, refused when, the value it needs)
WRAPPER_REFUSES = (("lora_dropout", bool, 0.0), ("fan_in_fan_out", bool, False), ("lora_bias", bool, False),
                   ("use_dora", bool, False), ("velora_config", lambda v: v is not None, None),
                   ("kasa_config", lambda v: v is not None, None))


def wrapper_options(case: AdapterCase) -> Finding | None:
    """peft builds a target_parameters wrapper only without dropout, fan_in_fan_out, lora_bias, DoRA, VeLoRA, KaSA.

    fan_in_fan_out depends on the release: peft before 0.22 builds the modules' LoRA first, and a Linear's resets it to
    False; peft 0.22 builds the wrappers first. With no version known, the scan judges as the stricter release does."""
    built, lay = peft_layers(case), case.layout
    if not built or not built[1].wrappers or lay is None:
        return None
    config = case.config or {}
    bad = [(field, value) for field, refused, value in WRAPPER_REFUSES if field in config and refused(config[field])]
    version = case.facts.get("peft_version")
    first = peft_versions.wrappers_built_first(version)
    linear_first = any(m not in lay.embedding_modules for m in built[1].modules(selection.TARGETED))
    if linear_first and first is False:
        bad = [b for b in bad if b[0] != "fan_in_fan_out"]  # a Linear's LoRA, built first, resets it to False
    if not bad:
        return None
    shown = ", ".join(f"{field}={json.dumps(config[field], default=str)[:40]}" for field, _ in bad)
    why = ""
    if linear_first and any(b[0] == "fan_in_fan_out" for b in bad):
        why = (f" (peft {version} builds the wrappers before any module's LoRA, so no Linear resets "
               "fan_in_fan_out first)" if first else
               " (peft 0.22 and later build the wrappers first and refuse it; before 0.22 a Linear's LoRA, built "
               "first, resets it to False: no peft is installed here to say which release loads it, "
               "`lora scan --peft-version` names it)")
    return failure(f"{CONFIG_NAME} sets {shown}, which peft's ParamWrapper refuses: it cannot build the "
                   f"target_parameters wrappers ({named(sorted(built[1].wrappers), 2)}) and raises at load{why}",
                   fixes.json_edit(case.config_file, [([field], value) for field, value in bad],
                                   "what peft builds a target_parameters wrapper with"),
                   actor=Actor.JOB, cause=causes.ADAPTER_CONFIG_INVALID)


def _ends_with_any(target: str, modules: Iterable[str]) -> bool:
    return any(m == target or m.endswith("." + target) for m in modules)


def _targets_fix() -> str:
    return "\n".join([
        fixes.comment("name modules the model has; DeepSeek-V3's attention (MLA) is "
                      f"{','.join(fixes.DSV3_MLA_TARGETS)}: in the training command,"),
        fixes.comment(f"  --lora_target {','.join(fixes.DSV3_MLA_TARGETS)}"),
        "dsv3-preflight run --only lora.targets --model-path \"${MODEL_PATH:?the model directory holding config.json}\" "
        f"--lora-targets {','.join(fixes.DSV3_MLA_TARGETS)}"])


def _params_fix(case: AdapterCase) -> str:
    return "\n".join([
        fixes.comment("name parameters the model has: with transformers 5, peft targets DeepSeek-V3's routed experts "
                      "as gate_up_proj and down_proj and its router as gate.weight (what gate_proj, up_proj, "
                      "down_proj and gate become); train, save, and check the adapter again"),
        fixes.rescan(case.path)])


def layers_transform(case: AdapterCase) -> Finding | None:
    """With layers_to_transform, peft adapts a module a target name ends only in those layers (a name equal to the
    module's path, and the wrappers of target_parameters, are not filtered): keys of other layers are dropped."""
    got = peft_layers(case)
    if got is None or got[0].layers is None:
        return None
    outside = got[1].modules(selection.OTHER_LAYER)
    if not outside:
        return None
    return keys_fail(f"{len(outside)} saved modules lie outside layers_to_transform {sorted(got[0].layers)}: peft "
                     f"builds no layer for them: {named(outside)}", case)


#: every rule on the saved keys and tensors, in the order their findings are shown
WEIGHT_RULES = (empty_adapter, zero_element, weight_dtypes, keys_without_prefix, keys_not_peft, keys_other_adapter,
                keys_collide, unpaired, ranks, shapes_consistent, dora_keys, bias_keys, saved_modules_present, target_coverage,
                layers_transform, wrapper_options)
