"""The Ray Train gate's facts: plain data (JSON types) gathered from Ray and from the workers' nodes.

Shapes are TypedDicts so a rule reads ``node["total"]``; recorded copies live in tests/data/ray_train/.
"""
from __future__ import annotations

from typing import Any, TypedDict


class NodeResources(TypedDict):
    """One alive Ray node as ``ray.nodes()`` tells it: its total resources (what a placement group can get)."""

    node_id: str
    ip: str
    hostname: str
    is_head: bool
    total: dict[str, float]


class ScalingFact(TypedDict):
    """What the worker group will ask for: ``num_workers`` bundles of ``resources_per_worker``, placed by
    ``placement_strategy`` (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD)."""

    num_workers: int
    resources_per_worker: dict[str, float]
    placement_strategy: str
    accelerator_type: str | None


class WorkerFact(TypedDict):
    """One started training worker (Ray's ActorMetadata), in the order Ray Train's ranks will take."""

    node_id: str
    node_ip: str
    hostname: str
    pid: int
    gpu_ids: list[str]


class StorageWrite(TypedDict):
    """One node's attempt to write its nonce under storage_path."""

    node: str
    path: str
    wrote: bool
    error: str | None
    free_bytes: int | None


class StorageFact(TypedDict):
    """storage_path proven across nodes: who wrote a nonce, and which nonces each node read back."""

    storage_path: str
    remote: bool
    writes: list[StorageWrite]
    #: reader node → {writer node: "ok" | "missing" | "mismatch" | error text}
    reads: dict[str, dict[str, str]]


def node_resources_from_table(table: list[dict[str, Any]]) -> list[NodeResources]:
    """The alive nodes of ``ray.nodes()`` (a list of dicts with NodeID, Alive, NodeManagerAddress, Resources)."""
    nodes: list[NodeResources] = []
    for entry in table:
        if not entry.get("Alive"):
            continue
        total = {str(k): float(v) for k, v in (entry.get("Resources") or {}).items()}
        nodes.append(NodeResources(node_id=str(entry.get("NodeID")), ip=str(entry.get("NodeManagerAddress")),
                                   hostname=str(entry.get("NodeManagerHostname") or ""),
                                   is_head="node:__internal_head__" in total, total=total))
    return nodes
