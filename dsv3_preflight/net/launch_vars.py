"""The rules of env.launch_vars (pure: facts in, findings out): the variables the launch depends on are set and coherent.

Small pure rules over the environment, the profile and what MASTER_ADDR resolves to, each returning
findings with their fix; MASTER_ADDR's problems carry the cause keys net.nic_route and net.port_reach
share, with the same fix."""
from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import Any

from dsv3_preflight.net import causes
from dsv3_preflight.net.facts import NicRouteFact, ResolveMasterFact
from dsv3_preflight.net.master import (
    is_loopback,
    loopback_fix,
    resolves_to_loopback,
    training_addresses,
    unresolvable_fix,
)
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Actor, Finding, failure, warning

TIMEOUT_UNITS = {"_MS": 0.001, "_SEC": 1.0, "_SECS": 1.0, "_S": 1.0, "_SECONDS": 1.0}


BOOL_VARS = ("TORCH_NCCL_BLOCKING_WAIT", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_IB_DISABLE", "NCCL_P2P_DISABLE",
             "NCCL_SHM_DISABLE", "TORCH_NCCL_ENABLE_MONITORING", "TORCH_NCCL_DUMP_ON_TIMEOUT")


MIN_COLLECTIVE_TIMEOUT_S = 60.0


MAX_COLLECTIVE_TIMEOUT_S = 24 * 3600.0


SUGGESTED_TIMEOUT_S = 1800.0  # 30 min: DeepSpeed's default process-group timeout


DEFAULT_OMP_THREADS = "8"


Env = Mapping[str, str]


def _export(name: str, value: str, comment: str = "") -> str:
    return f"export {name}={shlex.quote(value)}" + (f"   # {comment}" if comment else "")


def timeout_seconds(name: str, value: str) -> float | None:
    """The seconds a timeout variable means by its unit suffix (None: no unit suffix); ValueError if not a number."""
    for suffix, scale in sorted(TIMEOUT_UNITS.items(), key=lambda kv: -len(kv[0])):
        if name.endswith(suffix):
            if not re.fullmatch(r"\d+(\.\d+)?", value.strip()):
                raise ValueError(f"{name}={value!r} is not a non-negative number")
            return float(value) * scale
    return None


def _suggested(name: str) -> str:
    for suffix, scale in sorted(TIMEOUT_UNITS.items(), key=lambda kv: -len(kv[0])):
        if name.endswith(suffix):
            return f"{SUGGESTED_TIMEOUT_S / scale:.0f}"
    return f"{SUGGESTED_TIMEOUT_S:.0f}"


def is_head(profile: Profile) -> bool:
    """node_rank 0 set explicitly: this node is the head."""
    return bool(profile.node_rank == 0) and profile.sources.get("node_rank", "default") != "default"


def cuda_device_order(env: Env, profile: Profile) -> Finding | None:
    order = env.get("CUDA_DEVICE_ORDER")
    if not profile.expects_gpus or order == "PCI_BUS_ID":
        return None
    return failure(f"CUDA_DEVICE_ORDER is {'unset' if order is None else repr(order)}, not 'PCI_BUS_ID': CUDA's "
                   "FASTEST_FIRST order can differ between nodes and put two ranks on one GPU",
                   "export CUDA_DEVICE_ORDER=PCI_BUS_ID", actor=Actor.JOB, cause="env.cuda_device_order")


def world_size(profile: Profile) -> Finding | None:
    expected = profile.nnodes * profile.nproc_per_node
    if profile.world_size is None or profile.world_size == expected:
        return None
    return failure(f"WORLD_SIZE={profile.world_size} ({profile.sources['world_size']}) but NNODES × NPROC_PER_NODE = "
                   f"{profile.nnodes} × {profile.nproc_per_node} = {expected}",
                   f"export WORLD_SIZE={expected}", actor=Actor.JOB, cause="env.world_size")


def master_resolves(profile: Profile, resolve_master: ResolveMasterFact) -> Finding | None:
    if resolve_master.get("ok"):
        return None
    name = profile.master_addr
    return failure(f"MASTER_ADDR {name!r} does not resolve: {resolve_master.get('error')}", unresolvable_fix(name),
                   actor=Actor.JOB, cause=causes.MASTER_UNRESOLVABLE)


def master_not_loopback(profile: Profile, resolve_master: ResolveMasterFact, nic_route: NicRouteFact | None = None) -> Finding | None:
    addr = profile.master_addr
    addresses = list(resolve_master.get("addresses") or [])
    if not profile.multi_node or not resolves_to_loopback(addr, addresses):
        return None
    fix = loopback_fix(addr, addresses, resolve_master.get("hosts_entries") or [],
                       training_addresses((nic_route or {}).get("interfaces")), is_head(profile))
    what = ("is a loopback address" if is_loopback(addr)
            else f"resolves to loopback {', '.join(a for a in addresses if is_loopback(a))} on this node")
    return failure(f"MASTER_ADDR {addr!r} {what} but the profile has {profile.nnodes} nodes: workers cannot reach it", fix,
                   actor=Actor.JOB, cause=causes.MASTER_LOOPBACK)


def master_port_unprivileged(profile: Profile) -> Finding | None:
    if profile.master_port >= 1024:
        return None
    return warning(f"MASTER_PORT={profile.master_port} is a privileged port; the rendezvous needs root to bind it",
                   "export MASTER_PORT=39500", actor=Actor.JOB, cause=causes.PORT_PRIVILEGED)


