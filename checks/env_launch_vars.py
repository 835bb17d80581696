"""env.launch_vars: the variables the launch depends on are set and coherent."""
from __future__ import annotations

import ipaddress
import re
import shlex

from dsv3_preflight import Result, check

# Timeout-like variables users export for NCCL/torch, with their unit.
_TIMEOUT_UNITS = {"_MS": 0.001, "_SEC": 1.0, "_SECS": 1.0, "_S": 1.0, "_SECONDS": 1.0}
_BOOL_VARS = ("TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_IB_DISABLE", "NCCL_P2P_DISABLE",
              "NCCL_SHM_DISABLE", "TORCH_NCCL_ENABLE_MONITORING", "TORCH_NCCL_DUMP_ON_TIMEOUT")
MIN_COLLECTIVE_TIMEOUT_S = 60.0
MAX_COLLECTIVE_TIMEOUT_S = 24 * 3600.0


def _is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return addr == "localhost"


def _timeout_seconds(name: str, value: str) -> float | None:
    for suffix, scale in sorted(_TIMEOUT_UNITS.items(), key=lambda kv: -len(kv[0])):
        if name.endswith(suffix):
            if not re.fullmatch(r"\d+(\.\d+)?", value.strip()):
                raise ValueError(f"{name}={value!r} is not a non-negative number")
            return float(value) * scale
    return None


@check("env.launch_vars", needs=["env", "profile", "resolve_master"], tags=["env", "launch"], timeout=10)
def launch_vars(env, profile, resolve_master):
    """CUDA_DEVICE_ORDER, WORLD_SIZE, MASTER_ADDR/PORT, OMP_NUM_THREADS and NCCL timeouts are set and coherent."""
    fails: list[str] = []
    warns: list[str] = []
    exports: dict[str, str] = {}
    seen: dict[str, object] = {}

    if profile.expects_gpus:
        order = env.get("CUDA_DEVICE_ORDER")
        seen["CUDA_DEVICE_ORDER"] = order
        if order != "PCI_BUS_ID":
            fails.append(
                f"CUDA_DEVICE_ORDER is {'unset' if order is None else repr(order)}, not 'PCI_BUS_ID': CUDA's FASTEST_FIRST order can differ between nodes "
                "and put two ranks on one GPU"
            )
            exports["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"

    expected_world = profile.nnodes * profile.nproc_per_node
    seen["WORLD_SIZE"] = env.get("WORLD_SIZE")
    if profile.world_size is not None and profile.world_size != expected_world:
        fails.append(
            f"WORLD_SIZE={profile.world_size} ({profile.sources['world_size']}) but NNODES × NPROC_PER_NODE = "
            f"{profile.nnodes} × {profile.nproc_per_node} = {expected_world}"
        )
        exports["WORLD_SIZE"] = str(expected_world)

    addr = profile.master_addr
    seen["MASTER_ADDR"] = addr
    seen["MASTER_ADDR source"] = profile.sources["master_addr"]
    if not resolve_master.get("ok"):
        fails.append(f"MASTER_ADDR {addr!r} does not resolve: {resolve_master.get('error')}")
    else:
        seen["MASTER_ADDR resolves to"] = resolve_master.get("addresses")
    if profile.multi_node and (_is_loopback(addr) or any(_is_loopback(a) for a in resolve_master.get("addresses", []))):
        fails.append(
            f"MASTER_ADDR {addr!r} is a loopback address but the profile has {profile.nnodes} nodes: "
            "workers cannot reach it"
        )
        exports["MASTER_ADDR"] = "<head node's address on the training network>"

    port = profile.master_port
    seen["MASTER_PORT"] = port
    if port < 1024:
        warns.append(f"MASTER_PORT={port} is a privileged port; the rendezvous needs root to bind it")

    omp = env.get("OMP_NUM_THREADS")
    seen["OMP_NUM_THREADS"] = omp
    if omp is None:
        if profile.expects_gpus:
            warns.append("OMP_NUM_THREADS is not set: torchrun then forces 1 thread per rank")
            exports["OMP_NUM_THREADS"] = "8"
    elif not re.fullmatch(r"[1-9]\d*", omp.strip()):
        fails.append(f"OMP_NUM_THREADS={omp!r} is not a positive integer")
        exports["OMP_NUM_THREADS"] = "8"

    for name in sorted(env):
        if not (name.startswith(("NCCL_", "TORCH_NCCL_")) or name.startswith("TORCH_DIST")):
            continue
        value = env[name]
        if name in _BOOL_VARS:
            seen[name] = value
            if value.strip() not in ("0", "1"):
                fails.append(f"{name}={value!r} must be 0 or 1")
            continue
        if "TIMEOUT" not in name:
            continue
        seen[name] = value
        if name == "NCCL_IB_TIMEOUT":  # an exponent: 4.096 µs × 2^value, valid 1..31
            if not re.fullmatch(r"\d+", value.strip()) or not 1 <= int(value) <= 31:
                fails.append(f"NCCL_IB_TIMEOUT={value!r} must be an integer 1..31 (an exponent, not seconds)")
            continue
        try:
            seconds = _timeout_seconds(name, value)
        except ValueError as exc:
            fails.append(str(exc))
            continue
        if seconds is None:
            if not re.fullmatch(r"\d+(\.\d+)?", value.strip()):
                fails.append(f"{name}={value!r} is not a number")
            continue
        if seconds < MIN_COLLECTIVE_TIMEOUT_S:
            warns.append(f"{name}={value} is {seconds:g} s: shorter than a first collective on a busy cluster can take")
        elif seconds > MAX_COLLECTIVE_TIMEOUT_S:
            warns.append(f"{name}={value} is {seconds / 3600:g} h: a hang would go unnoticed for that long")

    evidence = {"variables": seen, "problems": fails, "warnings": warns}
    remediation = "\n".join(f"export {k}={shlex.quote(v) if not v.startswith('<') else v}" for k, v in exports.items()) or None
    if fails:
        return Result.failed(fails[0] + (f" (+{len(fails) - 1} more)" if len(fails) > 1 else ""), evidence, remediation)
    if warns:
        return Result.warned(warns[0] + (f" (+{len(warns) - 1} more)" if len(warns) > 1 else ""), evidence, remediation)
    return Result.passed(f"launch variables coherent (world size {expected_world}, rendezvous {addr}:{port})", evidence)
