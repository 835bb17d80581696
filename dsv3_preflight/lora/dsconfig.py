"""The rules a DeepSpeed JSON config must pass for a LoRA run under the HF Trainer (pure; "auto" values allowed).

The HF Trainer fills "auto" for batch sizes, precision and a few ZeRO buckets from its arguments.
``stage3_gather_16bit_weights_on_model_save`` must be true for a ZeRO-3 LoRA run, or every saved adapter holds
only partitioned (empty) tensors; an "auto" there is filled by accelerate's DeepSpeed plugin (which the Trainer
builds) from ``ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL`` (``accelerate launch`` exports it from its config's
``zero3_save_16bit_model``), false when unset: under torchrun, false.

Each rule is a small function of (config, :class:`Context`) returning findings; each fix edits the
user's own config file (its real path) with a python3 heredoc.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..result import Actor, Finding, Findings, failure, warning
from . import causes, fixes

GATHER_KEY = "stage3_gather_16bit_weights_on_model_save"
#: what accelerate's DeepSpeedPlugin fills an "auto" GATHER_KEY from (accelerate/utils/dataclasses.py; "true" → true)
ACCELERATE_GATHER_ENV = "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL"
#: what it fills an "auto" zero_optimization.stage from (unset: 2; accelerate launch exports its config's zero_stage)
ACCELERATE_STAGE_ENV = "ACCELERATE_DEEPSPEED_ZERO_STAGE"
ACCELERATE_DEFAULT_STAGE = 2
LEGACY_GATHER_KEY = "stage3_gather_fp16_weights_on_model_save"  # DeepSpeed's older name, still accepted
OFFLOAD_DEVICES = ("cpu", "nvme")


@dataclass(frozen=True)
class Context:
    """What the rules know besides the config: its path (for the fixes), the world size, the trainer's
    batch arguments when known, whether the run trains LoRA, the run's ACCELERATE_GATHER_ENV and
    ACCELERATE_STAGE_ENV (None: unset), and whether the Trainer installed here gathers a PEFT model itself on save."""

    path: str = "${DEEPSPEED_CONFIG:?the DeepSpeed JSON config of the run}"
    world_size: int = 1
    micro_batch: int | None = None
    grad_accum: int | None = None
    lora: bool = True
    accelerate_gather: str | None = None
    accelerate_stage: str | None = None
    #: the installed Trainer's save path (probes.facts.trainer_save_path): {"gathers": True/False/None, ...}
    trainer_save: dict[str, Any] | None = None
    #: the offloads as the installed DeepSpeed's config model reads them, defaults included ({part: {device, pin_memory}})
    deepspeed_offload: dict[str, Any] | None = None
    #: the trainer's precision when known ("bf16", "fp16", "no")
    mixed_precision: str | None = None
    #: what the installed transformers, accelerate and DeepSpeed made of the config (probes.facts.trainer_chain)
    trainer_chain: dict[str, Any] | None = None


def _is_true(v: Any) -> bool:
    """True as DeepSpeed's config model (pydantic, lax) reads a bool: true, 1, "true", "yes", "on", "1", "t", "y"."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v == 1
    return isinstance(v, str) and v.strip().lower() in ("true", "1", "yes", "on", "t", "y")


def _is_auto(v: Any) -> bool:
    """A value left for accelerate or the HF Trainer to fill in ("auto", in any case and spacing)."""
    return isinstance(v, str) and v.strip().lower() == "auto"


def _stage(zero: dict[str, Any], ctx: Context) -> int | None:
    """The ZeRO stage the run gets: an "auto" stage is what accelerate fills it with (ACCELERATE_STAGE_ENV, else 2)."""
    raw = zero.get("stage", 0)
    if _is_auto(raw):
        return _num(ctx.accelerate_stage) if ctx.accelerate_stage is not None else ACCELERATE_DEFAULT_STAGE
    return _num(raw)


def _num(v: Any) -> int | None:
    if isinstance(v, bool) or v is None or v == "auto":
        return None
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):
        return None
    return int(f) if f == f and abs(f) != float("inf") and f == int(f) else None


