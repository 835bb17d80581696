"""The training command's own arguments as profile values: what the preflight must judge is what will run.

The users' launches pass the paths the LoRA checks need on the training command line, HF Trainer /
LLaMA-Factory style (``--deepspeed ds_z3.json --output_dir ... --lora_target ... --lora_rank 16
--per_device_train_batch_size 1 --gradient_accumulation_steps 1 --model_name_or_path /nfs/...``), or
in one YAML/JSON file given as an argument (``src/train.py examples/deepseek3_lora.yaml``, as
HfArgumentParser and LLaMA-Factory read it; flags after it override it). `launch` reads them so a
lora_target naming modules DeepSeek-V3 lacks, or a ZeRO-3 config that saves empty adapters, keeps the
gate closed without repeating every path in the profile.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsv3_preflight.profile import FALSE_WORDS, TRUE_WORDS

#: training argument -> profile field
KEYS: dict[str, str] = {
    "deepspeed": "deepspeed_config",
    "output_dir": "output_dir",
    "model_name_or_path": "model_path",
    "lora_target": "lora_targets",
    "lora_rank": "lora_rank",
    "lora_r": "lora_rank",
    "lora_dropout": "lora_dropout",
    "per_device_train_batch_size": "per_device_train_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "bf16": "mixed_precision",
    "fp16": "mixed_precision",
    "trust_remote_code": "trust_remote_code",
}
#: the trainer's boolean flags: ``--bf16`` alone is true (HfArgumentParser's nargs="?", const=True), or takes a value
BOOL_KEYS = {"bf16", "fp16"}
#: plain boolean flags, taken as true or false (``--trust_remote_code`` alone is true)
FLAG_KEYS = {"trust_remote_code"}
_TRUE, _FALSE = TRUE_WORDS, FALSE_WORDS
PATHS = {"deepspeed_config", "output_dir", "model_path"}
CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
CONFIG_CAP = 1024 * 1024  # a trainer config larger than this is not a trainer config


@dataclass
class TrainerValues:
    """Profile values taken from the training command, where each came from, and what was left aside."""

    values: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _looks_local(path: str) -> bool:
    """A model path the checks can read on this node; a hub id (org/name) is not one."""
    return path.startswith(("/", "./", "../", "~")) or os.path.isdir(path)


def _take(out: TrainerValues, key: str, value: Any, origin: str) -> None:
    name = KEYS[key]
    if value is None or (isinstance(value, str) and not value.strip()):
        return
    if key == "deepspeed" and (isinstance(value, dict) or str(value).lstrip().startswith("{")):
        out.notes.append(f"{origin}: the DeepSpeed config is inline JSON, not a file: lora.deepspeed_config does not read it")
        return
    if key == "model_name_or_path" and not _looks_local(str(value)):
        out.notes.append(f"{origin}: {value} is not a local directory (a hub id?): lora.targets needs --model-path DIR")
        return
    if key in BOOL_KEYS:   # --bf16 → bf16, --fp16 → fp16; an explicit false is "no" unless the other is true
        word = str(value).strip().lower()
        if word not in _TRUE | _FALSE:
            out.notes.append(f"{origin}: {value!r} is not a boolean: the trainer's precision is not known")
            return
        if word in _TRUE:
            value = key
        elif out.values.get(name) not in (None, "no", key):
            return   # --fp16 true --bf16 false: fp16
        else:
            value = "no"
    if key in FLAG_KEYS:
        word = str(value).strip().lower()
        if word not in _TRUE | _FALSE:
            out.notes.append(f"{origin}: {value!r} is not a boolean: {key} is not known")
            return
        value = "true" if word in _TRUE else "false"
    if key == "lora_target":  # "all" (every linear layer) is LLaMA-Factory's and lora.targets' too
        value = ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)
    if name in PATHS:
        # torchrun runs in this directory on every node (launch --all-nodes too): the checks, wherever
        # they run, judge the file the training will open
        value = os.path.abspath(os.path.expanduser(str(value)))
    out.values[name] = value if isinstance(value, (int, float, str)) else str(value)
    out.origins[name] = origin


def _read_config(path: str) -> tuple[Mapping[str, Any] | None, str | None]:
    from dsv3_preflight.inputs import InputError, read_json, read_yaml

    reader = read_json if path.endswith(".json") else read_yaml
    try:  # the one bounded reader: regular files only, size and nesting bounded, never a blocking read
        doc = reader(path, what="trainer config", max_bytes=CONFIG_CAP)
    except InputError as exc:  # a YAML/JSON syntax error: the training would fail on it too
        return None, exc.reason
    return (doc, None) if isinstance(doc, dict) else (None, None)


def trainer_values(training: Sequence[str]) -> TrainerValues:
    """The profile values the training command carries: a config file argument first, then its flags."""
    out = TrainerValues()
    args = list(training[1:]) if training and not training[0].startswith("-") else list(training)
    # HfArgumentParser and LLaMA-Factory read a config file given as the script's first argument; a .json
    # later on is a flag's value (--deepspeed ds.json), not a trainer config.
    if args and not args[0].startswith("-") and args[0].endswith(CONFIG_SUFFIXES) and os.path.isfile(args[0]):
        doc, why = _read_config(args[0])
        if why:
            out.notes.append(f"training config {args[0]}: {why}")
        for key in KEYS:
            if doc and key in doc:
                _take(out, key, doc[key], f"{args[0]} [{key}]")
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if not arg.startswith("--"):
            continue
        key, eq, value = arg[2:].partition("=")
        key = key.replace("-", "_")
        if key not in KEYS:
            continue
        if not eq and key in BOOL_KEYS | FLAG_KEYS:   # a bare flag is true; a following true/false is its value
            if i < len(args) and args[i].strip().lower() in _TRUE | _FALSE:
                value = args[i]
                i += 1
            else:
                value = "true"
        elif not eq:
            if i >= len(args) or args[i].startswith("--"):
                continue
            value = args[i]
            i += 1
        _take(out, key, value, f"--{key}")
    return out


def contradictions(trainer: TrainerValues, profile: Any) -> list[str]:
    """Values the user set elsewhere (CLI, environment, TOML) that the training command contradicts."""
    found = []
    for name, value in trainer.values.items():
        source = profile.sources.get(name, "default")
        theirs = profile.values.get(name)
        if source == "default" or source.startswith("profile ") or theirs is None:
            continue
        if isinstance(theirs, bool):   # trust_remote_code: the training command's words are true/false
            mine = "true" if theirs else "false"
        else:
            mine = ",".join(theirs) if isinstance(theirs, (list, tuple)) else str(theirs)
        same = (os.path.abspath(os.path.expanduser(mine)) == value) if name in PATHS else mine == str(value)
        if not same:
            found.append(f"the training command has {trainer.origins[name]} {value} but {source} says {mine}: "
                         f"the preflight checks the training command's {name}")
    return found
