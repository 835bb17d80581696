"""Rank → GPU mapping: which physical GPU (PCI bus id) every rank of a torchrun job will drive.

Pure functions, no I/O: the GPU checks call them with the *expected* inputs (profile, environment,
NVML's GPU list); the collective probe can call :func:`find_duplicates` with the *observed* mapping.

API
---
``parse_visible_devices(value) -> list[str] | None``
    CUDA_VISIBLE_DEVICES split into entries; ``None`` when unset (every GPU visible).
``resolve_visible(cuda_visible_devices, device_order, gpus) -> Resolution``
    The GPUs a process sees, in CUDA index order, as CUDA would resolve them: integer entries index
    the enumeration of ``device_order`` (``PCI_BUS_ID`` or the default ``FASTEST_FIRST``), ``GPU-…``
    / ``MIG-…`` entries match UUIDs by prefix, and (like CUDA) the list stops at the first entry that
    is invalid or out of range. ``problems`` says what is wrong (duplicates, out of range, unknown
    UUID, empty list); ``order_certain`` is False when FASTEST_FIRST may differ from PCI order
    (GPUs of different models on the node).
``plan(nnodes, nproc_per_node, node_rank, cuda_visible_devices, device_order, gpus, host=None)``
    ``-> list[dict]``: one row per local rank of node ``node_rank``:
    ``{rank, node, host, local_rank, cuda_index, nvml_index, pci_bus_id, uuid, name}``
    (``cuda_index``/``pci_bus_id`` are None for a local rank with no visible GPU).
    ``gpus`` are NVML's GPUs (dicts with ``index``, ``pci_bus_id``, optional ``uuid``, ``name``).
``find_duplicates(rows) -> list[dict]``
    Every pair of ranks on one ``(host, pci_bus_id)``: ``{host, pci_bus_id, cuda_device, ranks,
    message}`` where ``message`` is NCCL's own wording, e.g.
    ``Duplicate GPU detected : rank 27 and rank 19 both on CUDA device 53000``.
``nccl_bus_id(pci_bus_id) -> str``
    NCCL's ``%lx`` of the bus id (``00000000:53:00.0`` → ``53000``), as NCCL's busIdToInt64 does.
``node_rank_problems``, ``shared_machine_problems``, ``world_size_problems`` (and ``cluster_problems``, all three)
    Node-level coherence: duplicate or missing node ranks, two nodes on one host, world size.
``mapping_table(rows) -> str``
    ``node 0 (host): ranks 0–7 → GPUs 0–7 (07:00.0, 0f:00.0, …)`` lines for evidence.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

PCI_BUS_ID = "PCI_BUS_ID"
FASTEST_FIRST = "FASTEST_FIRST"


def normalize_bus_id(pci_bus_id: str) -> str:
    """``00000000:53:00.0`` / ``0000:53:00.0`` → ``0000:53:00.0`` (lower case, 4-digit domain)."""
    text = pci_bus_id.strip().lower()
    m = re.fullmatch(r"([0-9a-f]+):([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])", text)
    if not m:
        return text
    domain, bus, dev, fn = m.groups()
    return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(dev, 16):02x}.{fn}"


def nccl_bus_id(pci_bus_id: str) -> str:
    """The bus id as NCCL prints it in "CUDA device %lx": hex digits of the id, leading zeros dropped."""
    digits = ""
    for ch in pci_bus_id:
        if ch in ".:":
            continue
        if ch in "0123456789abcdefABCDEF":
            digits += ch
        else:
            break
    return format(int(digits or "0", 16), "x")


def nccl_duplicate_message(rank: int, other: int, pci_bus_id: str) -> str:
    return f"Duplicate GPU detected : rank {rank} and rank {other} both on CUDA device {nccl_bus_id(pci_bus_id)}"


def parse_visible_devices(value: str | None) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as a list of entries (``None``: unset, every GPU is visible)."""
    if value is None:
        return None
    return [part.strip() for part in value.split(",")] if value.strip() else []


