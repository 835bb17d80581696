"""env.torchrun_python: torchrun runs the Python whose libraries the checks judged with.

The collective test ran this interpreter's torch and NCCL, the LoRA checks its peft and transformers, the CUDA
checks its torch's CUDA build. A torchrun command of another environment (``--torchrun`` naming a conda env's
torchrun, ``python3.10 -m torch.distributed.run``) runs other libraries: the GO would speak of code that does not
run. A named command is judged (FAIL when the libraries the checks use differ); without one, ``launch`` runs this
interpreter, and a ``torchrun`` on PATH of another environment is a warning (the one a person types)."""
from __future__ import annotations

from dsv3_preflight import check
from dsv3_preflight.host.facts import TorchrunPythonFact
from dsv3_preflight.host.torchrun_rules import judge_interpreter, where
from dsv3_preflight.result import Result


@check("env.torchrun_python", needs=["torchrun_python"], tags=["env", "launch"], timeout=5)
def torchrun_python(torchrun_python: TorchrunPythonFact):
    """torchrun runs the Python whose torch, NCCL, DeepSpeed, transformers and peft the checks judged with."""
    fact = torchrun_python
    mine = fact.get("self") or {}
    if fact.get("command"):
        return judge_interpreter(fact.get("judged") or {}, mine, named=True)
    if fact.get("path_torchrun"):
        return judge_interpreter(fact["path_torchrun"], mine, named=False)
    return Result.passed(f"torchrun is this interpreter's `-m torch.distributed.run` ({where(mine)}): the checks "
                         "judged its libraries", {"self": mine})
