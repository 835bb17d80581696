"""Small shared pieces of the GPU checks' wording: naming GPUs, spans of indices, the no-driver summary."""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .facts import Gpu, NvmlFact

NOT_EXPECTED = "profile expects no GPUs (gpus_per_node = 0)"
#: the root cause shared by every gpu.* check when NVML (the driver) does not answer
NO_DRIVER = "gpu.no_driver"


def no_nvml_summary(nvml: NvmlFact) -> str:
    """``no NVIDIA driver/NVML: NVML Shared Library Not Found`` (NVML's own words)."""
    return f"no NVIDIA driver/NVML: {nvml.get('error') or 'NVML not available'}"


def spans(values: Iterable[int | None]) -> str:
    """0,1,2,3,5 → '0–3, 5'. A GPU without an NVML index (None: the kernel lists it, NVML does not) is named
    ``?`` after the spans."""
    given = list(values)
    out: list[str] = []
    start: int | None = None
    prev: int | None = None
    for v in sorted({v for v in given if v is not None}):
        if start is None or prev is None:
            start = prev = v
        elif v == prev + 1:
            prev = v
        else:
            out.append(f"{start}–{prev}" if prev != start else str(start))
            start = prev = v
    if start is not None:
        out.append(f"{start}–{prev}" if prev != start else str(start))
    if None in given:
        out.append("?")
    return ", ".join(out)


def gpu_label(gpu: Gpu) -> str:
    """``GPU 3 (00000000:87:00.0)``: NVML's index and the PCI bus id an administrator finds the board by."""
    bus = gpu.get("pci_bus_id")
    if gpu.get("index") is None:
        return f"the GPU at {bus}"
    return f"GPU {gpu.get('index')}" + (f" ({bus})" if bus else "")


def gpu_target(gpu: Gpu) -> str:
    """What ``nvidia-smi -i`` takes for this GPU: its PCI bus id (stable across reboots), else its index."""
    return str(gpu.get("pci_bus_id") or gpu.get("index"))


def gpu_list(gpus: Iterable[Gpu]) -> str:
    """``GPU 3 (00000000:87:00.0), GPU 5 (00000000:90:00.0)``."""
    return ", ".join(gpu_label(g) for g in gpus)


def reset_cause(gpu: Gpu) -> str:
    """The root cause "this GPU needs a reset", shared by every check that finds a reason for it on this GPU."""
    return f"gpu.reset_pending:{gpu_target(gpu)}"


def replace_cause(gpu: Gpu) -> str:
    """The root cause "this GPU needs replacing" (row remapping failed, Xid 64)."""
    return f"gpu.replace:{gpu_target(gpu)}"


def nvlink_cause(gpu: Gpu) -> str:
    """The root cause "this GPU's NVLink is down or failing" (inactive links, Xid 74)."""
    return f"gpu.nvlink:{gpu_target(gpu)}"


def unknown_on(gpus: Sequence[Gpu], key: str) -> list[Gpu]:
    """The GPUs for which NVML gave no value of ``key`` (unknown: never read as healthy)."""
    return [g for g in gpus if g.get(key) is None]


def nvml_reason(gpus: Sequence[Gpu], *error_keys: str) -> str:
    """NVML's own words for why a value is missing, from the first GPU that has them."""
    for g in gpus:
        for key in error_keys:
            text = (g.get("errors") or {}).get(key)
            if text:
                return str(text)
    return "not in these facts (recorded by an older version?)"


def health_skip(nvml: NvmlFact, profile: Any, evidence: Mapping[str, Any], key: str | tuple[str, ...], what: str,
                *error_keys: str) -> Any:
    """The SKIP a health check returns before judging, or None: no GPU expected, no driver (the shared
    no-driver cause), or NVML reported ``key`` for no GPU (unknown, said with NVML's words)."""
    from dsv3_preflight.result import Result

    gpus = nvml.get("gpus") or []
    if not profile.expects_gpus:
        return Result.skipped(NOT_EXPECTED, evidence)
    if not nvml.get("available"):
        return Result.skipped(f"cannot read {what}: {no_nvml_summary(nvml)}", evidence, cause=NO_DRIVER)
    if not gpus:
        return Result.skipped(f"cannot read {what}: NVML lists no GPU", evidence)
    keys = (key,) if isinstance(key, str) else tuple(key)
    if all(len(unknown_on(gpus, k)) == len(gpus) for k in keys):
        return Result.skipped(f"NVML reported no {what}: {nvml_reason(gpus, *(error_keys or keys))}", evidence)
    return None


def rule_reported(gpus: Sequence[Gpu], key: str, what: str, *error_keys: str) -> Any:
    """A warning naming the GPUs whose ``key`` NVML did not report while others did: unknown is not healthy."""
    from dsv3_preflight.result import Actor, warning

    missing = unknown_on(gpus, key)
    if not missing or len(missing) == len(gpus):
        return None
    return warning(f"{what} unknown on {gpu_list(missing)} ({nvml_reason(missing, *(error_keys or (key,)))})",
                   "\n".join(f"nvidia-smi -q -i {gpu_target(g)}" for g in missing), actor=Actor.NODE)
