"""peft's own reading of adapter_config.json, behind ``--deep`` (importing peft brings torch and transformers:
seconds a plain scan does not spend; the plain scan's config rules mirror what peft does with each field)."""
from __future__ import annotations

import warnings
from typing import Any


def peft_config_facts(config: Any) -> dict[str, Any]:
    """``{"available", "error"}``: whether peft is importable here, and what its config class says of ``config``."""
    try:
        from peft import PeftConfig
    except ImportError as exc:
        return {"available": False, "error": None, "reason": f"{exc.name or exc} is not installed"}
    if not isinstance(config, dict):
        return {"available": True, "error": None}  # the config rules say what it is instead
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            PeftConfig.from_peft_type(**config)
    except Exception as exc:  # noqa: BLE001 - peft's complaint is the fact
        return {"available": True, "error": f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"}
    return {"available": True, "error": None}
