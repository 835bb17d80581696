"""The gate's own checks, declared like any other; the gate (not the CLI's registry) runs them, because their facts
exist only inside a Ray Train run. Each judge is pure: the rules live in :mod:`.rules`."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..registry import check
from ..result import Findings, Result
from . import rules
from .facts import NodeResources, ScalingFact, StorageFact, WorkerFact


@check("ray_train.scaling", scope="cluster", needs=["ray_train_scaling", "ray_train_nodes"], tags=["ray_train"],
       timeout=10)
def scaling(ray_train_scaling: ScalingFact, ray_train_nodes: Sequence[NodeResources]) -> Result:
    """num_workers × resources_per_worker (GPU, CPU, memory, accelerator_type) fits the live nodes under the placement
    strategy: a placement group that cannot be placed pends forever while Train retries the start."""
    found = Findings()
    found.check(rules.rule_accelerator_present, ray_train_scaling, ray_train_nodes)
    found.check(rules.rule_scaling_fits, ray_train_scaling, ray_train_nodes)
    can, per_node = rules.placeable(ray_train_scaling, ray_train_nodes)
    evidence = {"scaling": dict(ray_train_scaling), "placeable": can, "workers_per_node": per_node,
                "nodes": [dict(n) for n in ray_train_nodes]}
    return found.result(f"{ray_train_scaling['num_workers']} workers × {ray_train_scaling['resources_per_worker']} fit "
                        f"the {len(ray_train_nodes)} live nodes (room for {can})", evidence)


@check("ray_train.storage", scope="cluster", needs=["ray_train_storage"], tags=["ray_train", "storage"], timeout=10)
def storage(ray_train_storage: StorageFact, min_free_gib: float = rules.MIN_STORAGE_FREE_GIB) -> Result:
    """storage_path is written by every node, read back by every other node, with room for checkpoints."""
    fact = ray_train_storage
    if fact["remote"]:
        return Result.skipped(f"storage_path {fact['storage_path']} is cloud storage: every node reaches the same bucket "
                              "(credentials are checked by Ray at the first checkpoint)", {"storage": dict(fact)})
    found = Findings()
    found.check(rules.rule_storage_written, fact)
    found.check(rules.rule_storage_shared, fact)
    found.check(rules.rule_storage_free, fact, min_free_gib)
    nodes = [w["node"] for w in fact["writes"]]
    return found.result(f"storage_path {fact['storage_path']} is one storage for {', '.join(nodes)}: each wrote a "
                        "nonce there and read every other back", {"storage": dict(fact),
                                                                  "unseen_by": rules.unseen_by(fact)})


@check("ray_train.rank_map", scope="cluster", needs=["ray_train_workers", "nvml"], tags=["ray_train", "gpu"], timeout=10)
def rank_map(ray_train_workers: Sequence[WorkerFact], nvml: Mapping[str, Mapping[str, Any]]) -> Result:
    """The rank→GPU map Ray Train will build (ranks by node id then GPU id, CUDA_VISIBLE_DEVICES widened to the node's
    union, local ranks by node IP): no two ranks on one GPU, one Ray node per IP. ``nvml`` is by Ray node id."""
    rows = rules.with_bus_ids(rules.predict_rank_map(ray_train_workers), nvml)
    found = Findings()
    found.check(rules.rule_no_shared_gpu, rows)
    found.check(rules.rule_one_node_per_ip, rows)
    table = [f"rank {r['rank']}: {r['hostname']} ({r['node_ip']}) node_rank {r['node_rank']} local_rank "
             f"{r['local_rank']} GPU {','.join(r['gpu_ids']) or '-'} (CUDA_VISIBLE_DEVICES="
             f"{r['cuda_visible_devices'] or ''}, cuda:{'' if r['cuda_index'] is None else r['cuda_index']})" for r in rows]
    gpus = sum(1 for r in rows if r["gpu_ids"])
    return found.result(f"{len(rows)} ranks on {len({r['node_id'] for r in rows})} nodes, {gpus} with a GPU of their own",
                        {"rank_map": rows, "table": table})


@check("ray_train.nic", scope="cluster", needs=["ray_train_node_ips", "nic_route"], tags=["ray_train", "network"],
       timeout=10)
def nic(ray_train_node_ips: Mapping[str, str], nic_route: Mapping[str, Mapping[str, Any]]) -> Result:
    """Ray's node IP of every node is on the interface its kernel uses toward the rank-0 node (MASTER_ADDR)."""
    found = Findings()
    for node, ip in ray_train_node_ips.items():
        if node in nic_route:
            found.check(rules.rule_node_ip_on_route_nic, node, ip, nic_route[node])
    evidence = {"node_ips": dict(ray_train_node_ips),
                "interfaces": {n: f.get("ifname") for n, f in nic_route.items()}}
    return found.result("Ray's node IPs are on the interfaces toward the rank-0 node", evidence)


#: the gate's checks, in the order the gate runs them
SCALING = (scaling,)
AFTER_START = (storage, rank_map, nic)
