"""gpu.rank_mapping / gpu.rank_mapping_cluster: every rank gets its own GPU, the same way on every node."""
from __future__ import annotations

from typing import Any

from dsv3_preflight import Result, check
from dsv3_preflight.gpu.common import NOT_EXPECTED, join_problems, no_nvml_summary, spans
from dsv3_preflight.gpu.rankmap import PCI_BUS_ID, find_duplicates, mapping_table, plan, resolve_visible, cluster_problems

ORDER_FIX = "export CUDA_DEVICE_ORDER=PCI_BUS_ID   # on every node, before torchrun"


def _order_finding(order: str | None, certain: bool, where: str = "") -> tuple[str | None, str | None]:
    """(fail, warn) about CUDA_DEVICE_ORDER on one node."""
    if (order or "").strip().upper() == PCI_BUS_ID:
        return None, None
    shown = f"CUDA_DEVICE_ORDER={order}" if order else "CUDA_DEVICE_ORDER is unset (FASTEST_FIRST)"
    if not certain:
        return (f"{shown}{where} and the GPUs differ in model: CUDA's order can differ from PCI order, so ranks "
                "land on other GPUs than nvidia-smi shows and nodes disagree"), None
    return None, f"{shown}{where}: identical GPUs keep PCI order today, but set PCI_BUS_ID as the job does"


def _visible_problems(resolution: Any, nproc: int, node_label: str, first_rank: int) -> list[str]:
    problems = [f"{node_label}{p}" for p in resolution.problems]
    if nproc > len(resolution.devices):
        missing = list(range(first_rank + len(resolution.devices), first_rank + nproc))
        problems.append(f"{node_label}{nproc} local ranks but only {len(resolution.devices)} visible GPUs: "
                        f"ranks {spans(missing)} have no GPU (torch raises 'invalid device ordinal', or ranks share a GPU)")
    return problems


@check("gpu.rank_mapping", needs=["nvml", "env", "host", "profile"], tags=["gpu", "launch"], timeout=20)
def rank_mapping(nvml, env, host, profile):
    """This node's ranks map one-to-one onto its GPUs: CUDA_VISIBLE_DEVICES valid, CUDA_DEVICE_ORDER=PCI_BUS_ID, no GPU shared."""
    cvd = profile.cuda_visible_devices if profile.cuda_visible_devices is not None else env.get("CUDA_VISIBLE_DEVICES")
    order = env.get("CUDA_DEVICE_ORDER")
    evidence: dict[str, Any] = {"CUDA_VISIBLE_DEVICES": cvd, "CUDA_DEVICE_ORDER": order, "nnodes": profile.nnodes,
                                "nproc_per_node": profile.nproc_per_node, "node_rank": profile.node_rank}
    if not profile.expects_gpus:
        return Result.skipped(NOT_EXPECTED, evidence)
    if not nvml.get("available"):
        return Result.failed(f"cannot map ranks to GPUs: {no_nvml_summary(nvml)}", evidence,
                             "install the NVIDIA driver; nvidia-smi -L must list this node's GPUs")
    gpus = nvml.get("gpus") or []
    hostname = host.get("hostname") or "this node"
    resolution = resolve_visible(cvd, order, gpus)
    nproc = profile.nproc_per_node
    first = profile.node_rank * nproc
    if profile.node_rank >= profile.nnodes:
        return Result.failed(f"node rank {profile.node_rank} is outside 0..{profile.nnodes - 1} (nnodes={profile.nnodes})",
                             evidence, f"export NODE_RANK=<0..{profile.nnodes - 1}>   # unique per node")
    rows = plan(profile.nnodes, nproc, profile.node_rank, cvd, order, gpus, host=hostname)
    dups = find_duplicates(rows)
    fails = _visible_problems(resolution, nproc, "", first)
    fails += [f"{d['message']} ({hostname}, PCI {d['pci_bus_id']})" for d in dups]
    fail, warn = _order_finding(order, resolution.order_certain)
    if fail:
        fails.insert(0, fail)
    evidence.update(table=mapping_table(rows), rows=rows, duplicates=dups, problems=fails, warnings=[warn] if warn else [],
                    visible=[{"cuda_index": i, "nvml_index": g.get("index"), "pci_bus_id": g.get("pci_bus_id")}
                             for i, g in enumerate(resolution.devices)],
                    order_certain=resolution.order_certain)
    fixes = []
    if fail or warn:
        fixes.append(ORDER_FIX)
    if resolution.problems or nproc > len(resolution.devices):
        fixes.append(f"export CUDA_VISIBLE_DEVICES={','.join(str(i) for i in range(min(nproc, len(gpus))))}   # one distinct GPU per local rank"
                     if gpus else "unset CUDA_VISIBLE_DEVICES")
        if nproc > len(gpus):
            fixes.append(f"torchrun --nproc_per_node={len(gpus)} ...   # at most one rank per GPU")
    remediation = "\n".join(fixes) or None
    if fails:
        return Result.failed(join_problems(fails), evidence, remediation)
    if warn:
        return Result.warned(warn, evidence, remediation)
    return Result.passed(evidence["table"].splitlines()[0], evidence)


