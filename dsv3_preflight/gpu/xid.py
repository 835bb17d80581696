"""NVIDIA Xid events: the catalogue of what they mean, and reading them from kernel log lines.

Pure functions, no I/O (the kernel-log probe feeds the lines). Meanings and NVIDIA's resolution buckets
are from NVIDIA's Xid catalogue for Ampere and newer GPUs, "Analyzing Xid Errors with the Xid Catalog",
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html (columns "Resolution Bucket
(Immediate Action)" and "Trigger Conditions"). Line formats are the driver's own, as users posted them:
``NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s …`` (leptonai/gpud
testdata), ``NVRM: Xid (PCI:0000:00:08): 94, pid='<unknown>', name=<unknown>, Contained: SM (0x1). RST:
No, D-RST: No`` (akash-network/support#244), older drivers without ``PCI:``.

Each Xid is put in one of four classes for a preflight (the job has not started yet):
``node`` — the GPU or node needs an administrator before the job (NVIDIA: RESET_GPU, RESTART_BM, the ECC /
NVLink workflows); ``reset_soon`` — contained, the GPU should be reset when convenient; ``app`` — an
application fault (NVIDIA: RESTART_APP / IGNORE with the GPU healthy); ``info`` — NVIDIA says ignore, or
another check judges the state better (63: row remapping, judged by gpu.memory_errors through NVML).
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

CATALOG_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"


@dataclass(frozen=True)
class XidMeaning:
    mnemonic: str
    meaning: str
    nvidia_action: str   # NVIDIA's immediate resolution bucket
    kind: str            # node | reset_soon | app | info


def _m(mnemonic: str, meaning: str, action: str, kind: str) -> XidMeaning:
    return XidMeaning(mnemonic, meaning, action, kind)


XIDS: dict[int, XidMeaning] = {
    8: _m("ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", "RESTART_APP", "app"),
    13: _m("ROBUST_CHANNEL_GR_EXCEPTION", "Graphics Engine Exception: usually an application out-of-bounds access or "
           "illegal instruction", "RESTART_APP", "app"),
    31: _m("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault: usually an application's illegal address",
           "RESTART_APP", "app"),
    32: _m("ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream (often PCIe signal quality)",
           "RESTART_APP", "app"),
    38: _m("ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", "IGNORE", "info"),
    43: _m("ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing: an application hit a software-induced "
           "fault; the GPU remains healthy", "IGNORE", "app"),
    44: _m("ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "Graphics Engine fault during context switch", "IGNORE", "info"),
    45: _m("ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup after an application was aborted (Ctrl-C, kill, "
           "a reset) or a previous error", "IGNORE (follow the other Xid)", "info"),
    46: _m("ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "RESET_GPU", "node"),
    48: _m("ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error: an uncorrectable memory error; a GPU reset or node "
           "reboot is needed to clear it", "WORKFLOW_XID_48", "node"),
    62: _m("PMU_HALT_ERROR", "Internal micro-controller halt", "RESET_GPU", "node"),
    63: _m("INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory row remapping event (judged through NVML by gpu.memory_errors)",
           "IGNORE", "info"),
    64: _m("INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure", "RESET_GPU", "node"),
    74: _m("NVLINK_ERROR", "NVLink error: a link to another GPU or NVSwitch failed; a GPU reset or node reboot is "
           "needed to clear it", "WORKFLOW_NVLINK_ERR", "node"),
    79: _m("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus: the driver could not reach it over "
           "PCI Express", "RESTART_BM", "node"),
    92: _m("EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "IGNORE", "reset_soon"),
    94: _m("ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error: the application that hit it was stopped; reset "
           "the GPU when convenient", "RESTART_APP", "reset_soon"),
    95: _m("ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error: the GPU must be reset before applications "
           "can run again", "RESET_GPU", "node"),
    109: _m("ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context Switch Timeout Error", "RESET_GPU", "node"),
    110: _m("SEC_FAULT_ERROR", "Security Fault Error: cold reset the system", "RESET_GPU", "node"),
    119: _m("GSP_RPC_TIMEOUT", "GSP RPC Timeout: the GPU's System Processor did not answer the driver", "RESET_GPU", "node"),
    120: _m("GSP_ERROR", "GSP Error: code on the GPU's System Processor failed", "RESET_GPU", "node"),
    136: _m("ALI_TRAINING_FAIL", "NVLink Link Training Failed", "RESET_GPU", "node"),
    137: _m("NVLINK_PRIV_ERR", "NVLink Privilege Error: usually an application's illegal peer access", "IGNORE", "app"),
    140: _m("UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", "RESET_GPU", "node"),
    143: _m("GPU_INIT_ERROR", "GPU Initialization Error", "RESET_GPU", "node"),
    144: _m("NVLINK_SAW_ERROR", "NVLink SAW Error", "WORKFLOW_NVLINK5_ERR", "node"),
    145: _m("NVLINK_RLW_ERROR", "NVLink RLW Error", "WORKFLOW_NVLINK5_ERR", "node"),
    146: _m("NVLINK_TLW_ERROR", "NVLink TLW Error", "WORKFLOW_NVLINK5_ERR", "node"),
    147: _m("NVLINK_TREX_ERROR", "NVLink TREX Error", "WORKFLOW_NVLINK5_ERR", "node"),
    148: _m("NVLINK_NVLPW_CTRL_ERROR", "NVLink NVLPW_CTRL Error", "WORKFLOW_NVLINK5_ERR", "node"),
    149: _m("NVLINK_NETIR_ERROR", "NVLink NETIR Error", "WORKFLOW_NVLINK5_ERR", "node"),
    150: _m("NVLINK_MSE_ERROR", "NVLink MSE Error", "WORKFLOW_NVLINK5_ERR", "node"),
    154: _m("GPU_RECOVERY_ACTION_CHANGED", "GPU Recovery Action Changed", "XID_154", "node"),
    155: _m("NVLINK_SW_DEFINED_ERROR", "NVLink SW Defined Error (link down)", "RESET_GPU", "node"),
    156: _m("RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", "RESET_GPU", "reset_soon"),
    157: _m("RESOURCE_RETIREMENT_FAILURE", "Resource Retirement Failure: no repair is left", "IGNORE", "reset_soon"),
    158: _m("GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", "RESET_GPU", "node"),
}

#: a GPU's PCI address as the driver's lines print it (domain, bus, device): ``0000:9b:00``, ``00000000:9B:00``
PCI = r"[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}"
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>" + PCI + r"(?:\.[0-7])?)\): "
                  r"(?P<xid>\d+),?\s*(?P<rest>.*)$")
_FALLEN = re.compile(r"NVRM: (?:The NVIDIA )?GPU (?:at PCI:)?(?P<pci>" + PCI + r"(?:\.[0-7])?)"
                     r"(?P<rest>.*)$")
_KMSG = re.compile(r"^\d+,\d+,(?P<usec>\d+),[^;]*;")
_DMESG = re.compile(r"^\[\s*(?P<stamp>[^\]]+)\]\s")
_JOURNAL = re.compile(r"^(?P<stamp>[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d) \S+ kernel: ")
_PROCESS = re.compile(r"pid=(?P<pid>'?[^,]*'?)(?:, name=(?P<name>[^,]*))?")
_ACTION = re.compile(r"to 0x[0-9a-f]+ \((?P<action>[^)]+)\)", re.I)


def meaning(xid: int) -> XidMeaning:
    """NVIDIA's meaning of an Xid; one this table lacks is treated as needing the administrator's eye."""
    return XIDS.get(xid) or XidMeaning("UNKNOWN", f"Xid {xid} (not in this tool's table: see {CATALOG_URL})",
                                       "see NVIDIA's catalogue", "node")


def pci_key(pci: str) -> str:
    """``0000:9b:00`` / ``00000000:9B:00.0`` → ``0000:9b:00`` (domain, bus, device: how Xid lines name a GPU)."""
    parts = pci.lower().split(":")
    if len(parts) < 3:
        return pci.lower()
    return f"{int(parts[0], 16):04x}:{int(parts[1], 16):02x}:{int(parts[2].split('.')[0], 16):02x}"


def stamp(line: str) -> str | None:
    """The line's time as the log has it: seconds since boot (/dev/kmsg, dmesg) or a wall-clock time (journalctl, dmesg -T)."""
    m = _KMSG.match(line)
    if m:
        return f"{int(m.group('usec')) / 1e6:.6f}s"
    m = _DMESG.match(line) or _JOURNAL.match(line)
    return m.group("stamp").strip() if m else None


