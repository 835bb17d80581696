"""cluster.node_rank: the node ranks the nodes will launch with are one each, 0..NNODES-1, rank 0 on the master.

torchrun takes its node rank from ``--node_rank``, which the users' launch scripts fill from the exported
``NODE_RANK``. Two nodes exporting the same value both claim that rank, nobody takes the missing one, and the
rendezvous waits forever. The check compares each node's exported NODE_RANK (its ``env`` fact: what its Ray
workers inherited from `ray start`) with the other nodes' and with the rank the tool assigns
(``node_ranks``: node 0 holds MASTER_ADDR, the others by address), and a ``--node_rank`` in the training
command (the profile's node_rank taken from it), which `launch --all-nodes` would hand to every node alike."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.host.node_rank_rules import (
    VAR,
    exported_ranks,
    rule_differs_from_assigned,
    rule_duplicates,
    rule_gaps,
    rule_not_a_number,
    rule_out_of_range,
    rule_partial,
    rule_rank0_off_master,
    rule_training_command,
)
from dsv3_preflight.result import Findings


@check("cluster.node_rank", scope="cluster", needs=["env", "node_ranks", "profile"], tags=["cluster", "launch", "env"],
       timeout=5)
def node_rank(env, node_ranks, profile):
    """Exported NODE_RANKs (and a --node_rank in the training command) are one per node, 0..NNODES-1, 0 on the master."""
    exported = exported_ranks(env)
    assigned = dict(node_ranks)
    evidence = {"exported": exported, "assigned": assigned, "nnodes": profile.nnodes,
                "node_rank_source": profile.sources.get("node_rank")}
    found = Findings()
    found.check(rule_training_command, profile, assigned)
    found.check(rule_not_a_number, exported, assigned)
    found.check(rule_duplicates, exported, assigned)
    found.check(rule_out_of_range, exported, assigned, profile.nnodes)
    found.check(rule_gaps, exported, assigned, profile.nnodes)
    found.check(rule_rank0_off_master, exported, assigned)
    if not found.failures:
        found.check(rule_partial, exported, assigned)
        found.check(rule_differs_from_assigned, exported, assigned)
    if all(v is None for v in exported.values()) and not found:
        return Result.passed(f"no node exports {VAR}; launch --all-nodes gives each its own: "
                             + ", ".join(f"{n}={r}" for n, r in assigned.items()), evidence)
    return found.result(f"{VAR} is one per node, 0..{profile.nnodes - 1}, and matches the assigned ranks: "
                        + ", ".join(f"{n}={r}" for n, r in assigned.items()), evidence)
