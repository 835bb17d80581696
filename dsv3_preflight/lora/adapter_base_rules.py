"""The rules of lora.adapter_base: the adapters already saved in the output dir fit the profile's model (their LoRA
matrices take its layer widths and name modules it has), or resuming from one fails in peft with "size mismatch".

Pure: the ``output_dir``, ``saved_adapters`` and ``lora_base_model`` facts in; :func:`compare_saved` holds every
saved adapter to the model once, and the rules read its :class:`Comparison`."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dsv3_preflight.host.facts import OutputDirFact
from dsv3_preflight.lora import causes, fixes
from dsv3_preflight.lora.base_fit import compare, describe
from dsv3_preflight.lora.case import AdapterCase
from dsv3_preflight.lora.facts import LoraBaseModelFact, SavedAdaptersFact
from dsv3_preflight.lora.layout import Layout, analyse
from dsv3_preflight.lora.rules import named
from dsv3_preflight.lora.targets import built_as_clause
from dsv3_preflight.result import Actor, Finding, failure

MAX_NAMED = 3
#: how saved adapters differ from the model: their mismatched (module, matrix, saved shape), their absent modules
Differs = tuple[tuple[tuple[str, str, tuple[int, ...]], ...], tuple[str, ...]]


def recheck(model_path: str, output_dir: str) -> str:
    return (f"dsv3-preflight run --only lora.adapter_base --model-path {model_path} "
            f"--output-dir {fixes.quote(output_dir)}")


def base_of(case: AdapterCase) -> str | None:
    """The model the adapter says it was trained on (adapter_config.json's base_model_name_or_path)."""
    value = (case.config or {}).get("base_model_name_or_path")
    return value if isinstance(value, str) and value else None


def does_not_fit(cases: list[AdapterCase], found: Mapping[str, Any], model: LoraBaseModelFact, output_dir: str) -> Finding | None:
    """One finding for the adapters that differ from the model in the same way (a run's checkpoints share their
    layout), naming the first of them."""
    if not found["mismatched"] and not found["absent"]:
        return None
    shown = [c.path.removeprefix(output_dir.rstrip("/") + "/") for c in cases]
    model_type, model_path = model.get("model_type") or "the model", model.get("path") or ""
    base = base_of(cases[0])
    trained_on = f"; adapter_config.json says it was trained on {base}" if base else ""
    them = "it" if len(cases) == 1 else "them"
    fix = "\n".join([
        fixes.comment(f"{shown[0]} was trained on another base model than {model_path} ({model_type}); "
                      f"resuming from {them} or loading {them} fails in peft with 'size mismatch'"),
        f"grep -E '\"base_model_name_or_path\"|\"r\"' {fixes.quote(cases[0].config_file)}    # the model it was trained on",
        fixes.comment("run on that model, or save this model's run into an output dir of its own:"),
        recheck('"${MODEL_PATH:?the base model the adapter was trained on}"', output_dir),
    ])
    what = "saved adapter" if len(cases) == 1 else f"{len(cases)} saved adapters"
    verb = "does" if len(cases) == 1 else "do"
    return failure(f"{what} {named(shown, MAX_NAMED)} {verb} not fit {model_type} ({model_path}): "
                   f"{describe(found, model_type)}{trained_on}", fix, actor=Actor.JOB, cause=causes.ADAPTER_BASE_MISMATCH)


def skip_reason(model: LoraBaseModelFact, saved_adapters: SavedAdaptersFact) -> str | None:
    """Why there is nothing to compare (no model configured, no saved adapter with tensors), else None."""
    if not model.get("configured"):
        return "the profile names no model_path (--model-path / MODEL_PATH)"
    if not model.get("needed"):
        why = saved_adapters.get("reason") or "the output dir holds no saved adapter with tensors to compare"
        return f"nothing to compare with the model: {why}"
    return None


def model_unreadable(model: LoraBaseModelFact, output_dir: OutputDirFact) -> Finding | None:
    """The model's config could not be read: the job's configuration names the wrong model path."""
    if not model.get("error"):
        return None
    return failure(model["error"], recheck('"${MODEL_PATH:?the local model directory holding config.json}"',
                                           output_dir.get("path") or "."),
                   actor=Actor.JOB, cause=causes.MODEL_CONFIG_UNREADABLE)


@dataclass
class Comparison:
    """Every saved adapter held to the model: one row per adapter, the module kinds compared, the adapters grouped
    by how they differ (a run's checkpoints share their layout), and those peft converts as it loads them."""

    output_dir: str
    adapters: list[dict[str, Any]] = field(default_factory=list)
    compared_modules: set[str] = field(default_factory=set)
    #: adapters that differ the same way, same base
    groups: dict[tuple[Differs, str | None], tuple[dict[str, Any], list[AdapterCase]]] = field(default_factory=dict)
    #: adapters whose keys peft converts when it loads them (transformers 4 saves of MoE experts)
    converted: list[str] = field(default_factory=list)

    def add(self, case: AdapterCase, saved: Layout, model: LoraBaseModelFact) -> None:
        conversion = (model.get("conversions") or {}).get(case.path) or {}
        layout = analyse(conversion["tensors"]) if conversion.get("converted") else saved
        if conversion.get("converted"):
            self.converted.append(case.path.removeprefix(self.output_dir.rstrip("/") + "/"))
        # a converted adapter is held to the config peft converts with it (fused names, a fused pair's rank 2r)
        res = compare(layout, model, conversion.get("config") if conversion.get("converted") else case.config)
        self.compared_modules.update(res["compared"])
        self.adapters.append({"path": case.path, "base_model_name_or_path": base_of(case), **res,
                              "peft_converts": bool(conversion.get("converted")),
                              **({"peft_conversion_error": conversion["error"]} if conversion.get("error") else {})})
        differs: Differs = (tuple((m["module"], m["matrix"], tuple(m["saved"])) for m in res["mismatched"]), tuple(res["absent"]))
        self.groups.setdefault((differs, base_of(case)), (res, []))[1].append(case)


def compare_saved(saved_adapters: SavedAdaptersFact, model: LoraBaseModelFact, output_dir: str) -> Comparison:
    """Hold every saved adapter with LoRA pairs to the model."""
    out = Comparison(output_dir)
    for facts in saved_adapters.get("adapters") or []:
        case = AdapterCase.of(facts)
        if case.layout is not None and case.layout.pairs:
            out.add(case, case.layout, model)
    return out


def evidence_of(model: LoraBaseModelFact, comparison: Comparison) -> dict[str, Any]:
    return {"model_path": model.get("path"), "model_type": model.get("model_type"), "built_as": model.get("built_as"),
            "transformers": model.get("transformers_version"), "adapters": comparison.adapters}


def conversion_clause(comparison: Comparison, model: LoraBaseModelFact) -> str:
    """The adapters peft converts as it loads them, in words (empty when none)."""
    converted = comparison.converted
    if not converted:
        return ""
    versions = {c.get("peft_version") for c in (model.get("conversions") or {}).values() if c.get("converted")}
    return (f"; peft {', '.join(sorted(v for v in versions if v))} converts {named(converted, MAX_NAMED)} as it "
            f"loads {'it' if len(converted) == 1 else 'them'} (per-expert modules saved with transformers 4 become "
            f"adapters of the fused experts of transformers {model.get('transformers_version')})")


def nothing_compared(comparison: Comparison, model: LoraBaseModelFact) -> str:
    """Why no saved module could be held to the model (the SKIP's reason)."""
    kinds = sorted({t for a in comparison.adapters for t in a["not_compared"]})
    return (f"no saved module could be compared with {model.get('model_type')}: {', '.join(kinds) or 'none adapted'}"
            f"{conversion_clause(comparison, model)}")


def ok_summary(comparison: Comparison, model: LoraBaseModelFact) -> str:
    fitting = sum(1 for a in comparison.adapters if a["compared"])
    return (f"{fitting} saved adapter(s) fit {model.get('model_type')}: {len(comparison.compared_modules)} adapted "
            f"module kinds take the model's widths{conversion_clause(comparison, model)}{built_as_clause(model)}")
