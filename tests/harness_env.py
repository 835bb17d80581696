"""The environments the tests give the processes they start, in one place.

A test that starts a CLI, a torchrun job, a Ray node or a rank usually strips the variables a developer's shell may
carry (MASTER_ADDR, NCCL_*, DSV3_PREFLIGHT_*, ...), so the run under test sees only what the test sets. The run's own
settings made by tests/conftest.py (``HARNESS_VARS``: today the run's fact cache) must survive that stripping: a
process without them writes to the developer's ``~/.cache`` and reuses answers another run computed. Every cleaner
goes through :func:`env_without` (or :func:`dropped`, for monkeypatch), which keeps them whatever the prefixes say.
tests/conftest.py fails a CI run that wrote the user's fact cache anyway (``user_fact_cache_entries``).
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

#: the fact cache of this pytest run (dsv3_preflight/factcache.py), set by tests/conftest.py's pytest_configure
FACT_CACHE_VAR = "DSV3_PREFLIGHT_FACT_CACHE_DIR"
#: set by the harness for the whole run: never stripped
HARNESS_VARS = frozenset({FACT_CACHE_VAR})
#: the launch variables' families a shell may carry
LAUNCH_PREFIXES = ("MASTER_", "NCCL_", "GLOO_", "TORCH_NCCL", "CUDA_", "DSV3_PREFLIGHT")
#: torchrun's and the job's own variables
LAUNCH_VARS = ("NNODES", "NPROC_PER_NODE", "NODE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "RANK", "LOCAL_RANK")
#: and what else a training shell exports that the preflight reads (conftest's clean_env, report_lab's CLI runs)
SHELL_VARS = (*LAUNCH_VARS, "OMP_NUM_THREADS", "RAY_ADDRESS", "MODEL_PATH", "OUTPUT_DIR", "DEEPSPEED_CONFIG")


def dropped(name: str, prefixes: Iterable[str] = LAUNCH_PREFIXES, names: Iterable[str] = LAUNCH_VARS) -> bool:
    """Whether a cleaner stripping ``prefixes`` and ``names`` drops variable ``name`` (never a harness variable)."""
    return name not in HARNESS_VARS and (name.startswith(tuple(prefixes)) or name in tuple(names))


def env_without(prefixes: Iterable[str] = LAUNCH_PREFIXES, names: Iterable[str] = LAUNCH_VARS,
                base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) without the variables of ``prefixes`` and ``names``, the
    harness's own kept."""
    prefixes, names = tuple(prefixes), tuple(names)
    return {k: v for k, v in (os.environ if base is None else base).items() if not dropped(k, prefixes, names)}


def user_fact_cache() -> Path:
    """Where a process without the run's fact-cache variable writes: the product's default location."""
    from dsv3_preflight.factcache import default_directory

    return default_directory()


def user_fact_cache_entries() -> set[str]:
    try:
        return {p.name for p in user_fact_cache().iterdir()}
    except OSError:
        return set()
