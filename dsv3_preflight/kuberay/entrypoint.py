"""What a RayJob's entrypoint and environment say about the Ray Train run: its storage path and its ScalingConfig.

Only what is written in the manifest is read: the entrypoint's command line (flags such as ``--storage-path``,
``--num-workers``, ``--use-gpu``; keyword arguments of ``RunConfig(...)``/``ScalingConfig(...)`` when the entrypoint
is ``python -c``), and the variables of the runtime environment (``runtimeEnvYAML: env_vars``) and of the head's
Ray container (where the entrypoint runs). A value set inside the training script is not visible here: each
reading says where it came from, and what could not be inferred is listed instead of guessed.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import TypedDict, TypeVar

from .manifest import RayManifest, entrypoint, ray_container

T = TypeVar("T")

#: where Ray Train V2 persists when RunConfig names no storage_path (ray.train.constants.DEFAULT_STORAGE_PATH)
DEFAULT_STORAGE_PATH = "~/ray_results"
#: the home directory of the rayproject/ray images, which ``~`` expands to in their pods
RAY_IMAGE_HOME = "/home/ray"

STORAGE_FLAGS = ("--storage-path", "--storage_path")
NUM_WORKERS_FLAGS = ("--num-workers", "--num_workers")
USE_GPU_FLAGS = ("--use-gpu", "--use_gpu")
GPUS_PER_WORKER_FLAGS = ("--gpus-per-worker", "--gpus_per_worker", "--num-gpus-per-worker", "--num_gpus_per_worker")
NUM_WORKERS_ENV, USE_GPU_ENV, GPUS_PER_WORKER_ENV = "NUM_WORKERS", "USE_GPU", "GPUS_PER_WORKER"
TRUE, FALSE = frozenset({"true", "1", "yes", "y", "on"}), frozenset({"false", "0", "no", "n", "off"})


class Environment(TypedDict):
    values: dict[str, str]        # the variables the entrypoint sees, where the manifest states them
    sources: dict[str, str]       # variable -> "runtimeEnvYAML" or "head container <name>"
    hidden: list[str]             # envFrom configMaps/secrets and valueFrom variables: not visible here


class StorageClaim(TypedDict):
    path: str
    source: str       # where the lint read it
    default: bool     # Ray Train's default, because TorchTrainer is named and no storage path is


class ScalingClaim(TypedDict):
    num_workers: int | None
    use_gpu: bool | None
    gpus_per_worker: float | None
    sources: dict[str, str]       # field -> where it was read
    unknown: list[str]            # fields not stated in the manifest


def environment(manifest: RayManifest) -> Environment:
    """The variables the entrypoint runs with, as far as the manifest states them (the runtime env wins)."""
    values: dict[str, str] = {}
    sources: dict[str, str] = {}
    hidden: list[str] = []
    head = next((g for g in manifest["groups"] if g["role"] == "head"), None)
    container = ray_container(head) if head else None
    if container:
        for name, value in container["env"].items():
            if value is None:
                hidden.append(f"{name} (valueFrom, head container {container['name']})")
            else:
                values[name], sources[name] = value, f"head container {container['name']}"
        hidden += [f"envFrom {ref} (head container {container['name']})" for ref in container["env_from"]]
    job = manifest["job"]
    for name, value in (job["runtime_env_vars"] if job else {}).items():
        values[name], sources[name] = value, "runtimeEnvYAML env_vars"
    return Environment(values=values, sources=sources, hidden=hidden)


def _expand(word: str, env: Environment) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: env["values"].get(m.group(1) or m.group(2), m.group(0)), word)


def words(text: str, env: Environment) -> list[str]:
    """The entrypoint's words, with the variables the manifest states expanded (as the shell would)."""
    try:
        split = shlex.split(text, comments=False, posix=True)
    except ValueError:
        split = text.split()
    return [_expand(w, env) for w in split]


def flag_value(argv: list[str], flags: tuple[str, ...]) -> str | None:
    """The value of ``--flag VALUE`` or ``--flag=VALUE`` (the last one given); "" for a bare flag."""
    found = None
    for i, word in enumerate(argv):
        name, eq, value = word.partition("=")
        if name not in flags:
            continue
        if eq:
            found = value
        elif i + 1 < len(argv) and not argv[i + 1].startswith("-"):
            found = argv[i + 1]
        else:
            found = ""
    return found


