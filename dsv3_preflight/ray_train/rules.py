"""Pure rules of the Ray Train gate: facts in, findings out (who acts, and a fix that passes ``bash -n``).

- storage: every node wrote its nonce under ``storage_path`` and read every other node's back, with room left;
- scaling: ``num_workers`` × ``resources_per_worker`` fits the live nodes under the placement strategy (a
  placement group that cannot be placed pends forever, and Train V2 retries the start without end);
- rank map: the rank→GPU map Ray Train will build (:func:`predict_rank_map`), judged with the duplicate-GPU rules
  of :mod:`dsv3_preflight.gpu.rankmap`;
- NIC: Ray's node IP lies on the interface that reaches the rank-0 node (MASTER_ADDR under Ray Train).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..gpu.rankmap import find_duplicates
from ..result import Actor, Finding, failure, warning
from .facts import NodeResources, ScalingFact, StorageFact, WorkerFact

GIB = 1 << 30
#: free space under storage_path below which the first checkpoint may not fit (tunable per run)
MIN_STORAGE_FREE_GIB = 1.0
#: the resource Ray adds for ScalingConfig(accelerator_type=...)
ACCELERATOR_PREFIX = "accelerator_type:"
STORAGE_CAUSE = "ray_train.storage_not_shared"
SCALING_CAUSE = "ray_train.scaling_infeasible"
DUPLICATE_GPU = "gpu.duplicate_gpu"

SHARED_STORAGE_FIX = (
    "# storage_path must be one filesystem that every node mounts at the same path (NFS, Lustre) or cloud storage\n"
    "findmnt -T \"${SHARED_STORAGE:?a directory every node mounts at the same path}\"   # on every node: the same "
    "network filesystem\n"
    "# then, in the training script: RunConfig(storage_path=that directory, or s3://bucket/prefix)")


# -- storage_path ---------------------------------------------------------------------------------------------
def rule_storage_written(storage: StorageFact) -> list[Finding]:
    """Every node could create its nonce file under storage_path."""
    found = []
    for write in storage["writes"]:
        if write["wrote"]:
            continue
        found.append(failure(
            f"{write['node']} cannot write under storage_path {storage['storage_path']}: {write['error']} (Ray Train "
            "fails at the first checkpoint, after hours of training)",
            f"mkdir -p {storage['storage_path']} && touch {storage['storage_path']}/.write-test   # on {write['node']}, "
            f"as the user Ray runs as: see why it fails\n{SHARED_STORAGE_FIX}",
            actor=Actor.JOB, cause=STORAGE_CAUSE))
    return found


def unseen_by(storage: StorageFact) -> dict[str, list[str]]:
    """Reader node → the writer nodes whose nonce it could not read back (only writers that did write)."""
    writers = [w["node"] for w in storage["writes"] if w["wrote"]]
    unseen: dict[str, list[str]] = {}
    for reader, seen in storage["reads"].items():
        missing = [w for w in writers if w != reader and seen.get(w) != "ok"]
        if missing:
            unseen[reader] = missing
    return unseen


def rule_storage_shared(storage: StorageFact) -> Finding | None:
    """Every node reads back every other node's nonce: storage_path is one storage, not a directory per node."""
    unseen = unseen_by(storage)
    if not unseen:
        return None
    blind = sorted(unseen)
    detail = "; ".join(f"{reader} cannot see what {', '.join(writers)} wrote" for reader, writers in sorted(unseen.items()))
    return failure(
        f"storage_path {storage['storage_path']} is not shared by the nodes: {detail}. Nodes that cannot see it: "
        f"{', '.join(blind)}. A node-local path (the head's default ~/ray_results) fails at the first checkpoint "
        "with 'Unable to set up cluster storage'",
        SHARED_STORAGE_FIX, actor=Actor.JOB, cause=STORAGE_CAUSE)


