"""Facts for the LoRA checks: the DeepSpeed config as parsed JSON, the model's targetable modules (from its
local config.json, built on the meta device), and the adapters already saved in the output directory with, when
there are some, the model's module widths to compare them with.

Every file is read through :mod:`dsv3_preflight.inputs` (regular files only, bounded in size and
nesting): a missing file, a FIFO or a directory where a config should be, or bytes that are not JSON,
become the fact's ``error`` naming the file, which the check turns into a FAIL; the run goes on.
"""
from __future__ import annotations

import json
import os
import re
import threading
from pathlib import Path
from typing import Any

from dsv3_preflight import factcache
from dsv3_preflight.inputs import InputError, read_json, read_text
from dsv3_preflight.registry import probe

JSON_CAP = 4 * 1024 * 1024
#: the newest adapters of the output directory are read (a resumed run starts from the newest)
MAX_EXISTING_ADAPTERS = 8
#: what the model's facts depend on beside the question (factcache.py): the libraries that build the model and
#: apply peft, and this package's code that asks them
MODEL_LIBS = ("torch", "transformers", "peft", "accelerate", "safetensors", "huggingface-hub", "tokenizers")
MODEL_CODE = ("lora",)
#: the Trainer's set-up (trainer_chain.py) and DeepSpeed's own config model
TRAINER_LIBS = (*MODEL_LIBS, "deepspeed", "pydantic")
#: the variables the Trainer's set-up may read in its child (accelerate's own, the devices, the ranks, DeepSpeed's)
TRAINER_ENV = ("ACCELERATE_", "CUDA_", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "RANK", "DS_", "DEEPSPEED_",
               "TRANSFORMERS_", "PYTORCH_")


@probe("lora_deepspeed_config", needs=["profile"], timeout=60)
def lora_deepspeed_config(profile) -> dict[str, Any]:
    """The DeepSpeed JSON config named by the profile, parsed (or why it cannot be)."""
    raw = profile.deepspeed_config
    if not raw:
        return {"configured": False}
    path = Path(os.path.abspath(Path(raw).expanduser()))  # the fix names the file wherever it is pasted
    facts: dict[str, Any] = {"configured": True, "path": str(path)}
    try:
        config = read_json(path, what="DeepSpeed config", max_bytes=JSON_CAP)
    except InputError as exc:
        return {**facts, "error": str(exc)}
    if not isinstance(config, dict):
        return {**facts, "error": f"DeepSpeed config {path}: holds a JSON {type(config).__name__}, not an object"}
    facts["config"] = config
    zero = config.get("zero_optimization")
    facts["deepspeed_check"] = factcache.remembered("deepspeed_zero_config", {"zero_optimization": zero},
                                                    lambda: _deepspeed_model_check(config), dists=TRAINER_LIBS,
                                                    code=MODEL_CODE)
    facts["trainer_save"] = trainer_save_path()
    facts["trainer_chain"] = trainer_chain(config, profile)
    return facts


#: seconds the child that runs the Trainer's own DeepSpeed set-up may take (importing transformers is most of it)
TRAINER_CHAIN_TIMEOUT_S = 45.0


def trainer_chain(config: dict[str, Any], profile: Any) -> dict[str, Any]:
    """What the installed transformers, accelerate and DeepSpeed make of ``config`` for this run, step by step
    (:mod:`.trainer_chain`, in a child process with this node's environment), given the
    trainer arguments the profile knows and the model's hidden size when its config.json is at hand."""
    hidden = None
    if profile.model_path:
        try:
            raw = _model_config(profile.model_path)
            hidden = raw.get("hidden_size") if isinstance(raw, dict) else None
        except InputError:
            pass
    request = {"config": config, "world_size": profile.effective_world_size,
               "micro_batch": profile.per_device_train_batch_size, "grad_accum": profile.gradient_accumulation_steps,
               "mixed_precision": profile.mixed_precision, "hidden_size": hidden}
    # once per request and environment in this process (the child costs seconds; accelerate reads ACCELERATE_*)
    key = json.dumps([request, sorted((k, v) for k, v in os.environ.items() if k.startswith("ACCELERATE_"))],
                     sort_keys=True, default=str)
    with _CHAIN_LOCK:
        if key in _CHAIN:
            return dict(_CHAIN[key])
    answer = factcache.remembered("trainer_chain", request, lambda: _run_trainer_chain(request), dists=TRAINER_LIBS,
                                  code=MODEL_CODE, env_prefixes=TRAINER_ENV, keep=_chain_answered)
    if _chain_answered(answer):   # a timeout or a dead child is tried again next time
        with _CHAIN_LOCK:
            _CHAIN[key] = answer
    return dict(answer)


