"""Remediations of the LoRA domain as shell a person pastes (pure; every one passes ``bash -n``).

Real paths and values wherever the facts hold them; ``${NAME:?what to put here}`` where they do not;
prose only in ``#`` comments. A JSON file is edited with one ``python3 -c`` line (python is on every
training node, jq is not; one line pastes even from an indented report, where a heredoc's terminator
would not end it), the file's path passed as a shell-quoted argument.
"""
from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Sequence
from typing import Any

#: DeepSeek-V3's attention (MLA) projections, in the model's order: the LoRA targets of its attention
DSV3_MLA_TARGETS = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")
#: the order targets are written in a fix: attention first (as models define them), then the MLP
TARGET_ORDER = ("q_proj", "k_proj", "v_proj", *DSV3_MLA_TARGETS, "gate_proj", "up_proj", "down_proj")


def order_targets(names: Iterable[str]) -> list[str]:
    """Targets in the order a model defines them (attention, then MLP), unknown names after, alphabetically."""
    names = list(dict.fromkeys(names))
    rank = {n: i for i, n in enumerate(TARGET_ORDER)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


_BIDI = {*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C}


def _unprintable(ch: str) -> bool:
    o = ord(ch)
    return o < 0x20 or o == 0x7F or 0x80 <= o < 0xA0 or o in _BIDI


def quote(path: Any) -> str:
    """A path as one shell word, on one line: a name holding control characters (a newline, ESC) or bidi marks is
    written in bash's $'...' form with those characters escaped, so the fix neither breaks across lines nor sends
    them to the terminal, and bash turns them back into the real name."""
    text = str(path)
    if not any(_unprintable(ch) for ch in text):
        return shlex.quote(text)
    out = []
    for ch in text:
        if ch in ("\\", "'"):
            out.append("\\" + ch)
        elif _unprintable(ch):
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def comment(text: str) -> str:
    """One ``#`` comment line (newlines folded: a newline in a comment would make the rest run)."""
    return "# " + " ".join(str(text).split())


def _py(value: Any) -> str:
    """``value`` as a Python literal written with double quotes only (it goes inside a single-quoted shell word)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_py(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    raise TypeError(f"no literal for {type(value).__name__}")


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


#: a :func:`json_edit` value that removes the key (absent: the library's default)
DELETE = _Delete()


def json_edit(path: Any, edits: Sequence[tuple[Sequence[str], Any]], why: str) -> str:
    """One ``python3 -c`` line setting ``keys -> value`` in the JSON file ``path`` (objects created on the way;
    :data:`DELETE` removes the key).

    One line on purpose: it pastes wherever it is shown, indented or not (a heredoc's terminator must start its
    line, so an indented report would break it). The path is an argument, quoted for the shell.
    """
    statements = ["import json, sys", "p = sys.argv[1]", "c = json.load(open(p))"]
    for keys, value in edits:
        *parents, last = [str(k) for k in keys]
        target = "c" + "".join(f".setdefault({json.dumps(k)}, {{}})" for k in parents)
        if value is DELETE:
            statements.append(f"{target}.pop({json.dumps(last)}, None)")
        else:
            statements.append(f"{target}[{json.dumps(last)}] = {_py(value)}")
    statements += ['json.dump(c, open(p, "w"), indent=2)', 'print("updated", p)']
    script = "; ".join(statements)
    if "'" in script:  # a value we do not write ourselves: never build broken quoting
        raise ValueError("a JSON edit with a single quote in it")
    return f"python3 -c '{script}' {quote(path)}   {comment(why)}"


def peft_reads(directory: Any) -> str:
    """A line that shows peft's own reading of an adapter's config (its exact complaint, if any)."""
    return (f"python3 -c 'import sys; from peft import PeftConfig; print(PeftConfig.from_pretrained(sys.argv[1]))' "
            f"{quote(directory)}   {comment('what peft itself says about this adapter_config.json')}")


def rescan(path: Any, *, deep: bool = False) -> str:
    """Scan an adapter again after fixing it."""
    return f"dsv3-preflight lora scan{' --deep' if deep else ''} {quote(path)}"
