"""Running checks: facts in, results out. The engine knows nothing of what a check means.

Every check runs under its timeout and the run's deadline; an exception or a timeout in a probe or
a judge becomes an ERROR result for that check alone, and the run goes on.
"""
from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .facts import FactBusy, FactError, FactNotRecorded, FactStore
from .profile import Profile
from .registry import CheckSpec, Registry
from .result import Actor, Result, Status, decide_results

OnResult = Callable[[Result], None]


@dataclass
class NodeRun:
    """The outcome of running node checks on one node."""

    node: str
    results: list[Result]
    facts: dict[str, Any] = field(default_factory=dict)


def _call_with_timeout(func: Callable[[], Any], timeout: float) -> tuple[bool, Any, BaseException | None]:
    """Run func in a daemon thread; (finished, value, exception)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = func()
        except BaseException as exc:  # noqa: BLE001 - reported as ERROR
            box["exc"] = exc

    thread = threading.Thread(target=target, daemon=True, name="judge")
    thread.start()
    thread.join(max(timeout, 0.0))
    if thread.is_alive():
        return False, None, None
    return True, box.get("value"), box.get("exc")


def judged(call: Callable[[], Any], timeout: float | None = None, *, what: str = "check") -> Result:
    """The one wrapper every judging goes through: call a pure judge, and anything but a proper non-ERROR
    :class:`Result` becomes an ERROR (an exception, a wrong return type, an ERROR it made itself, evidence that is
    not JSON). ``timeout``: seconds the judge may take (in a daemon thread); None calls it in this thread.

    ``what`` names the judge in the ERROR's summary ("check", "the adapter's rules"). Checks go through
    :func:`judge`; ``lora scan`` and ``lora watch`` judge each adapter through this, so a rule that crashes there
    is that adapter's ERROR, as a crashing check is the check's.
    """
    if timeout is None:
        value, exc = _call_inline(call)
    else:
        finished, value, exc = _call_with_timeout(call, timeout)
        if not finished:
            return Result._engine_error(f"{what} did not finish within {timeout:g} s")
    return _checked(value, exc, what)


def _call_inline(call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return call(), None
    except Exception as exc:  # noqa: BLE001 - reported as ERROR
        return None, exc


def _checked(value: Any, exc: BaseException | None, what: str) -> Result:
    """The ERROR for what a judge raised or returned wrongly, else its Result."""
    if exc is not None:
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""
        return Result._engine_error(
            f"{what} raised {type(exc).__name__}: {exc}",
            {"exception": type(exc).__name__, "message": str(exc), "where": where},
        )
    if not isinstance(value, Result):
        return Result._engine_error(f"{what} returned {type(value).__name__}, not a Result")
    if value.status is Status.ERROR:
        return Result._engine_error(f"{what} returned ERROR itself (only the engine reports ERROR): {value.summary}")
    try:
        value.to_dict()
    except (TypeError, ValueError) as exc:
        return Result._engine_error(f"{what} returned evidence that is not JSON-serialisable: {exc}")
    return value


def judge(spec: CheckSpec, kwargs: Mapping[str, Any], timeout: float) -> Result:
    """Call a check's judge under ``timeout``; anything but a proper non-ERROR Result becomes an ERROR."""
    finished, value, exc = _call_with_timeout(lambda: spec.judge(**kwargs), timeout)
    if not finished:
        if timeout < spec.timeout - 0.01:
            return Result._engine_error(f"check did not finish before the run's deadline ({timeout:.1f} s were left)")
        return Result._engine_error(f"check did not finish within its timeout of {spec.timeout:g} s")
    return _checked(value, exc, "check")


def cluster_skip_reason(profile: Profile) -> str:
    return (
        f"cluster-scope check: the profile has {profile.nnodes} nodes, and this run saw only this one; "
        "run `dsv3-preflight run --all-nodes` to judge all nodes together"
    )


def skip_cluster_checks(checks: Iterable[CheckSpec], profile: Profile, cluster_name: str = "cluster",
                        on_result: OnResult | None = None) -> list[Result]:
    """The SKIP of each cluster-scope check a run on one node of several cannot judge (it saw one node only)."""
    results = []
    for spec in checks:
        result = Result.skipped(cluster_skip_reason(profile)).stamped(name=spec.name, node=cluster_name, duration_s=0.0)
        results.append(result)
        if on_result:
            on_result(result)
    return results


def run_node_checks(
    registry: Registry,
    checks: Iterable[CheckSpec],
    store: FactStore,
    node: str,
    deadline: float | None = None,
    on_result: OnResult | None = None,
) -> list[Result]:
    """Judge every node-scope check on this node's facts, in order; probes run in parallel."""
    checks = [c for c in checks if c.scope == "node"]
    store.start({need for c in checks for need in c.needs})
    results = []
    for spec in checks:
        started = time.monotonic()
        check_deadline = started + spec.timeout
        run_bound = deadline is not None and deadline < check_deadline
        if deadline is not None:
            check_deadline = min(check_deadline, deadline)
        if deadline is not None and started >= deadline:
            result = _run_late(spec, store)
        else:
            result = _run_one(spec, store, check_deadline, run_bound)
        result = result.stamped(name=spec.name, node=node, duration_s=time.monotonic() - started)
        results.append(result)
        if on_result:
            on_result(result)
    return results


