"""Rules over the Xid events of the kernel log since boot (the ``kernel_xid`` fact), named by NVML's GPUs.

An event's class comes from NVIDIA's catalogue (:mod:`.xid`). ``node`` events fail the node with the fix
NVIDIA's resolution bucket calls for (reset the GPU; reboot for a GPU fallen off the bus or a node-reboot
recovery action); ``reset_soon`` events warn; application faults warn the job's owner; the rest stay in the
evidence. The kernel log keeps an event until the next boot, after a GPU reset too: the fixes say so.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from dsv3_preflight.result import Actor, Finding, failure, warning

from . import remedies
from .common import gpu_label, gpu_target, nvlink_cause, replace_cause, reset_cause
from .facts import Gpu, XidEvent
from .xid import meaning, pci_key, recovery_action

NVLINK_XIDS = {74, 136, 144, 145, 146, 147, 148, 149, 150, 155}
REBOOT_XIDS = {79}
LOG_NOTE = "# the kernel log keeps this Xid until the next boot: after the fix, a reboot clears it"


def gpus_by_pci(gpus: Sequence[Gpu]) -> dict[str, Gpu]:
    return {pci_key(str(g["pci_bus_id"])): g for g in gpus if g.get("pci_bus_id")}


def _who(event: XidEvent, by_pci: Mapping[str, Gpu]) -> tuple[str, Gpu]:
    """(how to name the GPU, a GPU-like mapping for the fixes): NVML's GPU when the bus matches, else the bus."""
    gpu = by_pci.get(event["pci"])
    if gpu is not None:
        return gpu_label(gpu), gpu
    return f"PCI {event['pci']} (not among the GPUs NVML lists now)", {"index": None, "pci_bus_id": f"{event['pci']}.0"}


def _times(event: XidEvent) -> str:
    count = event.get("count", 1)
    when = event.get("last_time") or event.get("first_time")
    if count > 1:
        return f"{count}×" + (f", last at {when}" if when else "")
    return "once" + (f", at {when}" if when else "")


def _action_154(event: XidEvent) -> str | None:
    action = recovery_action(event.get("last"))
    return None if action in (None, "None") else action


def node_fix(event: XidEvent, gpu: Gpu) -> str:
    xid = event["xid"]
    action = _action_154(event) if xid == 154 else None
    if xid in REBOOT_XIDS or (action and "Reboot" in action):
        return "\n".join(["# drain this node from the job first",
                          remedies.kernel_xid_log(event["pci"]) + "   # the events, with the kernel's PCIe messages around them",
                          "reboot   # NVIDIA: restart the machine (a GPU fallen off the bus does not come back without it)",
                          "# if it recurs: reseat the GPU and check its power and PCIe slot, then replace it (vendor support)"])
    if xid == 64:
        return remedies.replace_gpus([gpu], f"Xid 64: {meaning(64).meaning}") + "\n" + LOG_NOTE
    return "\n".join([remedies.kernel_xid_log(event["pci"]),
                      remedies.reset_gpus([gpu], f"Xid {xid}: NVIDIA's action {meaning(xid).nvidia_action}"),
                      "# if it recurs after the reset: vendor support (nvidia-bug-report.sh)", LOG_NOTE])


def node_cause(event: XidEvent, gpu: Gpu) -> str:
    xid = event["xid"]
    if xid in REBOOT_XIDS:
        return f"gpu.fallen_off_bus:{gpu_target(gpu)}"
    if xid == 64:
        return replace_cause(gpu)
    if xid in NVLINK_XIDS:
        return nvlink_cause(gpu)
    if xid == 154 and (_action_154(event) or "").endswith("Reboot Required"):
        return "gpu.reboot_required"
    return reset_cause(gpu)


def _is_node(event: XidEvent) -> bool:
    kind = meaning(event["xid"]).kind
    if event["xid"] == 154:
        return _action_154(event) is not None
    if event["xid"] in range(144, 151) and "Nonfatal" in str(event.get("last")):
        return False
    return kind == "node"


def rule_node_xids(events: Sequence[XidEvent], gpus: Sequence[Gpu]) -> list[Finding]:
    """Xids after which NVIDIA resets the GPU or restarts the machine: the node is not ready for the job."""
    by_pci = gpus_by_pci(gpus)
    found = []
    for e in events:
        if not _is_node(e):
            continue
        who, gpu = _who(e, by_pci)
        m = meaning(e["xid"])
        extra = f" ({_action_154(e)})" if e["xid"] == 154 else ""
        found.append(failure(f"{who}: Xid {e['xid']} {m.meaning}{extra}, {_times(e)} since boot",
                             node_fix(e, gpu), actor=Actor.NODE, cause=node_cause(e, gpu)))
    return found


def rule_reset_soon_xids(events: Sequence[XidEvent], gpus: Sequence[Gpu]) -> list[Finding]:
    """Contained errors (Xid 94, 92, Nonfatal NVLink events, …): the GPU runs, but NVIDIA says reset it when convenient."""
    by_pci = gpus_by_pci(gpus)
    found = []
    for e in events:
        kind = meaning(e["xid"]).kind
        nonfatal_nvlink = e["xid"] in range(144, 151) and "Nonfatal" in str(e.get("last"))
        if kind != "reset_soon" and not nonfatal_nvlink:
            continue
        who, gpu = _who(e, by_pci)
        found.append(warning(f"{who}: Xid {e['xid']} {meaning(e['xid']).meaning}, {_times(e)} since boot",
                             remedies.reset_gpus([gpu], f"Xid {e['xid']}: reset when convenient") + "\n" + LOG_NOTE,
                             actor=Actor.NODE, cause=reset_cause(gpu)))
    return found


def rule_application_xids(events: Sequence[XidEvent], gpus: Sequence[Gpu]) -> Finding | None:
    """Application faults (Xid 13, 31, 43, …) earlier in this boot: the GPU is healthy; the program that faulted is not."""
    by_pci = gpus_by_pci(gpus)
    apps = [e for e in events if meaning(e["xid"]).kind == "app"]
    if not apps:
        return None
    shown = []
    for e in apps:
        who, _ = _who(e, by_pci)
        names = f" ({', '.join(e['names'])})" if e.get("names") else ""
        shown.append(f"Xid {e['xid']} {_times(e)} on {who}{names}")
    return warning("application faults earlier in this boot: " + "; ".join(shown) +
                   " (NVIDIA: an application bug, rarely the hardware)",
                   remedies.kernel_xid_log() + "   # which program, when\n"
                   "# if it was this job: rerun the failing step under compute-sanitizer --tool memcheck, or with "
                   "CUDA_DEVICE_WAITS_ON_EXCEPTION=1 and attach cuda-gdb (NVIDIA's advice for Xid 13 and 31)",
                   actor=Actor.JOB, cause="gpu.xid_application")
