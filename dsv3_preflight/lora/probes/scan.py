"""`lora scan`: find the adapters under some paths, read each one's facts, and judge each one on its own.

One adapter's damage (a corrupt header, a FIFO where the weights should be, a config that makes a rule
trip) is that adapter's FAIL with the reason; the others are judged as usual and the scan always ends
with a verdict. A directory the walk cannot list is reported as unreadable, never skipped.
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from dsv3_preflight.lora.verdict import judge_adapter, scan_document, unreadable_dir

from .adapter_files import DEFAULT_HEADER_CAP, find_adapters, read_adapter, read_trainer_step


def adapter_facts(path: str | os.PathLike[str], *, cap: int = DEFAULT_HEADER_CAP) -> dict[str, Any]:
    """read_adapter, never raising: an OS error nobody foresaw is this adapter's unreadable weights."""
    try:
        return read_adapter(path, cap=cap)
    except OSError as exc:
        return {"path": str(path), "dir": os.path.dirname(str(path)), "format": "safetensors", "name": os.path.basename(str(path)),
                "header": {"kind": "unreadable", "error": f"{path}: {exc.strerror or exc}", "tensors": {}}}


def judge_path(path: str | os.PathLike[str], *, cap: int = DEFAULT_HEADER_CAP, deep: bool = False) -> dict[str, Any]:
    """The verdict on one adapter path (weights file, or a directory holding only a config)."""
    facts = adapter_facts(path, cap=cap)
    verdict = judge_adapter(facts)
    header = facts.get("header") or {}
    if deep and verdict["status"] != "fail" and facts.get("format") in ("safetensors", "pickle"):
        from .peft_check import peft_config_facts

        facts["peft_check"] = peft_config_facts(facts.get("config"))
        if facts.get("format") == "safetensors" and header.get("tensors"):
            from .tensors import deep_facts

            facts["deep"] = deep_facts(facts["path"], header["tensors"])
            facts["trainer_step"], _ = read_trainer_step(facts["dir"])
        verdict = judge_adapter(facts)
    return verdict


def scan_paths(paths: Iterable[str | os.PathLike[str]], *, cap: int = DEFAULT_HEADER_CAP,
               deep: bool = False) -> tuple[dict[str, Any] | None, list[str]]:
    """(the scan document, []) or (None, the paths that are neither a file nor a directory)."""
    paths = [str(p) for p in paths]
    found, missing, unreadable = find_adapters(paths)
    if missing:
        return None, missing
    adapters = [judge_path(f, cap=cap, deep=deep) for f in found] + [unreadable_dir(u) for u in unreadable]
    adapters.sort(key=lambda a: (a["step"] is None, a["step"] or 0, a["path"]))
    return scan_document(adapters, paths=paths), []