def _chain_answered(answer: dict[str, Any]) -> bool:
    """The Trainer's set-up gave an answer (available or not), not a timeout or a child that died."""
    return answer.get("available") is not None


_CHAIN: dict[str, dict[str, Any]] = {}
_CHAIN_LOCK = threading.Lock()


def _run_trainer_chain(request: dict[str, Any]) -> dict[str, Any]:
    import subprocess
    import sys

    from dsv3_preflight import signals

    argv = [sys.executable, "-m", "dsv3_preflight.lora.probes.trainer_chain"]
    try:
        done = signals.run(argv, timeout=TRAINER_CHAIN_TIMEOUT_S, input=json.dumps(request), capture_output=True,
                           text=True)
    except subprocess.TimeoutExpired:
        return {"available": None, "timed_out": True,
                "reason": f"the Trainer's set-up did not finish in {TRAINER_CHAIN_TIMEOUT_S:.0f} s"}
    except OSError as exc:
        return {"available": None, "reason": f"cannot start {sys.executable}: {exc}"}
    last = (done.stdout or "").strip().splitlines()[-1:] or [""]
    try:
        answer = json.loads(last[0])
    except ValueError:
        tail = " ".join((done.stderr or "").strip().splitlines()[-3:])[:400]
        return {"available": None, "reason": f"the Trainer's set-up exited {done.returncode} with no answer: {tail}"}
    return answer if isinstance(answer, dict) else {"available": None, "reason": "the Trainer's set-up answered "
                                                                                   "no object"}


#: transformers' Trainer.save_model, under ZeRO-3 with a PEFT model, gathers the trainable weights itself
#: (huggingface/transformers#27825, 4.37+) when DeepSpeed's save_checkpoint takes exclude_frozen_parameters
#: (deepspeedai/DeepSpeed#3953): then the gather flag does not decide what the Trainer's saves hold
_TRAINER_GATHERS = re.compile(re.escape("_zero3_consolidated_16bit_state_dict(exclude_frozen_parameters=True)"))
_DEEPSPEED_EXCLUDES = re.compile(r"def save_checkpoint\([^)]*exclude_frozen_parameters")


def trainer_save_path() -> dict[str, Any]:
    """Whether the Trainer installed here saves a PEFT model's weights whole under ZeRO-3 without the gather flag:
    read from the installed sources of transformers (trainer.py) and DeepSpeed (runtime/engine.py), not imported
    (``gathers``: True, False, or None with the reason when either cannot be read)."""
    import importlib.metadata
    import importlib.util

    found: dict[str, Any] = {}
    for dist, module, rel, needle in (("transformers", "transformers", "trainer.py", _TRAINER_GATHERS),
                                      ("deepspeed", "deepspeed", "runtime/engine.py", _DEEPSPEED_EXCLUDES)):
        try:
            spec = importlib.util.find_spec(module)
            version = importlib.metadata.version(dist)
        except (ImportError, ValueError, importlib.metadata.PackageNotFoundError):
            spec, version = None, None
        if spec is None or not spec.submodule_search_locations:
            return {"gathers": None, "reason": f"{dist} is not installed here", **found}
        path = Path(list(spec.submodule_search_locations)[0]) / rel
        try:
            text = read_text(path, what=f"{dist} source", max_bytes=8 * 1024 * 1024)
        except InputError as exc:
            return {"gathers": None, "reason": str(exc), **found}
        m = needle.search(text)
        found[dist] = {"version": version, "file": str(path), "line": text.count("\n", 0, m.start()) + 1 if m else None,
                       "has_it": m is not None}
    return {"gathers": all(f["has_it"] for f in found.values()), **found}