def written_problems(cuda_visible_devices: str | None, nproc: int) -> list[str]:
    """What CUDA_VISIBLE_DEVICES gets wrong by its text alone, known without a driver or a GPU: an entry listed
    twice (the same index or the same UUID: two ranks on one GPU), an entry that is neither an index nor a UUID
    (CUDA stops reading there), fewer entries than local ranks. What needs the GPUs themselves (an index out of
    range, a UUID of no GPU here, an index and a UUID naming one GPU) is :func:`resolve_visible`'s."""
    entries = parse_visible_devices(cuda_visible_devices)
    if entries is None:
        return []
    problems: list[str] = []
    seen: dict[str, int] = {}
    read = 0
    for pos, entry in enumerate(entries):
        if re.fullmatch(r"\d+", entry):
            key = str(int(entry))
        elif entry.upper().startswith(("GPU-", "MIG-")):
            key = entry.lower()
        else:
            problems.append(f"CUDA_VISIBLE_DEVICES entry {entry!r} (position {pos}) is "
                            + ("a negative index" if re.fullmatch(r"[+-]\d+", entry) else "neither an index nor a GPU UUID")
                            + (f": CUDA stops reading there and ignores the {len(entries) - pos - 1} entries after it"
                               if pos < len(entries) - 1 else ""))
            break
        read += 1
        if key in seen:
            problems.append(f"CUDA_VISIBLE_DEVICES={cuda_visible_devices} lists {entry} twice (positions {seen[key]} "
                            f"and {pos}): two local ranks would share one GPU (NCCL aborts: Duplicate GPU detected)")
        seen.setdefault(key, pos)
    if not entries:
        problems.append("CUDA_VISIBLE_DEVICES is empty: no GPU is visible")
    elif nproc > read:
        problems.append(f"CUDA_VISIBLE_DEVICES={cuda_visible_devices} makes {read} GPUs visible for {nproc} local ranks")
    return problems


@dataclass
class Resolution:
    devices: list[dict[str, Any]]
    problems: list[str] = field(default_factory=list)
    order_certain: bool = True
    enumeration: list[dict[str, Any]] = field(default_factory=list)


def enumeration_order(device_order: str | None, gpus: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], bool]:
    """The GPUs in CUDA's enumeration order, and whether that order is certain.

    PCI_BUS_ID: sorted by bus id (NVML's order). FASTEST_FIRST (the default): CUDA puts the fastest
    GPU first and breaks ties by PCI order, so on a node of identical GPUs it equals PCI order; with
    different models the order depends on CUDA's speed heuristic, which we approximate by memory size.
    """
    by_pci = sorted((dict(g) for g in gpus), key=lambda g: normalize_bus_id(str(g.get("pci_bus_id", ""))))
    order = (device_order or FASTEST_FIRST).strip().upper()
    if order == PCI_BUS_ID:
        return by_pci, True
    models = {g.get("name") for g in by_pci}
    if len(models) <= 1:
        return by_pci, True
    approx = sorted(by_pci, key=lambda g: -int(g.get("memory_total_bytes") or 0))
    return approx, False


