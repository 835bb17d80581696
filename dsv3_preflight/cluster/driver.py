"""``run --all-nodes``: the node checks once on every Ray node, then the cluster checks on all facts.

One :class:`ClusterRun` holds a run once Ray answered: what was asked, the nodes, the deadline, and what the waves
found so far. Its waves go one way: the driver sends each node a :class:`.node_side.NodeTask` (with the wave's
typed parameters, :class:`dsv3_preflight.wave.Wave`), the node runs it through the runner and answers a
:class:`.node_side.NodeAnswer` (facts and results); the driver records them, then judges the cluster checks.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from ..engine import error_result
from ..profile import Profile
from ..registry import CheckSpec, Registry
from ..result import Actor, Result
from ..wave import NO_WAVE, Wave
from .connect import ClusterError, ConnectInfo, connect, disconnect
from .dispatch import NodeReport, hello_key, hellos, lost_text, new_run_id, node_time_limit, run_pinned
from .fixes import connect_fix, lost_node_fix, node_error_row, ray_ports_fix
from .liveness import ACTIVE, Lost, NodeWatch
from .node_side import NODE_RUN_CHECK, NodeTask
from .nodes import NodeInfo, alive_nodes, assign_node_ranks, unique_names
from .progress import Progress

__all__ = ["CLUSTER_RESERVE_S", "CONNECT_CHECK", "NODE_RUN_CHECK", "ClusterOutcome", "ClusterRun", "ProbeAsk",
           "Progress", "connect_timeout", "lost_node_fix", "ray_ports_fix", "run_all_nodes"]

CONNECT_CHECK = "cluster.connect"          # the ERROR row when Ray cannot be reached
LISTENER_FACT = "port_reach"               # facts gathered while node 0 runs the temporary listener
CLUSTER_RESERVE_S = 5.0                    # kept for the cluster checks after the node tasks


def connect_timeout(run_timeout: float) -> float:
    """How long connecting to Ray may take out of the run's overall timeout."""
    return min(max(float(run_timeout) * 0.5, 5.0), 120.0)


@dataclass
class ClusterOutcome:
    results: list[Result]
    nodes: list[dict[str, Any]]
    extra: dict[str, Any]
    ranked: list[NodeInfo] = field(default_factory=list)
    connect: ConnectInfo | None = None


@dataclass(frozen=True)
class ProbeAsk:
    """``--probe``: the gang, or the pairs (``--pairs-sample``, ``--pairs`` schedule)."""

    kind: str
    sample: int | None = None
    schedule: str = "fast"


def run_all_nodes(
    registry: Registry,
    selected: Iterable[CheckSpec],
    profile: Profile,
    *,
    timeout: float | None = None,
    address: str | None = None,
    probe: str | None = None,
    pairs_sample: int | None = None,
    pairs_schedule: str = "fast",
    checks_dirs: Iterable[str] = (),
    progress: bool = True,
    no_color: bool = False,
    session: ConnectInfo | ClusterError | None = None,
) -> ClusterOutcome:
    """Run the selected checks on every node of the Ray cluster and the cluster checks on all facts.

    ``session``: a connection the caller opened and keeps (`launch --all-nodes`), or the ClusterError its
    attempt ended in (reported as this run's ``cluster.connect`` ERROR, without a second attempt).
    Never raises for a cluster problem and never runs past ``timeout`` (plus Ray's shutdown): a
    node that dies, hangs or lacks the package is an ERROR row for that node; Ray unreachable is an
    ERROR row ``cluster.connect``.
    """
    timeout = float(timeout or profile.run_timeout)
    t0 = time.monotonic()
    say = Progress(progress, no_color=no_color)
    selected = list(selected)
    extra: dict[str, Any] = {"cluster": {"expected_nodes": profile.nnodes, "timeout_s": timeout,
                                         "master_addr": profile.master_addr}}

    say.say(f"connecting to Ray ({address or 'RAY_ADDRESS or auto'}) ...")
    try:
        if isinstance(session, ClusterError):
            raise session
        info = session if isinstance(session, ConnectInfo) else connect(address, timeout=connect_timeout(timeout))
    except ClusterError as exc:
        say.say(f"ERROR: {exc}")
        extra["cluster"].update({"ray": {"address": address, "error": str(exc)}, "present_nodes": [], "node_ranks": {}})
        return ClusterOutcome([error_result(CONNECT_CHECK, "cluster", str(exc), {"address": address},
                                            connect_fix(str(exc)), duration_s=time.monotonic() - t0,
                                            actor=Actor.NODE)], [], extra)
    say.say(info.message)
    run = ClusterRun(registry, [c for c in selected if c.scope == "node"], [c for c in selected if c.scope == "cluster"],
                     profile, info, t0 + timeout, say, extra, ProbeAsk(probe, pairs_sample, pairs_schedule) if probe else None,
                     list(checks_dirs))
    try:
        return run.run()
    finally:
        if info is not session:
            disconnect(info)


