"""gpu.pcie_link: every GPU's PCIe link trained at its full width, and at its full generation when it matters."""
from __future__ import annotations

from dsv3_preflight import check
from dsv3_preflight.gpu.common import health_skip, rule_reported
from dsv3_preflight.gpu.links import PCIE_KEYS, idle_downshifted, rule_pcie_generation, rule_pcie_width
from dsv3_preflight.result import Findings


@check("gpu.pcie_link", needs=["nvml", "profile"], tags=["gpu", "health"], timeout=20)
def pcie_link(nvml, profile):
    """PCIe width below its maximum (always a fault); generation below its maximum when busy, or below idle peers."""
    gpus = nvml.get("gpus") or []
    evidence = {"gpus": [{"index": g.get("index"), "pci_bus_id": g.get("pci_bus_id"), **{k: g.get(k) for k in PCIE_KEYS}}
                         for g in gpus]}
    skip = health_skip(nvml, profile, evidence, "pcie", "PCIe link state", "pcie_width_current", "pcie_gen_current")
    if skip:
        return skip
    found = Findings()
    found.check(rule_reported, gpus, "pcie", "PCIe link state", "pcie_width_current")
    found.check(rule_pcie_width, gpus)
    found.check(rule_pcie_generation, gpus)
    idle = idle_downshifted(gpus)
    if idle:
        evidence["not_judged"] = (f"GPUs {', '.join(map(str, idle))} are idle below their maximum generation: idle GPUs "
                                  "lower the link generation to save power; judged again under load")
    widths = sorted({f"x{g['pcie']['width_current']}" for g in gpus if (g.get("pcie") or {}).get("width_current")})
    gens = sorted({f"Gen{g['pcie']['gen_max']}" for g in gpus if (g.get("pcie") or {}).get("gen_max")})
    return found.result(f"{len(gpus)} GPUs at full PCIe width ({', '.join(widths)}, up to {', '.join(gens)})"
                        + ("; idle GPUs downshifted their generation (normal)" if idle else ""), evidence)