def _deepspeed_model_check(config: dict[str, Any]) -> dict[str, Any]:
    """Validate the zero_optimization section with DeepSpeed's own config model when DeepSpeed is installed."""
    zero = config.get("zero_optimization") or {}
    if not isinstance(zero, dict):  # the lint reports it; the model cannot take it
        return {"available": None, "reason": f"zero_optimization is a {type(zero).__name__}, not an object"}
    try:
        from deepspeed.runtime.zero.config import DeepSpeedZeroConfig  # type: ignore
    except Exception as exc:  # noqa: BLE001 - not installed here: the lint stands alone
        return {"available": False, "reason": f"deepspeed not importable ({type(exc).__name__})"}
    zero = {k: v for k, v in zero.items() if v != "auto"}
    try:
        parsed = DeepSpeedZeroConfig(**zero)
    except Exception as exc:  # noqa: BLE001 - the model's complaint is the fact
        return {"available": True, "error": f"{type(exc).__name__}: {str(exc)[:500]}"}
    # what DeepSpeed itself makes of the offloads, defaults included (pin_memory's default changed between releases)
    offload = {}
    for part in ("offload_optimizer", "offload_param"):
        sec = getattr(parsed, part, None)
        if sec is not None:
            device = getattr(sec, "device", None)
            offload[part] = {"device": str(getattr(device, "value", device)).lower(),
                             "pin_memory": bool(getattr(sec, "pin_memory", False))}
    return {"available": True, "error": None, "offload": offload}