def rule_storage_free(storage: StorageFact, min_free_gib: float = MIN_STORAGE_FREE_GIB) -> list[Finding]:
    """Room for checkpoints under storage_path on every node that wrote there."""
    found = []
    for write in storage["writes"]:
        free = write.get("free_bytes")
        if not write["wrote"] or free is None or free >= min_free_gib * GIB:
            continue
        found.append(failure(
            f"storage_path {storage['storage_path']} has {free / GIB:.2f} GiB free as {write['node']} sees it, below "
            f"{min_free_gib:g} GiB: checkpoints will not fit",
            f"df -h {storage['storage_path']}   # on {write['node']}: free space, or point storage_path elsewhere\n"
            f"{SHARED_STORAGE_FIX}", actor=Actor.JOB, cause="ray_train.storage_full"))
    return found


# -- ScalingConfig against the live cluster ------------------------------------------------------------------
def bundles_on(total: Mapping[str, float], per_worker: Mapping[str, float]) -> int:
    """How many workers of ``per_worker`` one node of ``total`` resources holds (Ray's bundle arithmetic)."""
    fits = [math.floor(total.get(name, 0.0) / amount + 1e-9) for name, amount in per_worker.items() if amount > 0]
    return max(min(fits), 0) if fits else 1 << 20


def placeable(scaling: ScalingFact, nodes: Sequence[NodeResources]) -> tuple[int, dict[str, int]]:
    """(workers the live nodes can place under the strategy, workers each node holds)."""
    per_node = {n["node_id"]: bundles_on(n["total"], scaling["resources_per_worker"]) for n in nodes}
    strategy = (scaling.get("placement_strategy") or "PACK").upper()
    if strategy == "STRICT_SPREAD":
        return sum(1 for v in per_node.values() if v > 0), per_node
    if strategy == "STRICT_PACK":
        return max(per_node.values(), default=0), per_node
    return sum(per_node.values()), per_node


def _amount(name: str, value: float) -> str:
    if name == "memory" or name == "object_store_memory":
        return f"{name} {value / GIB:.1f} GiB"
    return f"{name} {value:g}"


def _node_line(node: NodeResources, per_worker: Mapping[str, float], holds: int) -> str:
    have = ", ".join(_amount(k, node["total"].get(k, 0.0)) for k in per_worker)
    head = " (head)" if node["is_head"] else ""
    return f"{node['hostname'] or node['ip']} {node['ip']}{head}: {have} → {holds} worker{'s' if holds != 1 else ''}"


def _display_order(node: NodeResources) -> tuple[bool, tuple[int, ...], str]:
    """The head first, then by IP (numerically), then by host name: ``ray.nodes()`` keeps no order."""
    try:
        ip = tuple(int(part) for part in node["ip"].split("."))
    except ValueError:
        ip = ()
    return (not node["is_head"], ip, node["hostname"])


def rule_accelerator_present(scaling: ScalingFact, nodes: Sequence[NodeResources]) -> Finding | None:
    """ScalingConfig(accelerator_type=X): some node must carry the resource Ray adds for it."""
    wanted = scaling.get("accelerator_type")
    if not wanted or any(f"{ACCELERATOR_PREFIX}{wanted}" in n["total"] for n in nodes):
        return None
    present = sorted({k[len(ACCELERATOR_PREFIX):] for n in nodes for k in n["total"] if k.startswith(ACCELERATOR_PREFIX)})
    return failure(
        f"ScalingConfig(accelerator_type={wanted!r}) but no live node has that accelerator (nodes have: "
        f"{', '.join(present) or 'none'}): the placement group would pend forever",
        f"ray status   # the accelerators the nodes advertise\n# then ScalingConfig(accelerator_type="
        f"{present[0] if present else 'None'}) in the training script, or add {wanted} nodes",
        actor=Actor.JOB, cause=SCALING_CAUSE)


