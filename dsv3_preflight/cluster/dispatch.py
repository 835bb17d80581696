"""Dispatching one pinned task per node and collecting what comes back, never past the deadline."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from .nodes import NodeInfo

#: seconds kept back from the node's own time limit, for the transfer of its results
RETURN_MARGIN_S = 2.0


@dataclass
class NodeReport:
    """What one node task produced: its payload's answer, or why there is none."""

    node: NodeInfo
    value: dict[str, Any] | None = None
    error: str | None = None          # dead, hung, crashed, package missing: the cause in one line
    kind: str | None = None           # "died", "timeout", "crashed", "package_missing", "unschedulable"
    elapsed_s: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)


def _classify(exc: BaseException) -> tuple[str, str]:
    import ray.exceptions as rex

    name = type(exc).__name__
    text = str(exc).strip().splitlines()
    first = next((line for line in text if line.strip()), name)
    if isinstance(exc, getattr(rex, "NodeDiedError", ())) or "node" in name.lower() and "died" in name.lower():
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


def run_pinned(
    nodes: Sequence[NodeInfo],
    payload_for: Callable[[NodeInfo], dict[str, Any]],
    deadline: float,
    *,
    on_start: Callable[[NodeInfo], None] | None = None,
    on_done: Callable[[NodeReport], None] | None = None,
    task_label: str = "checks",
) -> dict[str, NodeReport]:
    """Run the bootstrap task once on every node (hard node affinity, no CPU/GPU asked); {node_id: report}.

    A node whose task fails gets its cause; one that has not answered by ``deadline`` (monotonic)
    gets ``kind="timeout"`` and its task is cancelled (force) — the others are not waited for longer.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from .bootstrap import make_task

    task = ray.remote(make_task())
    pending: dict[Any, tuple[NodeInfo, float]] = {}
    reports: dict[str, NodeReport] = {}
    for node in nodes:
        started = time.monotonic()
        ref = task.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node.node_id, soft=False),
            num_cpus=0, num_gpus=0, max_retries=0, name=f"dsv3-preflight {task_label} on {node.name or node.short_id}",
        ).remote(payload_for(node))
        pending[ref] = (node, started)
        if on_start:
            on_start(node)
    while pending:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _ = ray.wait(list(pending), num_returns=1, timeout=min(left, 1.0))
        for ref in ready:
            node, started = pending.pop(ref)
            report = NodeReport(node)
            try:
                value = ray.get(ref, timeout=max(min(deadline - time.monotonic(), 30.0), 1.0))
                if value.get("ok"):
                    report.value = value
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
            report.elapsed_s = time.monotonic() - started
            reports[node.node_id] = report
            if on_done:
                on_done(report)
    for ref, (node, started) in pending.items():
        try:
            ray.cancel(ref, force=True)
        except Exception:  # noqa: BLE001 - best effort: the node may be gone already
            pass
        report = NodeReport(node, kind="timeout", elapsed_s=time.monotonic() - started,
                            error=f"no answer within the overall timeout ({time.monotonic() - started:.0f} s): "
                                  "the node hangs, is overloaded, or Ray cannot start a worker there; its task was cancelled")
        reports[node.node_id] = report
        if on_done:
            on_done(report)
    return reports


def node_time_limit(deadline: float, reserve_s: float) -> float:
    """Seconds a node may spend, leaving time to return results and run what follows."""
    return max(deadline - time.monotonic() - reserve_s - RETURN_MARGIN_S, 1.0)


def merge_entries(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """A node entry with the second wave's facts added (the second wave's value wins)."""
    merged = dict(first)
    for key in ("facts", "fact_errors", "fact_timings_s"):
        merged[key] = {**(first.get(key) or {}), **(second.get(key) or {})}
    for fact in (second.get("facts") or {}):
        merged["fact_errors"].pop(fact, None)
    return merged
