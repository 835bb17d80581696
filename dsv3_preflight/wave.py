"""The wave: what cluster mode's driver hands one node's probes for one wave, typed.

``run --all-nodes`` runs waves of node tasks: the node checks, the port-reach wave while node 0 holds the
listener, the collective gang (``--probe``), the rounds of pairs (``--probe=pairs``). A wave's parameters
(the listener's token, this node's part of the gang or of a pair) are one :class:`Wave`: the driver builds it,
it crosses Ray as plain data inside the node task (``to_dict``/``from_dict``, so a node whose version differs
cannot break unpickling), and the runner hands it to the probes as the engine fact ``wave``, beside ``profile``.
Nothing of it goes through ``os.environ``. Outside cluster mode the wave is empty (:data:`NO_WAVE`): the gang
and pairs probes say "not requested".
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class GangPart:
    """This node's rank of the gang all_reduce over every node (``--probe``)."""

    master_addr: str
    master_port: int
    world: int
    node_rank: int
    backend: str
    timeout_s: float
    #: seconds of the rank's start-up (Python, importing torch) not counted against the timeout
    startup_s: float = 0.0


@dataclass(frozen=True)
class PairPart:
    """This node's side of one pair of a round of ``--probe=pairs``: rank ``role`` of a 2-rank process group
    whose store the pair's first node hosts on ``port``."""

    round: int
    rounds: int
    pair: tuple[str, str]
    addrs: Mapping[str, str]
    role: int
    port: int
    backend: str
    timeout_s: float
    iters: int
    busbw_bytes: int
    #: the pairs this node is in so far (the judge's coverage)
    planned: list[list[str]] = field(default_factory=list)
    #: the nodes the fact names (the round-robin's all, the fast schedule's the pair's own two)
    nodes: list[str] = field(default_factory=list)
    sample: int | None = None
    startup_s: float = 0.0

    @property
    def me(self) -> str:
        return self.pair[self.role]

    @property
    def peer(self) -> str:
        return self.pair[1 - self.role]

    @property
    def store_addr(self) -> str:
        return self.addrs[self.pair[0]]


@dataclass(frozen=True)
class Wave:
    """One node's parameters for one wave; the empty wave asks for nothing."""

    #: the token of the listener node 0 holds on MASTER_PORT during the port-reach wave
    listener_token: str | None = None
    gang: GangPart | None = None
    pair: PairPart | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the node task's payload."""
        return {key: value for key, value in asdict(self).items() if value is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Wave:
        """The wave a node task's payload carries; ValueError when a part lacks a field or has an unknown one."""
        data = data or {}
        try:
            gang = GangPart(**data["gang"]) if data.get("gang") else None
            pair = None
            if data.get("pair"):
                raw = dict(data["pair"])
                raw["pair"] = tuple(raw["pair"])
                pair = PairPart(**raw)
        except (TypeError, KeyError) as exc:
            raise ValueError(f"malformed wave parameters: {exc}") from exc
        return cls(listener_token=data.get("listener_token") or None, gang=gang, pair=pair)


#: outside cluster mode's waves: nothing requested
NO_WAVE = Wave()
