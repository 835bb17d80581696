"""GPU modes the job does not expect: MIG (Multi-Instance GPU) and compute modes other than Default.

The job runs one process per whole GPU. With MIG enabled, CUDA sees MIG instances (or none when no
instance was created), not the GPU; a MIG mode change waits for a GPU reset. Compute mode Prohibited
lets no process use the GPU; Exclusive_Process lets only one, so any second process touching the GPU (a
rank's stray context on another device, a monitoring agent) gets "all CUDA-capable devices are busy or
unavailable". NVML values: NVML_COMPUTEMODE_DEFAULT 0, EXCLUSIVE_THREAD 1 (deprecated), PROHIBITED 2,
EXCLUSIVE_PROCESS 3.
"""
from __future__ import annotations

from collections.abc import Sequence

from dsv3_preflight.result import Actor, Finding, failure, warning

from .common import gpu_list, gpu_target
from .facts import Gpu, Mig

COMPUTE_MODES = {0: "Default", 1: "Exclusive_Thread", 2: "Prohibited", 3: "Exclusive_Process"}
Gpus = Sequence[Gpu]


def _mig(g: Gpu) -> Mig:
    return g.get("mig") or {}


def rule_mig_disabled(gpus: Gpus) -> Finding | None:
    on = [g for g in gpus if _mig(g).get("current")]
    if not on:
        return None
    lines = [f"nvidia-smi -i {gpu_target(g)} -mig 0" for g in on]
    lines += [f"nvidia-smi -r -i {gpu_target(g)}   # the mode changes at the reset (drain the node first)" for g in on]
    return failure(f"MIG mode is enabled on {gpu_list(on)}: CUDA sees MIG instances, not whole GPUs",
                   "\n".join(lines), actor=Actor.NODE, cause="gpu.mig_enabled")


def rule_mig_not_pending(gpus: Gpus) -> Finding | None:
    pending = [g for g in gpus if _mig(g).get("supported") and _mig(g).get("pending") != _mig(g).get("current")]
    if not pending:
        return None
    return warning(f"a MIG mode change is pending on {gpu_list(pending)} until the GPU is reset",
                   "\n".join(f"nvidia-smi -r -i {gpu_target(g)}   # applies the pending mode (drain the node first)"
                             for g in pending), actor=Actor.NODE)


def _compute_mode_fix(gpus: Gpus) -> str:
    return "\n".join(f"nvidia-smi -i {gpu_target(g)} -c DEFAULT" for g in gpus)


def rule_compute_mode_not_prohibited(gpus: Gpus) -> Finding | None:
    bad = [g for g in gpus if g.get("compute_mode") == 2]
    if not bad:
        return None
    return failure(f"compute mode Prohibited on {gpu_list(bad)}: no process may use these GPUs",
                   _compute_mode_fix(bad), actor=Actor.NODE)


def rule_compute_mode_shared(gpus: Gpus) -> Finding | None:
    bad = [g for g in gpus if g.get("compute_mode") in (1, 3)]
    if not bad:
        return None
    modes = sorted({COMPUTE_MODES[mode] for g in bad if (mode := g.get("compute_mode")) is not None})
    return warning(f"compute mode {', '.join(modes)} on {gpu_list(bad)}: a second process on the GPU fails with "
                   "'busy or unavailable'", _compute_mode_fix(bad), actor=Actor.NODE)


RULES = (rule_mig_disabled, rule_mig_not_pending, rule_compute_mode_not_prohibited, rule_compute_mode_shared)
