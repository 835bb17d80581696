"""gpu.nvlink: every NVLink link of every GPU is up, without data-link errors."""
from __future__ import annotations

from dsv3_preflight import check
from dsv3_preflight.gpu.common import health_skip, rule_reported
from dsv3_preflight.gpu.fabric_rules import fabric_cause
from dsv3_preflight.gpu.links import rule_link_errors, rule_links_active, unbridged
from dsv3_preflight.result import Findings


@check("gpu.nvlink", needs=["nvml", "fabric_manager", "profile"], tags=["gpu", "health"], timeout=20)
def nvlink(nvml, fabric_manager, profile):
    """NVLink links all active (all down with Fabric Manager stopped: Fabric Manager's cause); error counters at zero."""
    gpus = nvml.get("gpus") or []
    evidence = {"gpus": [{"index": g.get("index"), "pci_bus_id": g.get("pci_bus_id"), "nvlink": g.get("nvlink")} for g in gpus]}
    skip = health_skip(nvml, profile, evidence, "nvlink", "NVLink state")
    if skip:
        return skip
    with_links = [g for g in gpus if (g.get("nvlink") or {}).get("supported")]
    found = Findings()
    found.check(rule_reported, gpus, "nvlink", "NVLink state")
    if not with_links and not found:
        return found.result(f"no NVLink on these {len(gpus)} GPUs (NVML: Not Supported): PCIe only", evidence)
    found.check(rule_links_active, with_links, fabric_cause(fabric_manager, nvml))
    found.check(rule_link_errors, with_links)
    bridged = [g for g in with_links if not unbridged(g)]
    n = sum(len(g["nvlink"]["links"]) for g in bridged)
    alone = [g for g in with_links if unbridged(g)]
    if alone:
        evidence["not_judged"] = (f"GPUs {', '.join(str(g.get('index')) for g in alone)} are PCIe cards with every NVLink link "
                                  "inactive: no NVLink bridge fitted (NVML lists an unbridged card's links as down)")
    if not bridged:
        return found.result(f"no NVLink bridge on these {len(alone)} PCIe GPUs: PCIe only", evidence)
    return found.result(f"{n} NVLink links active on {len(bridged)} GPUs, no data-link errors", evidence)