def _zero(config: dict[str, Any]) -> dict[str, Any]:
    zero = config.get("zero_optimization") or {}
    return zero if isinstance(zero, dict) else {}


def _fail(message: str, fix: str | None, cause: str = causes.DEEPSPEED_CONFIG_INVALID) -> Finding:
    return failure(message, fix, actor=Actor.JOB, cause=cause)


def _edit(ctx: Context, edits: Sequence[tuple[Sequence[str], Any]], why: str) -> str:
    return fixes.json_edit(ctx.path, edits, why)


# ------------------------------------------------------------------------------------------------ the rules
def zero_is_object(config: dict[str, Any], ctx: Context) -> Finding | None:
    zero = config.get("zero_optimization")
    if zero is None or isinstance(zero, dict):
        return None
    return _fail(f"zero_optimization is a {type(zero).__name__}, not an object",
                 "\n".join([fixes.comment('"zero_optimization": {"stage": 3, "' + GATHER_KEY + '": true}, an object of '
                                          "ZeRO settings:"),
                            _edit(ctx, [(["zero_optimization"], {"stage": 3, GATHER_KEY: True})],
                                  "zero_optimization as an object, gathering LoRA weights on save")]))


def gather_flag(config: dict[str, Any], ctx: Context) -> Finding | None:
    """ZeRO-3 with LoRA gathers the 16-bit weights on save, or every adapter save is empty."""
    zero = _zero(config)
    stage = _stage(zero, ctx)
    gather = zero.get(GATHER_KEY, zero.get(LEGACY_GATHER_KEY))
    auto = _is_auto(gather)
    if stage != 3 or not ctx.lora or _is_true(gather) or (auto and _is_true(ctx.accelerate_gather)):
        return None
    also = ""
    if GATHER_KEY in config or LEGACY_GATHER_KEY in config:
        where = " (it is set at the top level, where DeepSpeed ignores it: it belongs inside zero_optimization)"
    elif auto:
        now = "unset" if ctx.accelerate_gather is None else f"{ctx.accelerate_gather!r}"
        where = (f" (\"auto\" is filled in by accelerate, which the HF Trainer runs DeepSpeed through, from "
                 f"{ACCELERATE_GATHER_ENV}, {now} in this environment: false)")
        also = ("\n" + fixes.comment(f"or keep \"auto\" and export {ACCELERATE_GATHER_ENV}=true in every node's training "
                                      "environment (accelerate launch does it for zero3_save_16bit_model: true)"))
    elif gather is not None:
        where = f" (it is {gather!r})"
    else:
        where = " (it is not set; DeepSpeed's default is false)"
    fix = _edit(ctx, [(["zero_optimization", GATHER_KEY], True)],
                "gather the LoRA weights when ZeRO-3 saves them (else every adapter is empty)") + also
    head = f"ZeRO stage 3 with LoRA but zero_optimization.{GATHER_KEY} is not true{where}"
    save = ctx.trainer_save or {}
    raw = zero.get("stage")
    # the Trainer's branch tests the filled-in stage == 3: a number 3 (or "auto" filled with 3), not the string "3"
    numeric3 = (isinstance(raw, (int, float)) and not isinstance(raw, bool) and raw == 3) or _is_auto(raw)
    if save.get("gathers") and numeric3:
        tf = save.get("transformers") or {}
        return warning(f"{head}: the Trainer installed here (transformers {tf.get('version')}, trainer.py line "
                       f"{tf.get('line')}) gathers a PEFT model's weights itself when it saves under ZeRO-3, so its "
                       "saves are whole; any other save (accelerator.get_state_dict, a callback's or a script's "
                       "save_pretrained, another trainer) writes no weights or partitioned, empty tensors",
                       fix, actor=Actor.JOB, cause=causes.GATHER_FLAG_OFF)
    why = ""
    if save.get("gathers") is False:
        why = " (the Trainer installed here has no save path of its own for PEFT under ZeRO-3)"
    elif save.get("gathers") is None and save.get("reason"):
        why = f" (whether the installed Trainer gathers on its own is not known: {save['reason']})"
    return _fail(f"{head}: every adapter save writes partitioned, empty tensors{why}", fix, cause=causes.GATHER_FLAG_OFF)


