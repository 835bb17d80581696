"""Dispatching one pinned task per node and collecting what comes back, never past the deadline."""
from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .bootstrap import HELLO_NAMESPACE
from .liveness import ACTIVE, Lost, NodeWatch, is_node_death
from .node_side import NodeAnswer, NodeTask
from .nodes import NodeInfo

#: seconds kept back from the node's own time limit, for the transfer of its results
RETURN_MARGIN_S = 2.0
#: seconds of a rank's start-up (Python, importing torch) not counted against the timeout of the gang or of a
#: pair: a node that is slow to start is not a slow link (on a loaded 2-core lab, 6 ranks importing torch at
#: once took ~15 s)
STARTUP_ALLOWANCE_S = 20.0


def startup_allowance(timeout_s: float, room_s: float) -> float:
    """The start-up allowance of a wave whose ranks time out after ``timeout_s``, with ``room_s`` seconds the run
    can give the wave: at most STARTUP_ALLOWANCE_S, never more than the timeout, only from what is left of the room."""
    return min(STARTUP_ALLOWANCE_S, timeout_s, max(room_s - timeout_s, 0.0))


@dataclass
class NodeReport:
    """What one node task produced: its answer, or why there is none."""

    node: NodeInfo
    value: NodeAnswer | None = None
    error: str | None = None          # dead, hung, crashed, package missing: the cause in one line
    kind: str | None = None           # "died", "timeout", "crashed", "package_missing", "unschedulable", "unreachable"
    elapsed_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)
    lost: Lost | None = None          # when Ray reported the node dead


def lost_text(node: NodeInfo, lost: Lost, name: str | None = None) -> str:
    """One line: the node was lost, doing what, when (seconds into the run and UTC), and Ray's words."""
    reason = lost.reason.split(". ")[0].rstrip(".") if lost.reason else "no reason given"
    return (f"{name or node.name} was lost {lost.phase}, {lost.after_s:.1f} s into the run ({lost.at}): "
            f"Ray reported it dead ({reason}; seen in the {lost.source})")


def _classify(exc: BaseException) -> tuple[str, str]:
    import ray.exceptions as rex

    name = type(exc).__name__
    text = str(exc).strip().splitlines()
    first = next((line for line in text if line.strip()), name)
    if is_node_death(exc):
        return "died", f"the node died while running the checks ({name})"
    if isinstance(exc, (rex.WorkerCrashedError,)) or "WorkerCrashed" in name:
        return "died", f"the worker process running the checks died ({name}): the node was lost or killed it"
    if isinstance(exc, getattr(rex, "TaskUnschedulableError", ())):
        return "unschedulable", f"the task could not be placed on the node: {first[:300]}"
    if isinstance(exc, getattr(rex, "RuntimeEnvSetupError", ())):
        return "runtime_env", f"Ray could not set up the runtime_env on the node: {first[:300]}"
    if isinstance(exc, rex.RayTaskError):
        cause = getattr(exc, "cause", None)
        if cause is not None:
            return "crashed", f"the node task raised {type(cause).__name__}: {str(cause)[:300]}"
    return "crashed", f"{name}: {first[:300]}"


def new_run_id() -> str:
    return uuid.uuid4().hex[:12]


def hello_key(run_id: str, node_id: str) -> str:
    return f"hello/{run_id}/{node_id}"


