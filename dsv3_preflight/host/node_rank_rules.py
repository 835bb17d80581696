"""The rules of cluster.node_rank (pure: facts in, findings out): the node ranks the nodes will launch with are one each, 0..NNODES-1, rank 0 on the master.

torchrun takes its node rank from ``--node_rank``, which the users' launch scripts fill from the exported
``NODE_RANK``. Two nodes exporting the same value both claim that rank, nobody takes the missing one, and the
rendezvous waits forever. The check compares each node's exported NODE_RANK (its ``env`` fact: what its Ray
workers inherited from `ray start`) with the other nodes' and with the rank the tool assigns
(``node_ranks``: node 0 holds MASTER_ADDR, the others by address), and a ``--node_rank`` in the training
command (the profile's node_rank taken from it), which `launch --all-nodes` would hand to every node alike."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from dsv3_preflight.result import Actor, Finding, failure, warning

VAR = "NODE_RANK"


CAUSE = "cluster.node_rank"


def exported_ranks(env: Mapping[str, Mapping[str, str]]) -> dict[str, str | None]:
    """{node: its exported NODE_RANK as text, or None when it exports none}, in rank order."""
    return {node: (values.get(VAR) or "").strip() or None for node, values in env.items()}


def _fix(assigned: Mapping[str, int], nodes: list[str]) -> str:
    """One `export NODE_RANK=N` per node to change, by name, with the rank the tool gives it."""
    lines = [f"export {VAR}={assigned[n]}   # on {n}" for n in nodes if n in assigned]
    return "\n".join(lines + ["# then restart `ray start` on those nodes: its workers inherit the environment it had"])


def rule_not_a_number(exported: Mapping[str, str | None], assigned: Mapping[str, int]) -> Finding | None:
    bad = {n: v for n, v in exported.items() if v is not None and not v.isdigit()}
    if not bad:
        return None
    shown = ", ".join(f"{n}={v!r}" for n, v in bad.items())
    return failure(f"{VAR} is not a node rank on {shown}", _fix(assigned, list(bad)), actor=Actor.JOB, cause=CAUSE)


def _numbers(exported: Mapping[str, str | None]) -> dict[str, int]:
    return {n: int(v) for n, v in exported.items() if v is not None and v.isdigit()}


def rule_duplicates(exported: Mapping[str, str | None], assigned: Mapping[str, int]) -> list[Finding]:
    claims: dict[int, list[str]] = defaultdict(list)
    for node, rank in _numbers(exported).items():
        claims[rank].append(node)
    found = []
    for rank, nodes in sorted(claims.items()):
        if len(nodes) < 2:
            continue
        wrong = [n for n in nodes if assigned.get(n) != rank]
        found.append(failure(
            f"{len(nodes)} nodes export {VAR}={rank}: {', '.join(nodes)}; each would join the rendezvous as node {rank} "
            "and it waits forever for the rank nobody takes", _fix(assigned, wrong or nodes[1:]),
            actor=Actor.JOB, cause=CAUSE))
    return found


def rule_out_of_range(exported: Mapping[str, str | None], assigned: Mapping[str, int], nnodes: int) -> Finding | None:
    over = {n: r for n, r in _numbers(exported).items() if r >= nnodes}
    if not over:
        return None
    shown = ", ".join(f"{n} exports {r}" for n, r in over.items())
    return failure(f"{VAR} out of range for NNODES={nnodes} (ranks 0..{nnodes - 1}): {shown}",
                   _fix(assigned, list(over)), actor=Actor.JOB, cause=CAUSE)


def rule_gaps(exported: Mapping[str, str | None], assigned: Mapping[str, int], nnodes: int) -> Finding | None:
    """Ranks 0..min(NNODES, nodes)-1 that no exporting node claims, when every node exports one."""
    numbers = _numbers(exported)
    if not numbers or len(numbers) < len(exported):
        return None
    wanted = range(min(nnodes, len(exported)))
    gaps = [r for r in wanted if r not in numbers.values()]
    if not gaps:
        return None
    wrong = [n for n, r in numbers.items() if assigned.get(n) != r]
    return failure(f"no node exports {VAR}={', '.join(map(str, gaps))}: the rendezvous waits for "
                   f"{'that node' if len(gaps) == 1 else 'those nodes'} forever",
                   _fix(assigned, wrong), actor=Actor.JOB, cause=CAUSE)


def rule_rank0_off_master(exported: Mapping[str, str | None], assigned: Mapping[str, int]) -> Finding | None:
    """A node exporting 0 that is not the node holding MASTER_ADDR: torchrun's store would be where workers do not look."""
    node0 = next((n for n, r in assigned.items() if r == 0), None)
    off = [n for n, r in _numbers(exported).items() if r == 0 and n != node0]
    if not off or node0 is None:
        return None
    return failure(f"{', '.join(off)} export{'s' if len(off) == 1 else ''} {VAR}=0, but node 0 is {node0}, the node holding "
                   "MASTER_ADDR: rank 0 hosts the rendezvous store the workers connect to",
                   _fix(assigned, off + ([node0] if exported.get(node0) != "0" else [])), actor=Actor.JOB, cause=CAUSE)


def rule_partial(exported: Mapping[str, str | None], assigned: Mapping[str, int]) -> Finding | None:
    unset = [n for n, v in exported.items() if v is None]
    if not unset or len(unset) == len(exported):
        return None
    return warning(f"{VAR} is exported on {', '.join(n for n, v in exported.items() if v is not None)} but not on "
                   f"{', '.join(unset)}: a launch script's --node_rank=${VAR} is empty there",
                   _fix(assigned, unset), actor=Actor.JOB, cause=CAUSE)


def rule_differs_from_assigned(exported: Mapping[str, str | None], assigned: Mapping[str, int]) -> Finding | None:
    """A consistent set of exported ranks in another order than the tool's: launch --all-nodes passes its own."""
    numbers = _numbers(exported)
    other = [n for n, r in numbers.items() if n in assigned and assigned[n] != r]
    if not other:
        return None
    shown = ", ".join(f"{n} exports {numbers[n]}, gets {assigned[n]}" for n in other)
    return warning(f"exported {VAR} differs from the rank `launch --all-nodes` gives ({shown}): the training "
                   f"sees --node_rank and ${VAR} disagree", _fix(assigned, other), actor=Actor.JOB, cause=CAUSE)


def rule_training_command(profile: Any, assigned: Mapping[str, int]) -> Finding | None:
    """A --node_rank in the training command: `launch --all-nodes` runs that one command on every node."""
    source = str(profile.sources.get("node_rank"))
    if not source.startswith("training command") or len(assigned) < 2:
        return None
    return failure(f"the training command passes --node_rank {profile.node_rank} ({source}): `launch --all-nodes` "
                   f"runs it on all {len(assigned)} nodes, which would all claim rank {profile.node_rank}",
                   f"# remove --node_rank {profile.node_rank} from the training command: launch --all-nodes gives each node "
                   "its own (" + ", ".join(f"{n}={r}" for n, r in assigned.items()) + ")",
                   actor=Actor.JOB, cause=CAUSE)