def resolve_visible(cuda_visible_devices: str | None, device_order: str | None,
                    gpus: Sequence[Mapping[str, Any]]) -> Resolution:
    """The GPUs one process sees, in CUDA index order (see the module docstring)."""
    enumerated, certain = enumeration_order(device_order, gpus)
    entries = parse_visible_devices(cuda_visible_devices)
    if entries is None:
        return Resolution(list(enumerated), [], certain, enumerated)
    devices: list[dict[str, Any]] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    stopped = False
    if not entries:
        problems.append("CUDA_VISIBLE_DEVICES is empty: no GPU is visible")
    for pos, entry in enumerate(entries):
        gpu = None
        if re.fullmatch(r"[+-]?\d+", entry):
            idx = int(entry)
            if 0 <= idx < len(enumerated):
                gpu = enumerated[idx]
            else:
                problems.append(
                    f"CUDA_VISIBLE_DEVICES entry {entry!r} (position {pos}) is out of range: this node has "
                    f"{len(enumerated)} GPUs (0–{len(enumerated) - 1})" if enumerated else
                    f"CUDA_VISIBLE_DEVICES entry {entry!r} (position {pos}): this node has no GPU")
        elif entry.upper().startswith(("GPU-", "MIG-")):
            matches = [g for g in enumerated if str(g.get("uuid", "")).lower().startswith(entry.lower())]
            if len(matches) == 1:
                gpu = matches[0]
            elif not matches:
                problems.append(f"CUDA_VISIBLE_DEVICES entry {entry!r} (position {pos}) matches no GPU UUID on this node")
            else:
                problems.append(f"CUDA_VISIBLE_DEVICES entry {entry!r} (position {pos}) matches {len(matches)} GPUs: the UUID prefix is ambiguous")
        else:
            problems.append(f"CUDA_VISIBLE_DEVICES entry {entry!r} (position {pos}) is neither an index nor a GPU UUID")
        if gpu is None:
            if not stopped:
                later = len(entries) - pos - 1
                if later:
                    problems.append(f"CUDA stops reading CUDA_VISIBLE_DEVICES at the first invalid entry: the {later} entries after {entry!r} are ignored")
            stopped = True
            break
        key = normalize_bus_id(str(gpu.get("pci_bus_id", "")))
        if key in seen:
            problems.append(
                f"CUDA_VISIBLE_DEVICES lists GPU {gpu.get('index')} ({key}) twice (positions {seen[key]} and {pos})")
        seen.setdefault(key, pos)
        devices.append(gpu)
    return Resolution(devices, problems, certain, enumerated)


def plan(nnodes: int, nproc_per_node: int, node_rank: int, cuda_visible_devices: str | None,
         device_order: str | None, gpus: Sequence[Mapping[str, Any]], host: str | None = None) -> list[dict[str, Any]]:
    """Rows ``{rank, node, host, local_rank, cuda_index, nvml_index, pci_bus_id, uuid, name}`` of one node.

    torchrun gives global rank ``node_rank * nproc_per_node + local_rank`` and the training script
    selects ``cuda:<local_rank>``; the CUDA index resolves through CUDA_VISIBLE_DEVICES and the order.
    """
    if not 0 <= node_rank < max(nnodes, 1):
        raise ValueError(f"node_rank {node_rank} is outside 0..{nnodes - 1}")
    resolution = resolve_visible(cuda_visible_devices, device_order, gpus)
    rows = []
    for local in range(nproc_per_node):
        gpu = resolution.devices[local] if local < len(resolution.devices) else None
        rows.append({
            "rank": node_rank * nproc_per_node + local,
            "node": node_rank,
            "host": host if host is not None else f"node{node_rank}",
            "local_rank": local,
            "cuda_index": local if gpu is not None else None,
            "nvml_index": gpu.get("index") if gpu is not None else None,
            "pci_bus_id": normalize_bus_id(str(gpu["pci_bus_id"])) if gpu is not None else None,
            "uuid": gpu.get("uuid") if gpu is not None else None,
            "name": gpu.get("name") if gpu is not None else None,
        })
    return rows


