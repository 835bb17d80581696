"""lora.adapter_base: the adapters already saved in the output dir fit the profile's model (their LoRA matrices take
its layer widths and name modules it has), or resuming from one fails in peft with "size mismatch"."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.lora import causes
from dsv3_preflight.lora.adapter_base_rules import MAX_NAMED, base_of, does_not_fit, recheck
from dsv3_preflight.lora.base_fit import compare
from dsv3_preflight.lora.case import AdapterCase
from dsv3_preflight.lora.layout import analyse
from dsv3_preflight.lora.rules import named
from dsv3_preflight.lora.targets import built_as_clause
from dsv3_preflight.result import Actor, Findings, failure


@check("lora.adapter_base", needs=["output_dir", "saved_adapters", "lora_base_model"], tags=["lora", "model"],
       timeout=240)
def adapter_base(output_dir, saved_adapters, lora_base_model):
    """The adapters already in the output dir fit the profile's model: each lora_A/lora_B takes the width of the
    module it adapts, and every adapted module exists in the model."""
    model = lora_base_model
    if not model.get("configured"):
        return Result.skipped("the profile names no model_path (--model-path / MODEL_PATH)")
    if not model.get("needed"):
        why = saved_adapters.get("reason") or "the output dir holds no saved adapter with tensors to compare"
        return Result.skipped(f"nothing to compare with the model: {why}")
    if model.get("error"):
        return Findings([failure(model["error"], recheck('"${MODEL_PATH:?the local model directory holding '
                                                         'config.json}"', output_dir.get("path") or "."),
                                 actor=Actor.JOB, cause=causes.MODEL_CONFIG_UNREADABLE)]).result(
            "model config readable", {"path": model.get("path")})
    out = output_dir.get("path") or ""
    adapters, compared_modules = [], set()
    groups: dict[tuple, tuple[dict, list[AdapterCase]]] = {}   # adapters that differ the same way, same base
    converted = []   # adapters whose keys peft converts when it loads them (transformers 4 saves of MoE experts)
    for facts in saved_adapters.get("adapters") or []:
        case = AdapterCase.of(facts)
        if case.layout is None or not case.layout.pairs:
            continue
        conversion = (model.get("conversions") or {}).get(case.path) or {}
        layout = analyse(conversion["tensors"]) if conversion.get("converted") else case.layout
        if conversion.get("converted"):
            converted.append(case.path.removeprefix(out.rstrip("/") + "/"))
        # a converted adapter is held to the config peft converts with it (fused names, a fused pair's rank 2r)
        res = compare(layout, model, conversion.get("config") if conversion.get("converted") else case.config)
        compared_modules.update(res["compared"])
        adapters.append({"path": case.path, "base_model_name_or_path": base_of(case), **res,
                         "peft_converts": bool(conversion.get("converted")),
                         **({"peft_conversion_error": conversion["error"]} if conversion.get("error") else {})})
        differs = (tuple((m["module"], m["matrix"], tuple(m["saved"])) for m in res["mismatched"]), tuple(res["absent"]))
        groups.setdefault((differs, base_of(case)), (res, []))[1].append(case)
    found = Findings()
    for res, cases in groups.values():
        found.check(does_not_fit, cases, res, model, out)
    evidence = {"model_path": model.get("path"), "model_type": model.get("model_type"), "built_as": model.get("built_as"),
                "transformers": model.get("transformers_version"), "adapters": adapters}
    conv = ""
    if converted:
        versions = {c.get("peft_version") for c in (model.get("conversions") or {}).values() if c.get("converted")}
        conv = (f"; peft {', '.join(sorted(v for v in versions if v))} converts {named(converted, MAX_NAMED)} as it "
                f"loads {'it' if len(converted) == 1 else 'them'} (per-expert modules saved with transformers 4 become "
                f"adapters of the fused experts of transformers {model.get('transformers_version')})")
    if not found and not compared_modules:
        return Result.skipped(f"no saved module could be compared with {model.get('model_type')}: "
                              f"{', '.join(sorted({t for a in adapters for t in a['not_compared']})) or 'none adapted'}"
                              f"{conv}", evidence)
    fitting = sum(1 for a in adapters if a["compared"])
    return found.result(f"{fitting} saved adapter(s) fit {model.get('model_type')}: "
                        f"{len(compared_modules)} adapted module kinds take the model's widths{conv}"
                        f"{built_as_clause(model)}", evidence)
