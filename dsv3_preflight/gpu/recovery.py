"""The driver's own verdict on a GPU: reset required, drain and reset recommended, and the recovery action.

NVML field values (nvml.h): NVML_FI_DEV_RESET_STATUS (226), NVML_FI_DEV_DRAIN_AND_RESET_STATUS (227) and,
on newer drivers, NVML_FI_DEV_GET_GPU_RECOVERY_ACTION (230) with NVML_GPU_RECOVERY_ACTION_* values:
0 None, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset (NVIDIA's Xid 154 names the same
actions: "None", "GPU Reset Required", "Node Reboot Required", "Drain P2P", "Drain and Reset").
nvidia-smi -q shows them as "GPU Reset Status" and "GPU Recovery Action".
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsv3_preflight.result import Actor, Finding, failure

from . import remedies
from .common import gpu_label, reset_cause
from .facts import Gpu

ACTIONS = {0: "None", 1: "GPU Reset Required", 2: "Node Reboot Required", 3: "Drain P2P", 4: "Drain and Reset",
           5: "Recover IMEX Domain", 6: "Bus Reset", 7: "System Reboot"}
REBOOT_ACTIONS = {2, 7}
Gpus = Sequence[Gpu]


def _reset(g: Gpu) -> Mapping[str, Any]:
    return g.get("reset") or {}


def needs(g: Gpu) -> str | None:
    """What the driver asks for this GPU, in its words, or None."""
    r = _reset(g)
    action = r.get("recovery_action")
    if action:
        return ACTIONS.get(int(action), f"recovery action {action}")
    if r.get("reset_required"):
        return "GPU Reset Required"
    if r.get("drain_and_reset"):
        return "Drain and Reset"
    return None


def rule_no_reset_pending(gpus: Gpus) -> list[Finding]:
    found = []
    for g in gpus:
        what = needs(g)
        if what is None:
            continue
        if _reset(g).get("recovery_action") in REBOOT_ACTIONS:
            found.append(failure(f"{gpu_label(g)}: the driver asks for {what}",
                                 "# drain this node from the job first\nreboot   # the driver's recovery action for "
                                 f"{gpu_label(g)}", actor=Actor.NODE, cause="gpu.reboot_required"))
        else:
            found.append(failure(f"{gpu_label(g)}: the driver asks for {what}",
                                 remedies.reset_gpus([g], f"the driver reports {what}"), actor=Actor.NODE,
                                 cause=reset_cause(g)))
    return found