def stage_is_a_number(config: dict[str, Any], ctx: Context) -> Finding | None:
    """A stage written as a string ("3") is ZeRO-3 to DeepSpeed, which coerces it, but not to transformers and
    accelerate, which compare the value with == 3: no zero.Init at from_pretrained (every rank loads the whole
    model) and the Trainer's save falls to the partitioned state dict (empty adapters)."""
    raw = _zero(config).get("stage")
    if not isinstance(raw, str) or _num(raw) is None:
        return None
    return _fail(f"zero_optimization.stage is the string {raw!r}: DeepSpeed reads ZeRO-{_num(raw)}, transformers and "
                 f"accelerate compare it with the number {_num(raw)} and do not (from_pretrained skips zero.Init, so "
                 "every rank loads the whole model; the Trainer saves the adapters partitioned, empty)",
                 _edit(ctx, [(["zero_optimization", "stage"], _num(raw))], "the stage as a JSON number"))


def stage_auto(config: dict[str, Any], ctx: Context) -> Finding | None:
    """An "auto" stage is filled by accelerate from ACCELERATE_STAGE_ENV, 2 when unset (torchrun does not set it)."""
    raw = _zero(config).get("stage")
    if not _is_auto(raw):
        return None
    stage = _stage(_zero(config), ctx)
    if stage == 3:
        return None
    now = "unset" if ctx.accelerate_stage is None else f"{ctx.accelerate_stage!r}"
    return _fail(f"zero_optimization.stage is \"auto\", which accelerate (through which the HF Trainer runs DeepSpeed) "
                 f"fills from {ACCELERATE_STAGE_ENV}, {now} in this environment: ZeRO-{stage}, which keeps every "
                 "parameter on every GPU, not the ZeRO-3 a LoRA run of DeepSeek-V3 needs",
                 _edit(ctx, [(["zero_optimization", "stage"], 3)], "ZeRO-3, as a LoRA run of DeepSeek-V3 needs")
                 + "\n" + fixes.comment(f"or keep \"auto\" and export {ACCELERATE_STAGE_ENV}=3 in every node's training "
                                        "environment (accelerate launch does it for zero_stage: 3)"))


def stage_known(config: dict[str, Any], ctx: Context) -> Finding | None:
    zero = _zero(config)
    stage = _num(zero.get("stage", 0))
    if stage is None or stage in (0, 1, 2, 3):
        return None
    return _fail(f"zero_optimization.stage is {zero.get('stage')!r}; DeepSpeed knows stages 0-3",
                 _edit(ctx, [(["zero_optimization", "stage"], 3)], "ZeRO-3, as a LoRA run of DeepSeek-V3 needs"))


def offload_pinned(config: dict[str, Any], ctx: Context) -> Finding | None:
    """Both offloads to CPU/NVMe without pinned memory copy at pageable-memory speed."""
    zero = _zero(config)
    devices, pinned = {}, {}
    for part in ("offload_optimizer", "offload_param"):
        sec = zero.get(part)
        if isinstance(sec, dict):
            devices[part] = str(sec.get("device", "none")).lower()
            # an absent pin_memory is DeepSpeed's default, which the installed DeepSpeed's config model tells (True in
            # 0.19.8); without that reading, absent is read as unpinned
            parsed = (ctx.deepspeed_offload or {}).get(part)
            pinned[part] = parsed["pin_memory"] if parsed and "pin_memory" not in sec else _is_true(sec.get("pin_memory"))
    offloaded = [p for p, d in devices.items() if d in OFFLOAD_DEVICES]
    if len(offloaded) != 2 or all(pinned[p] for p in offloaded):
        return None
    unpinned = [p for p in offloaded if not pinned[p]]
    return warning(f"both offload_optimizer and offload_param go to {'/'.join(sorted({devices[p] for p in offloaded}))} "
                   f"but {', '.join(unpinned)} {'has' if len(unpinned) == 1 else 'have'} no pinned memory: "
                   "host↔GPU copies run at pageable-memory speed",
                   _edit(ctx, [(["zero_optimization", p, "pin_memory"], True) for p in unpinned],
                         "pinned host memory for the offloaded copies"), actor=Actor.JOB)


