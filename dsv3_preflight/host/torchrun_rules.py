"""The rules of env.torchrun_python (pure: facts in, findings out): torchrun runs the Python whose libraries the checks judged with.

The collective test ran this interpreter's torch and NCCL, the LoRA checks its peft and transformers, the CUDA
checks its torch's CUDA build. A torchrun command of another environment (``--torchrun`` naming a conda env's
torchrun, ``python3.10 -m torch.distributed.run``) runs other libraries: the GO would speak of code that does not
run. A named command is judged (FAIL when the libraries the checks use differ); without one, ``launch`` runs this
interpreter, and a ``torchrun`` on PATH of another environment is a warning (the one a person types)."""
from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from dsv3_preflight.host.facts import InspectedCommand
from dsv3_preflight.host.pyenv import describe, differences, pip_pin, same_environment
from dsv3_preflight.result import Actor, Result

PROFILE_FIX = "--torchrun"


def where(report: Mapping[str, Any]) -> str:
    return f"{report.get('executable')} ({describe(report)})"


def _alignment_fix(mine: Mapping[str, Any], theirs: Mapping[str, Any], diffs: list[dict[str, Any]],
                   theirs_python: str) -> str:
    """Run the preflight from the training environment (first choice), or give this one the training's versions."""
    quoted = shlex.quote(theirs_python)
    lines = [f"# torchrun runs {theirs_python} ({describe(theirs)}); the checks ran in {where(mine)}",
             "# run the preflight from the training environment, so its checks judge the libraries torchrun loads:",
             f"{quoted} -m pip install \"${{DSV3_PREFLIGHT:?this dsv3-preflight checkout or wheel}}\"",
             f"{quoted} -m dsv3_preflight launch ${{LAUNCH_ARGS:?the options and -- SCRIPT ARGS of this launch}}"]
    pins = []
    mine_python = shlex.quote(str(mine.get("executable")))
    for d in diffs:
        if d["theirs"] is None or d["name"] in ("python", "torch_cuda"):
            continue
        if d["name"] == "nccl":
            pins.append(f"{mine_python} -m pip install {theirs.get('nccl_wheel') or 'nvidia-nccl-cu12'}=={d['theirs']}")
        else:
            pins.append(f"{mine_python} -m {pip_pin(d['name'], d['theirs'])}")
    if pins:
        lines.append("# or give the preflight's interpreter the training environment's versions:")
        lines += pins
    return "\n".join(lines)


def judge_interpreter(inspected: InspectedCommand, mine: Mapping[str, Any], *, named: bool) -> Result:
    """One torchrun command (``named``: the profile's, which launch runs; else the ``torchrun`` on PATH)."""
    text = inspected.get("text") or "torchrun"
    bad = Result.failed if named else Result.warned
    who = f"torchrun command {text!r}" if named else f"the torchrun on PATH ({inspected.get('executable')})"
    tail = "" if named else ("; launch runs this interpreter's torchrun, a `torchrun` typed by hand runs that one "
                             "(--torchrun names the one you use)")
    evidence: dict[str, Any] = {"command": text, "executable": inspected.get("executable"),
                                "interpreter": inspected.get("interpreter"), "how": inspected.get("how"),
                                "self": mine}
    missing = inspected.get("not_found")
    if missing:
        fix = (f"command -v {shlex.quote(missing)} || echo 'not on PATH'    # on this node\n"
               f"# name torchrun by its full path: {PROFILE_FIX} \"${{TORCHRUN:?the torchrun of the training environment, "
               "e.g. /opt/conda/envs/train/bin/torchrun}\"")
        return bad(f"{who}: {missing} is not found on this node's PATH{tail}", evidence, fix,
                   actor=Actor.JOB)
    if inspected.get("unknown"):
        if not named:
            return Result.passed(f"torchrun is this interpreter's ({where(mine)}); the torchrun on PATH is not a "
                                 f"Python script ({inspected['unknown']})", evidence)
        return Result.skipped(f"cannot tell which Python {who} runs: {inspected['unknown']}; the checks judged the "
                              f"libraries of {where(mine)}", evidence)
    interpreter = inspected.get("interpreter")
    theirs = inspected.get("report")
    if theirs is None:
        fix = (f"{shlex.quote(str(interpreter))} -c 'import torch; print(torch.__version__)'    # what fails there\n"
               f"# name a torchrun whose Python runs: {PROFILE_FIX} \"${{TORCHRUN:?the torchrun of the training environment}}\"")
        return bad(f"{who} runs {interpreter}, which does not report its libraries: {inspected.get('error')}{tail}",
                   {**evidence, "error": inspected.get("error"), "timed_out": inspected.get("timed_out")}, fix,
                   actor=Actor.JOB)
    evidence["theirs"] = theirs
    if same_environment(mine, theirs):
        return Result.passed(f"{who} runs this interpreter ({where(mine)}): the checks judged its libraries", evidence)
    if not (theirs.get("versions") or {}).get("torch"):
        v = (mine.get("versions") or {}).get("torch")
        fix = (f"{shlex.quote(str(interpreter))} -m {pip_pin('torch', v)}    # torch for that environment (the one checked here)\n"
               if v else "") + (f"# or name the training environment's torchrun: {PROFILE_FIX} "
                                "\"${TORCHRUN:?the torchrun of the training environment}\"")
        return bad(f"{who} runs {interpreter}, which has no torch: torchrun cannot start there{tail}", evidence, fix,
                   actor=Actor.JOB)
    diffs = differences(mine, theirs)
    evidence["differences"] = diffs
    failing = [d for d in diffs if d["fails"]]
    listed = ", ".join(f"{d['label']} {d['theirs'] or 'none'} (checked: {d['mine'] or 'none'})" for d in (failing or diffs))
    fix = _alignment_fix(mine, theirs, diffs, str(interpreter))
    if failing:
        return bad(f"{who} runs {interpreter}, not the Python the checks ran in: {listed}{tail}", evidence, fix,
                   actor=Actor.JOB)
    if diffs:
        return Result.warned(f"{who} runs {interpreter}, another environment with the checked libraries' versions; "
                             f"it differs in {listed}", evidence, fix, actor=Actor.JOB)
    return Result.passed(f"{who} runs {interpreter}, another environment with the same versions as the checks' "
                         f"({describe(theirs)})", evidence)
