"""``run --all-nodes``: the node checks once on every Ray node, then the cluster checks on all facts."""
from __future__ import annotations

import shlex
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..engine import error_result
from ..profile import Profile
from ..registry import CheckSpec, Registry
from ..result import Actor, Result
from .connect import ClusterError, ConnectInfo, connect, disconnect
from .dispatch import NodeReport, hello_key, hellos, lost_text, merge_entries, new_run_id, node_time_limit, run_pinned
from .liveness import ACTIVE, Lost, NodeWatch
from .nodes import NodeInfo, alive_nodes, assign_node_ranks, unique_names

NODE_RUN_CHECK = "cluster.node_run"        # the ERROR row of a node that died, hung or lacks the package
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


class Progress:
    """Live progress per node on stderr (one line per event, so it also reads well in a log)."""

    def __init__(self, enabled: bool, no_color: bool = False) -> None:
        self.enabled = enabled
        self._console = None
        if enabled:
            from ..console import make_console

            self._console = make_console(no_color, stderr=True)
        self.t0 = time.monotonic()
        self.names: dict[str, str] = {}  # node id -> the name the node reported

    def say(self, text: str) -> None:
        if self._console is not None:
            from rich.markup import escape

            self._console.print(f"[dim]{time.monotonic() - self.t0:6.1f}s[/] {escape(text)}", soft_wrap=True)

    def done(self, report: NodeReport, wave: str) -> None:
        n = report.node
        if report.value is not None:
            reported = report.value.get("node_name")
            if reported and reported != n.name:
                self.names[n.node_id] = reported
            n = type(n)(**{**n.__dict__, "name": f"{reported or n.name} ({n.short_id})"})
            counts: dict[str, int] = {}
            for r in report.value.get("results", []):
                counts[r["status"]] = counts.get(r["status"], 0) + 1
            parts = ", ".join(f"{counts[s]} {s}" for s in ("fail", "error", "warn", "pass", "skip") if counts.get(s))
            self.say(f"node {n.node_rank} {n.name}: {wave} done in {report.elapsed_s:.1f} s ({parts or 'no checks'})")
        else:
            self.say(f"node {n.node_rank} {n.name}: ERROR ({report.kind}) {report.error}")


def _needs_listener(registry: Registry, spec: CheckSpec) -> bool:
    facts = [n for n in spec.needs if n in registry.probes]
    return LISTENER_FACT in registry.fact_closure(facts) if facts else False


def _error_entry(node: NodeInfo, error: str, identity: dict[str, Any] | None = None, state: str = "error") -> dict[str, Any]:
    return {"node": node.name, "node_rank": node.node_rank, "state": state, "error": error,
            "identity": {"ray": node.as_dict(), **(identity or {})}, "facts": {}, "fact_errors": {}, "fact_timings_s": {}}


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
    deadline = t0 + timeout
    checks_dirs = list(checks_dirs)
    say = Progress(progress, no_color=no_color)
    selected = list(selected)
    node_checks = [c for c in selected if c.scope == "node"]
    cluster_checks = [c for c in selected if c.scope == "cluster"]
    extra: dict[str, Any] = {"cluster": {"expected_nodes": profile.nnodes, "timeout_s": timeout,
                                         "master_addr": profile.master_addr}}

    say.say(f"connecting to Ray ({address or 'RAY_ADDRESS or auto'}) ...")
    try:
        if isinstance(session, ClusterError):
            raise session
        info = session if isinstance(session, ConnectInfo) else connect(address, timeout=connect_timeout(timeout))
    except ClusterError as exc:
        say.say(f"ERROR: {exc}")
        fix = ("export RAY_AUTH_MODE=token   # the cluster's token in ~/.ray/auth_token or $RAY_AUTH_TOKEN (`ray get-auth-token` on the head)"
               if "token" in str(exc) else
               "ray status   # on the head: is the cluster up? then pass its address:\n"
               "dsv3-preflight run --all-nodes --ray-address \"${RAY_HEAD:?the GCS address of the head, host:port}\"")
        extra["cluster"].update({"ray": {"address": address, "error": str(exc)}, "present_nodes": [], "node_ranks": {}})
        return ClusterOutcome([error_result(CONNECT_CHECK, "cluster", str(exc), {"address": address}, fix,
                                            duration_s=time.monotonic() - t0, actor=Actor.NODE)], [], extra)
    say.say(info.message)
    try:
        return _run(registry, node_checks, cluster_checks, profile, info, deadline, say, extra,
                    probe and (probe, pairs_sample, pairs_schedule), checks_dirs)
    finally:
        if info is not session:
            disconnect(info)