def parse_line(line: str) -> dict[str, Any] | None:
    """An Xid event of one kernel log line: ``{xid, pci, rest, time, pid, name}``, or None."""
    m = _XID.search(line)
    if m:
        event: dict[str, Any] = {"xid": int(m.group("xid")), "pci": pci_key(m.group("pci")), "rest": m.group("rest").strip()}
    else:
        m = _FALLEN.search(line)
        if not m or "fallen off the bus" not in m.group("rest"):
            return None
        event = {"xid": 79, "pci": pci_key(m.group("pci")), "rest": m.group("rest").strip(" :"), "no_xid_line": True}
    event["time"] = stamp(line)
    proc = _PROCESS.search(event["rest"])
    event["pid"] = proc.group("pid").strip("'") if proc else None
    event["name"] = (proc.group("name") or "").strip() or None if proc else None
    return event


def parse_lines(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Every Xid event in order. A multi-line "The NVIDIA GPU <pci> … fallen off the bus" report counts as one Xid 79."""
    events: list[dict[str, Any]] = []
    pending_gpu: tuple[str, str] | None = None  # (pci, line) of "NVRM: The NVIDIA GPU 0000:b3:00.0" awaiting its reason
    for line in lines:
        event = parse_line(line)
        if event:
            echo = event.get("no_xid_line") and events and (events[-1]["xid"], events[-1]["pci"]) == (79, event["pci"])
            if not echo:  # "NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus." right after its Xid 79 line
                events.append(event)
            pending_gpu = None
            continue
        gpu = re.search(r"NVRM: The NVIDIA GPU (?P<pci>[0-9a-fA-F:.]+)\s*$", line)
        if gpu:
            pending_gpu = (pci_key(gpu.group("pci")), line)
        elif pending_gpu and "fallen off the bus" in line:
            events.append({"xid": 79, "pci": pending_gpu[0], "rest": "fallen off the bus and is not responding to commands",
                           "time": stamp(pending_gpu[1]), "pid": None, "name": None, "no_xid_line": True})
            pending_gpu = None
    return events


def summarize(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Events grouped by (GPU, Xid), in order of first appearance: count, first and last time, processes, last text."""
    groups: dict[tuple[str, int], dict[str, Any]] = {}
    for e in events:
        key = (e["pci"], e["xid"])
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"pci": e["pci"], "xid": e["xid"], "count": 0, "first_time": e.get("time"), "names": [],
                               "first": e.get("rest")}
        g["count"] += 1
        g["last_time"] = e.get("time")
        g["last"] = e.get("rest")
        if e.get("name") and e["name"] != "<unknown>" and e["name"] not in g["names"] and len(g["names"]) < 5:
            g["names"].append(e["name"])
    return list(groups.values())


def recovery_action(text: str | None) -> str | None:
    """Xid 154's new recovery action: "… changed from 0x0 (None) to 0x2 (Node Reboot Required)" → "Node Reboot Required"."""
    m = _ACTION.search(text or "")
    return m.group("action") if m else None