def _enabled(config: dict[str, Any], block: str) -> Any:
    sec = config.get(block)
    return sec.get("enabled") if isinstance(sec, dict) else None


def _bf16_block(config: dict[str, Any]) -> str:
    """The block DeepSpeed reads bf16 from: bf16, else its old name bfloat16 (precision_config.get_bfloat16_config)."""
    return "bf16" if "bf16" in config or "bfloat16" not in config else "bfloat16"


def precision_conflict(config: dict[str, Any], ctx: Context) -> Finding | None:
    block = _bf16_block(config)
    bf16, fp16 = _enabled(config, block), _enabled(config, "fp16")
    if not (_is_true(bf16) and _is_true(fp16)):
        return None
    return _fail(f"{block}.enabled and fp16.enabled are both true: DeepSpeed refuses to start",
                 _edit(ctx, [(["fp16", "enabled"], False)], "bf16 only (pass only --bf16 to the trainer)"))


def bfloat16_alias(config: dict[str, Any], ctx: Context) -> Finding | None:
    """``bfloat16`` is DeepSpeed's old name for ``bf16``, read only where there is no ``bf16`` block. Through the HF
    Trainer there always is one: accelerate's set_mixed_precision writes it from the trainer's --bf16 (enabled:
    false without it), so the bfloat16 block never decides anything."""
    if "bfloat16" not in config:
        return None
    enabled = _enabled(config, "bfloat16")
    if "bf16" in config:
        head = "the config has both bf16 and its old name bfloat16: DeepSpeed reads bf16 and ignores bfloat16"
    else:
        head = ("the config names bf16 by its old name bfloat16, which the HF Trainer's run never reads: accelerate "
                "writes a bf16 block from the trainer's --bf16 (enabled: false without it) and DeepSpeed reads bf16 "
                "first")
    if ctx.mixed_precision == "no" and _is_true(enabled):
        head += "; the trainer has no --bf16, so this run trains in fp32, not bf16"
    elif ctx.mixed_precision is None and _is_true(enabled):
        head += "; bf16 training needs --bf16 on the training command"
    return warning(head, _edit(ctx, [(["bf16"], {"enabled": "auto"}), (["bfloat16"], fixes.DELETE)],
                               "bf16 under its own name, filled from the trainer's --bf16")
                   + "\n" + fixes.comment("and pass --bf16 to the trainer (bf16 is what DeepSeek-V3 trains in)"),
                   actor=Actor.JOB)


def trainer_batch_agrees(config: dict[str, Any], ctx: Context) -> list[Finding]:
    """An explicit micro batch / accumulation in the config equals the trainer's argument (else DeepSpeed asserts)."""
    found = []
    for key, trainer, flag in (("train_micro_batch_size_per_gpu", ctx.micro_batch, "--per_device_train_batch_size"),
                               ("gradient_accumulation_steps", ctx.grad_accum, "--gradient_accumulation_steps")):
        value = _num(config.get(key))
        if value is not None and trainer is not None and value != trainer:
            found.append(_fail(f"{key} is {value} in the DeepSpeed config but the trainer has {flag} {trainer}",
                               _edit(ctx, [([key], "auto")], f"let the Trainer fill {key} from {flag}")))
    return found


