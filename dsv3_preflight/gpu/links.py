"""Link rules: the PCIe link each GPU trained at, and its NVLink links' state and error counters.

PCIe. NVML reports the current link generation and width beside the maximum the GPU and the host allow
together. Width is judged always: a link that trained at x8 of x16 keeps half the host bandwidth whatever
the load. Generation is judged with care, because an idle GPU lowers its link generation to save power
(nvidia-smi: "These may be reduced when the GPU is not in use"): a GPU that is busy (utilisation above 0)
below its maximum generation fails; an idle GPU below its maximum is only suspicious when a GPU of the same
model on the node, equally idle, runs at its maximum (a warning, with the commands that re-read the link
under load); idle GPUs that all downshifted are not judged, and the evidence says so.

NVLink. Every link NVML knows must be active; all links of all GPUs down on an NVSwitch system is Fabric
Manager's doing (the fabric is unconfigured), reported under Fabric Manager's root cause. Data-link error
counters (replay, recovery, CRC) since the last reset are reported as a warning with their counts.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from dsv3_preflight.result import Actor, Finding, failure, warning

from .common import gpu_label, gpu_target, nvlink_cause
from .fabric_rules import Cause
from .facts import Gpu, NvLinkLink
from .rankmap import normalize_bus_id

Gpus = Sequence[Gpu]
Counter = Literal["replay", "recovery", "crc_flit", "crc_data"]
COUNTERS: tuple[Counter, ...] = ("replay", "recovery", "crc_flit", "crc_data")


def _pcie(g: Gpu) -> Mapping[str, Any]:
    return g.get("pcie") or {}


def _busy(g: Gpu) -> bool:
    return (g.get("utilization_gpu") or 0) > 0


def _lspci(g: Gpu) -> str:
    return f"lspci -vv -s {normalize_bus_id(str(g.get('pci_bus_id')))} | grep -E 'LnkCap:|LnkSta:'"


def pcie_fix_width(g: Gpu) -> str:
    p = _pcie(g)
    return "\n".join([
        f"# drain this node: {gpu_label(g)} trained at PCIe x{p.get('width_current')} of x{p.get('width_max')}",
        f"{_lspci(g)}   # the slot's capability (LnkCap) against the trained link (LnkSta)",
        f"nvidia-smi -q -i {gpu_target(g)} -d PCIE",
        "# reseat the GPU, its riser or cable; check the slot's lane setting in the BIOS; a reboot retrains the link",
    ])


def pcie_fix_generation_under_load(g: Gpu) -> str:
    """Load the GPU over PCIe (host-to-device copies) and read the link while it runs."""
    uuid = g.get("uuid") or "${GPU_UUID:?the UUID nvidia-smi -L shows for this GPU}"
    return "\n".join([
        f"CUDA_VISIBLE_DEVICES={uuid} python -c \"import torch; x = torch.ones(1 << 28, pin_memory=True); "
        "[x.to('cuda') for _ in range(400)]\" &",
        f"sleep 3; nvidia-smi -q -i {gpu_target(g)} -d PCIE | grep -A3 'PCIe Generation'   # under load: Current must equal Max",
        "wait",
        f"{_lspci(g)}   # if it stays low: the slot's speed (LnkCap) against the trained link (LnkSta); reseat, check BIOS",
    ])


def rule_pcie_width(gpus: Gpus) -> list[Finding]:
    """Width below the maximum is a fault at any load: the link trained with fewer lanes."""
    found = []
    for g in gpus:
        p = _pcie(g)
        cur, top = p.get("width_current"), p.get("width_max")
        if cur is not None and top is not None and cur < top:
            found.append(failure(f"{gpu_label(g)}: PCIe link trained at x{cur} of x{top}: {top // max(cur, 1)}× less "
                                 "host bandwidth (data loading, CPU offload, inter-node traffic through the host)",
                                 pcie_fix_width(g), actor=Actor.NODE, cause=f"gpu.pcie_degraded:{gpu_target(g)}"))
    return found


def _at_max_gen(g: Gpu) -> bool:
    p = _pcie(g)
    return p.get("gen_current") is not None and p.get("gen_current") == p.get("gen_max")


def rule_pcie_generation(gpus: Gpus) -> list[Finding]:
    """Generation below the maximum: a fault when busy; suspicious when idle peers of the same model run at their maximum."""
    found = []
    for g in gpus:
        p = _pcie(g)
        cur, top = p.get("gen_current"), p.get("gen_max")
        if cur is None or top is None or cur >= top:
            continue
        if _busy(g):
            found.append(failure(f"{gpu_label(g)}: PCIe Gen{cur} of Gen{top} while busy ({g.get('utilization_gpu')}% "
                                 f"utilisation): {2 ** (top - cur)}× less host bandwidth per lane",
                                 pcie_fix_generation_under_load(g), actor=Actor.NODE,
                                 cause=f"gpu.pcie_degraded:{gpu_target(g)}"))
            continue
        peers = [o for o in gpus if o is not g and o.get("name") == g.get("name") and not _busy(o) and _at_max_gen(o)]
        if peers:
            found.append(warning(f"{gpu_label(g)}: PCIe Gen{cur} of Gen{top} while idle GPUs "
                                 f"{', '.join(str(o.get('index')) for o in peers)} of the same model run Gen{top}: "
                                 "the link may have trained low (idle GPUs can downshift; confirm under load)",
                                 pcie_fix_generation_under_load(g), actor=Actor.NODE))
    return found


def idle_downshifted(gpus: Gpus) -> list[int | None]:
    """GPUs below their maximum generation that no rule judged: idle, and no idle peer at its maximum."""
    return [g.get("index") for g in gpus
            if (cur := _pcie(g).get("gen_current")) is not None and (top := _pcie(g).get("gen_max")) is not None
            and cur < top and not _busy(g)]


# -- NVLink ----------------------------------------------------------------------------------------------

def _links(g: Gpu) -> list[NvLinkLink]:
    nvlink = g.get("nvlink")
    return list(nvlink.get("links") or []) if nvlink else []


def all_links_down(gpus: Gpus) -> bool:
    links = [link for g in gpus for link in _links(g)]
    return bool(links) and not any(link.get("active") for link in links)


def unbridged(g: Gpu) -> bool:
    """A PCIe card (name "… PCIe" or "… NVL") whose every link is inactive: no NVLink bridge is fitted. NVML lists
    such a card's links as down (NVIDIA/NVSentinel#1481: an A100 80GB PCIe without a bridge, all 12 links down);
    that is the card's build, not a fault."""
    name = str(g.get("name") or "")
    return ("PCIe" in name or name.endswith("NVL")) and bool(_links(g)) and not any(link.get("active") for link in _links(g))


