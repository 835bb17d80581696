"""gpu.rank_mapping: every rank of this node gets its own GPU."""
from __future__ import annotations

from typing import Any

from dsv3_preflight import Result, check
from dsv3_preflight.gpu import remedies
from dsv3_preflight.gpu.common import NOT_EXPECTED
from dsv3_preflight.gpu.rankmap import (
    find_duplicates,
    mapping_table,
    plan,
    resolve_visible,
)
from dsv3_preflight.gpu.rankmap_rules import (
    rule_device_order,
    rule_no_shared_gpu,
    rule_node_rank_in_range,
    rule_nvml_answers,
    rule_visible_devices,
    rule_visible_devices_as_written,
)
from dsv3_preflight.result import Findings


@check("gpu.rank_mapping", needs=["nvml", "env", "host", "profile"], tags=["gpu", "launch"], timeout=20)
def rank_mapping(nvml, env, host, profile):
    """This node's ranks map one-to-one onto its GPUs: CUDA_VISIBLE_DEVICES valid, CUDA_DEVICE_ORDER=PCI_BUS_ID, no GPU shared."""
    cvd = profile.cuda_visible_devices if profile.cuda_visible_devices is not None else env.get("CUDA_VISIBLE_DEVICES")
    order = env.get("CUDA_DEVICE_ORDER")
    evidence: dict[str, Any] = {"CUDA_VISIBLE_DEVICES": cvd, "CUDA_DEVICE_ORDER": order, "nnodes": profile.nnodes,
                                "nproc_per_node": profile.nproc_per_node, "node_rank": profile.node_rank}
    if not profile.expects_gpus:
        return Result.skipped(NOT_EXPECTED, evidence)
    found = Findings()
    if not nvml.get("available"):
        # the driver is the node's to install; what CUDA_VISIBLE_DEVICES says wrong by itself is the job's, and a
        # cause of its own (not "the same cause"): it bites once the driver is there
        found.check(rule_nvml_answers, nvml)
        found.check(rule_node_rank_in_range, profile.node_rank, profile.nnodes)
        found.check(rule_visible_devices_as_written, cvd, profile.nproc_per_node)
        return found.result("ranks mapped", evidence)
    if found.check(rule_node_rank_in_range, profile.node_rank, profile.nnodes):
        return found.result("ranks mapped", evidence)
    gpus = nvml.get("gpus") or []
    hostname = host.get("hostname") or "this node"
    resolution = resolve_visible(cvd, order, gpus)
    rows = plan(profile.nnodes, profile.nproc_per_node, profile.node_rank, cvd, order, gpus, host=hostname)
    dups = find_duplicates(rows)
    found.check(rule_device_order, order, resolution.order_certain)
    found.check(rule_visible_devices, resolution, profile.nproc_per_node, len(gpus), profile.node_rank * profile.nproc_per_node)
    found.check(rule_no_shared_gpu, dups, "host", remedies.visible_devices(len(gpus), profile.nproc_per_node))
    evidence.update(table=mapping_table(rows), rows=rows, duplicates=dups,
                    visible=[{"cuda_index": i, "nvml_index": g.get("index"), "pci_bus_id": g.get("pci_bus_id")}
                             for i, g in enumerate(resolution.devices)],
                    order_certain=resolution.order_certain)
    return found.result(evidence["table"].splitlines()[0] if rows else "no ranks on this node", evidence)
