"""The watch of ``launch --all-nodes``: the driver reads every node's lines for progress (as it streams them); once a
stall is suspected it asks the actors that launched torchrun on each node for two samples, then for the capture
(probes/capture.py runs in the actor, on that node's /proc), names the culprit and publishes the report."""
from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from . import report
from .watch import StallOptions, StallWatch

#: seconds the driver waits for one round of the nodes' samples or captures (py-spy has its own timeouts inside)
RAY_CAPTURE_TIMEOUT_S = 120.0


class RayStallWatch:
    """The stall watch over every node's actor (``NodeTorchrun`` with ``stall_sample``/``stall_capture``)."""

    def __init__(self, options: StallOptions, nodes: Sequence[Mapping[str, Any]], actors: Mapping[int, Any],
                 publish: Callable[[dict[str, Any]], None] | None = None, master: tuple[str, int] | None = None) -> None:
        self.watch = StallWatch(options)
        self.nodes = {int(n["node_rank"]): n for n in nodes}
        self.actors = actors
        self.publish = publish
        self.facts = {str(n["name"]): n.get("facts") or {} for n in nodes}
        self.ip_nodes = {str(n["ip"]): str(n["name"]) for n in nodes if n.get("ip")}
        self.master = master   # MASTER_ADDR, MASTER_PORT: the rendezvous store the agents join

    def _rendezvous(self) -> dict[str, Any]:
        from .probes.store import agents_joined

        if self.master is None:
            return {"available": False, "why": "MASTER_ADDR/MASTER_PORT not known to the watch"}
        return agents_joined(self.master[0], self.master[1], len(self.nodes))

    def observe(self, line: str) -> None:
        self.watch.observe(line)

    def _gather(self, method: str, *args_of: Callable[[int], tuple]) -> dict[int, Any]:
        import ray

        refs = {r: getattr(a, method).remote(*(args_of[0](r) if args_of else ())) for r, a in self.actors.items()}
        out: dict[int, Any] = {}
        for rank, ref in refs.items():
            try:
                out[rank] = ray.get(ref, timeout=RAY_CAPTURE_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - a node that does not answer: its capture says so
                out[rank] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}
        return out

    def _sample(self) -> dict[int, Any]:
        return {r: s for r, s in self._gather("stall_sample").items() if "error" not in s}

    def _capture(self) -> list[dict[str, Any]]:
        got = self._gather("stall_capture", lambda r: (str(self.nodes[r]["name"]), r))
        return [c if "error" not in c else {"node": self.nodes[r]["name"], "node_rank": r, "ranks": [],
                                             "torchrun_alive": False, "error": c["error"]} for r, c in got.items()]

    def tick(self, refresh: Callable[[], None] | None = None) -> dict[str, Any] | None:
        """Called between polls: when due, judge; the stall section once one is reported (None otherwise).
        ``refresh`` reads the lines the nodes printed meanwhile (the driver polls them only between ticks)."""
        if not self.watch.due():
            return None
        section = self.watch.judge(self._sample, self._capture, expected_nodes=sorted(self.nodes), facts=self.facts,
                                   ip_nodes=self.ip_nodes, rendezvous=self._rendezvous, refresh=refresh)
        if section is None:
            print(report.slow_line(self.watch.slow[-1]), file=sys.stderr, flush=True)
            return None
        if self.publish is not None:
            self.publish(section)
        return section


def named_node_rank(section: Mapping[str, Any]) -> int:
    """The node rank the stall report names first (its first cause's node), 0 when it names none."""
    for cause in section.get("causes") or []:
        if isinstance(cause.get("node_rank"), int):
            return int(cause["node_rank"])
        if cause.get("node_ranks"):
            return int(cause["node_ranks"][0])
    return 0
