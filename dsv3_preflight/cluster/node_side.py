"""The node side of cluster mode: what the Ray task runs on each node.

A node task is one :class:`NodeTask` (the checks, the profile, the time limit, the wave's parameters); it loads
the registry once and runs the checks through ``runner.run_this_node``, the runner the CLI uses, with the wave
handed to the probes as the engine fact ``wave``. It answers one :class:`NodeAnswer`: who the node is, its facts
and its results. Both cross Ray as plain data (``to_wire``/``from_wire``), so a node whose dsv3-preflight differs
(or is missing, see :mod:`.bootstrap`) cannot break unpickling; on either side they are typed.
"""
from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..result import Result
from ..wave import NO_WAVE, Wave

#: the ERROR row of a node that died, hung, lacks the package, or whose wave failed
NODE_RUN_CHECK = "cluster.node_run"
#: the facts and their bookkeeping in a node's entry (the snapshot of its fact store)
FACT_KEYS = ("facts", "fact_errors", "fact_timings_s")


@dataclass(frozen=True)
class NodeTask:
    """What the driver asks of one node for one wave."""

    profile: Mapping[str, Any]
    checks: Sequence[str]
    checks_dirs: Sequence[str] = ()
    timeout: float | None = None
    wave: Wave = NO_WAVE
    #: where the node says who it is in Ray's key-value store when its task starts (see bootstrap)
    hello_key: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"profile": dict(self.profile), "checks": list(self.checks), "checks_dirs": list(self.checks_dirs),
                "timeout": self.timeout, "wave": self.wave.to_dict(), "hello_key": self.hello_key}

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> NodeTask:
        return cls(profile=data["profile"], checks=tuple(data.get("checks") or ()),
                   checks_dirs=tuple(data.get("checks_dirs") or ()), timeout=data.get("timeout"),
                   wave=Wave.from_dict(data.get("wave")), hello_key=data.get("hello_key"))


@dataclass
class NodeAnswer:
    """What one node task found: who the node is, its entry (facts, fact errors, timings, identity) and the results
    of its node checks."""

    node_name: str
    entry: dict[str, Any]
    results: list[Result] = field(default_factory=list)
    #: checks the driver asked for that this node's dsv3-preflight does not know
    unknown_checks: list[str] = field(default_factory=list)
    version: str | None = None
    python: str | None = None
    hostname: str | None = None
    pid: int | None = None
    node_id: str | None = None
    elapsed_s: float = 0.0

    @property
    def facts(self) -> dict[str, Any]:
        return self.entry.get("facts") or {}

    @property
    def fact_errors(self) -> dict[str, str]:
        return self.entry.get("fact_errors") or {}

    def to_wire(self) -> dict[str, Any]:
        from ..secrets import mask

        return {"ok": True, "node_id": self.node_id, "node_name": self.node_name, "hostname": self.hostname,
                "pid": self.pid, "python": self.python, "version": self.version,
                "unknown_checks": list(self.unknown_checks),
                # facts and results leave the node with their secrets masked, as in every document
                "results": mask([r.to_dict() for r in self.results]), "entry": mask(self.entry),
                "elapsed_s": self.elapsed_s}

    @classmethod
    def from_wire(cls, value: Mapping[str, Any]) -> NodeAnswer:
        return cls(node_name=value.get("node_name") or "", entry=dict(value.get("entry") or {}),
                   results=[Result.from_dict(d) for d in value.get("results") or ()],
                   unknown_checks=list(value.get("unknown_checks") or ()), version=value.get("version"),
                   python=value.get("python"), hostname=value.get("hostname"), pid=value.get("pid"),
                   node_id=value.get("node_id"), elapsed_s=float(value.get("elapsed_s") or 0.0))

    def merged(self, later: NodeAnswer) -> None:
        """Add a later wave's answer on the same node: its facts (its values win) and its results."""
        self.entry = merge_entries(self.entry, later.entry)
        self.results += later.results


def merge_entries(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """A node entry with the second wave's facts added (the second wave's value wins)."""
    merged = dict(first)
    for key in FACT_KEYS:
        merged[key] = {**(first.get(key) or {}), **(second.get(key) or {})}
    for fact in (second.get("facts") or {}):
        merged["fact_errors"].pop(fact, None)
    return merged


def run_node(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The Ray task's body: run the task's checks here and answer (plain data, see :class:`NodeAnswer`)."""
    return answer(NodeTask.from_wire(payload)).to_wire()


def answer(task: NodeTask) -> NodeAnswer:
    """Run ``task``'s checks on this node through the runner, once; the node's answer."""
    from .. import __version__
    from ..profile import Profile
    from ..registry import load_registry
    from ..runner import run_this_node, this_node_name

    started = time.monotonic()
    registry = load_registry(task.checks_dirs)
    wanted = list(task.checks)
    unknown = [n for n in wanted if n not in registry.checks]
    name = this_node_name()
    profile = Profile.from_dict(task.profile)
    # as a run's selection: what was asked, and the checks standing for plugins that could not be loaded
    selected = registry.select([n for n in wanted if n not in unknown]).selected if len(unknown) < len(wanted) else []
    results: list[Result] = []
    if selected:
        timeout = task.timeout if task.timeout is not None else profile.run_timeout
        outcome = run_this_node(registry, selected, profile, node=name, timeout=timeout,
                                cluster_checks_here=False, wave=task.wave)
        entry = outcome.entry
        # the cluster-scope checks are judged by the driver on every node's facts: only their facts come back
        results = [r for r in outcome.results if r.node != "cluster"]
    else:
        entry = {"node": name, "node_rank": profile.node_rank, "state": "ok", "error": None, "identity": {},
                 **{key: {} for key in FACT_KEYS}}
    return NodeAnswer(node_name=name, entry=entry, results=results, unknown_checks=unknown, version=__version__,
                      python=sys.executable, hostname=socket.gethostname(), pid=os.getpid(), node_id=_ray_node_id(),
                      elapsed_s=time.monotonic() - started)


def _ray_node_id() -> str | None:
    try:
        import ray

        # outside a Ray task (tests of this function) there is no node id; asking for one there would start a
        # local Ray instance (Ray's auto-init), so ask only inside Ray
        if ray.is_initialized():
            return str(ray.get_runtime_context().get_node_id())
    except Exception:  # noqa: BLE001 - no Ray, or a Ray that cannot say: no node id
        pass
    return None