def rule_scaling_fits(scaling: ScalingFact, nodes: Sequence[NodeResources]) -> Finding | None:
    """num_workers × resources_per_worker fits the live nodes; else the numbers, node by node."""
    want = int(scaling["num_workers"])
    can, per_node = placeable(scaling, nodes)
    if can >= want:
        return None
    per_worker = scaling["resources_per_worker"]
    strategy = (scaling.get("placement_strategy") or "PACK").upper()
    asked = "{" + ", ".join(_amount(k, v) for k, v in per_worker.items()) + "}"
    table = "; ".join(_node_line(n, per_worker, per_node[n["node_id"]]) for n in sorted(nodes, key=_display_order))
    totals = ", ".join(f"{_amount(k, sum(n['total'].get(k, 0.0) for n in nodes))} of {_amount(k, v * want)}"
                       for k, v in per_worker.items())
    return failure(
        f"ScalingConfig asks for {want} workers × {asked} ({strategy}) and the {len(nodes)} live "
        f"node{'s' if len(nodes) != 1 else ''} can place "
        f"{can}: {table}. Cluster totals: {totals}. The placement group would pend forever and Ray Train would retry "
        "the start without end",
        f"ray status   # the resources each node advertises\n# then, in the training script: ScalingConfig(num_workers="
        f"{can}, ...) or smaller resources_per_worker, or add nodes",
        actor=Actor.JOB, cause=SCALING_CAUSE)


# -- the rank -> GPU map Ray Train will build ---------------------------------------------------------------
def _lowest_gpu(worker: WorkerFact) -> Any:
    ids = worker["gpu_ids"]
    if not ids:
        return 0
    try:
        return min(int(i) for i in ids)
    except ValueError:
        return min(ids)


def predict_rank_map(workers: Sequence[WorkerFact]) -> list[dict[str, Any]]:
    """Rows ``{rank, node_id, node_ip, hostname, local_rank, node_rank, gpu_ids, cuda_visible_devices, cuda_index}``
    as Ray Train 2.5x assigns them: workers grouped by node id (first seen first), each group sorted by its lowest
    GPU id; local ranks and node ranks grouped by node IP; CUDA_VISIBLE_DEVICES widened to the sorted union of the
    GPU ids of the workers on the node; each rank drives the position of its first GPU id in that list."""
    groups: dict[str, list[WorkerFact]] = {}
    for worker in workers:
        groups.setdefault(worker["node_id"], []).append(worker)
    ordered = [w for group in groups.values() for w in sorted(group, key=_lowest_gpu)]
    by_ip: dict[str, list[int]] = {}
    for rank, worker in enumerate(ordered):
        by_ip.setdefault(worker["node_ip"], []).append(rank)
    node_ips = list(by_ip)
    union: dict[str, list[str]] = {}
    for worker in ordered:
        union.setdefault(worker["node_id"], [])
        union[worker["node_id"]] = sorted(set(union[worker["node_id"]]) | {str(i) for i in worker["gpu_ids"]})
    rows = []
    for rank, worker in enumerate(ordered):
        visible = union[worker["node_id"]]
        ids = [str(i) for i in worker["gpu_ids"]]
        rows.append({"rank": rank, "node_id": worker["node_id"], "node_ip": worker["node_ip"],
                     "hostname": worker["hostname"], "local_rank": by_ip[worker["node_ip"]].index(rank),
                     "node_rank": node_ips.index(worker["node_ip"]), "gpu_ids": ids,
                     "cuda_visible_devices": ",".join(visible) if visible else None,
                     "cuda_index": visible.index(ids[0]) if ids else None})
    return rows


