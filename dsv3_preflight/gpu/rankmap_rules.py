"""The rules of gpu.rank_mapping / gpu.rank_mapping_cluster (pure: facts in, findings out): every rank gets its own GPU, the same way on every node."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsv3_preflight.gpu import remedies
from dsv3_preflight.gpu.common import NO_DRIVER, no_nvml_summary, spans
from dsv3_preflight.gpu.cuda_causes import VISIBLE_DEVICES
from dsv3_preflight.gpu.facts import NvmlFact
from dsv3_preflight.gpu.rankmap import (
    PCI_BUS_ID,
    node_rank_problems,
    plan,
    resolve_visible,
    shared_machine_problems,
    world_size_problems,
    written_problems,
)
from dsv3_preflight.result import Actor, Finding, Findings, failure, warning

ORDER_FIX = "export CUDA_DEVICE_ORDER=PCI_BUS_ID   # on every node, before torchrun"


def node_rank_fix(nnodes: int) -> str:
    return (f"export NODE_RANK=${{THIS_NODE_RANK:?the rank of this node, 0 to {nnodes - 1}, unique per machine}}"
            "   # one torchrun per machine")


def rule_nvml_answers(nvml: NvmlFact) -> Finding | None:
    if nvml.get("available"):
        return None
    return failure(f"cannot map ranks to GPUs: {no_nvml_summary(nvml)}", remedies.install_driver(nvml),
                   actor=Actor.NODE, cause=NO_DRIVER)


def rule_node_rank_in_range(node_rank: int, nnodes: int) -> Finding | None:
    if node_rank < nnodes:
        return None
    return failure(f"node rank {node_rank} is outside 0..{nnodes - 1} (nnodes={nnodes})", node_rank_fix(nnodes),
                   actor=Actor.JOB, cause="gpu.node_rank")


def rule_device_order(order: str | None, certain: bool, where: str = "") -> Finding | None:
    """CUDA_DEVICE_ORDER=PCI_BUS_ID; without it CUDA may number GPUs unlike nvidia-smi (a FAIL with mixed models)."""
    if (order or "").strip().upper() == PCI_BUS_ID:
        return None
    shown = f"CUDA_DEVICE_ORDER={order}" if order else "CUDA_DEVICE_ORDER is unset (FASTEST_FIRST)"
    if not certain:
        return failure(f"{shown}{where} and the GPUs differ in model: CUDA's order can differ from PCI order, so ranks "
                       "land on other GPUs than nvidia-smi shows and nodes disagree", ORDER_FIX, actor=Actor.JOB)
    return warning(f"{shown}{where}: identical GPUs keep PCI order today, but set PCI_BUS_ID as the job does",
                   ORDER_FIX, actor=Actor.JOB)


def rule_visible_devices(resolution: Any, nproc: int, n_gpus: int, first_rank: int, label: str = "") -> list[Finding]:
    """CUDA_VISIBLE_DEVICES names valid, distinct GPUs, at least one per local rank."""
    fix = remedies.visible_devices(n_gpus, nproc)
    found = [failure(f"{label}{p}", fix, actor=Actor.JOB, cause=VISIBLE_DEVICES) for p in resolution.problems]
    if nproc > len(resolution.devices):
        missing = list(range(first_rank + len(resolution.devices), first_rank + nproc))
        if nproc > n_gpus:
            fix = (f"{fix}\ntorchrun --nproc_per_node={n_gpus} ${{TRAIN_SCRIPT:?the training script and its arguments}}"
                   "   # at most one rank per GPU")
        found.append(failure(f"{label}{nproc} local ranks but only {len(resolution.devices)} visible GPUs: ranks "
                             f"{spans(missing)} have no GPU (torch raises 'invalid device ordinal', or ranks share a GPU)",
                             fix, actor=Actor.JOB, cause=VISIBLE_DEVICES))
    return found


def rule_visible_devices_as_written(cvd: str | None, nproc: int, label: str = "") -> list[Finding]:
    """CUDA_VISIBLE_DEVICES judged by its text where the GPUs cannot be read (no driver): a GPU listed twice is the
    job's error whatever the node has, and bites once the administrator installs the driver."""
    problems = written_problems(cvd, nproc)
    if not problems:
        return []
    fix = (f"# CUDA_VISIBLE_DEVICES={cvd}: {nproc} local ranks need {nproc} distinct GPUs, each listed once\n"
           f'export CUDA_VISIBLE_DEVICES="${{CUDA_VISIBLE_DEVICES_DISTINCT:?{nproc} distinct GPU indices or UUIDs, '
           'comma-separated}"   # on every node, before torchrun; or unset it to use every GPU of the node')
    return [failure(f"{label}{p}", fix, actor=Actor.JOB, cause=VISIBLE_DEVICES) for p in problems]


