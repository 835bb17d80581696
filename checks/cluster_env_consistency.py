"""cluster.env_consistency: the launch variables that must agree across nodes do agree."""
from __future__ import annotations

import shlex

from dsv3_preflight import Result, check

#: Must be identical on every node (set on all or on none).
EXACT = ("CUDA_DEVICE_ORDER", "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS", "NNODES", "NPROC_PER_NODE",
         "WORLD_SIZE", "LOCAL_WORLD_SIZE")
PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_", "TORCH_DISTRIBUTED_")
#: Legitimately per node: interface names and HCAs may differ between hosts; only warn when they do.
PER_NODE_OK = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_DEBUG_FILE", "NCCL_TOPO_FILE",
               "NCCL_TOPO_DUMP_FILE")
#: Per-node by definition.
IGNORED = ("NODE_RANK", "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK")
UNSET = "<unset>"


def relevant(name: str) -> bool:
    return (name in EXACT or name.startswith(PREFIXES)) and name not in IGNORED


@check("cluster.env_consistency", scope="cluster", needs=["env", "node_ranks", "profile"], tags=["env", "cluster"], timeout=10)
def env_consistency(env, node_ranks, profile):
    """NCCL_*, GLOO_*, CUDA_DEVICE_ORDER, MASTER_ADDR/PORT, OMP_NUM_THREADS, world size are identical on all nodes."""
    nodes = list(env)
    if len(nodes) < 2:
        return Result.skipped(f"{len(nodes)} node reported its environment; consistency needs two or more",
                              {"nodes": nodes})
    names = sorted({k for e in env.values() for k in e if relevant(k)})
    differing: dict[str, dict[str, str]] = {}
    soft: dict[str, dict[str, str]] = {}
    for name in names:
        values = {n: env[n].get(name, UNSET) for n in nodes}
        if len(set(values.values())) > 1:
            (soft if name in PER_NODE_OK and UNSET not in values.values() else differing)[name] = values
    evidence = {"nodes": nodes, "compared": names, "differing": differing, "per_node": soft}
    if differing:
        first = next(iter(differing))
        ref = nodes[0]
        shown = ", ".join(f"{n}={v}" for n, v in differing[first].items())
        fix_lines = []
        for name, values in differing.items():
            want = values[ref]
            off = [n for n, v in values.items() if v != want]
            cmd = f"unset {name}" if want == UNSET else f"export {name}={shlex.quote(want)}"
            fix_lines.append(f"{cmd}   # on {', '.join(off)} (as on node 0 {ref}), before `ray start`")
        more = f" (+{len(differing) - 1} more)" if len(differing) > 1 else ""
        return Result.failed(f"{first} differs between nodes: {shown}{more}", evidence, "\n".join(fix_lines))
    if soft:
        first = next(iter(soft))
        return Result.warned(
            f"{first} differs between nodes ({', '.join(f'{n}={v}' for n, v in soft[first].items())}): fine only if the "
            "interface names really differ per host", evidence,
            "ip -br addr   # on each node: the named interface must carry the training network")
    return Result.passed(f"{len(names)} launch variables identical on {len(nodes)} nodes", evidence)
