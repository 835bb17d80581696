"""Remediations of the LoRA domain as shell a person pastes (pure; every one passes ``bash -n``).

Real paths and values wherever the facts hold them; ``${NAME:?what to put here}`` where they do not;
prose only in ``#`` comments. A JSON file is edited with a ``python3`` heredoc (python is on every
training node, jq is not), its path written as a Python literal inside a quoted heredoc so nothing in it
is expanded by the shell.
"""
from __future__ import annotations

import shlex
from typing import Any, Iterable, Sequence

#: DeepSeek-V3's attention (MLA) projections, in the model's order: the LoRA targets of its attention
DSV3_MLA_TARGETS = ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")
#: the order targets are written in a fix: attention first (as models define them), then the MLP
TARGET_ORDER = ("q_proj", "k_proj", "v_proj", *DSV3_MLA_TARGETS, "gate_proj", "up_proj", "down_proj")


def order_targets(names: Iterable[str]) -> list[str]:
    """Targets in the order a model defines them (attention, then MLP), unknown names after, alphabetically."""
    names = list(dict.fromkeys(names))
    rank = {n: i for i, n in enumerate(TARGET_ORDER)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


def quote(path: Any) -> str:
    """A path as one shell word."""
    return shlex.quote(str(path))


def comment(text: str) -> str:
    """One ``#`` comment line (newlines folded: a newline in a comment would make the rest run)."""
    return "# " + " ".join(str(text).split())


def json_edit(path: Any, edits: Sequence[tuple[Sequence[str], Any]], why: str, *, replace_parent: bool = False) -> str:
    """A python3 heredoc setting ``keys -> value`` in the JSON file ``path`` (objects created on the way).

    With ``replace_parent`` the object holding the last key is replaced by ``{key: value}`` when it is not an
    object (a ``zero_optimization`` that is a number, say).
    """
    lines = [f"python3 - <<'EOF'   {comment(why)}", "import json", f"path = {str(path)!r}",
             "with open(path) as fh:", "    config = json.load(fh)"]
    for keys, value in edits:
        *parents, last = list(keys)
        target = "config"
        for key in parents:
            if replace_parent:
                lines.append(f"if not isinstance({target}.get({key!r}), dict):")
                lines.append(f"    {target}[{key!r}] = {{}}")
            target = f"{target}.setdefault({key!r}, {{}})"
        lines.append(f"{target}[{last!r}] = {value!r}")
    lines += ["with open(path, 'w') as fh:", "    json.dump(config, fh, indent=2)", "print('updated', path)", "EOF"]
    return "\n".join(lines)


def peft_reads(directory: Any) -> str:
    """A heredoc that shows peft's own reading of an adapter's config (its exact complaint, if any)."""
    return "\n".join([f"python3 - <<'EOF'   {comment('what peft itself says about this adapter_config.json')}",
                      "from peft import PeftConfig",
                      f"print(PeftConfig.from_pretrained({str(directory)!r}))", "EOF"])


def rescan(path: Any, *, deep: bool = False) -> str:
    """Scan an adapter again after fixing it."""
    return f"dsv3-preflight lora scan{' --deep' if deep else ''} {quote(path)}"
