"""The runner of the Ray Train gate: it gathers facts from Ray and from the workers' nodes, has the checks judge them
(the suite's node and cluster checks through the engine, the gate's own in :mod:`.checks`), writes the report like
`run` does, and refuses the run when the verdict is red. It never judges by itself.

Two moments (see :mod:`.callback`): :func:`check_scaling` before the placement group is asked for, and
:func:`before_training` once the worker actors exist and before ``init_process_group``.
"""
from __future__ import annotations

import datetime as _dt
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..engine import error_result, judge, run_cluster_checks
from ..result import Actor, Result
from ..wave import NO_WAVE, GangPart, Wave
from . import checks as gate_checks
from . import probes
from .facts import NodeResources, ScalingFact, StorageFact, StorageWrite, WorkerFact, node_resources_from_table

logger = logging.getLogger(__name__)

#: the suite's checks the gate runs by default: what holds before init_process_group under Ray Train (not the
#: launch-variable checks: Ray Train sets MASTER_ADDR, RANK and the rest itself, after this gate; not
#: gpu.rank_mapping_cluster: ray_train.rank_map judges the map Ray Train builds, uneven placements included)
DEFAULT_ONLY = ("gpu.*", "host.*", "net.nic_route", "net.mtu", "cluster.env_consistency", "cluster.unique_hostnames",
                "dist.allreduce_cluster")
DEFAULT_SKIP = ("gpu.rank_mapping_cluster",)
GANG_CHECK = "dist.allreduce_cluster"
NODE_RUN = "ray_train.node_run"
ENV_PREFIX = "DSV3_PREFLIGHT_RAY_TRAIN_"
#: seconds the collective gang's ranks may spend starting Python and importing torch on a loaded node
GANG_STARTUP_S = 60.0


class PreflightRefused(RuntimeError):
    """The gate's verdict is red: the message is the console report (root causes, who acts, the fixes) and the
    paths of the JSON and HTML reports. Not one of Train's retryable start-up errors: the run ends with it."""


@dataclass(frozen=True)
class GateOptions:
    """How the gate runs; :meth:`from_env` reads ``DSV3_PREFLIGHT_RAY_TRAIN_*`` (for ``RAY_TRAIN_CALLBACKS``)."""

    profile_name: str | None = None
    config_path: str | None = None
    only: tuple[str, ...] = DEFAULT_ONLY
    skip: tuple[str, ...] = DEFAULT_SKIP
    probe: bool = True
    timeout: float = 300.0
    reports_dir: str = field(default_factory=lambda: os.path.abspath("preflight-reports"))
    min_free_gib: float = 1.0
    strict: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **given: Any) -> GateOptions:
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            value = env.get(ENV_PREFIX + name)
            return value if value not in (None, "") else None

        values: dict[str, Any] = {"profile_name": get("PROFILE"), "config_path": get("CONFIG")}
        for name, key in (("ONLY", "only"), ("SKIP", "skip")):
            if get(name) is not None:
                values[key] = tuple(v.strip() for v in str(get(name)).split(",") if v.strip())
        if get("PROBE") is not None:
            values["probe"] = str(get("PROBE")).lower() not in ("0", "false", "no", "off")
        if get("STRICT") is not None:
            values["strict"] = str(get("STRICT")).lower() in ("1", "true", "yes", "on")
        for name, key in (("TIMEOUT", "timeout"), ("MIN_FREE_GIB", "min_free_gib")):
            if get(name) is not None:
                values[key] = float(str(get(name)))
        if get("REPORTS_DIR") is not None:
            values["reports_dir"] = os.path.abspath(str(get("REPORTS_DIR")))
        values.update({k: v for k, v in given.items() if v is not None})
        return cls(**{k: v for k, v in values.items() if v is not None})


