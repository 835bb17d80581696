"""Which nodes Ray lost, and when: a runner's record of node deaths, and waits that end when a node dies.

The driver keeps one :class:`NodeWatch` for a run. While it waits on a node's task or actor it asks Ray's
node table (``ray.nodes()``, a GCS call of a few milliseconds) every ``poll_s`` seconds; a node Ray reports
dead ends the wait for what ran there at once instead of at the wait's timeout. A task or actor that fails
with ``NodeDiedError`` is Ray saying the same thing earlier (it learns of a dead raylet from the broken
connection, seconds before its health checks mark the node dead in the table).

Each loss is a :class:`Lost`: the node, what it was doing (the wave it was in, or "after its node checks,
before the port-reach wave"), when the driver learned it (UTC and seconds into the run) and Ray's
reason. The driver turns them into the engine fact ``node_states`` (``{node: {"state": "alive" | "dead",
...}}``) and an ERROR row for the node; runners never judge.

    watch = NodeWatch(ranked, t0=time.monotonic())
    watch.busy(node_id, "node checks")            # while a task of this wave runs there
    ready, lost = watch.wait({ref: node_id}, timeout=30.0)
    watch.sweep("after its node checks, before the port-reach wave")   # anything lost while idle
"""
from __future__ import annotations

import contextvars
import datetime as _dt
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .nodes import NodeInfo

#: how often a wait asks Ray's node table (a GCS round trip of a few milliseconds)
POLL_S = 0.5
#: the watch of the run in progress: every wave of the run (the probe waves too) records losses in it
ACTIVE: contextvars.ContextVar[NodeWatch | None] = contextvars.ContextVar("dsv3_preflight_node_watch", default=None)


@dataclass(frozen=True)
class Lost:
    """A node Ray reported dead during the run."""

    node_id: str
    phase: str                   # what the node was doing: "node checks", "port-reach wave", "collective gang", ...
    at: str                      # UTC, when the driver learned it
    after_s: float               # seconds into the run
    reason: str = ""             # Ray's words (the node table's death reason, or the task's NodeDiedError)
    source: str = "node table"   # "node table" or "task error"
    logs_dir: str | None = None  # the node's Ray session logs, as Ray knows the path (on that node)

    def as_dict(self) -> dict[str, Any]:
        return {"phase": self.phase, "lost_at": self.at, "lost_after_s": round(self.after_s, 1),
                "reason": self.reason, "seen_in": self.source, "logs_dir": self.logs_dir}


def logs_dir(raylet_socket: str | None) -> str | None:
    """The node's Ray logs directory from its raylet socket path (SESSION/sockets/raylet -> SESSION/logs)."""
    if not raylet_socket or "/sockets/" not in raylet_socket:
        return None
    return raylet_socket.split("/sockets/")[0] + "/logs"


def ray_node_table() -> dict[str, dict[str, Any]]:
    """Ray's node table by node id (alive and dead nodes; ``ray.init`` first)."""
    import ray

    return {entry["NodeID"]: entry for entry in ray.nodes()}


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


