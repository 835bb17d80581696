"""lora.adapter_base: the adapters already saved in the output dir fit the profile's model (their LoRA matrices take
its layer widths and name modules it has), or resuming from one fails in peft with "size mismatch"."""
from __future__ import annotations

from dsv3_preflight.lora import causes, fixes
from dsv3_preflight.lora.base_fit import describe
from dsv3_preflight.lora.case import AdapterCase
from dsv3_preflight.lora.rules import named
from dsv3_preflight.result import Actor, Finding, failure

MAX_NAMED = 3


def recheck(model_path: str, output_dir: str) -> str:
    return (f"dsv3-preflight run --only lora.adapter_base --model-path {model_path} "
            f"--output-dir {fixes.quote(output_dir)}")


def base_of(case: AdapterCase) -> str | None:
    """The model the adapter says it was trained on (adapter_config.json's base_model_name_or_path)."""
    value = (case.config or {}).get("base_model_name_or_path")
    return value if isinstance(value, str) and value else None


def does_not_fit(cases: list[AdapterCase], found: dict, model: dict, output_dir: str) -> Finding | None:
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