def hellos(run_id: str, node_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """What each node said about itself when its first task started ({node id: {"node_name", "hostname", "pid"}}),
    then the run's hellos are deleted from Ray's key-value store. Empty where the store cannot be read."""
    found: dict[str, dict[str, Any]] = {}
    try:
        from ray.experimental import internal_kv

        for node_id in node_ids:
            raw = internal_kv._internal_kv_get(hello_key(run_id, node_id), namespace=HELLO_NAMESPACE)
            if raw:
                found[node_id] = json.loads(raw)
        internal_kv._internal_kv_del(f"hello/{run_id}/", del_by_prefix=True, namespace=HELLO_NAMESPACE)
    except Exception:  # noqa: BLE001 - names then come from Ray's host names, with the node id
        pass
    return found


def run_pinned(
    nodes: Sequence[NodeInfo],
    payload_for: Callable[[NodeInfo], NodeTask | Mapping[str, Any]],
    deadline: float,
    *,
    watch: NodeWatch | None = None,
    phase: str | None = None,
    after_phase: str | None = None,
    on_start: Callable[[NodeInfo], None] | None = None,
    on_done: Callable[[NodeReport], None] | None = None,
    task_label: str = "checks",
    abandon_on_loss: bool | None = None,
) -> dict[str, NodeReport]:
    """Run the bootstrap task once on every node (hard node affinity, no CPU/GPU asked) with the node's task
    (``payload_for(node)``: a :class:`NodeTask`, or its plain data); {node_id: report}.

    A node whose task fails gets its cause; a node Ray reports dead (its node table, or the task's
    NodeDiedError) gets ``kind="died"`` at once, with the moment it was lost (``report.lost``); one that has
    not answered by ``deadline`` (monotonic) gets ``kind="timeout"``. Tasks not answered are cancelled
    (force); the other nodes are not waited for longer than they need. With ``abandon_on_loss`` (a wave
    that cannot finish without every node, such as a collective), a loss ends the wave: the tasks still
    running elsewhere are cancelled and reported ``kind="abandoned"`` (default: for the collective gang, whose
    ranks wait for every node until their timeout).

    ``watch``: the run's :class:`NodeWatch` (default: the one :data:`liveness.ACTIVE` holds, else a new one);
    ``phase``: what a node lost now was doing (default from ``task_label``: "during its node checks",
    "during the port-reach wave", "during the collective gang (--probe)", ...); ``after_phase``: what a node
    whose task ended is between while the others still run (default "after its node checks", ...).
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from .bootstrap import make_task

    watch = watch if watch is not None else (ACTIVE.get() or NodeWatch(list(nodes)))
    phase = phase or phase_of_wave(task_label)
    if abandon_on_loss is None:
        abandon_on_loss = task_label.startswith("gang")
    after_phase = after_phase or phase.replace("during its ", "after its ").replace("during the ", "after the ")
    task = ray.remote(make_task())
    pending: dict[Any, tuple[NodeInfo, float]] = {}
    reports: dict[str, NodeReport] = {}

    def done(report: NodeReport) -> None:
        reports[report.node.node_id] = report
        watch.idle(report.node.node_id, after_phase)
        if on_done:
            on_done(report)

    for node in nodes:
        if watch.is_lost(node.node_id):  # lost before this wave: nothing to run there
            lost = watch.lost[node.node_id]
            done(NodeReport(node, kind="died", error=lost_text(node, lost), lost=lost))
            continue
        started = time.monotonic()
        ref = task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node.node_id, soft=False),
            num_cpus=0, num_gpus=0, max_retries=0, name=f"dsv3-preflight {task_label} on {node.name or node.short_id}",
        ).remote(_wire(payload_for(node)))
        pending[ref] = (node, started)
        watch.busy(node.node_id, phase)
        if on_start:
            on_start(node)

    def collect(ref: Any) -> None:
        node, started = pending[ref]
        report = NodeReport(node)
        try:
            value = ray.get(ref, timeout=max(min(deadline - time.monotonic(), 30.0), 1.0))
            if value.get("ok"):
                report.value = NodeAnswer.from_wire(value)
            elif value.get("package_missing"):
                report.kind = "package_missing"
                report.error = (f"dsv3-preflight is not importable by the node's Python {value.get('python')}: "
                                f"{value.get('error')}")
                report.details = value
            else:
                report.kind, report.error = "crashed", f"unexpected answer from the node task: {value!r:.200}"
        except Exception as exc:  # noqa: BLE001 - every failure is this node's ERROR
            report.kind, report.error = _classify(exc)
            report.details = {"exception": type(exc).__name__}
            report.lost = watch.note_error(node.node_id, exc) or watch.lost.get(node.node_id)
            if report.lost is not None:
                report.kind, report.error = "died", lost_text(node, report.lost)
            elif report.kind == "died":   # its worker "crashed" while Ray lists the node alive: can we reach it?
                unreachable(report, f"Ray reported the worker running the checks as crashed ({type(exc).__name__})")
        report.elapsed_s = time.monotonic() - started
        done(report)

    def unreachable(report: NodeReport, why: str | None = None) -> None:
        """Record the driver's connects to the node's Ray ports; a node whose worker ports are filtered is alive and
        unreachable (kind ``unreachable``), not dead."""
        from .reach import ray_ports_reach

        reach = ray_ports_reach(report.node)
        report.details["reach"] = reach
        if reach["workers_filtered"]:
            node = report.node
            low = reach["ports"]["worker_port_low"]
            report.kind = "unreachable"
            report.error = (f"the node at {node.ip} is alive in Ray's node table, but its Ray workers cannot be reached "
                            f"from here: a connect to {node.ip}:{low['port']} (Ray's worker port range "
                            f"{reach['worker_ports'][0]}-{reach['worker_ports'][1]}) got {low['outcome']}"
                            + (f" ({low['error']})" if low.get("error") and low["outcome"] != "timeout" else "")
                            + f"; {why or report.error}")

    ready, dead = watch.wait({ref: node.node_id for ref, (node, _) in pending.items()},
                             deadline - time.monotonic(), on_ready=collect,
                             stop=(lambda: bool(watch.lost.keys() & {n.node_id for n, _ in pending.values()}))
                             if abandon_on_loss else None)
    for ref, lost in dead.items():
        node, started = pending[ref]
        _cancel(ref)
        done(NodeReport(node, kind="died", error=lost_text(node, lost), elapsed_s=time.monotonic() - started, lost=lost))
    gone = [watch.lost[n.node_id] for n, _ in pending.values() if n.node_id in watch.lost]
    silent: list[NodeReport] = []
    for ref, (node, started) in pending.items():
        if node.node_id in reports:
            continue
        _cancel(ref)
        if abandon_on_loss and gone:
            names = ", ".join(sorted({n.name for n, _ in pending.values() if n.node_id in watch.lost}))
            done(NodeReport(node, kind="abandoned", elapsed_s=time.monotonic() - started,
                            error=f"not waited for: {names} was lost {gone[0].phase} and this wave cannot finish without "
                                  "every node; its task was cancelled", details={"lost_nodes": names}))
            continue
        silent.append(NodeReport(node, kind="timeout", elapsed_s=time.monotonic() - started,
                                 error=f"no answer within the overall timeout ({time.monotonic() - started:.0f} s): "
                                       "the node hangs, is overloaded, or Ray cannot start a worker there; its task was "
                                       "cancelled"))
    # the nodes Ray still lists alive that never answered: their Ray ports, all at once (a few seconds, not per node)
    threads = [threading.Thread(target=unreachable, args=(r, "its task never answered"), daemon=True)
               for r in silent if not watch.is_lost(r.node.node_id)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for report in silent:
        done(report)
    return reports


#: what a node lost while a wave's task ran there was doing, by the wave's task label
_WAVE_PHASES = (("checks", "during its node checks"), ("port reach", "during the port-reach wave"),
                ("gang", "during the collective gang (--probe)"), ("pairs", "during the pairs probe (--probe=pairs)"))


def phase_of_wave(task_label: str) -> str:
    for prefix, phase in _WAVE_PHASES:
        if task_label.startswith(prefix):
            return phase
    return f"during the {task_label} wave"


def _wire(task: NodeTask | Mapping[str, Any]) -> dict[str, Any]:
    return task.to_wire() if isinstance(task, NodeTask) else dict(task)


def _cancel(ref: Any) -> None:
    import ray

    try:
        ray.cancel(ref, force=True)
    except Exception:  # noqa: BLE001 - best effort: the node may be gone already
        pass


def node_time_limit(deadline: float, reserve_s: float) -> float:
    """Seconds a node may spend, leaving time to return results and run what follows."""
    return max(deadline - time.monotonic() - reserve_s - RETURN_MARGIN_S, 1.0)
