"""The rules of gpu.versions (pure: facts in, findings out): driver, Fabric Manager, CUDA, torch, NCCL, DeepSpeed, transformers, PEFT identical on every node."""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from dsv3_preflight.gpu import remedies
from dsv3_preflight.host.pyenv import pip_pin
from dsv3_preflight.result import Actor, Finding, failure

COMPARED = (
    ("driver", "NVIDIA driver"), ("kernel_module", "NVIDIA kernel module"), ("fabric_manager", "Fabric Manager"),
    ("cuda_driver", "CUDA (driver)"), ("cuda_runtime", "CUDA (torch runtime)"), ("torch", "torch"),
    ("nccl", "NCCL (torch's)"), ("deepspeed", "deepspeed"), ("transformers", "transformers"), ("peft", "peft"),
    ("accelerate", "accelerate"), ("python", "python"),
)


PIP_NAMES = {"torch", "deepspeed", "transformers", "peft", "accelerate"}


def render_table(nodes: list[str], table: dict[str, dict[str, Any]], odd: dict[str, set[str]]) -> str:
    """A node × version text table; the odd ones out are marked with '*'."""
    keys = [k for k, _ in COMPARED]
    cells = [["node"] + keys]
    for node in nodes:
        cells.append([node] + [f"{table[node].get(k) or '-'}{'*' if node in odd.get(k, ()) else ''}" for k in keys])
    widths = [max(len(row[i]) for row in cells) for i in range(len(keys) + 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def version_fix(key: str, label: str, common: str | None, outliers: Sequence[str], sources: Mapping[str, Any]) -> tuple[str, Actor]:
    """The pasteable fix for one differing version, and who must act."""
    where = ", ".join(outliers)
    if common is None:
        return f"# {label}: the other nodes have none; remove it on {where} or install it everywhere", Actor.JOB
    if key in PIP_NAMES:
        return f"{pip_pin(key, common)}   # on {where}", Actor.JOB
    if key == "nccl":
        wheel = next((s for s in sources.values() if s), None) or "nvidia-nccl-cu12"
        return f"pip install {wheel}=={common}   # on {where}: the NCCL wheel torch loads", Actor.JOB
    if key in ("driver", "kernel_module", "cuda_driver"):
        return "\n".join([
            f"# install NVIDIA driver {common} (and Fabric Manager {common}) on {where}, then reboot",
            f"apt-cache madison nvidia-driver-{remedies.driver_branch(common)}-server | grep -F {common}   # on {where}: the package revision",
            "reboot   # the new kernel module loads only at boot",
        ]), Actor.NODE
    if key == "fabric_manager":
        return f"# on {where}:\n{remedies.fm_install(common)}", Actor.NODE
    if key == "cuda_runtime":
        return f"# torch's CUDA build differs on {where}: the torch line's fix installs the same build ({common})", Actor.JOB
    return f"# on {where}: use {label} {common} like the other nodes (one container image on all nodes avoids this)", Actor.JOB


def reference(values: Mapping[str, Any], nodes: Sequence[str]) -> tuple[Any, list[str]]:
    """(the version most nodes have, the nodes that differ from it); a missing value loses a tie."""
    common, _ = Counter(values.values()).most_common(1)[0]
    if list(values.values()).count(common) * 2 <= len(values) and None in values.values():
        common = next(v for v in Counter(values.values()) if v is not None)
    return common, sorted((n for n, v in values.items() if v != common), key=nodes.index)


def rule_identical(key: str, label: str, values: Mapping[str, Any], nodes: Sequence[str],
                   sources: Mapping[str, Any]) -> Finding | None:
    """One version that must be the same on every node; the majority is the reference."""
    if len(set(values.values())) <= 1:
        return None
    common, outliers = reference(values, nodes)
    fix, actor = version_fix(key, label, common, outliers, sources)
    return failure(f"{label} differs: " + ", ".join(f"{n} has {values[n] or 'none'}" for n in outliers)
                   + f", the others {common or 'none'}", fix, actor=actor)