# -- the verdict, the report, the refusal ----------------------------------------------------------------------
def conclude(doc: dict[str, Any], options: GateOptions) -> list[str]:
    """Write the JSON and HTML reports; raise :class:`PreflightRefused` when the verdict is red."""
    from ..commands.run import write_outputs
    from ..reports import render

    try:
        written = [str(p) for p in write_outputs(doc, json_path=None, html_path=None, no_report=False,
                                                  reports_dir=options.reports_dir)]
    except OSError as exc:
        written = []
        logger.warning("dsv3-preflight: cannot write the report under %s: %s", options.reports_dir, exc)
    text = render(doc, "console", color=False, width=120, quiet=True)
    where = "\n".join(f"report: {p}" for p in written)
    if int(doc["exit_code"]) != 0:
        raise PreflightRefused(f"dsv3-preflight refused this Ray Train run before training ({doc['verdict']}):\n"
                               f"{text}\n{where}")
    logger.info("dsv3-preflight: %s before training\n%s", doc["verdict"], where)
    return written


def _document(results: Sequence[Result], profile: Any, nodes: list[Mapping[str, Any]], started: _dt.datetime,
              options: GateOptions, info: Mapping[str, Any]) -> dict[str, Any]:
    from ..document import build_document

    return build_document(mode="cluster", profile=profile.to_dict(), nodes=nodes, results=results,
                          command=["ray-train", str(info.get("run_name") or "")], strict=options.strict,
                          started=started, extra={"ray_train": dict(info)})


def _judge(spec: Any, **facts: Any) -> Result:
    started = time.monotonic()
    return judge(spec, facts, spec.timeout).stamped(name=spec.name, node="cluster", duration_s=time.monotonic() - started)


def base_profile(options: GateOptions, use_gpu: bool) -> Any:
    """The profile the gate's values go over: the one named, else ``cpu`` for a CPU run and ``dsv3`` for GPUs."""
    from ..profile import resolve_profile

    return resolve_profile(cli={}, environ={}, config_path=options.config_path,
                           profile_name=options.profile_name or ("dsv3" if use_gpu else "cpu"))


# -- moment 1: the ScalingConfig against the live nodes ---------------------------------------------------------
def scaling_fact(num_workers: int, resources_per_worker: Mapping[str, float], placement_strategy: str | None,
                 accelerator_type: str | None) -> ScalingFact:
    return ScalingFact(num_workers=int(num_workers), resources_per_worker={k: float(v) for k, v in
                                                                           resources_per_worker.items() if v},
                       placement_strategy=str(placement_strategy or "PACK"), accelerator_type=accelerator_type)


def check_scaling(scaling: ScalingFact, table: list[dict[str, Any]], options: GateOptions, run_name: str = "") -> None:
    """Refuse at once a worker group the live nodes cannot place (``table``: ``ray.nodes()``)."""
    started = _dt.datetime.now(_dt.timezone.utc)
    nodes: list[NodeResources] = node_resources_from_table(table)
    result = _judge(gate_checks.scaling, ray_train_scaling=scaling, ray_train_nodes=nodes)
    if not result.status.is_red:
        return
    profile = base_profile(options, bool(scaling["resources_per_worker"].get("GPU")))
    info = {"run_name": run_name, "moment": "before the placement group", "scaling": dict(scaling)}
    conclude(_document([result], profile, [], started, options, info), options)


# -- moment 2: the worker actors exist, the process group does not ------------------------------------------
@dataclass
class Plan:
    """Who the nodes are and the rendezvous Ray Train will use, from the started workers."""

    workers: list[WorkerFact]
    reps: dict[str, Any]                 # node id → the first worker (lowest rank) on it
    names: dict[str, str] = field(default_factory=dict)
    node_rank: dict[str, int] = field(default_factory=dict)
    master_addr: str = ""
    master_port: int = 0
    backend: str = "gloo"

    def name(self, node_id: str) -> str:
        return self.names.get(node_id) or node_id[:12]


def worker_fact(worker: Any) -> WorkerFact:
    meta = worker.metadata
    return WorkerFact(node_id=str(meta.node_id), node_ip=str(meta.node_ip), hostname=str(meta.hostname),
                      pid=int(meta.pid), gpu_ids=[str(i) for i in (meta.accelerator_ids or {}).get("GPU", [])])