def _run(registry, node_checks, cluster_checks, profile, info, deadline, say, extra, probe, checks_dirs) -> ClusterOutcome:
    ranked = assign_node_ranks(unique_names(alive_nodes()), profile.master_addr)
    watch = NodeWatch(ranked, t0=say.t0)
    active = ACTIVE.set(watch)  # every wave of this run, the probe waves too, records the nodes Ray loses here
    run_id = new_run_id()
    try:
        return _waves(registry, node_checks, cluster_checks, profile, info, deadline, say, extra, probe, checks_dirs,
                      ranked, watch, run_id)
    finally:
        ACTIVE.reset(active)
        hellos(run_id, [])  # the nodes' hellos leave Ray's key-value store with the run


def _waves(registry, node_checks, cluster_checks, profile, info, deadline, say, extra, probe, checks_dirs, ranked,
           watch, run_id) -> ClusterOutcome:
    say.say(f"{len(ranked)} node(s) alive, {profile.nnodes} expected: "
            + ", ".join(f"{n.name}=node {n.node_rank}" for n in ranked))
    listener_checks = {c.name for c in node_checks + cluster_checks if _needs_listener(registry, c)}
    two_waves = bool(listener_checks) and len(ranked) > 1
    wave1 = [c.name for c in node_checks + cluster_checks]

    def payload(node: NodeInfo, names: list[str], env: dict[str, str] | None = None, reserve: float = CLUSTER_RESERVE_S):
        return {"profile": profile.with_values("cluster mode", node_rank=node.node_rank).to_dict(), "checks": names,
                "checks_dirs": checks_dirs, "timeout": node_time_limit(deadline, reserve), "env": env or {},
                "hello_key": hello_key(run_id, node.node_id)}

    # the port-reach wave's share: 15 s, less when the whole run is short (it is one TCP connect per worker)
    reserve1 = CLUSTER_RESERVE_S + (min(15.0, 0.25 * (deadline - say.t0)) if two_waves else 0.0)
    reports = run_pinned(
        ranked,
        lambda n: payload(n, [c for c in wave1 if not (two_waves and n.node_rank != 0 and c in listener_checks)], reserve=reserve1),
        deadline - reserve1, watch=watch, phase="during its node checks",
        after_phase="after its node checks, before the port-reach wave" if two_waves else "after its node checks",
        on_start=lambda n: say.say(f"node {n.node_rank} {n.name} ({n.ip}{', head' if n.is_head else ''}): running {len(wave1)} checks"),
        on_done=lambda r: say.done(r, "checks"),
    )
    cluster_info = extra["cluster"]
    failed: dict[str, NodeReport] = {nid: r for nid, r in reports.items() if r.value is None}
    _say_lost(say, watch.sweep("after its node checks, before the port-reach wave" if two_waves else "after its node checks"))
    # names: what each node reported (its answer, else what it said when its task started), unique
    said = hellos(run_id, [n.node_id for n in ranked])
    reported = {n.node_id: (reports[n.node_id].value or reports[n.node_id].details or {}).get("node_name")
                or said.get(n.node_id, {}).get("node_name") or "" for n in ranked}
    renamed = {n.node_id: n for n in unique_names(ranked, reported)}
    ranked = [renamed[n.node_id] for n in ranked]
    extra_results: list[Result] = []
    if two_waves:
        workers = [n for n in ranked[1:] if n.node_id not in failed and not watch.is_lost(n.node_id)]
        cluster_info["listener"], wave_failed, not_run = _listener_wave(
            registry, ranked[0], workers, reports, profile, deadline, say, sorted(listener_checks), payload, watch)
        failed.update(wave_failed)
        extra_results += not_run
        _say_lost(say, watch.sweep("after the port-reach wave"))
    results: list[Result] = list(extra_results)
    entries: dict[str, dict[str, Any]] = {}
    node_facts: dict[str, dict[str, Any]] = {}
    for node in ranked:
        report = reports[node.node_id]
        if report.value is None:
            entries[node.node_id] = _error_entry(node, report.error or "unknown",
                                                 {"python": report.details.get("python")} if report.details.get("python") else None)
            node_facts[node.name] = {"facts": {}, "fact_errors": {}}
            continue
        value = report.value
        entry = dict(value["entry"])
        entry.update({"node": node.name, "node_rank": node.node_rank, "state": "ok", "error": None})
        entry["identity"] = {**(entry.get("identity") or {}), "ray": node.as_dict(), "python": value.get("python"),
                             "dsv3_preflight": value.get("version")}
        for d in value.get("results", []):
            results.append(Result.from_dict({**d, "node": node.name}))
        for name in value.get("unknown_checks", []):
            results.append(error_result(
                name, node.name, f"this node's dsv3-preflight {value.get('version')} does not know the check {name!r}",
                {"python": value.get("python")},
                "pip install -U dsv3-preflight   # on that node, the same version as the driver's", actor=Actor.NODE))
        entries[node.node_id] = entry
        node_facts[node.name] = entry
    present = [n.name for n in ranked]
    node_ranks = {n.name: n.node_rank for n in ranked}
    if probe:  # the probe wave records facts; its registered cluster check judges them with the others below
        watch.idle_phase = "during the collective gang (--probe)" if probe[0] == "gang" else "during the pairs probe (--probe=pairs)"
        probe_errors, probe_checks = _probe_wave(registry, probe, ranked, node_facts, profile, deadline, say,
                                                 cluster_info, payload)
        results += probe_errors
        cluster_checks = cluster_checks + [c for c in probe_checks if c not in cluster_checks]
    _say_lost(say, watch.sweep("during the cluster checks"))
    # a wave abandoned on a node because another node was lost is no failure of that node
    results = [r for r in results if not (r.name == NODE_RUN_CHECK and r.evidence.get("kind") == "abandoned")]
    # every node that failed a wave or that Ray lost is ERROR under its own name, once, with what it did first
    for node in ranked:
        lost = watch.lost.get(node.node_id)
        report = failed.get(node.node_id)
        if lost is None and report is None:
            continue
        entry = entries[node.node_id]
        error = lost_text(node, lost) if lost else report.error or "unknown"
        entry.update({"state": "error", "error": error})
        if lost is not None:  # one row per lost node: the runner's rows of the waves it failed give way to this one
            results = [r for r in results if not (r.name == NODE_RUN_CHECK and r.node == node.name)]
        elif any(r.name == NODE_RUN_CHECK and r.node == node.name for r in results):
            continue
        results.append(_node_error_row(node, report, lost, error, info.gcs_address))
    states = watch.states({n.node_id: n.name for n in ranked},
                          {n.node_id: {"ip": n.ip, "node_rank": n.node_rank, "gcs_address": info.gcs_address,
                                       "run_failed": failed[n.node_id].kind if n.node_id in failed else None}
                           for n in ranked})
    for missing in range(len(ranked), profile.nnodes):
        entries[f"missing-{missing}"] = {
            "node": f"missing-{missing}", "node_rank": missing, "state": "missing",
            "error": f"the profile expects {profile.nnodes} nodes; Ray has {len(ranked)} alive",
            "identity": {}, "facts": {}, "fact_errors": {}, "fact_timings_s": {}}
    from ..engine import run_cluster_checks

    if cluster_checks:
        say.say(f"cluster checks on the facts of {len(node_facts)} node(s): {len(cluster_checks)}")
        results += run_cluster_checks(cluster_checks, profile, node_facts, node_ranks, node_states=states)
    cluster_info.update({
        "ray": info.as_dict(), "embedded": info.embedded, "node_ranks": node_ranks, "present_nodes": present,
        "missing_nodes": max(profile.nnodes - len(ranked), 0), "nodes": [n.as_dict() for n in ranked],
        "node_states": states, "elapsed_s": round(time.monotonic() - say.t0, 3),
        "failed_nodes": {e["node"]: (failed[nid].kind if nid in failed else "died") for nid, e in entries.items()
                         if e["state"] == "error"},
    })
    red = sum(1 for r in results if r.status.is_red)
    say.say(f"done: {len(results)} results, {red} red, in {time.monotonic() - say.t0:.1f} s")
    return ClusterOutcome(results, list(entries.values()), extra, ranked, info)


