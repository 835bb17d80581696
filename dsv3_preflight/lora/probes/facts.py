"""Facts for the LoRA checks: the DeepSpeed config as parsed JSON, the model's targetable modules
(from its local config.json, built on the meta device), and the adapters already saved in the output directory."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from dsv3_preflight.registry import probe

JSON_CAP = 4 * 1024 * 1024
MAX_EXISTING_ADAPTERS = 20


def _no_nan(token: str) -> Any:
    raise ValueError(f"{token} is not valid JSON")


@probe("lora_deepspeed_config", needs=["profile"], timeout=20)
def lora_deepspeed_config(profile) -> dict[str, Any]:
    """The DeepSpeed JSON config named by the profile, parsed (or why it cannot be)."""
    raw = profile.deepspeed_config
    if not raw:
        return {"configured": False}
    path = Path(raw).expanduser()
    facts: dict[str, Any] = {"configured": True, "path": str(path)}
    try:
        size = path.stat().st_size
        if not path.is_file():
            return {**facts, "error": f"{path} is not a file"}
        if size > JSON_CAP:
            return {**facts, "error": f"{path} is {size} bytes: not a DeepSpeed config"}
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {**facts, "error": f"{path} does not exist"}
    except (OSError, UnicodeDecodeError) as exc:
        return {**facts, "error": f"{path} is unreadable: {getattr(exc, 'strerror', None) or exc}"}
    try:
        config = json.loads(text, parse_constant=_no_nan)
    except ValueError as exc:
        return {**facts, "error": f"{path} is not valid JSON: {exc}"}
    if not isinstance(config, dict):
        return {**facts, "error": f"{path} holds a JSON {type(config).__name__}, not an object"}
    facts["config"] = config
    facts["deepspeed_check"] = _deepspeed_model_check(config)
    return facts


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
        DeepSpeedZeroConfig(**zero)
    except Exception as exc:  # noqa: BLE001 - the model's complaint is the fact
        return {"available": True, "error": f"{type(exc).__name__}: {str(exc)[:500]}"}
    return {"available": True, "error": None}


@probe("lora_model_modules", needs=["profile"], timeout=240)
def lora_model_modules(profile) -> dict[str, Any]:
    """LoRA-targetable modules of the profile's model (config.json only, meta device) with full-size counts."""
    if not profile.model_path:
        return {"configured": False}
    if not profile.lora_targets:
        return {"configured": True, "skipped": "the profile names no lora_targets", "path": profile.model_path}
    from dsv3_preflight.lora.targets import model_modules

    return {"configured": True, **model_modules(profile.model_path)}


@probe("saved_adapters", needs=["output_dir"], timeout=120)
def saved_adapters(output_dir) -> dict[str, Any]:
    """Header-only verdicts on the newest adapters already in the output dir (a resumed run's saves)."""
    if not output_dir.get("configured") or not output_dir.get("is_dir"):
        return {"scanned": False, "adapters": [], "reason": "no output directory to scan"}
    try:
        return {"scanned": True, "adapters": _existing_adapters(Path(output_dir["path"]))}
    except ImportError as exc:  # a scanner dependency missing: the dir is still judged, its adapters are not
        return {"scanned": False, "adapters": [], "reason": f"{exc.name or exc} not installed: adapters not scanned"}


def _existing_adapters(path: Path) -> list[dict[str, Any]]:
    """Header-only verdicts on the newest adapters already in the output dir (a resumed run's saves)."""
    from dsv3_preflight.lora.scan import find_adapters, scan_adapter

    found, _ = find_adapters([path])
    out = []
    for f in found[-MAX_EXISTING_ADAPTERS:]:
        r = scan_adapter(f)
        out.append({"path": r.path, "step": r.step, "status": r.status, "summary": r.summary})
    return out
