"""The HF Trainer's own DeepSpeed set-up, run on a config before launch (``python -m`` of this module, in a child).

A DeepSpeed config reaches the engine through four hands, each of which fills, checks or refuses it:

1. ``TrainingArguments`` (transformers ``HfTrainerDeepSpeedConfig.trainer_config_process``) fills "auto" batch,
   clipping, optimizer, scheduler-lr and precision values from the trainer's arguments and notes explicit values
   that differ from them; accelerate's ``DeepSpeedPlugin`` then fills the stage, offloads and gather flag, inserts
   ``gradient_accumulation_steps: 1`` where the key is absent, and refuses a config without ``zero_optimization``.
   This happens while the arguments are parsed: the first seconds of the run.
2. ``AcceleratorState``: ``set_mixed_precision``, which adds a ``bf16`` block and refuses the other dtype.
3. The Trainer's ``deepspeed_init`` (``trainer_config_finalize``): the hidden-size buckets and scheduler steps,
   and the mismatches of step 1 raised together.
4. ``accelerator.prepare`` (``Accelerator._prepare_deepspeed``): the accumulation steps DeepSpeed will really use,
   the last "auto" values, an error for any "auto" nobody fills; then ``deepspeed.initialize`` builds
   ``DeepSpeedConfig``, which asserts the batch arithmetic and refuses removed keys.

Steps 3 and 4 run after the model has loaded (for DeepSeek-V3, after every node read its 671B parameters). This
module runs the installed libraries' own code for every step except the config part of step 4, whose few lines
are transcribed from accelerate 1.15 (``accelerator.py``, ``_prepare_deepspeed``) because they need a model and
dataloaders. It runs in a child process: ``HfTrainerDeepSpeedConfig`` registers itself process-wide
(``is_deepspeed_zero3_enabled()`` turns true, which would change how the other probes build models), and
``DeepSpeedConfig`` reads the world size from ``deepspeed.comm``, which the child sets to the job's.

The trainer's arguments that the preflight does not know are taken as agreeing with the config (an explicit
``train_micro_batch_size_per_gpu: 2`` with an unknown ``--per_device_train_batch_size`` is taken as 2), and
the mismatches that only such a guess produced are dropped: only the arguments in ``known`` are compared.

Request (JSON on stdin): ``config``, ``world_size``, ``micro_batch``, ``grad_accum``, ``mixed_precision``
("bf16", "fp16", "no" or null), ``hidden_size`` (null: 7168, DeepSeek-V3's, for the buckets only).
Answer (JSON on stdout): see :func:`run_chain`.
"""
from __future__ import annotations

import copy
import json
import re
import sys
from types import SimpleNamespace
from typing import Any

#: where each step runs, in the words a finding uses
STEPS = {
    "arguments": "TrainingArguments (transformers' trainer_config_process, then accelerate's DeepSpeedPlugin), "
                 "in the run's first seconds",
    "precision": "the Accelerator's set_mixed_precision, in the run's first seconds",
    "deepspeed_init": "the Trainer's deepspeed_init (trainer_config_finalize), after the model has loaded",
    "prepare": "accelerator.prepare (accelerate's _prepare_deepspeed), after the model has loaded",
    "initialize": "deepspeed.initialize (DeepSpeedConfig), after the model has loaded",
}
#: a mismatch's config key -> the trainer argument it is compared with (only known ones are kept)
_MISMATCH_ARG = {"train_micro_batch_size_per_gpu": "micro_batch", "gradient_accumulation_steps": "grad_accum",
                 "train_batch_size": "batch", "fp16.enabled": "mixed_precision", "bf16.enabled": "mixed_precision"}
_MISMATCH = re.compile(r"^- ds (\S+?)=")
DEFAULT_HIDDEN = 7168   # DeepSeek-V3's hidden_size: only the "auto" bucket sizes depend on it, never a verdict
PLACEHOLDER_STEPS = 1000