def rule_no_shared_gpu(duplicates: Sequence[Mapping[str, Any]], where: str, fix: str) -> list[Finding]:
    """No two ranks on one GPU: NCCL aborts with "Duplicate GPU detected"."""
    return [failure(f"{d['message']} ({where} {d['host']}, PCI {d['pci_bus_id']})", fix, actor=Actor.JOB,
                    cause="gpu.duplicate_gpu") for d in duplicates]


def rule_node_ranks(node_ranks: Mapping[str, int], nnodes: int) -> list[Finding]:
    return [failure(p, node_rank_fix(nnodes), actor=Actor.JOB, cause="gpu.node_rank")
            for p in node_rank_problems(node_ranks, nnodes)]


def rule_one_machine_per_node(hosts: Mapping[str, Mapping[str, Any]], nnodes: int) -> list[Finding]:
    fix = ("# two entries of the job run on one machine: give every node rank its own machine\n"
           "ray status   # under Ray: which machines joined; place one task per node (a STRICT_SPREAD placement group)\n"
           + node_rank_fix(nnodes))
    return [failure(p, fix, actor=Actor.JOB, cause="gpu.node_rank") for p in shared_machine_problems(hosts)]


def rule_world_size(node_ranks: Mapping[str, int], nproc: int, world_size: int | None) -> list[Finding]:
    total = len(node_ranks) * nproc
    return [failure(p, f"export WORLD_SIZE={total}   # {len(node_ranks)} nodes × {nproc} ranks", actor=Actor.JOB)
            for p in world_size_problems(node_ranks, nproc, world_size)]


def rule_node_facts(node: str, facts: NvmlFact | None) -> Finding | None:
    if facts is None:
        return failure(f"{node}: no NVML facts", f"dsv3-preflight run --only 'gpu.*'   # on {node}: why its facts are missing",
                       actor=Actor.NODE)
    if not facts.get("available"):
        return failure(f"{node}: {no_nvml_summary(facts)}", remedies.install_driver(facts), actor=Actor.NODE, cause=NO_DRIVER)
    return None


def rule_same_order(orders: Mapping[str, str]) -> Finding | None:
    if len(set(orders.values())) <= 1:
        return None
    return failure("CUDA_DEVICE_ORDER differs across nodes: " + ", ".join(f"{n}={o}" for n, o in orders.items()),
                   ORDER_FIX, actor=Actor.JOB)


def judge_nodes(found: Findings, nvml: Mapping[str, NvmlFact], env: Mapping[str, Mapping[str, str]],
                hosts: Mapping[str, Mapping[str, Any]], node_ranks: Mapping[str, int],
                profile: Any) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Each node's rules of gpu.rank_mapping_cluster (its NVML facts, CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER),
    added to ``found``; returns every rank's row of the mapping and each node's device order."""
    nproc = profile.nproc_per_node
    rows: list[dict[str, Any]] = []
    orders: dict[str, str] = {}
    for node, rank in node_ranks.items():
        facts = nvml.get(node)
        node_env = env.get(node) or {}
        cvd = node_env.get("CUDA_VISIBLE_DEVICES", profile.cuda_visible_devices)
        missing = rule_node_facts(node, facts)
        if missing or facts is None:
            found.add(missing, rule=rule_node_facts.__name__)
            found.check(rule_visible_devices_as_written, cvd, nproc, f"{node}: ")
            continue
        gpus = facts.get("gpus") or []
        order = node_env.get("CUDA_DEVICE_ORDER")
        orders[node] = order or "FASTEST_FIRST (unset)"
        resolution = resolve_visible(cvd, order, gpus)
        found.check(rule_visible_devices, resolution, nproc, len(gpus), rank * nproc, f"{node}: ")
        found.check(rule_device_order, order, resolution.order_certain, f" on {node}")
        if 0 <= rank < profile.nnodes:
            rows += plan(profile.nnodes, nproc, rank, cvd, order, gpus, host=hosts[node].get("hostname") or node)
    return rows, orders
