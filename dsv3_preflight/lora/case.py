"""One adapter as the rules see it: the facts read from disk, the layout of its keys, its config (pure)."""
from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .layout import Layout, analyse

CONFIG_NAME = "adapter_config.json"
WEIGHT_NAMES = ("adapter_model.safetensors", "adapter_model.bin")
_STEP = re.compile(r"checkpoint-(\d+)$")
_LAYOUTS: OrderedDict[str, Layout] = OrderedDict()
_LAYOUT_MEMO = 32


def step_of(path: str | os.PathLike[str]) -> int | None:
    """The step of the nearest ``checkpoint-<step>`` directory in ``path``, else None."""
    for part in reversed(os.fspath(path).split(os.sep)):
        m = _STEP.search(part)
        if m:
            return int(m.group(1))
    return None


@dataclass
class AdapterCase:
    """The facts of :func:`dsv3_preflight.lora.probes.adapter_files.read_adapter`, with the key layout."""

    facts: Mapping[str, Any]
    layout: Layout | None

    @classmethod
    def of(cls, facts: Mapping[str, Any]) -> AdapterCase:
        return cls(facts, layout_of(facts))

    @property
    def path(self) -> str:
        return str(self.facts.get("path", ""))

    @property
    def directory(self) -> str:
        return str(self.facts.get("dir", ""))

    @property
    def config_file(self) -> str:
        return f"{self.directory.rstrip('/')}/{CONFIG_NAME}" if self.directory else CONFIG_NAME

    @property
    def format(self) -> str:
        return str(self.facts.get("format", "safetensors"))

    @property
    def weights(self) -> Mapping[str, Any] | None:
        """The header facts (safetensors) or the pickle facts."""
        return self.facts.get("header") or self.facts.get("pickle")

    @property
    def config(self) -> dict[str, Any] | None:
        """adapter_config.json when it is a JSON object, else None (the config rules say why)."""
        value = self.facts.get("config")
        return value if isinstance(value, dict) else None

    @property
    def expects_config(self) -> bool:
        """An adapter weights file (by its name, or with a config beside it) must come with its config."""
        return (self.format == "missing" or self.facts.get("name") in WEIGHT_NAMES
                or bool(self.facts.get("has_config_beside")))


def layout_of(facts: Mapping[str, Any]) -> Layout | None:
    """The key layout of the adapter's tensors, memoised by the header's digest (one run's checkpoints share it)."""
    weights = facts.get("header") or facts.get("pickle")
    if not weights or weights.get("kind") in ("unreadable", "corrupt") or "tensors" not in weights:
        return None
    digest = weights.get("sha")
    if digest and digest in _LAYOUTS:
        _LAYOUTS.move_to_end(digest)
        return _LAYOUTS[digest]
    layout = analyse(weights["tensors"])
    if digest:
        _LAYOUTS[digest] = layout
        while len(_LAYOUTS) > _LAYOUT_MEMO:
            _LAYOUTS.popitem(last=False)
    return layout
