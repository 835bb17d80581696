"""``--probe``: the one-process-per-node collective probe run as a gang over all nodes.

A placement group with STRICT_SPREAD (one bundle per node, a sliver of CPU so it fits beside a busy
cluster) holds one actor per node; each calls ``dsv3_preflight.collective.probe_node`` with the node
rank the launcher would give its node, and the driver combines the outcomes that returned.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

from ..result import Result
from .nodes import NodeInfo

CHECK_NAME = "cluster.collective_gang"
BUNDLE = {"CPU": 0.01}


class GangMember:
    def node_id(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def probe(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        from dsv3_preflight.collective import probe_node

        return probe_node(**kwargs)


def collective_available() -> bool:
    try:
        from dsv3_preflight.collective import combine, probe_node  # noqa: F401
    except ImportError:
        return False
    return True


def run_gang(ranked: Sequence[NodeInfo], profile: Any, deadline: float) -> tuple[Result, dict[str, Any]]:
    """Run the gang probe; (a cluster Result, details for the document). Never past ``deadline``."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    from dsv3_preflight.collective import combine

    started = time.monotonic()
    n = len(ranked)
    details: dict[str, Any] = {"nodes": n, "strategy": "STRICT_SPREAD"}
    pg = placement_group([dict(BUNDLE) for _ in range(n)], strategy="STRICT_SPREAD", name="dsv3-preflight-gang")
    actors: list[Any] = []
    try:
        left = deadline - time.monotonic()
        try:
            ray.get(pg.ready(), timeout=max(min(left - 5.0, 60.0), 1.0))
        except Exception as exc:  # noqa: BLE001
            details["error"] = f"placement group not ready: {type(exc).__name__}"
            return Result._engine_error(
                f"the gang's placement group (STRICT_SPREAD, {n} bundles of {BUNDLE}) could not be placed in time: "
                "a node is full or gone", details,
                "ray status   # every node needs 0.01 CPU free; then re-run with --probe"), details
        member = ray.remote(GangMember)
        actors = [member.options(placement_group=pg, placement_group_bundle_index=i, num_cpus=BUNDLE["CPU"],
                                 max_restarts=0).remote() for i in range(n)]
        ids = ray.get([a.node_id.remote() for a in actors], timeout=max(min(deadline - time.monotonic(), 60.0), 1.0))
        rank_of = {node.node_id: node.node_rank for node in ranked}
        master = ranked[0].ip
        timeout_s = max(min(profile.collective_timeout, deadline - time.monotonic() - 5.0), 5.0)
        details.update({"master_addr": master, "master_port": profile.master_port, "backend": profile.backend,
                        "timeout_s": round(timeout_s, 1)})
        refs = []
        for actor, node_id in zip(actors, ids):
            refs.append(actor.probe.remote({
                "master_addr": master, "master_port": profile.master_port, "world_size": n,
                "node_rank": rank_of[node_id], "nproc_per_node": 1, "backend": profile.backend, "timeout_s": timeout_s,
            }))
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout_s + 10.0)
        outcomes = []
        for ref in ready:
            try:
                outcomes.append(ray.get(ref, timeout=5.0))
            except Exception as exc:  # noqa: BLE001 - that node's ranks are then never joined
                details.setdefault("actor_errors", []).append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
        verdict = combine(outcomes, expected_world=n)
        details["combined"] = verdict
        summary = verdict.get("summary") or ("all_reduce across all nodes ok" if verdict.get("ok") else "gang probe failed")
        if verdict.get("ok"):
            return Result.passed(f"{n}-node gang: {summary}", details), details
        findings = verdict.get("findings") or []
        fix = next((f.get("remediation") for f in findings if f.get("remediation")), None)
        return Result.failed(f"{n}-node gang: {summary}", details,
                             fix or f"dsv3-preflight run --all-nodes --only 'net.*'   # check reach to {master}:{profile.master_port}"), details
    finally:
        details["elapsed_s"] = round(time.monotonic() - started, 3)
        for actor in actors:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001
                pass
        try:
            remove_placement_group(pg)
        except Exception:  # noqa: BLE001
            pass