def _num(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def _versions() -> dict[str, str | None]:
    import importlib.metadata as md

    out: dict[str, str | None] = {}
    for dist in ("transformers", "accelerate", "deepspeed"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    return out


#: the TrainingArguments values the preflight never knows, as placeholders (transformers' defaults): they decide no
#: verdict, since a mismatch with one of them is dropped and what they fill is only validated (importing
#: TrainingArguments itself would cost two seconds a check)
_PLACEHOLDERS = {"max_grad_norm": 1.0, "learning_rate": 5e-5, "adam_beta1": 0.9, "adam_beta2": 0.999,
                 "adam_epsilon": 1e-8, "weight_decay": 0.0, "save_on_each_node": False}


def _trainer_args(req: dict[str, Any], config: dict[str, Any]) -> tuple[SimpleNamespace, dict[str, Any]]:
    """The trainer's arguments: the values the preflight knows; an unknown batch value taken from the config's explicit
    one (assumed to agree), an unknown precision from the config's explicit bf16/fp16 flags; the rest placeholders."""
    args = SimpleNamespace(**_PLACEHOLDERS)
    known: dict[str, Any] = {k: _num(req.get(k)) for k in ("micro_batch", "grad_accum") if _num(req.get(k))}
    world = int(req.get("world_size") or 1)
    # an unknown value agrees with the config: its explicit value; an absent accumulation is 1 (accelerate inserts it);
    # else what an explicit train_batch_size leaves for it (micro × accumulation × world size), else 1
    ga = known.get("grad_accum") or _num(config.get("gradient_accumulation_steps")) or 1
    mb = known.get("micro_batch") or _num(config.get("train_micro_batch_size_per_gpu"))
    tbs = _num(config.get("train_batch_size"))
    if mb is None:
        mb = tbs // (ga * world) if tbs and tbs % (ga * world) == 0 else 1
    if ("grad_accum" not in known and "gradient_accumulation_steps" in config
            and _num(config["gradient_accumulation_steps"]) is None and tbs and tbs % (mb * world) == 0):
        ga = tbs // (mb * world)
    args.per_device_train_batch_size, args.gradient_accumulation_steps = mb, ga
    if "micro_batch" in known and "grad_accum" in known:
        known["batch"] = True
    mp = req.get("mixed_precision")
    if mp in ("bf16", "fp16", "no"):
        known["mixed_precision"] = mp
    else:   # as the config asks, where it asks; else bf16, DeepSeek-V3's
        def on(block: str) -> bool:
            sec = config.get(block)
            return isinstance(sec, dict) and sec.get("enabled") is True
        mp = "fp16" if on("fp16") else "bf16"
    args.bf16, args.fp16 = mp == "bf16", mp == "fp16"
    args.bf16_full_eval = args.fp16_full_eval = False
    args.world_size = world
    args.mixed_precision = mp
    args.get_warmup_steps = lambda steps: 0
    return args, known


def _auto_leaves(node: Any, prefix: str = "") -> list[str]:
    if not isinstance(node, dict):
        return []
    out = []
    for key, value in node.items():
        if isinstance(value, dict):
            out += _auto_leaves(value, f"{prefix}{key}.")
        elif value == "auto":
            out.append(f"{prefix}{key}")
    return out


def run_chain(req: dict[str, Any]) -> dict[str, Any]:
    """Each step in turn, as the Trainer runs them. The answer: ``available``; ``versions``; ``step`` (the one
    that refused, or "done") and ``error`` (its message); ``mismatches`` (explicit values that differ from a known
    trainer argument, in transformers' words); ``engine`` (what DeepSpeed ends up with: micro batch,
    accumulation, train batch, bf16/fp16, stage); ``known`` (the trainer arguments compared)."""
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    out: dict[str, Any] = {"available": True, "versions": _versions(), "step": None, "error": None, "mismatches": [],
                           "unfilled_auto": [], "engine": None}
    try:
        import deepspeed.comm as ds_comm
        from accelerate.utils import DeepSpeedPlugin
        from deepspeed.runtime.config import DeepSpeedConfig
        from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig
    except Exception as exc:  # noqa: BLE001 - the libraries the run needs are not all here
        return {"available": False, "reason": f"{type(exc).__name__}: {exc}"[:300], "versions": out["versions"]}
    config = copy.deepcopy(req["config"])
    try:   # the blocks DeepSpeed removed that this config still has (DeepSpeedConfig refuses the first)
        from deepspeed.runtime.config import _REMOVED_TOP_LEVEL_CONFIG_KEYS as removed
        from deepspeed.runtime.config import _REMOVED_ZERO_CONFIG_KEYS as removed_zero
        zero = config.get("zero_optimization")
        out["removed_keys"] = [k for k in removed if k in config] + [
            f"zero_optimization.{k}" for k in removed_zero if isinstance(zero, dict) and k in zero]
    except ImportError:   # an older DeepSpeed: nothing removed yet
        out["removed_keys"] = []
    args, known = _trainer_args(req, config)
    world = args.world_size
    out["known"] = known
    hidden = _num(req.get("hidden_size")) or DEFAULT_HIDDEN
    model = SimpleNamespace(config=SimpleNamespace(hidden_size=hidden))

    def keep(mismatch: str) -> bool:
        m = _MISMATCH.match(mismatch)
        return bool(m) and _MISMATCH_ARG.get(m.group(1)) in known

    try:
        out["step"] = "arguments"
        hf = HfTrainerDeepSpeedConfig(config)
        hf.trainer_config_process(args)
        plugin = DeepSpeedPlugin(hf_ds_config=hf)
        out["step"] = "precision"
        plugin.set_mixed_precision(args.mixed_precision)
        out["step"] = "deepspeed_init"
        try:
            hf.trainer_config_finalize(args, model, PLACEHOLDER_STEPS)
        except ValueError:   # the mismatches, raised together at its end (after every fill): the known ones count
            if not hf.mismatches:
                raise
        out["mismatches"] = [m[2:] for m in hf.mismatches if keep(m)]
        if out["mismatches"]:
            raise ValueError("Please correct the following DeepSpeed config values that mismatch TrainingArguments "
                             "values: " + " ".join(f"- {m}" for m in out["mismatches"]))
        out["step"] = "prepare"
        # accelerate 1.15 _prepare_deepspeed, config part (no dataloader reaches it: the Trainer filled the micro
        # batch in step 1); the accelerator's accumulation is the Trainer's, and DeepSpeed's value wins
        micro = plugin.get_value("train_micro_batch_size_per_gpu")
        plugin.fill_match("gradient_accumulation_steps", must_match=False,
                          gradient_accumulation_steps=args.gradient_accumulation_steps)
        accum = plugin.get_value("gradient_accumulation_steps")
        # what _prepare_deepspeed passes to deepspeed_config_process for the Trainer's run (accelerate 1.15,
        # accelerator.py 2223-2353): clipping and the gather flag, the batch keys once a micro batch is known, the
        # hidden-size buckets, a config-defined optimizer's and scheduler's values
        kwargs: dict[str, Any] = {"gradient_clipping": args.max_grad_norm,
                                  "zero_optimization.stage3_gather_16bit_weights_on_model_save": False}
        if isinstance(micro, int):
            kwargs.update({"train_micro_batch_size_per_gpu": micro,
                           "train_batch_size": micro * (accum if isinstance(accum, int) else 1) * world})
        kwargs.update({"zero_optimization.reduce_bucket_size": hidden * hidden,
                       "zero_optimization.stage3_prefetch_bucket_size": int(0.9 * hidden * hidden),
                       "zero_optimization.stage3_param_persistence_threshold": 10 * hidden,
                       "optimizer.params.lr": args.learning_rate, "optimizer.params.weight_decay": args.weight_decay,
                       "scheduler.params.warmup_min_lr": 0, "scheduler.params.warmup_max_lr": args.learning_rate,
                       "scheduler.params.warmup_num_steps": 1,
                       "scheduler.params.total_num_steps": PLACEHOLDER_STEPS})
        # an "auto" nobody fills: deepspeed_config_process raises for the first; the evidence names them all
        out["unfilled_auto"] = [k for k in _auto_leaves(plugin.deepspeed_config) if k not in kwargs]
        plugin.deepspeed_config_process(must_match=False, **kwargs)
        out["step"] = "initialize"
        final = copy.deepcopy(plugin.deepspeed_config)
        ds_comm.get_rank = lambda *a, **k: 0            # this child is rank 0 of a job of `world` ranks
        ds_comm.get_world_size = lambda *a, **k: world
        ds = DeepSpeedConfig(final, mpu=None)
        out["engine"] = {"micro_batch": ds.train_micro_batch_size_per_gpu,
                         "gradient_accumulation_steps": ds.gradient_accumulation_steps,
                         "train_batch_size": ds.train_batch_size, "world_size": ds.world_size,
                         "bf16": bool(ds.bfloat16_config.enabled), "fp16": bool(ds.float16_config.enabled),
                         "stage": int(ds.zero_optimization_stage)}
        out["trainer"] = {"per_device_train_batch_size": args.per_device_train_batch_size,
                          "gradient_accumulation_steps": args.gradient_accumulation_steps,
                          "mixed_precision": args.mixed_precision}
        out["step"] = "done"
    except Exception as exc:  # noqa: BLE001 - the library's refusal is the fact
        text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
        out["error"] = f"{type(exc).__name__}: {text}"[:1200]
        out["where"] = STEPS.get(out["step"], out["step"])
    return out


def main() -> int:
    req = json.loads(sys.stdin.read())
    result = run_chain(req)
    sys.stdout.write("\n" + json.dumps(result, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