def _say_lost(say: Progress, lost: list[Lost]) -> None:
    for item in lost:
        say.say(f"Ray reported node {item.node_id[:6]} dead {item.phase} ({item.reason or 'no reason given'})")


def _node_error_row(node: NodeInfo, report: NodeReport | None, lost: Lost | None, error: str, gcs: str | None) -> Result:
    """The ERROR row of a node that could not run (lost, hung, crashed, no package), with its fix."""
    kind = "died" if lost else (report.kind if report else "died")
    evidence: dict[str, Any] = {"kind": kind, "node_id": node.node_id, "ip": node.ip, "node_rank": node.node_rank,
                                **(report.details if report else {})}
    if lost:
        evidence.update(lost.as_dict())
    cause = "cluster.node_lost" if lost else None
    if report is not None and report.kind == "package_missing":
        fix = ("pip install dsv3-preflight   # in the Python Ray uses on that node, or export "
               "DSV3_PREFLIGHT_SHIP_PACKAGE=1 to ship it with the job (runtime_env py_modules)")
    elif report is not None and report.kind == "unreachable" and not lost:
        fix, cause = ray_ports_fix(node, report.details.get("reach") or {}), "cluster.node_unreachable"
    else:
        fix = lost_node_fix(node, lost, gcs)
    return error_result(NODE_RUN_CHECK, node.name, error, evidence, fix,
                        duration_s=report.elapsed_s if report else 0.0, actor=Actor.NODE, cause=cause)


