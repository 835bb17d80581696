"""What the saved tensor names of an adapter say, in peft's own key grammar (pure).

``PeftModel.save_pretrained`` writes each adapter parameter as ``base_model.model.<module>.<param>`` with the
adapter name removed: ``lora_A.weight``, ``lora_B.weight``, ``lora_B.bias`` (``lora_bias``),
``lora_embedding_A``/``lora_embedding_B`` (embeddings), ``lora_magnitude_vector`` (DoRA), the embedding's
``base_layer.weight`` when an embedding is targeted, and the plain parameters of ``modules_to_save``. A
key that keeps the adapter name (``lora_A.default.weight``, as a hand-rolled ``state_dict()`` save
writes it) still loads into peft's default adapter; any other adapter name does not.

:func:`analyse` sorts every key into those classes once per distinct header (checkpoints of one run
share it byte for byte), so the rules read lists, not tensors.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PREFIX = "base_model.model."
DEFAULT_ADAPTER = "default"
#: no model has a parameter name this long; a longer key is malformed (and never reaches a regex)
MAX_KEY_LEN = 1024
_PAIR = {"lora_A": "A", "lora_B": "B", "lora_embedding_A": "A", "lora_embedding_B": "B"}
_TOKENS = frozenset((*_PAIR, "lora_magnitude_vector"))
_LAYER_TEMPLATE = re.compile(r"\.\d+(?=\.|$)")
_LAYER_INDEX = re.compile(r".*?\.[^.]*\.(?P<idx>\d+)\.")


@dataclass
class Layout:
    """Every saved key, classified. Shapes are tuples; module names are without ``base_model.model.``."""

    tensors: int = 0
    #: module -> {"A": shape, "B": shape} (lora_A/lora_B or their embedding forms)
    pairs: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)
    embedding_modules: set[str] = field(default_factory=set)
    magnitude: dict[str, tuple[int, ...]] = field(default_factory=dict)   # DoRA, by module
    bias_b: dict[str, tuple[int, ...]] = field(default_factory=dict)      # lora_B.bias, by module
    base_layer: dict[str, list[str]] = field(default_factory=dict)       # module -> its base_layer.* keys
    no_prefix: list[str] = field(default_factory=list)                    # keys not under base_model.model.
    other_adapter: dict[str, list[str]] = field(default_factory=dict)     # adapter name (not default) -> keys
    other: list[str] = field(default_factory=list)                        # keys in no peft class (full names)
    malformed: list[str] = field(default_factory=list)                    # a LoRA token in a key peft never writes
    zero_element: list[str] = field(default_factory=list)
    #: one adapter parameter saved under two keys (``lora_A.weight`` and ``lora_A.default.weight``): the parameter's
    #: name (without the adapter) -> [(key, shape)], in the order peft maps them (sorted: the last one is the value
    #: peft loads, see :func:`analyse`)
    collisions: dict[str, list[tuple[str, tuple[int, ...]]]] = field(default_factory=dict)
    by_dtype: dict[str, list[str]] = field(default_factory=dict)
    #: what the rules derived from this layout, by (rule, config values): a layout is shared by a run's checkpoints
    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def modules(self) -> list[str]:
        if "modules" not in self.memo:
            self.memo["modules"] = sorted(self.pairs)
        modules: list[str] = self.memo["modules"]
        return modules

    def derived(self, key: Any, compute: Any) -> Any:
        """``compute()`` once per ``key`` (a hashable description of the config values it depends on)."""
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(value) if not isinstance(value, tuple) else value


def analyse(tensors: Mapping[str, Any]) -> Layout:
    """Classify ``tensors`` ({name: (dtype, shape)} or {name: [dtype, shape]}) by peft's key grammar."""
    out = Layout(tensors=len(tensors))
    pairs, by_dtype = out.pairs, out.by_dtype
    # peft remaps ``lora_A.weight`` and keeps ``lora_A.default.weight`` as it is: both fill one parameter, and the key
    # that comes later in load_file's (sorted) order wins; so the layout keeps that key's shape
    holder: dict[str, tuple[str, tuple[int, ...]]] = {}

    def claim(param: str, name: str, shape: tuple[int, ...]) -> bool:
        """Whether ``name`` is the key peft loads ``param`` from (so far); a second key is a collision."""
        prior = holder.get(param)
        if prior is not None:
            seen = out.collisions.setdefault(param, [prior])
            seen.append((name, shape))
            seen.sort()
            if name < prior[0]:
                return False
        holder[param] = (name, shape)
        return True
    for name, (dtype, shape) in tensors.items():
        shape = _shape(shape)
        by_dtype.setdefault(dtype, []).append(name)
        if 0 in shape:
            out.zero_element.append(name)
        if len(name) > MAX_KEY_LEN:
            out.malformed.append(name)
            continue
        if not name.startswith(PREFIX):
            out.no_prefix.append(name)
            continue
        parts = name[len(PREFIX):].split(".")
        n = len(parts)
        # peft writes the token last (embeddings, DoRA), before the parameter, or before adapter + parameter
        if n >= 2 and parts[-2] in _TOKENS:
            at = n - 2
        elif parts[-1] in _TOKENS:
            at = n - 1
        elif n >= 3 and parts[-3] in _TOKENS:
            at = n - 3
        elif _TOKENS.intersection(parts):
            out.malformed.append(name)
            continue
        else:
            at = None
        if at is None:
            if "base_layer" in parts:
                i = parts.index("base_layer")
                out.base_layer.setdefault(".".join(parts[:i]), []).append(name)
            else:
                out.other.append(name)
            continue
        module, token, tail = ".".join(parts[:at]), parts[at], parts[at + 1:]
        adapter = None
        is_embedding = token.startswith("lora_embedding")
        if token == "lora_magnitude_vector" or is_embedding:
            if len(tail) == 1:
                adapter = tail[0]
            elif tail:
                out.malformed.append(name)
                continue
            param = None
        else:
            if len(tail) == 2:
                adapter, param = tail
            elif len(tail) == 1:
                param = tail[0]
            else:
                out.malformed.append(name)
                continue
            if param not in ("weight", "bias") or (param == "bias" and token != "lora_B"):
                out.malformed.append(name)
                continue
        if not module:
            out.malformed.append(name)
            continue
        if adapter is not None and adapter != DEFAULT_ADAPTER:
            out.other_adapter.setdefault(adapter, []).append(name)
            continue
        if not claim(f"{module}.{token}" + (f".{param}" if param else ""), name, shape):
            continue
        if token == "lora_magnitude_vector":
            out.magnitude[module] = shape
        elif param == "bias":
            out.bias_b[module] = shape
        else:
            pairs.setdefault(module, {})[_PAIR[token]] = shape
            if is_embedding:
                out.embedding_modules.add(module)
    return out


def template(module: str) -> str:
    """The module with its layer/expert numbers as ``*``: ``model.layers.*.self_attn.q_proj``."""
    return _LAYER_TEMPLATE.sub(".*", module)


def layer_index(module: str) -> int | None:
    """The layer number of ``module`` the way peft finds it for layers_to_transform without layers_pattern
    (the first numbered part followed by more of the name)."""
    m = _LAYER_INDEX.match(module)
    return int(m.group("idx")) if m else None
