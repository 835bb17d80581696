"""The Python a torchrun command runs and the versions of its libraries, beside the preflight's own.

System boundaries: the command's executable found on the node's PATH, the first bytes of that script (its
``#!`` line), and that interpreter run as ``python -c`` (the standard-library report of ``pyenv_report.py``)
under a timeout, in its own process group.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsv3_preflight import signals
from dsv3_preflight.host.pyenv import python_word, shebang_interpreter, split_command
from dsv3_preflight.registry import probe

from . import pyenv_report

REPORT_TIMEOUT = 10.0
HEAD_BYTES = 512


def _which(word: str, path: str | None) -> str | None:
    if os.sep in word:
        return word if os.path.isfile(word) and os.access(word, os.X_OK) else None
    return shutil.which(word, path=path)


def run_report(interpreter: str, env: Mapping[str, str], timeout: float = REPORT_TIMEOUT) -> dict[str, Any]:
    """``{report}`` of an interpreter (its libraries' versions), or ``{error, timed_out}`` when it cannot say."""
    try:
        source = Path(pyenv_report.__file__).read_text(encoding="utf-8")
        proc = signals.run([interpreter, "-c", source], capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL, env=dict(env))
    except subprocess.TimeoutExpired:
        return {"report": None, "error": f"it did not answer within {timeout:g} s", "timed_out": True}
    except OSError as exc:
        return {"report": None, "error": f"it does not start: {exc.strerror or exc}", "timed_out": False}
    lines = proc.stdout.strip().splitlines()
    try:
        report = json.loads(lines[-1]) if proc.returncode == 0 and lines else None
    except ValueError:
        report = None
    if not isinstance(report, dict):
        tail = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or [""])[-1][:300]
        return {"report": None, "error": f"it exited {proc.returncode}: {tail}".rstrip(": "), "timed_out": False}
    return {"report": report, "error": None, "timed_out": False}


def inspect_command(text: str, env: Mapping[str, str]) -> dict[str, Any]:
    """What a torchrun command runs: its words, the executable on PATH, the interpreter (named in the command, or
    the script's ``#!`` line), and that interpreter's report. ``unknown`` says why no interpreter could be told."""
    out: dict[str, Any] = {"text": text, "words": [], "executable": None, "interpreter": None, "how": None,
                           "unknown": None, "not_found": None, "report": None, "error": None, "timed_out": False}
    try:
        words = split_command(text)
    except ValueError as exc:
        out["unknown"] = f"the command cannot be split into words: {exc}"
        return out
    out["words"] = words
    path = env.get("PATH")
    named = python_word(words)
    if named is not None:
        out["how"] = "named"
        out["interpreter"] = _which(named, path)
        if out["interpreter"] is None:
            out["not_found"] = named
            return out
    else:
        exe = _which(words[0], path)
        if exe is None:
            out["not_found"] = words[0]
            return out
        out["executable"] = exe
        try:
            with open(exe, "rb") as fh:
                head = fh.read(HEAD_BYTES).decode("latin-1")
        except OSError as exc:
            out["unknown"] = f"{exe} cannot be read: {exc.strerror or exc}"
            return out
        interp, on_path, why_not = shebang_interpreter(head)
        if interp is None:
            out["unknown"] = f"{exe}: {why_not}"
            return out
        out["how"] = "env #!" if on_path else "#!"
        out["interpreter"] = _which(interp, path) if on_path else interp
        if out["interpreter"] is None or not os.path.exists(out["interpreter"]):
            out["not_found"] = interp
            out["interpreter"] = None
            return out
    out.update(run_report(out["interpreter"], env))
    return out


@probe("torchrun_python", needs=["profile", "env"], timeout=REPORT_TIMEOUT + 5)   # one interpreter run at most
def torchrun_python(profile, env) -> dict[str, Any]:
    """The Python the launch's torchrun runs (the profile's ``torchrun`` command; when unset, ``launch`` runs this
    interpreter, and a ``torchrun`` on PATH is looked at too) and its libraries' versions, beside the preflight's."""
    fact: dict[str, Any] = {"self": pyenv_report.report(), "command": profile.torchrun,
                            "source": profile.sources.get("torchrun", "default"), "judged": None, "path_torchrun": None}
    if profile.torchrun:
        fact["judged"] = inspect_command(profile.torchrun, env)
    else:
        found = inspect_command("torchrun", env)
        fact["path_torchrun"] = None if found["executable"] is None and found["not_found"] else found   # none on PATH
    return fact