def _needs_listener(registry: Registry, spec: CheckSpec) -> bool:
    facts = [n for n in spec.needs if n in registry.probes]
    return LISTENER_FACT in registry.fact_closure(facts) if facts else False


def _error_entry(node: NodeInfo, error: str, identity: dict[str, Any] | None = None, state: str = "error") -> dict[str, Any]:
    return {"node": node.name, "node_rank": node.node_rank, "state": state, "error": error,
            "identity": {"ray": node.as_dict(), **(identity or {})}, "facts": {}, "fact_errors": {}, "fact_timings_s": {}}


def _say_lost(say: Progress, lost: list[Lost]) -> None:
    for item in lost:
        say.say(f"Ray reported node {item.node_id[:6]} dead {item.phase} ({item.reason or 'no reason given'})")


@dataclass
class ClusterRun:
    """One ``run --all-nodes`` once Ray answered: what was asked, the nodes, and what its waves found so far.

    :meth:`run`: the node checks on every node (node 0 without the port-reach checks when there are workers),
    the port-reach wave while node 0 holds the listener, the probe wave (``--probe``), an ERROR row for each
    node that could not run, then the cluster checks on every node's facts.
    """

    registry: Registry
    node_checks: list[CheckSpec]
    cluster_checks: list[CheckSpec]
    profile: Profile
    info: ConnectInfo
    deadline: float
    say: Progress
    extra: dict[str, Any]
    probe: ProbeAsk | None = None
    checks_dirs: list[str] = field(default_factory=list)
    # -- what the run finds, filled wave by wave
    ranked: list[NodeInfo] = field(default_factory=list)
    watch: NodeWatch = field(default_factory=lambda: NodeWatch([]))
    run_id: str = ""
    #: {node id: the first wave's report} (a later wave on the same node merges its answer into it)
    reports: dict[str, NodeReport] = field(default_factory=dict)
    #: {node id: the report of the wave that failed on the node}
    failed: dict[str, NodeReport] = field(default_factory=dict)
    results: list[Result] = field(default_factory=list)
    #: {node id: the node's entry of the document}
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: {node name: the node's facts}, what the cluster checks judge
    node_facts: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def cluster_info(self) -> dict[str, Any]:
        return self.extra["cluster"]

    def task(self, node: NodeInfo, checks: list[str], wave: Wave = NO_WAVE,
             reserve: float = CLUSTER_RESERVE_S) -> NodeTask:
        """The node task of ``node`` in a wave running ``checks`` with the wave's parameters ``wave``."""
        return NodeTask(profile=self.profile.with_values("cluster mode", node_rank=node.node_rank).to_dict(),
                        checks=checks, checks_dirs=self.checks_dirs, timeout=node_time_limit(self.deadline, reserve),
                        wave=wave, hello_key=hello_key(self.run_id, node.node_id))

    def run(self) -> ClusterOutcome:
        self.ranked = assign_node_ranks(unique_names(alive_nodes()), self.profile.master_addr)
        self.watch = NodeWatch(self.ranked, t0=self.say.t0)
        active = ACTIVE.set(self.watch)  # every wave of this run, the probe waves too, records the nodes Ray loses here
        self.run_id = new_run_id()
        try:
            return self._waves()
        finally:
            ACTIVE.reset(active)
            hellos(self.run_id, [])  # the nodes' hellos leave Ray's key-value store with the run

    def _waves(self) -> ClusterOutcome:
        self.say.say(f"{len(self.ranked)} node(s) alive, {self.profile.nnodes} expected: "
                     + ", ".join(f"{n.name}=node {n.node_rank}" for n in self.ranked))
        listener_checks = sorted({c.name for c in self.node_checks + self.cluster_checks
                                  if _needs_listener(self.registry, c)})
        two_waves = bool(listener_checks) and len(self.ranked) > 1
        self._node_wave(listener_checks if two_waves else [])
        self._name_nodes()
        if two_waves:
            self._listener_wave(listener_checks)
            _say_lost(self.say, self.watch.sweep("after the port-reach wave"))
        for node in self.ranked:
            self._record(node)
        cluster_checks = list(self.cluster_checks)
        if self.probe:  # the probe wave records facts; its registered cluster check judges them with the others
            cluster_checks += [c for c in self._probe_wave() if c not in cluster_checks]
        _say_lost(self.say, self.watch.sweep("during the cluster checks"))
        self._node_errors()
        states = self.watch.states(
            {n.node_id: n.name for n in self.ranked},
            {n.node_id: {"ip": n.ip, "node_rank": n.node_rank, "gcs_address": self.info.gcs_address,
                         "run_failed": self.failed[n.node_id].kind if n.node_id in self.failed else None}
             for n in self.ranked})
        self._missing_entries()
        if cluster_checks:
            from ..engine import run_cluster_checks

            self.say.say(f"cluster checks on the facts of {len(self.node_facts)} node(s): {len(cluster_checks)}")
            self.results += run_cluster_checks(cluster_checks, self.profile, self.node_facts, self._node_ranks(),
                                               node_states=states)
        self._summary(states)
        red = sum(1 for r in self.results if r.status.is_red)
        self.say.say(f"done: {len(self.results)} results, {red} red, in {time.monotonic() - self.say.t0:.1f} s")
        return ClusterOutcome(self.results, list(self.entries.values()), self.extra, self.ranked, self.info)

    def _node_ranks(self) -> dict[str, int]:
        return {n.name: n.node_rank for n in self.ranked if n.node_rank is not None}

    def _node_wave(self, listener_checks: list[str]) -> None:
        """Every selected check on every node; with ``listener_checks`` (the port-reach wave follows), the workers
        leave those for it."""
        names = [c.name for c in self.node_checks + self.cluster_checks]
        two_waves = bool(listener_checks)
        # the port-reach wave's share: 15 s, less when the whole run is short (it is one TCP connect per worker)
        reserve = CLUSTER_RESERVE_S + (min(15.0, 0.25 * (self.deadline - self.say.t0)) if two_waves else 0.0)
        after = "after its node checks, before the port-reach wave" if two_waves else "after its node checks"

        def checks_of(node: NodeInfo) -> list[str]:
            return [c for c in names if node.node_rank == 0 or c not in listener_checks]

        say = self.say
        self.reports = run_pinned(
            self.ranked, lambda n: self.task(n, checks_of(n), reserve=reserve), self.deadline - reserve,
            watch=self.watch, phase="during its node checks", after_phase=after,
            on_start=lambda n: say.say(f"node {n.node_rank} {n.name} ({n.ip}{', head' if n.is_head else ''}): "
                                       f"running {len(names)} checks"),
            on_done=lambda r: say.done(r, "checks"))
        self.failed = {nid: r for nid, r in self.reports.items() if r.value is None}
        _say_lost(say, self.watch.sweep(after))

    def _name_nodes(self) -> None:
        """Each node's name: what it reported (its answer, else what it said when its task started), unique."""
        said = hellos(self.run_id, [n.node_id for n in self.ranked])

        def reported(node: NodeInfo) -> str:
            report = self.reports[node.node_id]
            answered = report.value.node_name if report.value is not None else report.details.get("node_name")
            return answered or said.get(node.node_id, {}).get("node_name") or ""

        renamed = {n.node_id: n for n in unique_names(self.ranked, {n.node_id: reported(n) for n in self.ranked})}
        self.ranked = [renamed[n.node_id] for n in self.ranked]

    def _listener_wave(self, names: list[str]) -> None:
        """Start the listener on node 0, run the port-reach checks on the workers, stop it; what the document says of
        the listener, the workers whose wave failed, ERROR rows of the checks that could not run because node 0 was
        lost."""
        from .listener_host import listener_available, start_listener, stop_listener

        head = self.ranked[0]
        workers = [n for n in self.ranked[1:] if n.node_id not in self.failed and not self.watch.is_lost(n.node_id)]
        info: dict[str, Any] = {"node": head.name, "port": self.profile.master_port, "checks": names}
        self.cluster_info["listener"] = info
        if not workers:
            return
        if self.watch.is_lost(head.node_id) or self.reports[head.node_id].value is None:
            why = (f"node 0 {head.name}, which holds MASTER_ADDR and the listener, was lost "
                   f"{self.watch.lost[head.node_id].phase}" if self.watch.is_lost(head.node_id) else
                   f"node 0 {head.name}, which holds the listener, could not run its checks")
            info["error"] = why
            self.results += [error_result(name, w.name, f"not run: {why}", {"node0": head.name},
                                          "dsv3-preflight run --all-nodes   # once node 0 is back", actor=Actor.NODE,
                                          cause="cluster.node_lost")
                             for w in workers for name in names]
            return
        actor = None
        if listener_available():
            actor, started = start_listener(head, self.profile.master_port, self.deadline, ipv6=":" in head.ip)
            info.update(started)
            self.say.say(f"listener on node 0 {head.name}:{self.profile.master_port}: "
                         + ("up" if actor is not None else f"not started ({started.get('error')})"))
        else:
            info["error"] = "the listener is not available (dsv3_preflight.net is missing)"
        wave = Wave(listener_token=info.get("token"))
        try:
            second = run_pinned(workers, lambda n: self.task(n, names, wave), self.deadline - CLUSTER_RESERVE_S,
                                watch=self.watch, phase="during the port-reach wave",
                                on_done=lambda r: self.say.done(r, "port reach"), task_label="port reach")
        finally:
            info.update(stop_listener(actor))
            info.pop("token", None)
        for node_id, report in second.items():
            first = self.reports[node_id].value
            if report.value is None or first is None:
                report.error = f"port-reach wave: {report.error}"
                self.failed[node_id] = report
                continue
            first.merged(report.value)

    def _record(self, node: NodeInfo) -> None:
        """The node's entry, facts and results from its answer; an error entry when it has none."""
        report = self.reports[node.node_id]
        value = report.value
        if value is None:
            python = report.details.get("python")
            self.entries[node.node_id] = _error_entry(node, report.error or "unknown", {"python": python} if python else None)
            self.node_facts[node.name] = {"facts": {}, "fact_errors": {}}
            return
        entry = dict(value.entry)
        entry.update({"node": node.name, "node_rank": node.node_rank, "state": "ok", "error": None})
        entry["identity"] = {**(entry.get("identity") or {}), "ray": node.as_dict(), "python": value.python,
                             "dsv3_preflight": value.version}
        self.results += [replace(r, node=node.name) for r in value.results]
        self.results += [error_result(
            name, node.name, f"this node's dsv3-preflight {value.version} does not know the check {name!r}",
            {"python": value.python}, "pip install -U dsv3-preflight   # on that node, the same version as the driver's",
            actor=Actor.NODE) for name in value.unknown_checks]
        self.entries[node.node_id] = entry
        self.node_facts[node.name] = entry

    def _probe_wave(self) -> list[CheckSpec]:
        """``--probe``: the gang (``gang.py``) or the pairs rounds (``pairs.py``). They put what each node measured
        into its facts; ERROR rows for node tasks that failed; the registered cluster check to judge."""
        assert self.probe is not None
        kind = self.probe.kind
        self.watch.idle_phase = ("during the collective gang (--probe)" if kind == "gang"
                                 else "during the pairs probe (--probe=pairs)")
        if kind == "pairs":
            from .pairs import PAIRS_CHECK as name
            from .pairs import run_pairs

            def wave() -> tuple[list[Result], dict[str, Any]]:
                assert self.probe is not None
                return run_pairs(self.ranked, self.profile, self.deadline, self.node_facts, self.task, self.say,
                                 self.probe.sample, self.probe.schedule)
        else:
            from .gang import GANG_CHECK as name
            from .gang import run_gang

            def wave() -> tuple[list[Result], dict[str, Any]]:
                return run_gang(self.ranked, self.profile, self.deadline, self.node_facts, self.task, self.say)
        spec = self.registry.checks.get(name)
        if spec is None:
            self.results.append(error_result(name, "cluster", f"--probe={kind}: this installation has no check {name!r}",
                                             remediation="pip install -U dsv3-preflight   # the same version on every node",
                                             actor=Actor.NODE))
            return []
        started = time.monotonic()
        try:
            errors, self.cluster_info["probe"] = wave()
        except Exception as exc:  # noqa: BLE001 - the wave's failure is its ERROR, the rest of the run stands
            self.cluster_info["probe"] = {"kind": kind, "error": f"{type(exc).__name__}: {exc}"}
            self.results.append(error_result(name, "cluster", f"the {kind} probe could not run: {type(exc).__name__}: {exc}",
                                             duration_s=time.monotonic() - started, actor=Actor.NODE))
            return []
        self.results += errors
        return [spec]

    def _node_errors(self) -> None:
        """Every node that failed a wave or that Ray lost is ERROR under its own name, once, with what it did first."""
        # a wave abandoned on a node because another node was lost is no failure of that node
        self.results = [r for r in self.results if not (r.name == NODE_RUN_CHECK and r.evidence.get("kind") == "abandoned")]
        for node in self.ranked:
            lost = self.watch.lost.get(node.node_id)
            report = self.failed.get(node.node_id)
            if lost is None and report is None:
                continue
            entry = self.entries[node.node_id]
            error = lost_text(node, lost) if lost else (report.error if report else None) or "unknown"
            entry.update({"state": "error", "error": error})
            mine = [r for r in self.results if r.name == NODE_RUN_CHECK and r.node == node.name]
            if lost is not None:  # one row per lost node: the runner's rows of the waves it failed give way to this one
                self.results = [r for r in self.results if r not in mine]
            elif mine:
                continue
            self.results.append(node_error_row(node, report, lost, error, self.info.gcs_address))

    def _missing_entries(self) -> None:
        for missing in range(len(self.ranked), self.profile.nnodes):
            self.entries[f"missing-{missing}"] = {
                "node": f"missing-{missing}", "node_rank": missing, "state": "missing",
                "error": f"the profile expects {self.profile.nnodes} nodes; Ray has {len(self.ranked)} alive",
                "identity": {}, "facts": {}, "fact_errors": {}, "fact_timings_s": {}}

    def _summary(self, states: dict[str, Any]) -> None:
        self.cluster_info.update({
            "ray": self.info.as_dict(), "embedded": self.info.embedded, "node_ranks": self._node_ranks(),
            "present_nodes": [n.name for n in self.ranked],
            "missing_nodes": max(self.profile.nnodes - len(self.ranked), 0),
            "nodes": [n.as_dict() for n in self.ranked], "node_states": states,
            "elapsed_s": round(time.monotonic() - self.say.t0, 3),
            "failed_nodes": {e["node"]: (self.failed[nid].kind if nid in self.failed else "died")
                             for nid, e in self.entries.items() if e["state"] == "error"},
        })
