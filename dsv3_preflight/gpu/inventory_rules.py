"""The rules of gpu.inventory (pure: facts in, findings out): the GPUs the profile expects are here, of an accepted model, persistent and free."""
from __future__ import annotations

from collections.abc import Sequence

from dsv3_preflight.gpu import remedies
from dsv3_preflight.gpu.common import NO_DRIVER, no_nvml_summary, spans
from dsv3_preflight.gpu.facts import Gpu, NvmlFact
from dsv3_preflight.result import Actor, Finding, failure, warning

MIB = 1 << 20


GpuList = Sequence[Gpu]


def rule_nvml_answers(nvml: NvmlFact) -> Finding | None:
    if nvml.get("available"):
        return None
    return failure(no_nvml_summary(nvml), remedies.install_driver(nvml), actor=Actor.NODE, cause=NO_DRIVER)


def rule_count(gpus: GpuList, expected: int) -> Finding | None:
    if len(gpus) == expected:
        return None
    return failure(f"{len(gpus)} GPUs on this node, the profile expects {expected}",
                   "nvidia-smi -L   # which GPU is missing\nlspci -nn | grep -i nvidia   # is it still on the PCI bus?\n"
                   + remedies.kernel_xid_log() + "   # Xid 79: fallen off the bus",
                   actor=Actor.NODE)


def rule_models(gpus: GpuList, accepted: Sequence[str]) -> Finding | None:
    wrong = [g for g in gpus if not any(m.lower() in (g.get("name") or "").lower() for m in accepted)]
    if not wrong:
        return None
    models = ",".join(list(accepted) + sorted({str(g.get("name")) for g in wrong}))
    return failure(f"GPUs {spans([g['index'] for g in wrong])} are {wrong[0].get('name')}, not one of {', '.join(accepted)}",
                   f"dsv3-preflight run --gpu-models '{models}'   # if this model is intended (config key gpu_models)",
                   actor=Actor.JOB)


def rule_one_model(gpus: GpuList) -> Finding | None:
    models = sorted({g.get("name") or "?" for g in gpus})
    if len(models) <= 1:
        return None
    return failure(f"mixed GPU models on one node: {', '.join(models)}",
                   "nvidia-smi -L   # which slot holds the odd model: one model per node keeps the ranks in step",
                   actor=Actor.NODE)


def rule_persistence(gpus: GpuList) -> Finding | None:
    off = [g["index"] for g in gpus if g.get("persistence_mode") is False]
    if not off:
        return None
    return warning(f"persistence mode is off on GPUs {spans(off)}: every CUDA init reloads the driver state (slow, flaky)",
                   "systemctl enable --now nvidia-persistenced   # or: nvidia-smi -pm 1", actor=Actor.NODE)


def rule_no_other_processes(gpus: GpuList) -> Finding | None:
    busy = [(g, p) for g in gpus for p in g.get("processes") or []]
    if not busy:
        return None
    shown = [f"pid {p['pid']} on GPU {g['index']}" + (f" ({used // MIB} MiB)" if (used := p.get("used_memory_bytes")) else "")
             for g, p in busy]
    fixes = [f"ps -o pid,user,etime,cmd -p {pid} && kill {pid}   # after checking it is a leftover"
             for pid in dict.fromkeys(p["pid"] for _, p in busy)]
    # the cause host.resources gives the same processes (it sees them through /dev/nvidia*): one card, not two
    return failure("GPUs busy with other processes: " + ", ".join(shown), "\n".join(fixes), actor=Actor.NODE,
                   cause="host.gpu_held")