def rule_links_active(gpus: Gpus, fabric_cause: Cause | None = None) -> list[Finding]:
    """Every NVLink link up. All down with Fabric Manager at fault: one finding under Fabric Manager's cause.
    PCIe cards without a bridge are not judged (see :func:`unbridged`)."""
    if fabric_cause is not None and all_links_down(gpus):
        n = sum(len(_links(g)) for g in gpus)
        return [failure(f"all {n} NVLink links of the {len(gpus)} GPUs are down: {fabric_cause.why}",
                        fabric_cause.fix, actor=fabric_cause.actor, cause=fabric_cause.key)]
    found = []
    for g in gpus:
        down = [link["link"] for link in _links(g) if not link.get("active")]
        if down and not unbridged(g):
            found.append(failure(
                f"{gpu_label(g)}: NVLink links {', '.join(map(str, down))} of {len(_links(g))} are inactive: "
                "collectives fall back to slower paths or hang",
                "\n".join([f"nvidia-smi nvlink -s -i {gpu_target(g)}   # <inactive> links",
                           f"nvidia-smi nvlink -e -i {gpu_target(g)}   # their error counters",
                           f"nvidia-smi -r -i {gpu_target(g)}   # drain the node first; a reset retrains the links (or reboot)",
                           "# still inactive after a reset: reseat or replace the GPU board (vendor support)"]),
                actor=Actor.NODE, cause=nvlink_cause(g)))
    return found


def rule_link_errors(gpus: Gpus) -> list[Finding]:
    """Data-link error counters since the last reset: the link retried or retrained."""
    found = []
    for g in gpus:
        counted = {c: sum(link.get(c) or 0 for link in _links(g)) for c in COUNTERS}
        bad = [link["link"] for link in _links(g) if any(link.get(c) for c in COUNTERS)]
        if bad:
            shown = ", ".join(f"{c.replace('_', ' ')} {n}" for c, n in counted.items() if n)
            found.append(warning(f"{gpu_label(g)}: NVLink errors on links {', '.join(map(str, bad))} ({shown})",
                                 f"nvidia-smi nvlink -e -i {gpu_target(g)}   # do they grow during a run? then reset the GPU "
                                 "or reseat it", actor=Actor.NODE))
    return found


#: the NVML fields gpu.pcie_link shows as evidence
PCIE_KEYS = ("pcie", "performance_state", "utilization_gpu")