def ray_ports_fix(node: NodeInfo, reach: dict[str, Any]) -> str:
    """Open Ray's ports on the firewall of a node that is alive and unreachable: its worker port range, its raylet's
    and object manager's ports (the real ones Ray reports), from the other nodes; then the connect that must work."""
    where = f"{node.name} ({node.ip})" if node.name != node.ip else node.ip
    lo, hi = (reach.get("worker_ports") or [10002, 19999])[:2]
    ports = reach.get("ports") or {}
    lines = [f"# {where} is alive in Ray but drops or refuses what the other nodes send its Ray workers: open Ray's "
             "ports on its firewall",
             f"iptables -I INPUT -p tcp --dport {lo}:{hi} -j ACCEPT   # on {where}: Ray's worker ports "
             f"(ray start --min-worker-port/--max-worker-port, default {lo}-{hi})"]
    for key, what in (("node_manager_port", "the raylet's node manager port"),
                      ("object_manager_port", "the object manager port")):
        if key in ports:
            lines.append(f"iptables -I INPUT -p tcp --dport {ports[key]['port']} -j ACCEPT   # on {where}: {what} "
                         f"(ray start --{key.replace('_', '-')}; it changes at each start unless set)")
    lines += [f"# with nftables instead: nft insert rule inet filter input tcp dport {lo}-{hi} accept   # on {where}",
              f"# with ufw instead: ufw allow proto tcp to any port {lo}:{hi}   # on {where}",
              f"timeout 3 bash -c 'exec 3<>/dev/tcp/{node.ip}/{lo}' ; echo $?   # from the head: 0 or 1 (refused) once "
              "open, 124 while it is filtered",
              "dsv3-preflight run --all-nodes   # again"]
    return "\n".join(lines)


def lost_node_fix(node: NodeInfo, lost: Lost | None, gcs: str | None) -> str:
    """Ray's log of the node (from the head, and on the node itself), then how it rejoins: real ids and paths."""
    lines = [f"ray logs raylet.out --node-id {node.node_id} --tail 100   # on the head: Ray's log of {node.name} ({node.ip})"]
    if lost is not None and lost.logs_dir:
        lines.append(f"tail -n 100 {shlex.quote(lost.logs_dir + '/raylet.out')}   # on {node.name} itself, when the head "
                     "cannot fetch it (the node's log agent went down with it)")
    if lost is not None:
        join = f"ray start --address={gcs}" if gcs else "ray start --address=\"${RAY_HEAD:?the GCS address of the head, host:port}\""
        lines.append(f"{join}   # on {node.name} once it is repaired, then re-run: dsv3-preflight run --all-nodes")
    else:
        lines.append("ray status   # is the node alive and not overloaded? then re-run; the other nodes' results are above")
    return "\n".join(lines)