def choose_backend(configured: str | None, gpus_per_worker: float) -> str:
    """The backend Ray Train's torch config picks: the configured one, else nccl with GPUs and gloo without (the
    collective probe speaks gloo and nccl: a per-device list is judged by the backend of the workers' devices)."""
    text = (configured or "").lower()
    if text in ("gloo", "nccl"):
        return text
    # none, or a per-device list such as cpu:gloo,cuda:nccl: what the workers' devices use
    return "nccl" if gpus_per_worker > 0 and ("nccl" in text or not text) else "gloo"


def gather(refs: Mapping[str, Any], deadline: float) -> dict[str, tuple[Any, str | None]]:
    """``{key: (value, None) | (None, error)}`` for Ray object refs, waiting at most until ``deadline``."""
    import ray

    pending = list(refs.values())
    ray.wait(pending, num_returns=len(pending), timeout=max(deadline - time.monotonic(), 0.1))
    out: dict[str, tuple[Any, str | None]] = {}
    for key, ref in refs.items():
        try:
            out[key] = (ray.get(ref, timeout=max(min(deadline - time.monotonic(), 5.0), 0.1)), None)
        except Exception as exc:  # noqa: BLE001 - a node that cannot answer is an ERROR row, never a retry
            out[key] = (None, f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}")
    return out


def unique_names(names: Mapping[str, str]) -> dict[str, str]:
    """Node id → name; a name several Ray nodes share gets ``-<6 hex digits of the node id>``."""
    return {nid: name if list(names.values()).count(name) == 1 else f"{name}-{nid[:6]}" for nid, name in names.items()}


def make_plan(workers: Sequence[Any], backend_config: Any, deadline: float) -> Plan:
    facts = [worker_fact(w) for w in workers]
    reps: dict[str, Any] = {}
    first: dict[str, WorkerFact] = {}
    for worker, fact in zip(workers, facts):
        reps.setdefault(fact["node_id"], worker)
        first.setdefault(fact["node_id"], fact)
    ips = list(dict.fromkeys(f["node_ip"] for f in facts))   # Ray Train's node ranks: node IPs in rank order
    plan = Plan(facts, reps, node_rank={nid: ips.index(f["node_ip"]) for nid, f in first.items()})
    answers = gather({nid: w.execute_async(probes.identity) for nid, w in reps.items()}, deadline)
    plan.names = unique_names({nid: (value or {}).get("name") or first[nid]["hostname"]
                               for nid, (value, _error) in answers.items()})
    if workers:
        (address, _error) = gather({"rank0": workers[0].execute_async(probes.address_and_port)}, deadline)["rank0"]
        plan.master_addr, plan.master_port = address if address else (facts[0]["node_ip"], 0)
        gpus = float((getattr(workers[0], "resources", None) or {}).get("GPU", 0.0))
        plan.backend = choose_backend(getattr(backend_config, "backend", None), gpus)
    return plan


def _local(call: Callable[..., Any], *args: Any) -> tuple[Any, str | None]:
    try:
        return call(*args), None
    except Exception as exc:  # noqa: BLE001 - recorded as the node's error
        return None, f"{type(exc).__name__}: {exc}"


def prove_storage(plan: Plan, storage_path: str, remote: bool, deadline: float,
                  controller: str | None = None) -> StorageFact:
    """Every node writes its nonce under storage_path, every node reads every nonce back, then each removes its own.
    ``controller``: the node id of Train's controller (it writes the run's marker there), which takes part from this
    process when no worker runs on it."""
    fact = StorageFact(storage_path=storage_path, remote=remote, writes=[], reads={})
    if remote:
        return fact
    run_id = uuid.uuid4().hex[:12]
    here = controller if controller and controller not in plan.reps else None
    nonces = {nid: uuid.uuid4().hex for nid in [*plan.reps, *([here] if here else [])]}

    def wave(call: Callable[..., Any], *args: Any, per_node: bool = False) -> dict[str, tuple[Any, str | None]]:
        def extra(nid: str) -> tuple[Any, ...]:
            return (nid, nonces[nid]) if per_node else ()

        out = gather({nid: w.execute_async(call, storage_path, run_id, *args, *extra(nid))
                      for nid, w in plan.reps.items()}, deadline)
        if here:
            out[here] = _local(call, storage_path, run_id, *args, *extra(here))
        return out

    for nid, (value, error) in wave(probes.write_nonce, per_node=True).items():
        wrote = value or {"path": storage_path, "wrote": False, "error": error, "free_bytes": None}
        fact["writes"].append(StorageWrite(node=plan.name(nid), path=wrote["path"], wrote=wrote["wrote"],
                                           error=wrote["error"], free_bytes=wrote["free_bytes"]))
    for nid, (value, error) in wave(probes.read_nonces, nonces).items():
        fact["reads"][plan.name(nid)] = {plan.name(k): v for k, v in (value or {k: str(error) for k in nonces}).items()}
    gather({nid: w.execute_async(probes.remove_nonce, storage_path, run_id, nid) for nid, w in plan.reps.items()},
           deadline)
    if here:
        _local(probes.remove_nonce, storage_path, run_id, here)
    return fact


