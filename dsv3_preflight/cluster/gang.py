"""``--probe`` (gang): one all_reduce over every node, as a wave of node tasks.

The runner only schedules: one task pinned to each node (hard node affinity) runs the preflight with the
check ``dist.allreduce_cluster`` with the node's part of the gang in its wave (``Wave.gang``); there the probe
``collective_gang`` (dsv3_preflight/collective/probes/gang.py) runs the node's rank and returns its outcome
as a fact. The driver puts each node's fact into that node's facts and the registered cluster check judges
them with every rule of ``dist.allreduce``. A node whose task fails is an engine ERROR for that node (and
its rank is never joined in the check's verdict).
"""
from __future__ import annotations

import time
from collections.abc import Callable, MutableMapping, Sequence
from typing import Any

from ..engine import error_result
from ..result import Actor, Result
from ..wave import GangPart, Wave
from .dispatch import run_pinned, startup_allowance
from .node_side import NODE_RUN_CHECK, NodeTask, merge_entries
from .nodes import NodeInfo

GANG_CHECK = "dist.allreduce_cluster"
#: seconds a node task needs beyond the probe's own timeout: start, load the registry, send the facts back
TASK_MARGIN_S = 15.0


def gang_budget(collective_timeout: float, left_s: float) -> tuple[float, float]:
    """(timeout, start-up allowance) of the gang's ranks, given ``left_s`` seconds to the run's deadline: the
    timeout times the rendezvous and the all_reduce; each rank's own start-up (Python, importing torch; slow on a
    loaded node) is not counted against it, up to the allowance, which only uses time the run has left."""
    room = left_s - TASK_MARGIN_S - 5.0
    timeout_s = max(min(float(collective_timeout), room), 5.0)
    return timeout_s, startup_allowance(timeout_s, room)


def run_gang(ranked: Sequence[NodeInfo], profile: Any, deadline: float, node_facts: MutableMapping[str, dict[str, Any]],
             task: Callable[[NodeInfo, list[str], Wave], NodeTask], say: Any) -> tuple[list[Result], dict[str, Any]]:
    """Run the gang wave; (ERROR results of nodes whose task failed, what the run did for the document).

    ``task(node, checks, wave)``: the node task (``ClusterRun.task``). ``node_facts[name]`` (each node's entry)
    receives the node's ``collective_gang`` fact."""
    started = time.monotonic()
    n = len(ranked)
    master = ranked[0].ip
    timeout_s, startup_s = gang_budget(profile.collective_timeout, deadline - time.monotonic())
    info: dict[str, Any] = {"kind": "gang", "nodes": n, "dispatch": "one task pinned to each node (hard node affinity)",
                            "master_addr": master, "master_port": profile.master_port, "backend": profile.backend,
                            "timeout_s": round(timeout_s, 1), "startup_allowance_s": round(startup_s, 1),
                            "check": GANG_CHECK}
    say.say(f"--probe: collective gang over {n} node(s), {profile.backend}, master {master}:{profile.master_port}, "
            f"timeout {timeout_s:.0f} s")

    def params(node: NodeInfo) -> NodeTask:
        part = GangPart(master_addr=master, master_port=int(profile.master_port), world=n,
                        node_rank=int(node.node_rank or 0), backend=profile.backend, timeout_s=timeout_s,
                        startup_s=startup_s)
        return task(node, [GANG_CHECK], Wave(gang=part))

    reports = run_pinned(ranked, params, min(deadline, time.monotonic() + timeout_s + startup_s + TASK_MARGIN_S),
                         on_done=lambda r: say.done(r, "gang"), task_label="gang")
    errors = []
    for node in ranked:
        report = reports[node.node_id]
        if report.value is None:
            # the node's facts say why it has no gang outcome (a task abandoned because another node was lost,
            # a task that died): never an empty fact the judge would read as "not requested"
            entry = node_facts.setdefault(node.name, {"facts": {}, "fact_errors": {}})
            entry.setdefault("fact_errors", {})["collective_gang"] = f"gang wave: {report.error}"
            errors.append(error_result(NODE_RUN_CHECK, node.name, f"gang wave: {report.error}",
                                       {"kind": report.kind, "node_id": node.node_id, "ip": node.ip},
                                       f"ray status   # is {node.name} ({node.ip}) alive? then re-run with --probe",
                                       duration_s=report.elapsed_s, actor=Actor.NODE))
            continue
        entry = node_facts.setdefault(node.name, {"facts": {}, "fact_errors": {}})
        entry.update(merge_entries(entry, report.value.entry))
    info["elapsed_s"] = round(time.monotonic() - started, 3)
    info["failed_nodes"] = {node.name: reports[node.node_id].kind for node in ranked if reports[node.node_id].value is None}
    return errors, info