def batch_arithmetic(config: dict[str, Any], ctx: Context) -> Finding | None:
    """train_batch_size = micro batch x gradient accumulation x world size."""
    tbs = _num(config.get("train_batch_size"))
    if tbs is None:
        return None
    mb = _num(config.get("train_micro_batch_size_per_gpu"))
    mb = mb if mb is not None else ctx.micro_batch
    # an absent gradient_accumulation_steps is 1: accelerate's DeepSpeedPlugin inserts it (the HF Trainer fills only
    # the keys that are there), whatever the trainer's --gradient_accumulation_steps says
    absent = "gradient_accumulation_steps" not in config
    ga = 1 if absent else _num(config.get("gradient_accumulation_steps"))
    ga = ga if ga is not None else ctx.grad_accum
    ws = ctx.world_size
    fix = _edit(ctx, [(["train_batch_size"], "auto")] + ([(["gradient_accumulation_steps"], "auto")] if absent else []),
                "let the Trainer compute train_batch_size" + (" and fill gradient_accumulation_steps" if absent else ""))
    if mb is not None and ga is not None and tbs != mb * ga * ws:
        ga_said = " (absent: accelerate inserts 1)" if absent else ""
        return _fail(f"train_batch_size {tbs} ≠ micro batch {mb} × gradient accumulation {ga}{ga_said} × world size "
                     f"{ws} = {mb * ga * ws}", fix)
    if ws and tbs % ws:
        return _fail(f"train_batch_size {tbs} is not a multiple of the world size {ws}: DeepSpeed asserts "
                     "train_batch_size = micro batch × gradient accumulation × world size", fix)
    if mb is not None and ga is None and mb * ws and tbs % (mb * ws):
        return _fail(f"train_batch_size {tbs} is not a multiple of micro batch {mb} × world size {ws}", fix)
    if ga is not None and mb is None and ga * ws and tbs % (ga * ws):
        return _fail(f"train_batch_size {tbs} is not a multiple of gradient accumulation {ga} × world size {ws}", fix)
    return None


# ------------------------------------------------------------------------- what the installed libraries did with it
def _recheck(ctx: Context) -> str:
    return f"dsv3-preflight run --only lora.deepspeed_config --deepspeed-config {fixes.quote(ctx.path)}"


def _chain_fix(chain: dict[str, Any], ctx: Context) -> str:
    """Edits for what the libraries refused: removed blocks and unfilled "auto" values dropped (DeepSpeed's
    defaults), mismatching values set to "auto" (transformers' own advice), the batch keys left to the Trainer."""
    error = chain.get("error") or ""
    edits: list[tuple[list[str], Any]] = []
    why = []
    if chain.get("removed_keys"):
        edits += [(k.split("."), fixes.DELETE) for k in chain["removed_keys"]]
        why.append("drop what DeepSpeed removed")
    if chain.get("unfilled_auto") and "not found in kwargs" in error:
        edits += [(k.split("."), fixes.DELETE) for k in chain["unfilled_auto"]]
        why.append("drop the \"auto\" values nobody fills (DeepSpeed's defaults apply)")
    for m in chain.get("mismatches") or []:
        key = m.split("=", 1)[0].removeprefix("ds ").strip()
        edits.append((key.split("."), "auto"))
    if chain.get("mismatches"):
        why.append("let the Trainer fill the mismatching values from its arguments")
    if "Please specify the ZeRO optimization config" in error:
        edits.append((["zero_optimization"], {"stage": 3, GATHER_KEY: True}))
        why.append("ZeRO-3, gathering LoRA weights on save")
    if chain.get("step") == "initialize" and "batch" in error and not edits:
        edits += [([k], "auto") for k in ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
                                          "train_batch_size")]
        why.append("let the Trainer fill the batch sizes from its arguments")
    lines = [_edit(ctx, edits, "; ".join(why))] if edits else [
        fixes.comment(f"correct {ctx.path} as the message above says, then check again:")]
    return "\n".join(lines + [_recheck(ctx)])


def trainer_refuses(config: dict[str, Any], ctx: Context) -> Finding | None:
    """The installed transformers, accelerate or DeepSpeed refuse the config on the Trainer's way to the engine."""
    chain = ctx.trainer_chain or {}
    if not chain.get("available") or not chain.get("error"):
        return None
    versions = ", ".join(f"{k} {v}" for k, v in (chain.get("versions") or {}).items() if v)
    return _fail(f"the HF Trainer's run would stop at {chain.get('where') or chain.get('step')}: "
                 f"{chain['error']} ({versions} here)", _chain_fix(chain, ctx))