def _listener_wave(registry, head, workers, reports, profile, deadline, say, names, payload, watch):
    """Start the listener on node 0, run the port-reach checks on the workers, stop it.

    Returns (what the document says of the listener, {node id: report} of workers whose wave failed, ERROR rows
    of the checks that could not run because node 0 was lost)."""
    from .listener_host import listener_available, start_listener, stop_listener

    info: dict[str, Any] = {"node": head.name, "port": profile.master_port, "checks": names}
    if not workers:
        return info, {}, []
    if watch.is_lost(head.node_id) or reports[head.node_id].value is None:
        why = (f"node 0 {head.name}, which holds MASTER_ADDR and the listener, was lost {watch.lost[head.node_id].phase}"
               if watch.is_lost(head.node_id) else f"node 0 {head.name}, which holds the listener, could not run its checks")
        info["error"] = why
        rows = [error_result(name, w.name, f"not run: {why}", {"node0": head.name},
                             "dsv3-preflight run --all-nodes   # once node 0 is back", actor=Actor.NODE, cause="cluster.node_lost")
                for w in workers for name in names]
        return info, {}, rows
    actor = None
    if listener_available():
        actor, started = start_listener(head, profile.master_port, deadline, ipv6=":" in head.ip)
        info.update(started)
        say.say(f"listener on node 0 {head.name}:{profile.master_port}: "
                + ("up" if actor is not None else f"not started ({started.get('error')})"))
    else:
        info["error"] = "the listener is not available (dsv3_preflight.net is missing)"
    env = {"DSV3_PREFLIGHT_LISTENER_TOKEN": info["token"]} if info.get("token") else {}
    try:
        second = run_pinned(workers, lambda n: payload(n, names, env), deadline - CLUSTER_RESERVE_S, watch=watch,
                            phase="during the port-reach wave", on_done=lambda r: say.done(r, "port reach"),
                            task_label="port reach")
    finally:
        info.update(stop_listener(actor))
        info.pop("token", None)
    failed = {}
    for node_id, report in second.items():
        first = reports[node_id]
        if report.value is None:
            report.error = f"port-reach wave: {report.error}"
            failed[node_id] = report
            continue
        first.value["entry"] = merge_entries(first.value["entry"], report.value["entry"])
        first.value["results"] += report.value["results"]
    return info, failed, []


def _probe_wave(registry, probe, ranked, node_facts, profile, deadline, say, cluster_info, payload):
    """``--probe``: the gang (``gang.py``) or the pairs rounds (``pairs.py``). They put what each node measured
    into its facts; returns (ERROR results of node tasks that failed, the registered cluster check to judge)."""
    kind, sample, schedule = probe
    if kind == "pairs":
        from .pairs import PAIRS_CHECK as name
        from .pairs import run_pairs

        def wave():
            return run_pairs(ranked, profile, deadline, node_facts, payload, say, sample, schedule)
    else:
        from .gang import GANG_CHECK as name
        from .gang import run_gang

        def wave():
            return run_gang(ranked, profile, deadline, node_facts, payload, say)
    spec = registry.checks.get(name)
    if spec is None:
        return [error_result(name, "cluster", f"--probe={kind}: this installation has no check {name!r}",
                             remediation="pip install -U dsv3-preflight   # the same version on every node",
                             actor=Actor.NODE)], []
    started = time.monotonic()
    try:
        errors, cluster_info["probe"] = wave()
    except Exception as exc:  # noqa: BLE001 - the wave's failure is its ERROR, the rest of the run stands
        cluster_info["probe"] = {"kind": kind, "error": f"{type(exc).__name__}: {exc}"}
        return [error_result(name, "cluster", f"the {kind} probe could not run: {type(exc).__name__}: {exc}",
                             duration_s=time.monotonic() - started, actor=Actor.NODE)], []
    return errors, [spec]
