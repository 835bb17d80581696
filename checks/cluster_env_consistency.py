"""cluster.env_consistency: the launch variables that must agree across nodes do agree.

Each node's ``env`` fact is the environment its Ray workers inherited from `ray start`: what the training
will see there. NCCL also reads NCCL_* settings from files (``$NCCL_CONF_FILE`` or ``~/.nccl.conf``, then
``/etc/nccl.conf``, the ``nccl_conf`` fact) where the environment leaves them unset: those count as the
node's values, named with their file. NODE_RANK and the other per-node ranks are judged by cluster.node_rank."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.net.env_consistency import compare, rule_must_agree, rule_per_node
from dsv3_preflight.result import Findings


@check("cluster.env_consistency", scope="cluster", needs=["env", "node_ranks", "profile", "nccl_conf"],
       tags=["env", "cluster"], timeout=10)
def env_consistency(env, node_ranks, profile, nccl_conf=None):
    """NCCL_*, GLOO_*, CUDA_DEVICE_ORDER, MASTER_ADDR/PORT, OMP_NUM_THREADS, world size are identical on all nodes
    (NCCL_* as NCCL sees them: the environment, else the node's nccl.conf files)."""
    nodes = list(env)
    if len(nodes) < 2:
        return Result.skipped(f"{len(nodes)} node reported its environment; consistency needs two or more",
                              {"nodes": nodes})
    names, differing, soft, from_files = compare(env, nodes, nccl_conf)
    evidence = {"nodes": nodes, "compared": names, "differing": differing, "per_node": soft,
                "nccl_conf": {name: files for name, files in from_files.items() if files}}
    found = Findings()
    for name, values in differing.items():
        found.check(rule_must_agree, name, values, nodes[0], from_files[name])
    for name, values in soft.items():
        found.check(rule_per_node, name, values)
    return found.result(f"{len(names)} launch variables identical on {len(nodes)} nodes", evidence)