def node_profiles(plan: Plan, options: GateOptions, node_gpus: Mapping[str, int]) -> dict[str, Any]:
    """Each node's profile: the base profile with the values Ray Train will use on that node. GPUs expected on a
    node: the named profile's or config's when one is given (gpu.inventory then catches a GPU Ray no longer sees),
    else the GPUs the node's raylet advertises (``node_gpus``); none for a CPU run."""
    counts = {nid: sum(1 for w in plan.workers if w["node_id"] == nid) for nid in plan.reps}
    union = {nid: sorted({g for w in plan.workers if w["node_id"] == nid for g in w["gpu_ids"]}) for nid in plan.reps}
    use_gpu = any(union.values())
    base = base_profile(options, use_gpu)
    named = bool(options.profile_name or options.config_path)
    out = {}
    for nid in plan.reps:
        values: dict[str, Any] = {"nnodes": len(plan.reps), "nproc_per_node": counts[nid],
                                  "node_rank": plan.node_rank[nid], "world_size": len(plan.workers),
                                  "master_addr": plan.master_addr, "master_port": plan.master_port or base.master_port,
                                  "backend": plan.backend}
        if not use_gpu:
            values["gpus_per_node"] = 0
        elif not named:
            values["gpus_per_node"] = int(node_gpus.get(nid, len(union[nid])))
        if union[nid]:
            values["cuda_visible_devices"] = ",".join(union[nid])
        out[nid] = base.with_values("Ray Train (the started worker group)", **values)
    return out


def selected_specs(options: GateOptions) -> tuple[list[Any], list[str]]:
    """(the selected cluster-scope specs, every selected check name) of the suite's registry."""
    from ..registry import load_registry

    selection = load_registry().select(list(options.only), list(options.skip), [])
    names = [s.name for s in selection.selected if options.probe or s.name != GANG_CHECK]
    return [s for s in selection.selected if s.scope == "cluster" and s.name in names], names


def run_node_checks(plan: Plan, profiles: Mapping[str, Any], names: list[str], options: GateOptions,
                    deadline: float) -> tuple[list[Result], dict[str, dict[str, Any]]]:
    """The suite's checks on one worker of each node at once (the gang's ranks among them); (results, entries)."""
    gang = GANG_CHECK in names
    timeout = max(deadline - time.monotonic() - 5.0, 5.0)
    refs = {}
    for nid, worker in plan.reps.items():
        wave = NO_WAVE
        if gang:
            wave = Wave(gang=GangPart(master_addr=plan.master_addr, master_port=plan.master_port or 0,
                                      world=len(plan.reps), node_rank=plan.node_rank[nid], backend=plan.backend,
                                      startup_s=GANG_STARTUP_S,
                                      timeout_s=min(profiles[nid].collective_timeout, timeout)))
        payload = {"profile": profiles[nid].to_dict(), "only": names, "timeout": timeout, "node_name": plan.name(nid),
                   "wave": wave.to_dict()}
        refs[nid] = worker.execute_async(probes.node_checks, payload)
    results: list[Result] = []
    entries: dict[str, dict[str, Any]] = {}
    for nid, (value, error) in gather(refs, deadline + GANG_STARTUP_S).items():
        name = plan.name(nid)
        if value is None:
            results.append(error_result(NODE_RUN, name, f"the node checks did not come back from {name}: {error}",
                                        {"node_id": nid}, f"ray status   # is {name} alive?", actor=Actor.NODE))
            entries[name] = {"node": name, "node_rank": plan.node_rank[nid], "state": "error", "error": error,
                             "facts": {}, "fact_errors": {}}
            continue
        results += [Result.from_dict(r) for r in value["results"]]
        entries[name] = {**value["entry"], "node_rank": plan.node_rank[nid]}
    return results, entries


