"""The facts `lora scan` and `lora watch` judge: one adapter's files (header, config, step) and, with
``--deep``, its tensor data, the config as peft reads it and the trainer's step.

Gathering only: the judging is :mod:`dsv3_preflight.lora.run` (through the engine's wrapper). One adapter's
damage (a corrupt header, a FIFO where the weights should be) is data in its facts, never an exception.
"""
from __future__ import annotations

import functools
import os
from typing import Any

from .adapter_files import DEFAULT_HEADER_CAP, read_adapter, read_trainer_step

#: ``peft_version=INSTALLED``: judge for the peft installed in this environment
INSTALLED = "installed"


@functools.lru_cache(maxsize=1)
def installed_peft() -> str | None:
    """The version of the peft installed here, from its package metadata (peft is not imported); None without it."""
    import importlib.metadata

    try:
        return importlib.metadata.version("peft")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def judged_for(peft_version: str | None) -> str | None:
    """The peft version ``peft_version`` stands for: the installed one for INSTALLED."""
    return installed_peft() if peft_version == INSTALLED else peft_version


def adapter_facts(path: str | os.PathLike[str], *, cap: int = DEFAULT_HEADER_CAP,
                  peft_version: str | None = INSTALLED) -> dict[str, Any]:
    """read_adapter, never raising: an OS error nobody foresaw is this adapter's unreadable weights. ``peft_version``:
    the peft release that will load the adapter (the rules follow its behaviour), by default the one installed here."""
    try:
        facts = read_adapter(path, cap=cap)
    except OSError as exc:
        facts = {"path": str(path), "dir": os.path.dirname(str(path)), "format": "safetensors", "name": os.path.basename(str(path)),
                 "header": {"kind": "unreadable", "error": f"{path}: {exc.strerror or exc}", "tensors": {}}}
    return {**facts, "peft_version": judged_for(peft_version)}


def add_deep_facts(facts: dict[str, Any]) -> dict[str, Any]:
    """``--deep``: add the config as peft reads it and, for safetensors with tensors, the streamed tensor data
    and the trainer's step (``facts`` is changed and returned)."""
    if facts.get("format") not in ("safetensors", "pickle"):
        return facts
    from .peft_check import peft_config_facts

    facts["peft_check"] = peft_config_facts(facts.get("config"))
    header = facts.get("header") or {}
    if facts.get("format") == "safetensors" and header.get("tensors"):
        from .tensors import deep_facts

        facts["deep"] = deep_facts(facts["path"], header["tensors"])
        facts["trainer_step"], _ = read_trainer_step(facts["dir"])
    return facts
