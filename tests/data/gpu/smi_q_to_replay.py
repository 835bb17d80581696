"""Convert a real machine's `nvidia-smi -q` text into the NVML replay document (dsv3_preflight.gpu.probes.replay).

    python tests/data/gpu/smi_q_to_replay.py nvidia-smi-q.txt > machine.json

Every value comes from the text as printed; what `nvidia-smi -q` does not print is left out of the document
(the replay then answers "not recorded" and the checks call it unknown), except these conversions:
- `ecc_uncorrected_volatile` / `_aggregate`: the sum of the section's uncorrectable counters (NVML's total);
- `retired_pages_sbe` / `_dbe`: that many placeholder addresses (NVML returns addresses, -q prints the count);
- memory in MiB → bytes; "16x" → 16; Enabled/Yes → 1, Disabled/No → 0; N/A → NVML Not Supported (3);
- `clocks_event_reasons`: the bit mask of the reasons printed "Active" (nvml.h values);
- `performance_state`: P0 → 0; `compute_mode`: NVML_COMPUTEMODE_* of the printed name;
- `field_values` 226/227/230 from "GPU Reset Status" and "GPU Recovery Action".
`nvidia-smi nvlink -s` / `-e` text, when given with --nvlink, fills `nvlink` per GPU in the order printed.
"""
from __future__ import annotations

import json
import re
import sys
from typing import Any

REASON_BITS = {"Idle": 0x1, "Applications Clocks Setting": 0x2, "SW Power Cap": 0x4, "HW Slowdown": 0x8,
               "Sync Boost": 0x10, "SW Thermal Slowdown": 0x20, "HW Thermal Slowdown": 0x40,
               "HW Power Brake Slowdown": 0x80, "Display Clock Setting": 0x100}
COMPUTE_MODES = {"Default": 0, "Exclusive_Thread": 1, "Prohibited": 2, "Exclusive_Process": 3}
RECOVERY = {"None": 0, "GPU Reset Required": 1, "Node Reboot Required": 2, "Drain P2P": 3, "Drain and Reset": 4}
NOT_SUPPORTED = {"nvml_error": 3}


def tree(text: str) -> dict[str, Any]:
    """`nvidia-smi -q` as nested dicts by indentation: {"Driver Version": "...", "GPU 00000000:18:00.0": {...}}."""
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]
    for raw in text.splitlines():
        if not raw.strip() or raw.startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        key, sep, value = raw.strip().partition(" : ")
        if not sep and raw.rstrip().endswith(":"):
            key, value, sep = raw.strip()[:-1], "", " : "
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        key = key.strip()
        if sep and value.strip():
            parent.setdefault(key, value.strip())
        else:
            node: dict[str, Any] = {}
            parent.setdefault(key, node)
            stack.append((indent, parent[key] if isinstance(parent[key], dict) else node))
    return root


def _yes(value: str | None) -> Any:
    if value is None:
        return None
    if value in ("N/A", "Requested functionality has been deprecated"):
        return NOT_SUPPORTED
    return 1 if value in ("Enabled", "Yes") else 0


def _int(value: str | None) -> Any:
    if value is None:
        return None
    if value == "N/A":
        return NOT_SUPPORTED
    m = re.match(r"-?\d+", value)
    return int(m.group(0)) if m else None


def _uncorrectable(section: dict[str, Any]) -> int | None:
    values = [int(v) for k, v in section.items() if "Uncorrectable" in k and str(v).isdigit()]
    return sum(values) if values else None


