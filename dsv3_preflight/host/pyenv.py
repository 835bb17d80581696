"""Which Python a torchrun command runs, and how its libraries differ from the preflight's own (pure helpers).

The preflight's checks judge with the libraries of the interpreter they run in: the collective test with its
torch and NCCL, the LoRA checks with its peft and transformers, the CUDA checks with its torch's CUDA build.
A torchrun of another environment (``--torchrun /opt/conda/envs/train/bin/torchrun``, a conda ``torchrun``
first on PATH) runs other libraries: a GO would speak of code that does not run. These functions read a
torchrun command's interpreter from its words and its script's first lines, and compare two environments'
reports (``host/probes/pyenv_report.py``); the probe ``torchrun_python`` does the reading and running.
"""
from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

#: the names of a Python interpreter (python, python3, python3.11, pypy3)
PYTHON_NAME = re.compile(r"(?:python|pypy)(?:\d+(?:\.\d+)*)?")
#: distlib's launcher for a script whose interpreter path is too long for a ``#!`` line (pip writes it):
#: ``#!/bin/sh`` then ``'''exec' "/very/long/path/bin/python" "$0" "$@"``
_DISTLIB_EXEC = re.compile(r"""^'''exec' (?:"(?P<q>[^"]+)"|(?P<p>\S+)) "\$0" "\$@"\s*$""")

#: (key in a report's versions, label, a difference fails): the libraries the checks judge with fail, others warn
COMPARED = (
    ("torch", "torch", True), ("torch_cuda", "torch's CUDA", True), ("nccl", "NCCL (torch's wheel)", True),
    ("deepspeed", "deepspeed", True), ("transformers", "transformers", True), ("peft", "peft", True),
    ("python", "python", False), ("accelerate", "accelerate", False), ("safetensors", "safetensors", False),
)


def pip_pin(package: str, version: str) -> str:
    """The pip command installing exactly ``version``. A local version (torch's ``2.4.0+cu121``) is not on PyPI:
    it comes from PyTorch's index named by the local tag."""
    if "+" in version and package == "torch":
        return f"pip install {package}=={version} --index-url https://download.pytorch.org/whl/{version.split('+', 1)[1]}"
    return f"pip install {package}=={version}"


def split_command(text: str) -> list[str]:
    """A torchrun command as the launcher splits it (shell words); ValueError on unbalanced quotes."""
    words = shlex.split(text)
    if not words:
        raise ValueError("it is empty")
    return words


def is_python(word: str) -> bool:
    """Whether a command word names a Python interpreter (by its file name)."""
    return PYTHON_NAME.fullmatch(os.path.basename(word)) is not None


def python_word(words: Sequence[str]) -> str | None:
    """The interpreter a command names itself (``/opt/conda/bin/python -m torch.distributed.run``), else None."""
    return words[0] if words and is_python(words[0]) else None


def shebang_interpreter(head: str) -> tuple[str | None, bool, str | None]:
    """``(interpreter, on_path, why_not)`` from a script's first lines: ``#!/opt/conda/bin/python3``,
    ``#!/usr/bin/env python3`` (``on_path``: resolve it on PATH), distlib's ``#!/bin/sh`` + ``'''exec' "..."``
    lines. ``why_not`` says why none was found (a binary, another language, no ``#!``)."""
    lines = head.splitlines()
    if not lines or not lines[0].startswith("#!"):
        return None, False, "it has no #! line (a binary, or not a script)"
    words = lines[0][2:].split()
    if not words:
        return None, False, "its #! line is empty"
    if os.path.basename(words[0]) == "env":
        rest = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if rest and is_python(rest[0]):
            return rest[0], True, None
        return None, False, f"its #! line runs {' '.join(words[1:]) or 'env'}, not Python"
    if is_python(words[0]):
        return words[0], False, None
    if os.path.basename(words[0]) in ("sh", "bash") and len(lines) > 1:
        m = _DISTLIB_EXEC.match(lines[1])
        if m:
            return m.group("q") or m.group("p"), False, None
    return None, False, f"its #! line runs {words[0]}, not Python"


def differences(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What differs between two reports' versions: ``{name, label, mine, theirs, fails}`` in COMPARED's order (not
    ``key``: evidence under a secret-like name is masked)."""
    a, b = mine.get("versions") or {}, theirs.get("versions") or {}
    return [{"name": key, "label": label, "mine": a.get(key), "theirs": b.get(key), "fails": fails}
            for key, label, fails in COMPARED if a.get(key) != b.get(key)]


def same_environment(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> bool:
    """One environment: the same prefix (a venv's own, not the base interpreter its python links to)."""
    return bool(mine.get("prefix")) and os.path.realpath(mine["prefix"]) == os.path.realpath(theirs.get("prefix") or "")


def describe(report: Mapping[str, Any]) -> str:
    """``torch 2.5.1+cu124, NCCL 2.21.5`` (what a reader recognises an environment by)."""
    v = report.get("versions") or {}
    parts = [f"torch {v['torch']}" if v.get("torch") else "no torch"]
    if v.get("nccl"):
        parts.append(f"NCCL {v['nccl']}")
    return ", ".join(parts)
