"""The rules of cluster.node_count: the nodes the job needs joined the cluster and are alive (pure: the
``node_ranks`` and ``node_states`` the cluster runner records in, findings out)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsv3_preflight.result import Actor, Finding, failure, warning

NodeStates = Mapping[str, Mapping[str, Any]]


def gcs_address(node_states: NodeStates) -> str | None:
    """The Ray head's GCS address, as the first node that knows it reports it."""
    return next((s.get("gcs_address") for s in node_states.values() if s.get("gcs_address")), None)


def join_command(node_states: NodeStates) -> str:
    gcs = gcs_address(node_states)
    return f"ray start --address={gcs}" if gcs else 'ray start --address="${RAY_HEAD:?the head GCS address, host:port}"'


def lost_nodes(node_ranks: Mapping[str, int], node_states: NodeStates) -> list[str]:
    """The nodes that joined and died during the run."""
    return [n for n in node_ranks if (node_states.get(n) or {}).get("state") == "dead"]


def evidence_of(node_ranks: Mapping[str, int], node_states: NodeStates, profile: Any) -> dict[str, Any]:
    lost = lost_nodes(node_ranks, node_states)
    return {"expected": profile.nnodes, "present": [n for n in node_ranks if n not in lost], "lost": lost,
            "node_ranks": dict(node_ranks), "nnodes_source": profile.sources.get("nnodes"),
            "gcs_address": gcs_address(node_states)}


def rule_nodes_missing(node_ranks: Mapping[str, int], node_states: NodeStates, profile: Any) -> Finding | None:
    """Fewer nodes present (joined and alive) than the profile expects: the node's administrator acts."""
    lost = lost_nodes(node_ranks, node_states)
    present = [n for n in node_ranks if n not in lost]
    if len(present) >= profile.nnodes:
        return None
    missing = profile.nnodes - len(present)
    lost_part = ""
    if lost:
        lost_part = " (lost during the run: " + ", ".join(
            f"{n} {node_states[n].get('phase') or ''}".strip() for n in lost) + ")"
    join = join_command(node_states)
    fix = ("ray status   # on the head: which nodes joined\n"
           + "".join(f"{join}   # on {n} once it is repaired\n" for n in lost)
           + (f"{join}   # on each node that never joined (the job's environment exported first)\n"
              if missing > len(lost) else "")
           + "dsv3-preflight run --all-nodes   # then again")
    return failure(
        f"{missing} node(s) missing: the profile expects {profile.nnodes} nodes ({profile.sources.get('nnodes')}), "
        f"{len(present)} present: {', '.join(present) or 'none'}{lost_part}",
        fix, actor=Actor.NODE, cause="cluster.node_lost" if lost else "cluster.node_missing")


def rule_nodes_extra(node_ranks: Mapping[str, int], node_states: NodeStates, profile: Any) -> Finding | None:
    """More nodes present than the profile expects: the extra ones idle (a warning for the job's configuration)."""
    present = [n for n in node_ranks if n not in lost_nodes(node_ranks, node_states)]
    if len(present) <= profile.nnodes:
        return None
    extra = [n for n, r in node_ranks.items() if r >= profile.nnodes]
    return warning(f"{len(present)} nodes present but the profile expects {profile.nnodes}: the launch uses node ranks "
                   f"0..{profile.nnodes - 1}, leaving {', '.join(extra)} idle",
                   f"export NNODES={len(present)}   # if all of them should train", actor=Actor.JOB)


def ok_summary(node_ranks: Mapping[str, int], node_states: NodeStates, profile: Any) -> str:
    present = [n for n in node_ranks if n not in lost_nodes(node_ranks, node_states)]
    return f"{len(present)} of {profile.nnodes} expected nodes present: {', '.join(present)}"
