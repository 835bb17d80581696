"""Shared by the collective tests (test_collective.py, test_dist_allreduce.py, test_dist_allreduce_cluster.py): the
ranks, outcomes and `collective` facts of the shape the probe writes, and the profile they are judged on."""
from __future__ import annotations

from dsv3_preflight.profile import resolve_profile


def _rank(rank, last="done", *, sum_ok=True, host="n0", pci=None, missing=None, findings=(), rank_map=None):
    return {"rank": rank, "host": host, "last_phase": last, "sum_ok": sum_ok if last in ("first_collective", "steady_state", "done") else None,
            "never_joined": missing, "findings": list(findings), "pci_bus_id": pci, "device": "cpu",
            "timings": {"init_s": 0.5, "first_collective_s": 0.01, "steady_s": 0.001}, "rank_map": rank_map,
            "nccl_interfaces": [], "log_tail": []}


def _outcome(node_rank, ranks, **extra):
    return {"node_rank": node_rank, "ranks": ranks, "sweep": None, "deadline_hit": False, "env": {}, **extra}


def _profile(**values):
    return resolve_profile(cli=values, environ={}, profile_name="cpu")


def _fact(outcomes, world, **extra):
    """A `collective` fact of the shape the probe writes (collective/probes/local.py): the outcome, no verdict."""
    return {"requested": True, "mode": "full", "backend": "gloo", "world": world, "partial": False,
            "outcome": outcomes[0], **extra}


DUP_PCI = "00000000:53:00.0"


def _dup_ranks(host="n0"):
    rank_map = {"0": {"host": host, "pci_bus_id": DUP_PCI}, "1": {"host": host, "pci_bus_id": DUP_PCI}}
    return [_rank(0, host=host, pci=DUP_PCI, rank_map=rank_map), _rank(1, host=host, pci=DUP_PCI)]