def _model_paths(model_path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """(the model path, its config.json): the path is a model directory or the config file itself."""
    path = Path(model_path).expanduser()
    return path, (path / "config.json" if path.is_dir() else path)


def _model_config(model_path: str | os.PathLike[str]) -> Any:
    """The model's config.json, parsed (:class:`InputError` when it cannot be)."""
    return read_json(_model_paths(model_path)[1], what="model config", max_bytes=JSON_CAP)


_MODEL_FACTS: dict[tuple[Any, ...], dict[str, Any]] = {}
_MODEL_FACTS_LOCK = threading.Lock()


def model_facts(model_path: str | os.PathLike[str]) -> dict[str, Any]:
    """:func:`read_model_facts`, once per model config in this process: ``lora.targets`` and ``lora.adapter_base``
    both need the model built on the meta device, and their probes run at the same time (the second waits for the
    first build). Keyed by the config file's identity and change time, so an edited config.json is read again."""
    path, cfg_file = _model_paths(model_path)
    try:
        st = cfg_file.stat()
    except OSError:
        return read_model_facts(model_path)   # says why (no such file, ...); nothing to remember
    key = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    with _MODEL_FACTS_LOCK:
        if key not in _MODEL_FACTS:
            _MODEL_FACTS[key] = read_model_facts(model_path)
        return dict(_MODEL_FACTS[key])


def read_model_facts(model_path: str | os.PathLike[str]) -> dict[str, Any]:
    """Targetable modules of the model whose config.json is in ``model_path`` (or is ``model_path``)."""
    from .model import model_modules

    path, cfg_file = _model_paths(model_path)
    facts: dict[str, Any] = {"path": str(path), "config_file": str(cfg_file)}
    if not os.path.lexists(path):
        return {**facts, "error": f"model path {path}: does not exist"}
    try:
        raw = _model_config(model_path)
    except InputError as exc:
        why = str(exc)
        if why.endswith("no such file"):
            why = f"model config {cfg_file}: no such file (the model directory needs its config.json)"
        return {**facts, "error": why}
    found = factcache.remembered("model_modules", raw, lambda: model_modules(raw), dists=MODEL_LIBS, code=MODEL_CODE)
    if found.get("error"):
        return {**facts, **found, "error": f"model config {cfg_file}: {found['error']}"}
    return {**facts, **found}


def peft_facts(model_path: str | os.PathLike[str], targets: list[str], rank: int,
               all_linear_as_string: bool = True, dropout: float = 0.0) -> dict[str, Any]:
    """What peft does with ``targets`` on the model of ``model_path`` (:func:`.model.peft_targets`)."""
    from .model import peft_targets

    try:
        raw = _model_config(model_path)
    except InputError as exc:
        return {"available": False, "reason": str(exc)}
    question = {"config": raw, "targets": targets, "rank": rank, "all_linear_as_string": all_linear_as_string,
                "dropout": dropout}
    return factcache.remembered("peft_targets", question,
                                lambda: peft_targets(raw, targets, rank, all_linear_as_string, dropout),
                                dists=MODEL_LIBS, code=MODEL_CODE)


@probe("lora_model_modules", needs=["profile"], timeout=240)
def lora_model_modules(profile) -> dict[str, Any]:
    """LoRA-targetable modules of the profile's model (config.json only, meta device) with full-size counts, and
    what peft itself adapts for the profile's lora_targets at its lora_rank."""
    from ..targets import DEFAULT_RANK

    if not profile.model_path:
        return {"configured": False}
    if not profile.lora_targets:
        return {"configured": True, "skipped": "the profile names no lora_targets", "path": profile.model_path}
    facts = {"configured": True, **model_facts(profile.model_path)}
    if not facts.get("error"):
        # a training command's lora_target is LLaMA-Factory's: a list, where peft's "all-linear" is just a name
        from_trainer = profile.sources.get("lora_targets", "").startswith("training command")
        facts["peft"] = peft_facts(profile.model_path, list(profile.lora_targets), profile.lora_rank or DEFAULT_RANK,
                                   all_linear_as_string=not from_trainer, dropout=profile.lora_dropout or 0.0)
    return facts


@probe("saved_adapters", needs=["output_dir"], timeout=120)
def saved_adapters(output_dir) -> dict[str, Any]:
    """The facts of the newest adapters already in the output dir (a resumed run's saves), header only."""
    if not output_dir.get("configured") or not output_dir.get("is_dir"):
        return {"scanned": False, "adapters": [], "reason": "no output directory to scan"}
    from .adapter_files import find_adapters
    from .scan import adapter_facts

    found, _, unreadable = find_adapters([output_dir["path"]])
    newest = found[-MAX_EXISTING_ADAPTERS:]
    return {"scanned": True, "total": len(found), "adapters": [adapter_facts(f) for f in newest],
            "unreadable": unreadable}


@probe("lora_base_model", needs=["profile", "saved_adapters"], timeout=240)
def lora_base_model(profile, saved_adapters) -> dict[str, Any]:
    """The profile model's module widths, when the output dir holds adapters whose LoRA matrices can be compared
    with them (built on the meta device from config.json, as for lora.targets)."""
    if not profile.model_path:
        return {"configured": False}
    weighed = [a for a in saved_adapters.get("adapters") or [] if ((a.get("header") or a.get("pickle") or {}).get("tensors"))]
    if not weighed:
        return {"configured": True, "needed": False, "path": profile.model_path}
    facts = {"configured": True, "needed": True, **model_facts(profile.model_path)}
    if not facts.get("error"):
        # what peft's load does to each adapter's keys first (transformers 5's MoE conversion of transformers 4 saves)
        from .model import peft_converted_tensors

        raw = _model_config(profile.model_path)
        facts["conversions"] = {}
        done: dict[str, dict[str, Any]] = {}   # a run's checkpoints share their layout and config: convert it once
        for a in weighed:
            config = a.get("config") if isinstance(a.get("config"), dict) else None
            tensors = (a.get("header") or a.get("pickle"))["tensors"]
            key = json.dumps([config, sorted((k, list(v[1])) for k, v in tensors.items())], sort_keys=True, default=str)
            if key not in done:
                question = {"config": raw, "adapter_config": config, "tensors": tensors}
                done[key] = factcache.remembered(
                    "peft_converted_tensors", question,
                    lambda config=config, tensors=tensors: peft_converted_tensors(raw, config, tensors),
                    dists=MODEL_LIBS, code=MODEL_CODE)
            conv = done[key]
            if conv.get("converted") or conv.get("error"):
                facts["conversions"][a.get("path", "")] = conv
    return facts