def _call_kwargs(text: str, call: str) -> dict[str, str]:
    """Literal keyword arguments of ``call(...)`` written in ``text`` (a ``python -c`` entrypoint)."""
    out: dict[str, str] = {}
    for match in re.finditer(rf"\b{call}\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)", text):
        for key, value in re.findall(r"(\w+)\s*=\s*(\{[^{}]*\}|\"[^\"]*\"|'[^']*'|[\w.]+)", match.group(1)):
            out[key] = value.strip("\"'")
    return out


def storage_claim(manifest: RayManifest, env: Environment) -> StorageClaim | None:
    """The storage path the entrypoint states (flag, RunConfig keyword, a *STORAGE_PATH variable), Ray Train's
    default when the entrypoint names TorchTrainer and no path, else None (not stated in the manifest)."""
    entry = entrypoint(manifest)
    argv = words(entry, env)
    value = flag_value(argv, STORAGE_FLAGS)
    if value:
        return StorageClaim(path=value, source=f"entrypoint {next(f for f in STORAGE_FLAGS if f in entry)}",
                            default=False)
    kwargs = _call_kwargs(_expand(entry, env), "RunConfig")
    if kwargs.get("storage_path"):
        return StorageClaim(path=kwargs["storage_path"], source="entrypoint RunConfig(storage_path=...)", default=False)
    for name in sorted(env["values"]):
        if name.endswith("STORAGE_PATH") and env["values"][name]:
            return StorageClaim(path=env["values"][name], source=f"env {name} ({env['sources'][name]})", default=False)
    if "TorchTrainer" in entry:
        return StorageClaim(path=DEFAULT_STORAGE_PATH, default=True,
                            source="Ray Train's default: the entrypoint names TorchTrainer and no storage path")
    return None


def _bool_word(value: str | None) -> bool | None:
    if value is None:
        return None
    word = value.strip().lower()
    return True if word == "" or word in TRUE else False if word in FALSE else None


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def _count(value: str | None) -> int | None:
    return int(value) if value is not None and re.fullmatch(r"\d+", value.strip()) else None


def scaling_claim(manifest: RayManifest, env: Environment) -> ScalingClaim:
    """num_workers, use_gpu and GPUs per worker as the entrypoint's flags, a ``ScalingConfig(...)`` written in it,
    or the variables NUM_WORKERS / USE_GPU / GPUS_PER_WORKER state them."""
    entry = entrypoint(manifest)
    argv = words(entry, env)
    kwargs = _call_kwargs(_expand(entry, env), "ScalingConfig")
    sources: dict[str, str] = {}

    def read(field: str, flags: tuple[str, ...], var: str,
             parse: Callable[[str | None], T | None]) -> T | None:  # the first source that states it
        candidates = [(flag_value(argv, flags), f"entrypoint {'/'.join(flags[:2])}"),
                      (kwargs.get(field), f"entrypoint ScalingConfig({field}=...)"),
                      (env["values"].get(var), f"env {var} ({env['sources'].get(var, '')})")]
        for raw, where in candidates:
            value = parse(raw)
            if value is not None:
                sources[field] = where
                return value
        return None

    num = read("num_workers", NUM_WORKERS_FLAGS, NUM_WORKERS_ENV, _count)
    use_gpu = read("use_gpu", USE_GPU_FLAGS, USE_GPU_ENV, _bool_word)
    per = read("gpus_per_worker", GPUS_PER_WORKER_FLAGS, GPUS_PER_WORKER_ENV, _number)
    if per is None and kwargs.get("resources_per_worker"):
        match = re.search(r"[\"']GPU[\"']\s*:\s*([\d.]+)", kwargs["resources_per_worker"])
        if match:
            per, sources["gpus_per_worker"] = float(match.group(1)), "entrypoint ScalingConfig(resources_per_worker=...)"
    unknown = [f for f, v in (("num_workers", num), ("use_gpu", use_gpu), ("gpus_per_worker", per)) if v is None]
    return ScalingClaim(num_workers=num, use_gpu=use_gpu, gpus_per_worker=per, sources=sources, unknown=unknown)


def workers_gpus(claim: ScalingClaim) -> float | None:
    """GPUs one Ray Train worker asks for: resources_per_worker's GPU, else 1 with use_gpu, 0 without."""
    if claim["gpus_per_worker"] is not None:
        return claim["gpus_per_worker"]
    if claim["use_gpu"] is None:
        return None
    return 1.0 if claim["use_gpu"] else 0.0
