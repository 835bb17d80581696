"""gpu.versions: driver, Fabric Manager, CUDA, torch, NCCL, DeepSpeed, transformers, PEFT identical on every node."""
from __future__ import annotations

from collections import Counter
from typing import Any

from dsv3_preflight import Result, check
from dsv3_preflight.gpu.common import join_problems

#: (key in the versions fact, label)
COMPARED = (
    ("driver", "NVIDIA driver"), ("kernel_module", "NVIDIA kernel module"), ("fabric_manager", "Fabric Manager"),
    ("cuda_driver", "CUDA (driver)"), ("cuda_runtime", "CUDA (torch runtime)"), ("torch", "torch"),
    ("nccl", "NCCL (torch's)"), ("deepspeed", "deepspeed"), ("transformers", "transformers"), ("peft", "peft"),
    ("accelerate", "accelerate"), ("python", "python"),
)
PIP_NAMES = {"torch", "deepspeed", "transformers", "peft", "accelerate"}


def pip_pin(package: str, version: str) -> str:
    """The pip command installing exactly ``version``. A local version (torch's ``2.4.0+cu121``) is not on PyPI:
    it comes from PyTorch's index named by the local tag."""
    if "+" in version and package == "torch":
        return f"pip install {package}=={version} --index-url https://download.pytorch.org/whl/{version.split('+', 1)[1]}"
    return f"pip install {package}=={version}"


def render_table(nodes: list[str], table: dict[str, dict[str, Any]], odd: dict[str, set[str]]) -> str:
    """A node × version text table; the odd ones out are marked with '*'."""
    keys = [k for k, _ in COMPARED]
    cells = [["node"] + keys]
    for node in nodes:
        cells.append([node] + [f"{table[node].get(k) or '-'}{'*' if node in odd.get(k, ()) else ''}" for k in keys])
    widths = [max(len(row[i]) for row in cells) for i in range(len(keys) + 1)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


@check("gpu.versions", scope="cluster", needs=["versions", "profile"], tags=["gpu", "versions"], timeout=20)
def versions(versions, profile):
    """Every version that must agree (driver, FM, CUDA, torch, NCCL, deepspeed, transformers, peft) is identical on all nodes."""
    nodes = list(versions)
    table = {n: dict(versions[n]) for n in nodes}
    odd: dict[str, set[str]] = {}
    fails: list[str] = []
    fixes: list[str] = []
    for key, label in COMPARED:
        values = {n: table[n].get(key) for n in nodes}
        if len(set(values.values())) <= 1:
            continue
        common, _ = Counter(values.values()).most_common(1)[0]
        if list(values.values()).count(common) * 2 <= len(values) and None in values.values():
            common = next(v for v in Counter(values.values()) if v is not None)
        outliers = {n for n, v in values.items() if v != common}
        odd[key] = outliers
        fails.append(f"{label} differs: " + ", ".join(f"{n} has {values[n] or 'none'}" for n in sorted(outliers, key=nodes.index))
                     + f", the others {common or 'none'}")
        if key in PIP_NAMES and common:
            fixes.append(f"{pip_pin(key, common)}   # on {', '.join(sorted(outliers, key=nodes.index))}")
        elif key in ("driver", "kernel_module") and common:
            fixes.append(f"install NVIDIA driver {common} (and Fabric Manager {common}) on {', '.join(sorted(outliers, key=nodes.index))}, then reboot")
        elif key == "fabric_manager" and common:
            fixes.append(f"install nvidia-fabricmanager {common} on {', '.join(sorted(outliers, key=nodes.index))}")
        else:
            fixes.append(f"make {label} {common or '?'} on {', '.join(sorted(outliers, key=nodes.index))}   # one container image on all nodes avoids this")
    text = render_table(nodes, table, odd)
    evidence = {"table": text, "versions": table, "odd_ones_out": {k: sorted(v) for k, v in odd.items()}}
    if fails:
        return Result.failed(join_problems(fails), evidence, "\n".join(dict.fromkeys(fixes)))
    if len(nodes) == 1:
        return Result.passed(f"one node ({nodes[0]}): nothing to compare; torch {table[nodes[0]].get('torch')}, "
                             f"driver {table[nodes[0]].get('driver') or 'none'}", evidence)
    return Result.passed(f"{len(nodes)} nodes agree: driver {table[nodes[0]].get('driver')}, torch {table[nodes[0]].get('torch')}, "
                         f"NCCL {table[nodes[0]].get('nccl')}", evidence)