@check("gpu.rank_mapping_cluster", scope="cluster", needs=["nvml", "env", "host", "profile", "node_ranks"],
       tags=["gpu", "launch"], timeout=30)
def rank_mapping_cluster(nvml, env, host, profile, node_ranks):
    """Across nodes: unique node ranks and hosts, a world size that adds up, and no two ranks on one GPU of one host."""
    evidence: dict[str, Any] = {"node_ranks": dict(node_ranks)}
    if not profile.expects_gpus:
        return Result.skipped(NOT_EXPECTED, evidence)
    nproc = profile.nproc_per_node
    hosts = {n: host.get(n) or {} for n in node_ranks}
    fails = cluster_problems(node_ranks, hosts, profile.nnodes, nproc, profile.effective_world_size)
    warns: list[str] = []
    rows: list[dict[str, Any]] = []
    orders: dict[str, str] = {}
    for node, rank in node_ranks.items():
        facts = nvml.get(node)
        if facts is None:
            fails.append(f"{node}: no NVML facts")
            continue
        if not facts.get("available"):
            fails.append(f"{node}: {no_nvml_summary(facts)}")
            continue
        node_env = env.get(node) or {}
        cvd, order = node_env.get("CUDA_VISIBLE_DEVICES", profile.cuda_visible_devices), node_env.get("CUDA_DEVICE_ORDER")
        orders[node] = order or "FASTEST_FIRST (unset)"
        resolution = resolve_visible(cvd, order, facts.get("gpus") or [])
        fails += _visible_problems(resolution, nproc, f"{node}: ", rank * nproc)
        fail, warn = _order_finding(order, resolution.order_certain, f" on {node}")
        if fail:
            fails.append(fail)
        if warn:
            warns.append(warn)
        if 0 <= rank < profile.nnodes:
            hostname = hosts[node].get("hostname") or node
            rows += plan(profile.nnodes, nproc, rank, cvd, order, facts.get("gpus") or [], host=hostname)
    if len(set(orders.values())) > 1:
        fails.append("CUDA_DEVICE_ORDER differs across nodes: " + ", ".join(f"{n}={o}" for n, o in orders.items()))
    dups = find_duplicates(rows)
    for d in dups:
        fails.append(f"{d['message']} (host {d['host']}, PCI {d['pci_bus_id']})")
    evidence.update(table=mapping_table(rows), duplicates=dups, orders=orders, problems=fails, warnings=warns,
                    hosts={n: {k: h.get(k) for k in ("hostname", "machine_id", "boot_id")} for n, h in hosts.items()})
    fixes = []
    if dups or any("share the" in f or "node rank" in f for f in fails):
        fixes.append("export NODE_RANK=<unique 0..N-1 per machine>   # one torchrun per machine; check Ray placed one task per node")
    if any("CUDA_DEVICE_ORDER" in f for f in fails + warns):
        fixes.append(ORDER_FIX)
    if any("world size" in f for f in fails):
        fixes.append(f"export WORLD_SIZE=$(( NNODES * NPROC_PER_NODE ))   # {profile.nnodes} × {nproc}")
    if any("visible" in f.lower() for f in fails):
        fixes.append("export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7   # the same valid list on every node")
    remediation = "\n".join(fixes) or None
    if fails:
        return Result.failed(join_problems(fails), evidence, remediation)
    if warns:
        return Result.warned(join_problems(warns), evidence, remediation)
    return Result.passed(f"{len(rows)} ranks on {len(node_ranks)} nodes, each on its own GPU", evidence)