@dataclass
class NodeWatch:
    """The nodes of a run, which of them Ray lost, and what each was doing; see the module docstring."""

    nodes: Sequence[NodeInfo]
    t0: float = field(default_factory=time.monotonic)
    poll_s: float = POLL_S
    lost: dict[str, Lost] = field(default_factory=dict)
    #: node id -> the wave whose task or actor runs there now
    _busy: dict[str, str] = field(default_factory=dict)
    #: node id -> what a node that finished its part of a wave is between (until the driver moves on)
    _after: dict[str, str] = field(default_factory=dict)
    #: what a node that runs nothing of ours is between (the driver says it as the run moves on)
    idle_phase: str = "before its node checks"
    _last_poll: float = 0.0
    _logs: dict[str, str | None] = field(default_factory=dict)
    table: Any = None  # a callable returning {node id: node-table entry}; Ray's own by default

    def __post_init__(self) -> None:
        if self.table is None:
            self.table = ray_node_table
        self._ids = {n.node_id for n in self.nodes}
        self.poll_s = float(os.environ.get("DSV3_PREFLIGHT_NODE_POLL_S") or self.poll_s)

    # -- what each node is doing -------------------------------------------------------------------
    def busy(self, node_id: str, phase: str) -> None:
        self._busy[node_id] = phase
        self._after.pop(node_id, None)

    def idle(self, node_id: str, after: str | None = None) -> None:
        """The node's task of the wave ended; ``after``: what it is between now (while the others still run)."""
        self._busy.pop(node_id, None)
        if after:
            self._after[node_id] = after

    def phase_of(self, node_id: str) -> str:
        return self._busy.get(node_id) or self._after.get(node_id) or self.idle_phase

    def is_lost(self, node_id: str) -> bool:
        return node_id in self.lost

    # -- learning of deaths ---------------------------------------------------------------------------
    def record(self, node_id: str, reason: str, source: str, phase: str | None = None) -> Lost | None:
        """Record that Ray reported ``node_id`` dead (kept once: the first report wins)."""
        if node_id in self.lost or node_id not in self._ids:
            return None
        lost = Lost(node_id, phase or self.phase_of(node_id), _now(), time.monotonic() - self.t0,
                    " ".join(str(reason).split())[:400], source, self._logs.get(node_id))
        self.lost[node_id] = lost
        return lost

    def poll(self, force: bool = False) -> list[Lost]:
        """Ask Ray's node table (at most every ``poll_s`` unless ``force``); the nodes newly reported dead."""
        now = time.monotonic()
        if not force and now - self._last_poll < self.poll_s:
            return []
        self._last_poll = now
        try:
            table = self.table()
        except Exception:  # noqa: BLE001 - the GCS did not answer this time: nothing learned, ask again later
            return []
        found = []
        for node_id in self._ids - set(self.lost):
            entry = table.get(node_id)
            if entry is None:
                continue
            self._logs.setdefault(node_id, logs_dir(entry.get("RayletSocketName")))
            if entry.get("Alive", True):
                continue
            reason = entry.get("DeathReasonMessage") or entry.get("DeathReason") or "Ray's node table lists it as dead"
            lost = self.record(node_id, reason, "node table")
            if lost:
                found.append(lost)
        return found

    def sweep(self, idle_phase: str | None = None) -> list[Lost]:
        """A forced poll, then (optionally) the name of what idle nodes are between from now on."""
        found = self.poll(force=True)
        if idle_phase:
            self.idle_phase = idle_phase
            self._after.clear()
        return found

    def note_error(self, node_id: str, exc: BaseException) -> Lost | None:
        """A task or actor error that is Ray saying the node died (NodeDiedError); None for any other error."""
        if not is_node_death(exc):
            return None
        text = str(exc).strip().splitlines()
        return self.record(node_id, next((t for t in text if t.strip()), type(exc).__name__), "task error")

    # -- waiting -----------------------------------------------------------------------------------------
    def wait(self, refs: Mapping[Any, str], timeout: float, *, on_ready: Callable[[Any], None] | None = None,
             stop: Callable[[], bool] | None = None) -> tuple[list[Any], dict[Any, Lost]]:
        """Wait for ``refs`` (object ref -> node id) until all are ready, ``timeout`` passes, every ref still
        pending belongs to a node Ray reported dead, or ``stop()`` says so (checked after each poll). Returns
        (ready refs, {ref: Lost} for the refs of lost nodes); a ref in neither was still running when the wait
        ended. ``on_ready(ref)`` is called as each is ready."""
        import ray

        pending = dict(refs)
        ready: list[Any] = []
        dead: dict[Any, Lost] = {}
        end = time.monotonic() + max(timeout, 0.0)
        while pending:
            left = end - time.monotonic()
            done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=max(min(left, self.poll_s), 0.0))
            for ref in done:  # what finished counts, even when its node died right after
                del pending[ref]
                ready.append(ref)
                if on_ready is not None:
                    on_ready(ref)
            self.poll()
            for ref, node_id in list(pending.items()):
                if node_id in self.lost:
                    dead[ref] = self.lost[node_id]
                    del pending[ref]
            if end - time.monotonic() <= 0 or (stop is not None and stop()):
                break
        return ready, dead

    def states(self, names: Mapping[str, str], extra: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
        """The ``node_states`` fact: {node name: {"state": "alive" | "dead", ...}} in the order of ``names``
        (node id -> name); ``extra`` adds fields per node id (its Ray address, the GCS address...)."""
        out = {}
        for node_id, name in names.items():
            lost = self.lost.get(node_id)
            entry: dict[str, Any] = {"state": "dead" if lost else "alive", "node_id": node_id}
            entry.update((extra or {}).get(node_id, {}))
            if lost:
                entry.update(lost.as_dict())
            out[name] = entry
        return out


def is_node_death(exc: BaseException) -> bool:
    """Whether a Ray error says the node itself died (not only the task's worker process)."""
    try:
        import ray.exceptions as rex
    except ImportError:  # pragma: no cover - Ray is there whenever a Ray error is
        return False
    node_died = getattr(rex, "NodeDiedError", None)
    if node_died is not None and isinstance(exc, node_died):
        return True
    cause = getattr(exc, "cause", None)
    if node_died is not None and isinstance(cause, node_died):
        return True
    # an actor on a dead node: ActorDiedError/ActorUnavailableError whose context names the node's death
    text = str(exc)
    return type(exc).__name__.startswith("Actor") and ("node" in text and ("died" in text or "dead" in text))


def ids_of(nodes: Iterable[NodeInfo]) -> list[str]:
    return [n.node_id for n in nodes]