def device(gpu: dict[str, Any]) -> dict[str, Any]:
    d: dict[str, Any] = {"name": gpu.get("Product Name"), "uuid": gpu.get("GPU UUID"),
                         "pci_bus_id": (gpu.get("PCI") or {}).get("Bus Id")}
    fb = gpu.get("FB Memory Usage") or {}
    if fb:
        d["memory_total"] = _int(fb.get("Total")) << 20
        d["memory_used"] = _int(fb.get("Used")) << 20
    if "Persistence Mode" in gpu:
        d["persistence_mode"] = _yes(gpu["Persistence Mode"])
    ecc = gpu.get("ECC Mode") or {}
    if ecc:
        d["ecc_mode"] = [_yes(ecc.get("Current")), _yes(ecc.get("Pending"))]
    errors = gpu.get("ECC Errors") or {}
    for key, section in (("ecc_uncorrected_volatile", "Volatile"), ("ecc_uncorrected_aggregate", "Aggregate")):
        total = _uncorrectable(errors.get(section) or {})
        if total is not None:
            d[key] = total
    pages = gpu.get("Retired Pages") or {}
    for key, label in (("retired_pages_sbe", "Single Bit ECC"), ("retired_pages_dbe", "Double Bit ECC")):
        if label in pages:
            n = _int(pages[label])
            d[key] = n if isinstance(n, dict) else list(range(n))
    if "Pending Page Blacklist" in pages:
        d["retired_pages_pending"] = _yes(pages["Pending Page Blacklist"])
    rows = gpu.get("Remapped Rows") or {}
    if rows:
        d["remapped_rows"] = [_int(rows.get("Correctable Error")), _int(rows.get("Uncorrectable Error")),
                              _yes(rows.get("Pending")), _yes(rows.get("Remapping Failure Occurred"))]
    procs = gpu.get("Processes")
    d["processes"] = [] if procs in (None, "None") else [
        {"pid": int(p["Process ID"]), "used_memory": _int(p.get("Used GPU Memory")) << 20}
        for p in _processes(procs)]
    fabric = gpu.get("Fabric") or {}
    if fabric:
        state = {"Not Supported": 0, "Not Started": 1, "In Progress": 2, "Completed": 3}.get(fabric.get("State"))
        d["fabric"] = NOT_SUPPORTED if state in (None, 0) else {
            "state": state, "status": 0 if fabric.get("Status") == "Success" else 999,
            "clique_id": _int(fabric.get("CliqueId")) or 0,
            "cluster_uuid": str(fabric.get("ClusterUUID", "0" * 32)).replace("-", "")}
    link = (gpu.get("PCI") or {}).get("GPU Link Info") or {}
    if link:
        gen, width = link.get("PCIe Generation") or {}, link.get("Link Width") or {}
        d["pcie"] = {"gen_current": _int(gen.get("Current")), "gen_max": _int(gen.get("Max")),
                     "gen_device_max": _int(gen.get("Device Max", gen.get("Max"))),
                     "width_current": _int(width.get("Current")), "width_max": _int(width.get("Max")),
                     "replay_counter": _int((gpu.get("PCI") or {}).get("Replays Since Reset"))}
        d["pcie"] = {k: v for k, v in d["pcie"].items() if v is not None}
    if "Performance State" in gpu:
        d["performance_state"] = _int(gpu["Performance State"].lstrip("P"))
    util = gpu.get("Utilization") or {}
    if util:
        d["utilization"] = {"gpu": _int(util.get("Gpu")), "memory": _int(util.get("Memory"))}
    reasons = gpu.get("Clocks Event Reasons") or gpu.get("Clocks Throttle Reasons") or {}
    if reasons:
        d["clocks_event_reasons"] = sum(bit for name, bit in REASON_BITS.items() if _flat(reasons).get(name) == "Active")
    temp = (gpu.get("Temperature") or {}).get("GPU Current Temp")
    if temp:
        d["temperature"] = _int(temp)
    mig = gpu.get("MIG Mode") or {}
    if mig:
        d["mig_mode"] = NOT_SUPPORTED if mig.get("Current") == "N/A" else [_yes(mig.get("Current")), _yes(mig.get("Pending"))]
    if "Compute Mode" in gpu:
        d["compute_mode"] = COMPUTE_MODES[gpu["Compute Mode"]]
    fields: dict[str, Any] = {}
    status = gpu.get("GPU Reset Status") or {}
    if "Reset Required" in status:
        fields["226"] = _yes(status["Reset Required"])
    if "Drain and Reset Recommended" in status:
        fields["227"] = _yes(status["Drain and Reset Recommended"])
    if "GPU Recovery Action" in gpu:
        fields["230"] = RECOVERY.get(gpu["GPU Recovery Action"], NOT_SUPPORTED)
    if fields:
        d["field_values"] = fields
    return {k: v for k, v in d.items() if v is not None}


def _flat(section: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in section.items():
        if isinstance(v, dict):
            out.update(_flat(v))
        else:
            out[k] = v
    return out


def _processes(section: Any) -> list[dict[str, Any]]:
    if isinstance(section, dict) and "Process ID" in section:
        return [section]
    return [v for v in (section or {}).values() if isinstance(v, dict) and "Process ID" in v]


def nvlink(text: str) -> list[list[dict[str, Any]]]:
    """`nvidia-smi nvlink -s` text → per GPU, per link {active}: a speed means active, <inactive> not."""
    gpus: list[list[dict[str, Any]]] = []
    for line in text.splitlines():
        if line.startswith("GPU "):
            gpus.append([])
        m = re.match(r"\s+Link (\d+): (.*)$", line)
        if m and gpus:
            gpus[-1].append({"active": 0 if "inactive" in m.group(2) else 1})
    return gpus


def convert(text: str) -> dict[str, Any]:
    t = tree(text)
    cuda = t.get("CUDA Version")
    doc: dict[str, Any] = {"init_error": None, "driver_version": t.get("Driver Version")}
    if cuda and cuda != "Not Found":
        major, minor = cuda.split(".")[:2]
        doc["cuda_driver_version"] = int(major) * 1000 + int(minor) * 10
    doc["devices"] = [device(v) for k, v in t.items() if k.startswith("GPU ") and isinstance(v, dict)]
    return doc


if __name__ == "__main__":
    args = sys.argv[1:]
    links = None
    if "--nvlink" in args:
        i = args.index("--nvlink")
        links = nvlink(open(args[i + 1]).read())
        del args[i:i + 2]
    out = convert(open(args[0]).read())
    if links:
        for dev, dev_links in zip(out["devices"], links):
            dev["nvlink"] = dev_links
    json.dump(out, sys.stdout, indent=1)
