"""Where peft releases load the same adapter differently, and which release the scan judges for (pure).

The scan predicts what ``PeftModel.from_pretrained`` does with a saved adapter, and that depends on the peft release
that will load it: the one installed where the scan runs (``peft_version`` in the adapter's facts, read from the
package's metadata, never imported), or the one ``lora scan --peft-version`` names. Each difference is a function of
that version here, so a rule asks one question and the answer is None when no version is known.
"""
from __future__ import annotations

import re

#: peft 0.22 builds the target_parameters wrappers (ParamWrapper) before any module's LoRA: a Linear target no longer
#: resets fan_in_fan_out to False first, so a wrapper always sees it (peft 0.22.0, tuners_utils.inject_adapter)
WRAPPERS_FIRST = (0, 22)


def release(version: object) -> tuple[int, int] | None:
    """(major, minor) of a peft version string such as ``0.22.0`` or ``0.23.0.dev0``; None when it is not one."""
    m = re.match(r"\s*v?(\d+)\.(\d+)", version) if isinstance(version, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def wrappers_built_first(version: object) -> bool | None:
    """Whether this peft builds the target_parameters wrappers before the modules' LoRA; None: no version known."""
    r = release(version)
    return None if r is None else r >= WRAPPERS_FIRST
