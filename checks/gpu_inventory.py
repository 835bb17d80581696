"""gpu.inventory: the GPUs the profile expects are here, healthy and free."""
from __future__ import annotations

from typing import Any

from dsv3_preflight import Result, check
from dsv3_preflight.gpu.common import NOT_EXPECTED, join_problems, no_nvml_summary, spans

MIB = 1 << 20


@check("gpu.inventory", needs=["nvml", "profile"], tags=["gpu"], timeout=30)
def inventory(nvml, profile):
    """GPU count and model match the profile; persistence mode on; no uncorrectable ECC errors; no other process on the GPUs."""
    gpus = nvml.get("gpus") or []
    evidence: dict[str, Any] = {
        "driver_version": nvml.get("driver_version"),
        "cuda_driver_version": nvml.get("cuda_driver_version_str"),
        "gpus": [{k: g.get(k) for k in ("index", "name", "uuid", "pci_bus_id", "memory_total_bytes", "persistence_mode",
                                         "ecc_enabled", "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate",
                                         "remapped_rows", "retired_pages_dbe", "processes")} for g in gpus],
        "expected": {"gpus_per_node": profile.gpus_per_node, "gpu_models": list(profile.gpu_models)},
    }
    if not profile.expects_gpus:
        return Result.skipped(NOT_EXPECTED, evidence)
    if not nvml.get("available"):
        evidence["nvml_error"] = nvml.get("error")
        return Result.failed(no_nvml_summary(nvml), evidence,
                             "install the NVIDIA datacenter driver (nvidia-smi must list the GPUs)\n"
                             "docker run --gpus all ...   # inside a container: start it with the GPUs")
    fails: list[str] = []
    warns: list[str] = []
    fixes: list[str] = []
    expected = profile.gpus_per_node
    if len(gpus) != expected:
        fails.append(f"{len(gpus)} GPUs on this node, the profile expects {expected}")
        fixes.append("nvidia-smi -L   # which GPU is missing; dmesg -T | grep -i Xid   # fallen off the bus?")
    models = sorted({g.get("name") or "?" for g in gpus})
    wrong = [g["index"] for g in gpus if not any(m.lower() in (g.get("name") or "").lower() for m in profile.gpu_models)]
    if wrong:
        fails.append(f"GPUs {spans(wrong)} are {gpus[wrong[0]].get('name')}, not one of {', '.join(profile.gpu_models)}")
        fixes.append("set gpu_models in the profile (config key gpu_models) if this model is intended")
    if len(models) > 1:
        fails.append(f"mixed GPU models on one node: {', '.join(models)}")
    off = [g["index"] for g in gpus if g.get("persistence_mode") is False]
    if off:
        warns.append(f"persistence mode is off on GPUs {spans(off)}: every CUDA init reloads the driver state (slow, flaky)")
        fixes.append("systemctl enable --now nvidia-persistenced   # or: nvidia-smi -pm 1")
    vol = [g for g in gpus if (g.get("ecc_uncorrected_volatile") or 0) > 0]
    if vol:
        fails.append("uncorrectable ECC errors since boot on GPU " + ", ".join(
            f"{g['index']} ({g['ecc_uncorrected_volatile']})" for g in vol))
        fixes.append("nvidia-smi -q -d ECC,ROW_REMAPPER -i " + ",".join(str(g["index"]) for g in vol) +
                     "\nnvidia-smi -r -i <gpu>   # reset when idle (or reboot); replace the GPU if it recurs")
    agg = [g for g in gpus if (g.get("ecc_uncorrected_aggregate") or 0) > 0 and g not in vol]
    if agg:
        warns.append("uncorrectable ECC errors in the GPU's lifetime on GPU " + ", ".join(
            f"{g['index']} ({g['ecc_uncorrected_aggregate']})" for g in agg))
    no_ecc = [g["index"] for g in gpus if g.get("ecc_enabled") is False]
    if no_ecc:
        warns.append(f"ECC is disabled on GPUs {spans(no_ecc)}")
        fixes.append("nvidia-smi -e 1 && reboot")
    for g in gpus:
        rows = g.get("remapped_rows") or {}
        if rows.get("failure"):
            fails.append(f"GPU {g['index']} ({g.get('pci_bus_id')}): row remapping failed: the GPU needs replacement")
            fixes.append(f"nvidia-smi -q -d ROW_REMAPPER -i {g['index']}   # RMA the GPU")
        elif rows.get("pending"):
            fails.append(f"GPU {g['index']} ({g.get('pci_bus_id')}): a row remapping is pending until the GPU is reset")
            fixes.append(f"nvidia-smi -r -i {g['index']}   # when idle, or reboot")
    busy = [(g, p) for g in gpus for p in g.get("processes") or []]
    if busy:
        lines = [f"pid {p['pid']} on GPU {g['index']}" + (f" ({p['used_memory_bytes'] // MIB} MiB)" if p.get("used_memory_bytes") else "")
                 for g, p in busy]
        fails.append("GPUs busy with other processes: " + ", ".join(lines))
        for pid in dict.fromkeys(p["pid"] for _, p in busy):
            fixes.append(f"ps -o pid,user,etime,cmd -p {pid} && kill {pid}   # after checking it is a leftover")
    evidence["problems"], evidence["warnings"] = fails, warns
    remediation = "\n".join(dict.fromkeys(fixes)) or None
    if fails:
        return Result.failed(join_problems(fails), evidence, remediation)
    if warns:
        return Result.warned(join_problems(warns), evidence, remediation)
    mem = (gpus[0].get("memory_total_bytes") or 0) // MIB
    return Result.passed(f"{len(gpus)} × {models[0]} ({mem} MiB), driver {nvml.get('driver_version')}, "
                         "persistence on, no uncorrectable ECC errors, no other processes", evidence)
