"""gpu.versions: driver, Fabric Manager, CUDA, torch, NCCL, DeepSpeed, transformers, PEFT identical on every node."""
from __future__ import annotations

from collections.abc import Mapping

from dsv3_preflight import check
from dsv3_preflight.gpu.facts import VersionsFact
from dsv3_preflight.gpu.versions_rules import COMPARED, reference, render_table, rule_identical
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Findings


@check("gpu.versions", scope="cluster", needs=["versions", "profile"], tags=["gpu", "versions"], timeout=20)
def versions(versions: Mapping[str, VersionsFact], profile: Profile):
    """Every version that must agree (driver, FM, CUDA, torch, NCCL, deepspeed, transformers, peft) is identical on all nodes."""
    nodes = list(versions)
    table = {n: dict(versions[n]) for n in nodes}
    found = Findings()
    odd: dict[str, set[str]] = {}
    for key, label in COMPARED:
        values = {n: table[n].get(key) for n in nodes}
        found.check(rule_identical, key, label, values, nodes, {n: table[n].get("nccl_source") for n in nodes})
        if len(set(values.values())) > 1:
            odd[key] = set(reference(values, nodes)[1])
    evidence = {"table": render_table(nodes, table, odd), "versions": table, "odd_ones_out": {k: sorted(v) for k, v in odd.items()}}
    if len(nodes) == 1:
        return found.result(f"one node ({nodes[0]}): nothing to compare; torch {table[nodes[0]].get('torch')}, "
                            f"driver {table[nodes[0]].get('driver') or 'none'}", evidence)
    first = table[nodes[0]] if nodes else {}
    return found.result(f"{len(nodes)} nodes agree: driver {first.get('driver')}, torch {first.get('torch')}, "
                        f"NCCL {first.get('nccl')}", evidence)
