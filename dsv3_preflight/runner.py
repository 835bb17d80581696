"""Running the suite on this node: the one code path the CLI, pytest and the Ray node task share."""
from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .engine import OnResult, run_cluster_checks, run_node_checks
from .facts import FactStore
from .profile import Profile
from .registry import CheckSpec, Registry
from .result import Result
from .wave import NO_WAVE, Wave

NODE_NAME_ENV = "DSV3_PREFLIGHT_NODE_NAME"


def this_node_name(environ: Mapping[str, str] | None = None) -> str:
    """This node's name in results: $DSV3_PREFLIGHT_NODE_NAME, else the host name."""
    environ = os.environ if environ is None else environ
    return environ.get(NODE_NAME_ENV) or socket.gethostname()


def cluster_skip_reason(profile: Profile) -> str:
    return (
        f"cluster-scope check: the profile has {profile.nnodes} nodes, and this run saw only this one; "
        "run `dsv3-preflight run --all-nodes` to judge all nodes together"
    )


@dataclass
class NodeOutcome:
    node: str
    results: list[Result]
    entry: dict[str, Any] = field(default_factory=dict)


def run_this_node(
    registry: Registry,
    selected: Iterable[CheckSpec],
    profile: Profile,
    *,
    node: str | None = None,
    facts_doc: Mapping[str, Any] | None = None,
    replay_source: str | None = None,
    timeout: float | None = None,
    on_result: OnResult | None = None,
    cluster_checks_here: bool | None = None,
    wave: Wave = NO_WAVE,
) -> NodeOutcome:
    """Gather this node's facts and judge the selected checks on them.

    Cluster-scope checks run here only when this node is the whole cluster (nnodes == 1), unless
    ``cluster_checks_here`` says otherwise (cluster mode judges them once on all nodes' facts). ``wave``: cluster
    mode's parameters for this node's probes (the engine fact ``wave``).
    """
    selected = list(selected)
    deadline = time.monotonic() + timeout if timeout else None
    node = node or (facts_doc or {}).get("node") or this_node_name()
    store = FactStore(
        registry,
        {"profile": profile, "wave": wave},
        recorded=(facts_doc or {}).get("facts") if facts_doc else None,
        recorded_errors=(facts_doc or {}).get("fact_errors") if facts_doc else None,
        replay_source=replay_source,
    )
    cluster = [c for c in selected if c.scope == "cluster"]
    judged_elsewhere = cluster_checks_here is False  # cluster mode: the driver judges them on the facts sent back
    if cluster_checks_here is None:
        cluster_checks_here = profile.nnodes == 1
    identity = ["host"] if "host" in registry.probes else []  # who this node is, in every document
    store.start({n for c in cluster for n in c.needs} | set(identity))  # gathered beside the node checks' facts
    results = run_node_checks(registry, selected, store, node, deadline=deadline, on_result=on_result)
    if cluster and cluster_checks_here:
        for spec in cluster:  # wait (bounded) for what they need
            for need in spec.needs:
                try:
                    store.get(need, deadline=deadline)
                except Exception:  # noqa: BLE001 - the error is in the snapshot and becomes the check's ERROR
                    pass
        snapshot = store.snapshot()
        results += run_cluster_checks(cluster, profile, {node: snapshot}, {node: profile.node_rank}, on_result=on_result)
    elif cluster:
        for spec in cluster if judged_elsewhere else ():  # so wait (bounded) for their facts to be in the snapshot
            for need in spec.needs:
                try:
                    store.get(need, deadline=deadline)
                except Exception:  # noqa: BLE001 - recorded in fact_errors
                    pass
        for spec in cluster:
            result = Result.skipped(cluster_skip_reason(profile)).stamped(name=spec.name, node="cluster", duration_s=0.0)
            results.append(result)
            if on_result:
                on_result(result)
    for fact in identity:
        try:
            store.get(fact, deadline=deadline)
        except Exception:  # noqa: BLE001 - recorded in fact_errors
            pass
    snapshot = store.snapshot()
    entry = {
        "node": node,
        "node_rank": profile.node_rank,
        "state": "replayed" if replay_source else "ok",
        "error": None,
        "identity": snapshot["facts"].get("host", {}),
        **snapshot,
    }
    return NodeOutcome(node, results, entry)
