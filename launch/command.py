"""The torchrun command of a launch, built by pure functions: profile + environment in, argv + env out.

Nothing here touches the system: the facts come from the result document of the preflight, the
environment is passed in, and the result is data that the gate executes and ``--dry-run`` prints.

Precedence of the environment torchrun inherits (highest first):

1. the user's own explicit values (variables set and non-empty in the launching environment);
2. values derived from this node's facts by the preflight (``NCCL_SOCKET_IFNAME`` /
   ``GLOO_SOCKET_IFNAME`` from the route to MASTER_ADDR, ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` when the
   profile expects GPUs);
3. everything else of the launching environment, unchanged.

A user's value that differs from the derived one is kept and produces a warning. torchrun's own
flags come from the profile (CLI flags > NNODES/NODE_RANK/MASTER_* > --config > built-in profile).
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

#: The variables NCCL and Gloo read to choose the interface their sockets bind.
IFNAME_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


def default_torchrun(python: str) -> list[str]:
    """torchrun as the module of the given interpreter: no PATH lookup, the same torch as the preflight's."""
    return [python, "-m", "torch.distributed.run"]


@dataclass(frozen=True)
class Derived:
    """One environment value the preflight derived, and why."""

    value: str
    reason: str


@dataclass(frozen=True)
class LaunchCommand:
    """What to execute: argv, the complete environment, and what the launcher changed in it."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    #: (name, value) set by the launcher, i.e. different from the environment it was given.
    diff: tuple[tuple[str, str], ...]
    #: (name, your value, derived value) where the user's explicit value won over a derived one.
    kept: tuple[tuple[str, str, str], ...] = ()
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())


def route_interface(nic_route: Any) -> str | None:
    """The interface name in a ``nic_route`` fact (None when the fact has none)."""
    if not isinstance(nic_route, Mapping):
        return None
    for key in ("interface", "ifname", "iface", "dev"):
        value = nic_route.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def derive_env(profile: Any, facts: Mapping[str, Any]) -> tuple[dict[str, Derived], list[str]]:
    """The environment the preflight derives for this node from its facts; plus notes on what it could not."""
    derived: dict[str, Derived] = {}
    notes: list[str] = []
    iface = route_interface(facts.get("nic_route"))
    if iface:
        target = (facts.get("nic_route") or {}).get("target") or profile.master_addr
        for name in IFNAME_VARS:
            derived[name] = Derived(iface, f"route to MASTER_ADDR {target} leaves through {iface} (nic_route)")
    else:
        notes.append("NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME not derived: the nic_route fact was not gathered")
    if profile.expects_gpus:
        derived["CUDA_DEVICE_ORDER"] = Derived("PCI_BUS_ID", "the same GPU order on every node (env.launch_vars)")
    return derived, notes


def ifname_selects(spec: str, iface: str) -> bool:
    """Whether an NCCL/Gloo interface spec (``eth0``, ``eth``, ``=eth0``, ``^docker,lo``) selects ``iface``."""
    spec = spec.strip()
    if spec.startswith("^"):
        items = [s.strip() for s in spec[1:].split(",") if s.strip()]
        exact = items and items[0].startswith("=")
        items = [s.lstrip("=") for s in items]
        return not any(iface == s if exact else iface.startswith(s) for s in items)
    exact = spec.startswith("=")
    items = [s.strip() for s in spec.lstrip("=").split(",") if s.strip()]
    return any(iface == s if exact else iface.startswith(s) for s in items)


def _contradicts(name: str, yours: str, derived: str) -> bool:
    if name in IFNAME_VARS:
        return not ifname_selects(yours, derived)
    return yours.strip() != derived


def torchrun_argv(profile: Any, training: Sequence[str], *, torchrun: Sequence[str], node_rank: int | None = None) -> list[str]:
    """torchrun's argv: the users' flags, from the profile, then the training script and its arguments."""
    rank = profile.node_rank if node_rank is None else node_rank
    return [
        *torchrun,
        f"--nnodes={profile.nnodes}",
        f"--nproc_per_node={profile.nproc_per_node}",
        f"--node_rank={rank}",
        f"--master_addr={profile.master_addr}",
        f"--master_port={profile.master_port}",
        "--max_restarts=0",
        *training,
    ]


def build_command(
    profile: Any,
    training: Sequence[str],
    *,
    environ: Mapping[str, str],
    derived: Mapping[str, Derived],
    torchrun: Sequence[str],
    node_rank: int | None = None,
    notes: Sequence[str] = (),
) -> LaunchCommand:
    """The launch: argv from the profile, env = derived values merged under the user's explicit ones."""
    if not training:
        raise ValueError("no training script: name it after `--`")
    env = dict(environ)
    diff: list[tuple[str, str]] = []
    kept: list[tuple[str, str, str]] = []
    warnings: list[str] = []
    for name, item in derived.items():
        yours = environ.get(name, "")
        if yours.strip():
            if yours != item.value:
                kept.append((name, yours, item.value))
            if _contradicts(name, yours, item.value):
                warnings.append(
                    f"{name}={yours} is yours and is kept, but the preflight derived {name}={item.value}: {item.reason}"
                )
            continue
        env[name] = item.value
        diff.append((name, item.value))
    argv = torchrun_argv(profile, training, torchrun=torchrun, node_rank=node_rank)
    return LaunchCommand(tuple(argv), env, tuple(diff), tuple(kept), tuple(warnings), tuple(notes))


def shell_text(command: LaunchCommand) -> str:
    """The launch as shell text to paste on a node: the exports it adds, then the command, all quoted."""
    lines = [f"export {name}={shlex.quote(value)}" for name, value in command.diff]
    lines += [f"# {name}={shlex.quote(yours)} kept from your environment (derived: {shlex.quote(derived)})"
              for name, yours, derived in command.kept]
    lines.append(shlex.join(command.argv))
    return "\n".join(lines) + "\n"