def find_duplicates(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every pair of ranks that share one GPU (same host and PCI bus id), with NCCL's message.

    The message names the higher rank first, as the field reports showed ("rank 27 and rank 19").
    """
    groups: dict[tuple[str, str], list[int]] = {}
    for row in rows:
        bus = row.get("pci_bus_id")
        if bus is None:
            continue
        groups.setdefault((str(row.get("host")), normalize_bus_id(str(bus))), []).append(int(row["rank"]))
    found = []
    for (host, bus), ranks in groups.items():
        ranks = sorted(set(ranks))
        for i, low in enumerate(ranks):
            for high in ranks[i + 1:]:
                found.append({
                    "host": host,
                    "pci_bus_id": bus,
                    "cuda_device": nccl_bus_id(bus),
                    "ranks": [high, low],
                    "message": nccl_duplicate_message(high, low, bus),
                })
    found.sort(key=lambda d: (d["ranks"][1], d["ranks"][0]))
    return found


def node_rank_problems(node_ranks: Mapping[str, int], nnodes: int) -> list[str]:
    """Node ranks used twice, outside 0..nnodes-1, or missing."""
    problems = []
    by_rank: dict[int, list[str]] = {}
    for node, rank in node_ranks.items():
        by_rank.setdefault(int(rank), []).append(node)
    for rank, nodes in sorted(by_rank.items()):
        if len(nodes) > 1:
            problems.append(f"node rank {rank} is used by {len(nodes)} nodes: {', '.join(nodes)}")
        if not 0 <= rank < nnodes:
            problems.append(f"node rank {rank} ({', '.join(nodes)}) is outside 0..{nnodes - 1} (nnodes={nnodes})")
    missing = sorted(set(range(nnodes)) - set(by_rank))
    if missing:
        problems.append(f"no node has node rank {', '.join(map(str, missing))} (nnodes={nnodes})")
    return problems


def shared_machine_problems(hosts: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Two "nodes" that are one machine (same host name, machine id or boot id): their ranks collide on its GPUs."""
    shared: dict[tuple[str, ...], list[str]] = {}
    for key, label in (("hostname", "host name"), ("machine_id", "machine id"), ("boot_id", "boot id")):
        seen: dict[str, list[str]] = {}
        for node, host in hosts.items():
            value = (host or {}).get(key)
            if value:
                seen.setdefault(str(value), []).append(node)
        for value, nodes in seen.items():
            if len(nodes) > 1:
                shared.setdefault(tuple(nodes), []).append(f"{label} {value}")
    return [f"nodes {', '.join(nodes)} share the {' and '.join(what)}: they are one machine, "
            "and their ranks will collide on its GPUs" for nodes, what in shared.items()]


def world_size_problems(node_ranks: Mapping[str, int], nproc_per_node: Mapping[str, int] | int,
                        world_size: int | None) -> list[str]:
    """WORLD_SIZE that is not the sum of the nodes' local ranks."""
    per = {n: nproc_per_node for n in node_ranks} if isinstance(nproc_per_node, int) else dict(nproc_per_node)
    total = sum(per.get(n, 0) for n in node_ranks)
    if world_size is None or total == world_size:
        return []
    return [f"world size does not add up: the nodes launch {total} ranks "
            f"({' + '.join(str(per.get(n, 0)) for n in node_ranks)}), WORLD_SIZE is {world_size}"]


def cluster_problems(node_ranks: Mapping[str, int], hosts: Mapping[str, Mapping[str, Any]], nnodes: int,
                     nproc_per_node: Mapping[str, int] | int, world_size: int | None = None) -> list[str]:
    """Node-level problems of a cluster: duplicate/missing node ranks, one host twice, world size."""
    return (node_rank_problems(node_ranks, nnodes) + shared_machine_problems(hosts)
            + world_size_problems(node_ranks, nproc_per_node, world_size))


def _span(values: Sequence[int]) -> str:
    if not values:
        return "none"
    if list(values) == list(range(values[0], values[0] + len(values))) and len(values) > 1:
        return f"{values[0]}–{values[-1]}"
    return ",".join(map(str, values))


def mapping_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """One line per node: ``node 0 (host): ranks 0–7 → GPUs 0–7 (07:00.0, …)``."""
    lines = []
    nodes: dict[Any, list[Mapping[str, Any]]] = {}
    for row in rows:
        nodes.setdefault((row["node"], row.get("host")), []).append(row)
    for (node, host), group in sorted(nodes.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        group = sorted(group, key=lambda r: r["rank"])
        mapped = [r for r in group if r.get("cuda_index") is not None]
        buses = ", ".join(str(r["pci_bus_id"])[5:] for r in mapped)
        line = f"node {node} ({host}): ranks {_span([r['rank'] for r in group])} → GPUs {_span([r['cuda_index'] for r in mapped])}"
        if buses:
            line += f" ({buses})"
        unmapped = [r["rank"] for r in group if r.get("cuda_index") is None]
        if unmapped:
            line += f"; ranks {_span(unmapped)} have no visible GPU"
        lines.append(line)
    return "\n".join(lines)