def omp_threads(env: Env, profile: Profile) -> Finding | None:
    omp = env.get("OMP_NUM_THREADS")
    if omp is None:
        if not profile.expects_gpus:
            return None
        return warning("OMP_NUM_THREADS is not set: torchrun then forces 1 thread per rank",
                       _export("OMP_NUM_THREADS", DEFAULT_OMP_THREADS), actor=Actor.JOB)
    if re.fullmatch(r"[1-9]\d*", omp.strip()):
        return None
    return failure(f"OMP_NUM_THREADS={omp!r} is not a positive integer", _export("OMP_NUM_THREADS", DEFAULT_OMP_THREADS),
                   actor=Actor.JOB)


def nccl_variables(env: Env) -> list[Finding]:
    """The NCCL/torch switches are 0 or 1, NCCL_IB_TIMEOUT is an exponent 1..31, and timeouts are sane numbers."""
    found = []
    for name in sorted(n for n in env if n.startswith(("NCCL_", "TORCH_NCCL_", "TORCH_DIST"))):
        if name in BOOL_VARS:
            found.append(_bool_var(name, env[name]))
        elif name == "NCCL_IB_TIMEOUT":
            found.append(_ib_timeout(env[name]))
        elif "TIMEOUT" in name:
            found.append(_timeout_var(name, env[name]))
    return [f for f in found if f is not None]


def nccl_port_range_ignored(env: Env, nic_route: NicRouteFact | None) -> Finding | None:
    """NCCL_PORT_RANGE is a myth: NCCL has no such variable (NVIDIA/nccl#388) and ignores it. NCCL and Gloo connect
    between nodes on the kernel's ephemeral ports, so a firewall opened for that "range" alone blocks them."""
    value = env.get("NCCL_PORT_RANGE")
    if value is None:
        return None
    span = (nic_route or {}).get("ephemeral_range")
    where = f"{span[0]}-{span[1]} on this node" if span else "see /proc/sys/net/ipv4/ip_local_port_range"
    return warning(f"NCCL_PORT_RANGE={value!r} is set, but NCCL has no such variable and ignores it (NVIDIA/nccl#388): "
                   f"NCCL and Gloo connect between nodes on the kernel's ephemeral ports ({where}), so a firewall "
                   "that opens only NCCL_PORT_RANGE blocks them; the ephemeral range must be open between the nodes "
                   "on the training interface",
                   "unset NCCL_PORT_RANGE   # NCCL ignores it: drop it from the job's environment too\n"
                   "cat /proc/sys/net/ipv4/ip_local_port_range   # the ports NCCL and Gloo connect on: open them "
                   "between the nodes on the training interface, beside MASTER_PORT",
                   actor=Actor.JOB)


def _bool_var(name: str, value: str) -> Finding | None:
    if value.strip() in ("0", "1"):
        return None
    return failure(f"{name}={value!r} must be 0 or 1", _export(name, "1", "or 0 to turn it off"), actor=Actor.JOB)


def _ib_timeout(value: str) -> Finding | None:  # an exponent: 4.096 µs × 2^value, valid 1..31
    if re.fullmatch(r"\d+", value.strip()) and 1 <= int(value) <= 31:
        return None
    return failure(f"NCCL_IB_TIMEOUT={value!r} must be an integer 1..31 (an exponent, not seconds)",
                   _export("NCCL_IB_TIMEOUT", "22", "an exponent: 4.096 µs × 2^22, about 17 s"),
                   actor=Actor.JOB)


def _timeout_var(name: str, value: str) -> Finding | None:
    fix = _export(name, _suggested(name), f"{SUGGESTED_TIMEOUT_S / 60:.0f} min")
    try:
        seconds = timeout_seconds(name, value)
    except ValueError as exc:
        return failure(str(exc), fix, actor=Actor.JOB)
    if seconds is None:
        return None if re.fullmatch(r"\d+(\.\d+)?", value.strip()) else failure(f"{name}={value!r} is not a number", fix,
                                                                              actor=Actor.JOB)
    if seconds < MIN_COLLECTIVE_TIMEOUT_S:
        return warning(f"{name}={value} is {seconds:g} s: shorter than a first collective on a busy cluster can take",
                       fix, actor=Actor.JOB)
    if seconds > MAX_COLLECTIVE_TIMEOUT_S:
        return warning(f"{name}={value} is {seconds / 3600:g} h: a hang would go unnoticed for that long", fix,
                       actor=Actor.JOB)
    return None


def variables_seen(env: Env, profile: Profile, resolve_master: ResolveMasterFact) -> dict[str, Any]:
    """The variables this check looked at, as evidence."""
    seen: dict[str, Any] = {}
    if profile.expects_gpus:
        seen["CUDA_DEVICE_ORDER"] = env.get("CUDA_DEVICE_ORDER")
    seen.update({"WORLD_SIZE": env.get("WORLD_SIZE"), "MASTER_ADDR": profile.master_addr,
                 "MASTER_ADDR source": profile.sources["master_addr"]})
    if resolve_master.get("ok"):
        seen["MASTER_ADDR resolves to"] = resolve_master.get("addresses")
    seen.update({"MASTER_PORT": profile.master_port, "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS")})
    for name in sorted(env):
        if (name in BOOL_VARS or name == "NCCL_PORT_RANGE"
                or (name.startswith(("NCCL_", "TORCH_NCCL_", "TORCH_DIST")) and "TIMEOUT" in name)):
            seen[name] = env[name]
    return seen
