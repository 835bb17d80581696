"""Shared by the pairwise probe's tests (test_pairs_units.py, test_dist_pairs.py): the facts recorded from real
runs over Ray nodes in network namespaces (tests/data/collective/pairs_*.json) judged by the registered check
`dist.pairs`."""
from __future__ import annotations

import json
from pathlib import Path

from dsv3_preflight.profile import Profile
from dsv3_preflight.registry import load_registry

DATA = Path(__file__).parents[1] / "data" / "collective"


CHECK = load_registry().checks["dist.pairs"]


def _recorded(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def _judge(rec: dict, facts: dict | None = None, **values):
    profile = Profile.from_dict(rec["profile"])
    if values:
        profile = profile.with_values("test", **values)
    return CHECK(collective_pairs=facts if facts is not None else rec["collective_pairs"], profile=profile,
                 node_ranks=rec["node_ranks"])


def _doc(result) -> dict:
    return {"results": [dict(result.to_dict(), name="dist.pairs", node="cluster")]}
