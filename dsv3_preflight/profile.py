"""The profile: what the cluster should look like and where things are, with the source of every value.

Precedence, highest first: CLI flags > the environment variables users already export
(MASTER_ADDR, NNODES, …) > a TOML file (``--config``) > the named built-in profile > defaults.
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEFAULT_MASTER_PORT = 39500


class ConfigError(Exception):
    """A profile value is bad; the message names its source and key."""


def _int(lo: int | None = None, hi: int | None = None) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool):
            raise ValueError("expected an integer, got a boolean")
        if isinstance(value, str):
            value = value.strip()
            if not re.fullmatch(r"[+-]?\d+", value):
                raise ValueError(f"expected an integer, got {value!r}")
        elif not isinstance(value, int):
            raise ValueError(f"expected an integer, got {type(value).__name__}")
        number = int(value)
        if lo is not None and number < lo:
            raise ValueError(f"must be >= {lo}, got {number}")
        if hi is not None and number > hi:
            raise ValueError(f"must be <= {hi}, got {number}")
        return number

    return parse


def _float(lo: float = 0.0) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        if isinstance(value, bool):
            raise ValueError("expected a number, got a boolean")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"expected a number, got {value!r}") from None
        if number != number or number in (float("inf"), float("-inf")):
            raise ValueError(f"expected a finite number, got {value!r}")
        if number < lo:
            raise ValueError(f"must be >= {lo:g}, got {number:g}")
        return number

    return parse


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__}")
    return value.strip()


def _host(value: Any) -> str:
    value = _str(value)
    if not value:
        raise ValueError("must not be empty")
    if value.startswith("[") and value.endswith("]"):
        value = value[1:-1]
    try:
        ipaddress.ip_address(value)
        return value
    except ValueError:
        pass
    if len(value) > 253 or not re.fullmatch(r"[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?", value):
        raise ValueError(f"{value!r} is neither an IP address nor a valid host name")
    return value


def _list(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, (list, tuple)):
        items = [_str(v) for v in value]
    else:
        raise ValueError(f"expected a list or a comma-separated string, got {type(value).__name__}")
    items = [i for i in items if i]
    if not items:
        raise ValueError("must name at least one entry")
    return tuple(items)


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        value = _str(value).lower()
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}, got {value!r}")
        return value

    return parse


#: the words a boolean takes (a trainer flag's value, as HfArgumentParser's string_to_bool reads it)
TRUE_WORDS = frozenset({"true", "yes", "y", "t", "1", "on"})
FALSE_WORDS = frozenset({"false", "no", "n", "f", "0", "off"})


def _bool(value: Any) -> bool:
    """true/false (a TOML or JSON boolean, or the words a trainer flag takes: true, yes, 1, false, no, 0)."""
    if isinstance(value, bool):
        return value
    word = _str(value).lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError(f"expected true or false, got {value!r}")


def _path(value: Any) -> str:
    value = _str(value)
    if not value:
        raise ValueError("must not be empty")
    return value


@dataclass(frozen=True)
class Field:
    name: str
    parse: Callable[[Any], Any]
    default: Any
    help: str
    env: tuple[str, ...] = ()
    metavar: str | None = None


FIELDS: tuple[Field, ...] = (
    Field("nnodes", _int(1, 4096), 3, "number of nodes in the job", ("NNODES",)),
    Field("nproc_per_node", _int(1, 1024), 8, "processes (GPUs) per node", ("NPROC_PER_NODE", "LOCAL_WORLD_SIZE")),
    Field("node_rank", _int(0, 4095), 0, "this node's rank (0 holds MASTER_ADDR)", ("NODE_RANK",)),
    Field("world_size", _int(1, 1 << 20), None, "total ranks; nnodes × nproc_per_node when unset", ("WORLD_SIZE",)),
    Field("master_addr", _host, "127.0.0.1", "rendezvous host (the head node)", ("MASTER_ADDR",)),
    Field("master_port", _int(1, 65535), DEFAULT_MASTER_PORT, "rendezvous TCP port", ("MASTER_PORT",)),
    Field("cuda_visible_devices", _str, None, "GPUs the job may use (indices or UUIDs)", ("CUDA_VISIBLE_DEVICES",)),
    Field("gpus_per_node", _int(0, 1024), 8, "GPUs expected on each node (0: a CPU-only job)"),
    Field("gpu_models", _list, ("A100", "H100", "H200", "H800", "A800"), "accepted GPU model names (substrings)"),
    Field("backend", _choice("nccl", "gloo"), "nccl", "torch.distributed backend for the collective probe"),
    Field("model_path", _path, None, "local model directory (config.json)", ("MODEL_PATH",)),
    Field("output_dir", _path, None, "training/adapter output directory", ("OUTPUT_DIR",)),
    Field("checkpoint_dir", _path, None, "checkpoint directory (node-local); output_dir when unset"),
    Field("deepspeed_config", _path, None, "DeepSpeed JSON config", ("DEEPSPEED_CONFIG",)),
    Field("kuberay_manifest", _path, None, "a KubeRay RayJob/RayCluster YAML for the kuberay.* checks (what "
          "`dsv3-preflight lint FILE` judges)", ("DSV3_PREFLIGHT_KUBERAY_MANIFEST",), "FILE"),
    Field("lora_targets", _list, None, "LoRA target modules (comma-separated)", (), "A,B"),
    Field("lora_rank", _int(1, 65536), None, "LoRA rank r"),
    Field("lora_dropout", _float(0.0), None, "LoRA dropout (peft's and LLaMA-Factory's default 0)"),
    Field("lora_unmatched_targets", _choice("fail", "warn"), "fail",
          "a lora_target naming no module of the model while others match: fail (the run would adapt less than "
          "asked) or warn (accept it)", ("DSV3_PREFLIGHT_LORA_UNMATCHED_TARGETS",), "fail|warn"),
    Field("trust_remote_code", _bool, None, "the trainer's trust_remote_code: true builds a model whose config.json "
          "has an auto_map with the model repo's own code (DeepSeek-V3's modeling_deepseek.py), not transformers'",
          (), "true|false"),
    Field("per_device_train_batch_size", _int(1, 1 << 20), None,
          "the trainer's --per_device_train_batch_size (checked against the DeepSpeed config)"),
    Field("gradient_accumulation_steps", _int(1, 1 << 20), None,
          "the trainer's --gradient_accumulation_steps (checked against the DeepSpeed config)"),
    Field("mixed_precision", _choice("bf16", "fp16", "no"), None,
          "the trainer's precision: bf16 for --bf16, fp16 for --fp16, no for neither (checked against the DeepSpeed "
          "config)"),
    Field("shm_min_gib", _float(0.0), 16.0, "minimum /dev/shm size in GiB (containers used --shm-size=16g)"),
    Field("probe_timeout", _float(0.1), 10.0, "seconds a probe may take"),
    Field("collective_timeout", _float(1.0), 60.0, "seconds the collective probe may take"),
    Field("run_timeout", _float(1.0), 300.0, "seconds the whole run may take"),
    Field("min_busbw_gbps", _float(0.0), None, "minimum all_reduce bus bandwidth in GB/s"),
    # --probe=pairs (dist.pairs): every pair of nodes as a 2-rank process group
    Field("pairs_timeout", _float(1.0), 30.0, "seconds each pair of --probe=pairs may take (past it: a finding)"),
    Field("pairs_iters", _int(1, 100000), 20,
          "all_reduces per pair: the latency is the p50 of this many small ones; as many for the bandwidth"),
    Field("pairs_busbw_bytes", _int(4, 1 << 34), 16 * 1024 * 1024, "message size (bytes) of the pairs' busbw"),
    Field("pairs_latency_ratio", _float(1.0), 3.0,
          "a pair is slow past this many times the median p50 latency of the pairs without its nodes"),
    Field("pairs_busbw_ratio", _float(0.0), 0.5,
          "a pair is slow below this fraction of the median busbw of the pairs without its nodes"),
    Field("torchrun", _str, None, "the command that starts torchrun (shell words): launch runs it, and "
          "env.torchrun_python compares the Python it runs with this one; unset: this interpreter's "
          "`-m torch.distributed.run`", (), "CMD"),
)
FIELD_BY_NAME = {f.name: f for f in FIELDS}

#: Built-in profiles: a name and the defaults it changes.
BUILTIN_PROFILES: dict[str, dict[str, Any]] = {
    # This job: 3 nodes × 8 A100/H100, NCCL, rendezvous on 39500.
    "dsv3": {},
    # A GPU-less machine: one node, two processes, gloo. A healthy machine is all green under it.
    "cpu": {"nnodes": 1, "nproc_per_node": 2, "gpus_per_node": 0, "backend": "gloo", "shm_min_gib": 0.0},
}
DEFAULT_PROFILE = "dsv3"


@dataclass(frozen=True)
class Profile:
    """The resolved profile. Attribute access for values; ``sources`` says where each came from."""

    name: str
    values: Mapping[str, Any]
    sources: Mapping[str, str]

    def __getattr__(self, item: str) -> Any:
        values = object.__getattribute__(self, "values")
        if item in values:
            return values[item]
        raise AttributeError(item)

    @property
    def effective_world_size(self) -> int:
        return self.values["world_size"] or self.values["nnodes"] * self.values["nproc_per_node"]

    @property
    def expects_gpus(self) -> bool:
        return self.values["gpus_per_node"] > 0

    @property
    def multi_node(self) -> bool:
        return self.values["nnodes"] > 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "values": {k: list(v) if isinstance(v, tuple) else v for k, v in self.values.items()},
            "sources": dict(self.sources),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Profile:
        values = {}
        for field in FIELDS:
            value = data["values"].get(field.name, field.default)
            values[field.name] = tuple(value) if isinstance(value, list) else value
        return cls(data.get("name", DEFAULT_PROFILE), values, dict(data.get("sources", {})))

    def with_values(self, source: str, **changes: Any) -> Profile:
        """A copy with some values changed (parsed and validated like any other layer)."""
        values, sources = dict(self.values), dict(self.sources)
        for key, raw in changes.items():
            values[key] = _parse(FIELD_BY_NAME[key], raw, source)
            sources[key] = source
        return Profile(self.name, values, sources)


def _parse(field: Field, raw: Any, source: str) -> Any:
    try:
        return field.parse(raw)
    except ValueError as exc:
        raise ConfigError(f"{source}: {field.name}: {exc}") from None


def read_toml(path: str | Path) -> dict[str, Any]:
    """The --config TOML, read through the one bounded reader (a directory, a FIFO, /dev/zero, a binary or a
    huge file is a ConfigError naming it, at once: never a blocking read, never a crash)."""
    from .inputs import InputError
    from .inputs import read_toml as bounded_toml

    try:
        return bounded_toml(path, what="--config")
    except InputError as exc:
        raise ConfigError(str(exc)) from None


def resolve_profile(
    cli: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    config_path: str | Path | None = None,
    profile_name: str | None = None,
    training: Mapping[str, tuple[Any, str]] | None = None,
) -> Profile:
    """Resolve the profile from its layers; a bad value raises ConfigError naming source and key.

    ``training``: values `launch` read from the training command (field -> (value, where)); they win,
    since they are what will run."""
    cli = {k: v for k, v in (cli or {}).items() if v is not None}
    training = dict(training or {})
    environ = {} if environ is None else environ
    toml: dict[str, Any] = {}
    if config_path is not None:
        toml = read_toml(config_path)
    name = profile_name or toml.pop("profile", None) or DEFAULT_PROFILE
    name_source = "--profile" if profile_name else (f"{config_path} [profile]" if config_path and name != DEFAULT_PROFILE else "default")
    if not isinstance(name, str) or name not in BUILTIN_PROFILES:
        raise ConfigError(f"{name_source}: profile: unknown profile {name!r}; built-in profiles: {', '.join(BUILTIN_PROFILES)}")
    toml.pop("profile", None)
    unknown = sorted(set(toml) - set(FIELD_BY_NAME))
    if unknown:
        raise ConfigError(f"{config_path}: unknown key(s) {', '.join(unknown)}; known keys: {', '.join(FIELD_BY_NAME)}")

    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for field in FIELDS:
        raw, source = field.default, "default"
        if field.name in BUILTIN_PROFILES[name]:
            raw, source = BUILTIN_PROFILES[name][field.name], f"profile {name}"
        if field.name in toml:
            raw, source = toml[field.name], f"{config_path} [{field.name}]"
        for var in field.env:
            if environ.get(var, "").strip():
                raw, source = environ[var], f"env {var}"
                break
        if field.name in cli:
            raw, source = cli[field.name], f"--{field.name.replace('_', '-')}"
        if field.name in training:
            raw, where = training[field.name]
            source = f"training command {where}"
        values[field.name] = None if raw is None else _parse(field, raw, source)
        sources[field.name] = source
    profile = Profile(name, values, sources)
    if values["node_rank"] >= values["nnodes"]:
        raise ConfigError(
            f"{sources['node_rank']}: node_rank: {values['node_rank']} is out of range for nnodes={values['nnodes']} "
            f"({sources['nnodes']}); node ranks are 0..{values['nnodes'] - 1}"
        )
    return profile
