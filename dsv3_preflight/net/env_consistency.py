"""The rules of cluster.env_consistency (pure: facts in, findings out): the launch variables that must agree across nodes do agree.

Each node's ``env`` fact is the environment its Ray workers inherited from `ray start`: what the training
will see there. NCCL also reads NCCL_* settings from files (``$NCCL_CONF_FILE`` or ``~/.nccl.conf``, then
``/etc/nccl.conf``, the ``nccl_conf`` fact) where the environment leaves them unset: those count as the
node's values, named with their file. NODE_RANK and the other per-node ranks are judged by cluster.node_rank."""
from __future__ import annotations

import shlex
from collections.abc import Mapping

from dsv3_preflight.net.facts import NcclConfFile
from dsv3_preflight.net.ifselect import nccl_settings
from dsv3_preflight.result import Actor, Finding, failure, warning

EXACT = ("CUDA_DEVICE_ORDER", "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS", "NNODES", "NPROC_PER_NODE",
         "WORLD_SIZE", "LOCAL_WORLD_SIZE")


PREFIXES = ("NCCL_", "TORCH_NCCL_", "GLOO_", "TORCH_DISTRIBUTED_")


PER_NODE_OK = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_DEBUG_FILE", "NCCL_TOPO_FILE",
               "NCCL_TOPO_DUMP_FILE")


IGNORED = ("NODE_RANK", "RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK")


UNSET = "<unset>"


def relevant(name: str) -> bool:
    return (name in EXACT or name.startswith(PREFIXES)) and name not in IGNORED


def with_nccl_conf(env: Mapping[str, str], files: list[NcclConfFile] | None) -> tuple[dict[str, str], dict[str, str]]:
    """The node's variables as its processes and NCCL see them, and {name: file} for those NCCL reads from a settings
    file: the environment wins, then the first file in NCCL's order (the ``nccl_conf`` fact)."""
    names = {name for conf in files or [] for name in conf.get("values") or {}}
    settings = nccl_settings(env, files or [], names)   # net.nic_route's precedence, for every name a file sets
    sources = {name: source for name, (_value, source) in settings.items() if source}
    return {**env, **{name: value for name, (value, source) in settings.items() if source and value is not None}}, sources


def rule_must_agree(name: str, values: Mapping[str, str], ref: str,
                    sources: Mapping[str, str] | None = None) -> Finding:
    """A variable that differs between nodes: the export (or unset) that makes each odd node match node 0; where an
    odd node's value comes from an NCCL settings file and node 0 has none, the sed deleting its line there."""
    sources = sources or {}
    want = values[ref]
    off = [n for n, v in values.items() if v != want]
    shown = ", ".join(f"{n}={v}" + (f" ({sources[n]})" if n in sources else "") for n, v in values.items())
    lines = []
    exported = [n for n in off if not (want == UNSET and n in sources)]
    if exported:
        cmd = f"unset {name}" if want == UNSET else f"export {name}={shlex.quote(want)}"
        lines.append(f"{cmd}   # on {', '.join(exported)} (as on node 0 {ref}), before `ray start` there")
    for n in off:
        if want == UNSET and n in sources:   # unset does not undo a file: NCCL reads it again
            lines.append(f"sed -i '/^{name}=/d' {shlex.quote(sources[n])}   # on {n}: NCCL reads {name} from this "
                         f"file (node 0 {ref} has none)")
    return failure(f"{name} differs between nodes: {shown}", "\n".join(lines), actor=Actor.JOB,
                   cause="cluster.env_drift")


def rule_per_node(name: str, values: Mapping[str, str]) -> Finding:
    return warning(f"{name} differs between nodes ({', '.join(f'{n}={v}' for n, v in values.items())}): fine only if "
                   "the interface names really differ per host",
                   "ip -br addr   # on each node: the named interface must carry the training network",
                   actor=Actor.JOB)


def compare(env: Mapping[str, Mapping[str, str]], nodes: list[str], nccl_conf: Mapping[str, list[NcclConfFile]] | None
            ) -> tuple[list[str], dict[str, dict[str, str]], dict[str, dict[str, str]], dict[str, dict[str, str]]]:
    """The launch variables of every node side by side, as the libraries see them (NCCL_* from nccl.conf where the
    environment leaves them unset): the names compared, those that differ where they must agree, those that may
    differ per node, and which node's value came from which file."""
    seen = {n: with_nccl_conf(env[n], (nccl_conf or {}).get(n)) for n in nodes}
    names = sorted({k for e, _ in seen.values() for k in e if relevant(k)})
    differing: dict[str, dict[str, str]] = {}
    soft: dict[str, dict[str, str]] = {}
    for name in names:
        values = {n: seen[n][0].get(name, UNSET) for n in nodes}
        if len(set(values.values())) > 1:
            (soft if name in PER_NODE_OK and UNSET not in values.values() else differing)[name] = values
    from_files = {name: {n: seen[n][1][name] for n in nodes if name in seen[n][1]} for name in names}
    return names, differing, soft, from_files