def _run_one(spec: CheckSpec, store: FactStore, check_deadline: float, run_bound: bool = False) -> Result:
    kwargs = {}
    for need in spec.needs:
        try:
            kwargs[need] = store.get(need, deadline=check_deadline)
        except FactBusy as exc:  # another run on this node holds what the probe needs: say so, judge nothing
            return Result.warned(f"not judged: {exc}", {"fact": need, "busy": str(exc)},
                                 "# wait for that dsv3-preflight run to finish, then run again", actor=Actor.JOB)
        except FactNotRecorded:
            return Result.skipped(f"not judged: the replayed facts do not hold {need!r} (recorded by a version or "
                                  "a selection that did not gather it); record them again with `run --facts-out`",
                                  {"fact": need, "replay": "not recorded"})
        except FactError as exc:
            error = str(exc)
            if run_bound and error.endswith("not gathered before the check's own timeout"):
                error = f"{need}: not gathered before the run's overall timeout"
            return Result._engine_error(f"cannot judge: fact {need!r} unavailable: {error}", {"fact": need, "error": error})
    remaining = check_deadline - time.monotonic()
    # the judge gets the check's whole timeout when the facts came quickly (a judge is pure and fast)
    return judge(spec, kwargs, max(min(spec.timeout, remaining + 0.01), 0.05))


# after the run's overall deadline a check is still judged when its facts are already there: judging is pure
# and quick, and a result the run could give is better than "timed out" (never lie, never hang)
LATE_JUDGE_TIMEOUT_S = 2.0


def _run_late(spec: CheckSpec, store: FactStore) -> Result:
    missing = [need for need in spec.needs if not store.ready(need)]
    if missing:
        return Result._engine_error(
            f"the run's overall timeout was reached before {', '.join(missing)} could be gathered",
            {"facts_not_gathered": missing},
        )
    return _run_one(spec, store, time.monotonic() + LATE_JUDGE_TIMEOUT_S)


def run_cluster_checks(
    checks: Iterable[CheckSpec],
    profile: Profile,
    node_facts: Mapping[str, Mapping[str, Any]],
    node_ranks: Mapping[str, int],
    cluster_name: str = "cluster",
    on_result: OnResult | None = None,
    node_states: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Result]:
    """Judge every cluster-scope check on the facts of all nodes.

    Each fact argument is ``{node: value}`` ordered by node rank, holding the nodes that gathered it.
    A fact that no node could gather makes the check ERROR with the nodes' errors. ``node_states`` is what
    the runner saw of each node (``{"state": "alive" | "dead", ...}``, cluster mode's NodeWatch); a node
    it does not name was alive for this run (one node judging itself).
    """
    ordered = sorted(node_facts, key=lambda n: (node_ranks.get(n, 1 << 30), n))
    results = []
    for spec in checks:
        if spec.scope != "cluster":
            continue
        started = time.monotonic()
        kwargs: dict[str, Any] = {}
        error = None
        for need in spec.needs:
            if need == "profile":
                kwargs[need] = profile
            elif need == "node_ranks":
                kwargs[need] = {n: node_ranks[n] for n in ordered if n in node_ranks}
            elif need == "node_states":
                kwargs[need] = {n: dict((node_states or {}).get(n) or {"state": "alive"}) for n in ordered if n in node_ranks}
            else:
                have = {n: node_facts[n]["facts"][need] for n in ordered if need in node_facts[n].get("facts", {})}
                if not have:
                    errs = {n: node_facts[n].get("fact_errors", {}).get(need, "not gathered") for n in ordered}
                    error = Result._engine_error(f"cannot judge: no node has the fact {need!r}", {"fact": need, "errors": errs})
                    break
                kwargs[need] = have
        result = error or judge(spec, kwargs, spec.timeout)
        result = result.stamped(name=spec.name, node=cluster_name, duration_s=time.monotonic() - started)
        results.append(result)
        if on_result:
            on_result(result)
    return results


def exit_code(results: Iterable[Result], strict: bool = False) -> int:
    """pytest's codes through the one verdict function: 0 no FAIL/ERROR, 1 otherwise, 5 nothing ran."""
    return int(decide_results(results, strict=strict).exit_code)


def error_result(name: str, node: str, summary: str, evidence: Mapping[str, Any] | None = None,
                 remediation: str | None = None, *, duration_s: float = 0.0, actor: Actor | str | None = None,
                 cause: str | None = None) -> Result:
    """An ERROR result a runner records when it could not run something (a node that died, Ray unreachable).

    Runners never judge: they record what they learned as a fact, or as this ERROR, named and placed.
    """
    return Result._engine_error(summary, evidence, remediation, actor=actor, cause=cause).stamped(
        name=name, node=node, duration_s=duration_s)