def trainer_ignores(config: dict[str, Any], ctx: Context) -> list[Finding]:
    """What DeepSpeed ends up with differs from the trainer's own arguments, silently: an absent
    gradient_accumulation_steps becomes 1 whatever --gradient_accumulation_steps says (accelerate inserts it)."""
    chain = ctx.trainer_chain or {}
    engine, known = chain.get("engine") or {}, chain.get("known") or {}
    if not chain.get("available") or chain.get("error") or not engine:
        return []
    found = []
    world = engine.get("world_size") or ctx.world_size
    counted = ((known.get("micro_batch") or engine.get("micro_batch") or 0)
               * (known.get("grad_accum") or engine.get("gradient_accumulation_steps") or 0) * world)
    for key, arg, flag in (("gradient_accumulation_steps", "grad_accum", "--gradient_accumulation_steps"),
                           ("micro_batch", "micro_batch", "--per_device_train_batch_size")):
        want, got = known.get(arg), engine.get(key)
        if want is None or got is None or want == got:
            continue
        name = "gradient_accumulation_steps" if arg == "grad_accum" else "train_micro_batch_size_per_gpu"
        how = (" (the config has no gradient_accumulation_steps, so accelerate's DeepSpeedPlugin inserts 1)"
               if name == "gradient_accumulation_steps" and name not in config else "")
        found.append(_fail(f"the trainer's {flag} {want} is silently not what DeepSpeed runs: its engine steps with "
                           f"{name} {got}{how}: a train batch of {engine.get('train_batch_size')} where the trainer "
                           f"counts on {counted}",
                           _edit(ctx, [([name], "auto")], f"let the Trainer fill {name} from {flag}")))
    return found


def trainer_unknown(config: dict[str, Any], ctx: Context) -> Finding | None:
    """The libraries could not be run on the config here (a timeout, a child that died): said, never passed over."""
    chain = ctx.trainer_chain
    if not chain or chain.get("available") is not None:
        return None
    return warning(f"the HF Trainer's own DeepSpeed set-up could not be run on the config here: {chain.get('reason')}; "
                   "only this check's own rules judged it",
                   "\n".join([fixes.comment("run the check again (a loaded node may need longer):"), _recheck(ctx)]),
                   actor=Actor.JOB)


RULES = (zero_is_object, stage_is_a_number, stage_auto, gather_flag, stage_known, offload_pinned, precision_conflict,
         bfloat16_alias, trainer_batch_agrees, batch_arithmetic)
#: what the installed libraries made of the config: judged when the rules above found no failure (a refusal then
#: most often repeats one of theirs, in the library's words)
LIBRARY_RULES = (trainer_refuses, trainer_ignores, trainer_unknown)


def lint(config: dict[str, Any], ctx: Context | None = None, *, library: bool = True, **kw: Any) -> Findings:
    """Every rule's findings on ``config`` (``kw`` builds the :class:`Context` when none is given); with
    ``library``, then :func:`library_findings`."""
    ctx = ctx or Context(**kw)
    found = Findings()
    for rule in RULES:
        found.check(rule, config, ctx)
    return library_findings(found, config, ctx) if library else found


def library_findings(found: Findings, config: dict[str, Any], ctx: Context) -> Findings:
    """The :data:`LIBRARY_RULES`, where ``found`` holds no failure yet."""
    if not found.failures:
        for rule in LIBRARY_RULES:
            found.check(rule, config, ctx)
    return found


def seen(config: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The values the rules read, for the evidence."""
    zero = _zero(config)
    offload = {p: {"device": str(zero[p].get("device", "none")).lower(), "pin_memory": _is_true(zero[p].get("pin_memory"))}
               for p in ("offload_optimizer", "offload_param") if isinstance(zero.get(p), dict)}
    return {"zero_optimization.stage": zero.get("stage", 0),
            f"zero_optimization.{GATHER_KEY}": zero.get(GATHER_KEY, zero.get(LEGACY_GATHER_KEY)),
            "offload": offload,
            "bf16.enabled": _enabled(config, "bf16"),
            **({"bfloat16.enabled": _enabled(config, "bfloat16")} if "bfloat16" in config else {}),
            "fp16.enabled": _enabled(config, "fp16"),
            **{k: config.get(k) for k in ("train_batch_size", "train_micro_batch_size_per_gpu",
                                          "gradient_accumulation_steps")},
            "world_size": ctx.world_size,
            # an "auto" gather flag is decided by the run's environment: shown with it
            **({ACCELERATE_GATHER_ENV: ctx.accelerate_gather} if _is_auto(zero.get(GATHER_KEY)) else {})}