def gate_results(plan: Plan, storage: StorageFact, entries: Mapping[str, Mapping[str, Any]],
                 min_free_gib: float) -> list[Result]:
    nvml = {nid: (entries.get(plan.name(nid)) or {}).get("facts", {}).get("nvml") or {} for nid in plan.reps}
    routes = {plan.name(nid): entries[plan.name(nid)]["facts"]["nic_route"] for nid in plan.reps
              if "nic_route" in (entries.get(plan.name(nid)) or {}).get("facts", {})}
    ips = {plan.name(nid): next(w["node_ip"] for w in plan.workers if w["node_id"] == nid) for nid in plan.reps}
    out = [_judge(gate_checks.storage, ray_train_storage=storage, min_free_gib=min_free_gib),
           _judge(gate_checks.rank_map, ray_train_workers=plan.workers, nvml=nvml)]
    if routes:
        out.append(_judge(gate_checks.nic, ray_train_node_ips=ips, nic_route=routes))
    return out


def raylet_gpus() -> dict[str, int]:
    """Node id → the GPUs its raylet advertises (``ray.nodes()``), for the nodes alive now."""
    import ray

    return {n["node_id"]: int(n["total"].get("GPU", 0)) for n in node_resources_from_table(ray.nodes())}


def controller_node(plan: Plan) -> str | None:
    """This process's Ray node (Train's controller runs on the driver's node), named like the workers' nodes."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    if node_id not in plan.names:
        value, _error = _local(probes.identity)
        plan.names[node_id] = f"{(value or {}).get('name') or node_id[:12]} (driver)"
    return node_id


def before_training(workers: Sequence[Any], run_context: Any, options: GateOptions,
                    say: Callable[[str], None] = logger.info) -> list[str]:
    """Judge the started worker group before its process group exists; the report's paths, or PreflightRefused."""
    started = _dt.datetime.now(_dt.timezone.utc)
    deadline = time.monotonic() + options.timeout
    run_config = run_context.run_config
    storage_path = str(run_config.storage_path)
    remote = "://" in storage_path or getattr(run_config, "storage_filesystem", None) is not None
    plan = make_plan(workers, getattr(run_context, "backend_config", None), deadline)
    say(f"dsv3-preflight: {len(workers)} workers on {len(plan.reps)} nodes; rendezvous {plan.backend} "
        f"{plan.master_addr}:{plan.master_port}; storage_path {storage_path}")
    controller = controller_node(plan)
    storage = prove_storage(plan, storage_path, remote, deadline, controller)
    profiles = node_profiles(plan, options, raylet_gpus())
    cluster_specs, names = selected_specs(options)
    results, entries = run_node_checks(plan, profiles, names, options, deadline)
    rank0 = next(nid for nid in plan.reps if plan.node_rank[nid] == 0)
    ranks = {plan.name(nid): plan.node_rank[nid] for nid in plan.reps}
    facts = {name: entry for name, entry in entries.items() if entry.get("facts")}
    results += run_cluster_checks(cluster_specs, profiles[rank0], facts, ranks)
    results += gate_results(plan, storage, entries, options.min_free_gib)
    info = {"run_name": run_config.name, "moment": "before init_process_group", "storage_path": storage_path,
            "master_addr": plan.master_addr, "master_port": plan.master_port, "backend": plan.backend,
            "workers": len(workers), "nodes": {plan.name(nid): nid for nid in plan.reps}}
    ordered: list[Mapping[str, Any]] = sorted(entries.values(), key=lambda e: e.get("node_rank", 0))
    return conclude(_document(results, profiles[rank0], ordered, started, options, info), options)