def with_bus_ids(rows: Sequence[Mapping[str, Any]], nvml_by_node: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows with ``host`` and ``pci_bus_id``: a Ray GPU id is the NVML index on its node (raylets see every GPU in
    PCI order); a node without NVML facts keeps a bus id of None (its duplicates are judged by Ray id alone)."""
    out = []
    for row in rows:
        gpus = {str(g.get("index")): g for g in (nvml_by_node.get(row["node_id"]) or {}).get("gpus") or []}
        gpu = gpus.get(row["gpu_ids"][0]) if row["gpu_ids"] else None
        out.append({**row, "host": row["hostname"], "pci_bus_id": gpu.get("pci_bus_id") if gpu else None})
    return out


def rule_no_shared_gpu(rows: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """No two ranks on one GPU: by PCI bus id on one host (two raylets on one machine included), else by the Ray GPU
    id on one Ray node (fractional GPUs: resources_per_worker={"GPU": 0.5})."""
    fix = ("# one GPU per worker: ScalingConfig(use_gpu=True, resources_per_worker={\"GPU\": 1}) in the training script\n"
           "ray status   # one raylet per machine: two raylets on one host each hand out the same GPUs")
    found = [failure(f"{d['message']} (host {d['host']}, PCI {d['pci_bus_id']})", fix, actor=Actor.JOB,
                     cause=DUPLICATE_GPU) for d in find_duplicates(rows)]
    seen: dict[tuple[str, str], int] = {}
    for row in rows:
        if row.get("pci_bus_id") is not None:
            continue
        for gpu in row["gpu_ids"][:1]:
            other = seen.setdefault((row["node_id"], gpu), row["rank"])
            if other != row["rank"]:
                found.append(failure(f"ranks {other} and {row['rank']} both drive Ray GPU {gpu} of {row['hostname']} "
                                     "(a fractional GPU per worker): NCCL aborts with 'Duplicate GPU detected'", fix,
                                     actor=Actor.JOB, cause=DUPLICATE_GPU))
    return found


def rule_one_node_per_ip(rows: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """Ray Train groups local ranks by node IP: two Ray nodes on one IP become one 'node' of local ranks."""
    ids_by_ip: dict[str, list[str]] = {}
    for row in rows:
        if row["node_id"] not in ids_by_ip.setdefault(row["node_ip"], []):
            ids_by_ip[row["node_ip"]].append(row["node_id"])
    return [failure(f"{len(ids)} Ray nodes share the IP {ip} ({', '.join(i[:8] for i in ids)}): Ray Train numbers their "
                    "workers as one node (LOCAL_RANK and NODE_RANK span both), so local ranks index GPUs that are not "
                    "theirs", "ray start --node-ip-address=\"${NODE_IP:?the address of this machine on the training network}\""
                    "   # one address per Ray node", actor=Actor.JOB, cause="ray_train.shared_node_ip")
            for ip, ids in ids_by_ip.items() if len(ids) > 1]


# -- Ray's node IP against the NIC toward the rank-0 node --------------------------------------------------
def rule_node_ip_on_route_nic(node: str, node_ip: str, nic_route: Mapping[str, Any]) -> Finding | None:
    """Ray's node IP of a node is an address of the interface its kernel uses toward the rank-0 node's IP (the
    MASTER_ADDR Ray Train sets): else the rendezvous and the peers' addresses are on different networks."""
    ifname = nic_route.get("ifname")
    if not ifname or nic_route.get("route_error") or nic_route.get("local"):
        return None
    addresses = list(nic_route.get("ipv4") or []) + list(nic_route.get("ipv6") or [])
    if node_ip in addresses:
        return None
    return warning(f"{node}: Ray's node IP {node_ip} is not on {ifname}, the interface toward the rank-0 node "
                   f"{nic_route.get('target') or nic_route.get('master_addr')} ({', '.join(addresses) or 'no address'}): "
                   "Ray Train's MASTER_ADDR and the peers' traffic use different networks",
                   f"ray start --node-ip-address={addresses[0] if addresses else '${NODE_IP:?an address of ' + ifname + '}'}"
                   f"   # on {node}: Ray's node IP on {ifname}", actor=Actor.JOB, cause="ray_train.node_ip_nic")
