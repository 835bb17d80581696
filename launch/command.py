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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsv3_preflight.net.ifselect import gloo_select, nccl_select, nccl_settings, recommended_nccl_value


def default_torchrun(python: str) -> list[str]:
    """torchrun as the module of the given interpreter: no PATH lookup, the same torch as the preflight's."""
    return [python, "-m", "torch.distributed.run"]


@dataclass(frozen=True)
class Derived:
    """One environment value the preflight derived, and why."""

    value: str
    reason: str
    #: for the socket interface variables: the interface meant, and the node's interfaces (nic_route's records)
    interface: str | None = None
    interfaces: tuple[Mapping[str, Any], ...] = ()
    #: the NCCL version the node's facts name (None: unknown), whose interface rules judge a user's value
    nccl_version: str | None = None


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


def derive_env(profile: Any, facts: Mapping[str, Any]) -> tuple[dict[str, Derived], list[str]]:
    """The environment the preflight derives for this node from its facts; plus notes on what it could not.

    From ``nic_route`` (the kernel's route to MASTER_ADDR): ``GLOO_SOCKET_IFNAME`` is that interface
    (Gloo takes exact names) and ``NCCL_SOCKET_IFNAME`` the shortest value selecting exactly it with
    NCCL's prefix rules (``eth0``, else ``=eth0``), as net.nic_route recommends.
    """
    derived: dict[str, Derived] = {}
    notes: list[str] = []
    route = facts.get("nic_route") if isinstance(facts.get("nic_route"), Mapping) else {}
    iface = route.get("ifname")
    if iface:
        interfaces = tuple(route.get("interfaces") or ({"name": iface, "index": 0, "ipv4": [route.get("src") or "0.0.0.0"]},))
        family = nccl_settings(route.get("env") or {}, route.get("nccl_conf") or [],   # nccl.conf's too
                               ["NCCL_SOCKET_FAMILY"])["NCCL_SOCKET_FAMILY"][0]
        reason = f"the route to MASTER_ADDR {route.get('target') or profile.master_addr} leaves through {iface} (nic_route)"
        derived["NCCL_SOCKET_IFNAME"] = Derived(recommended_nccl_value(iface, interfaces, family), reason, iface, interfaces,
                                                route.get("nccl_version"))
        derived["GLOO_SOCKET_IFNAME"] = Derived(iface, reason, iface, interfaces)
    else:
        notes.append("NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME not derived: the nic_route fact was not gathered "
                     "or names no interface")
    if profile.expects_gpus:
        derived["CUDA_DEVICE_ORDER"] = Derived("PCI_BUS_ID", "the same GPU order on every node (env.launch_vars)")
    return derived, notes


def _contradicts(name: str, yours: str, item: Derived) -> bool:
    """Whether the user's value makes the library use something else than the derived value would."""
    if name == "NCCL_SOCKET_IFNAME" and item.interface:
        return nccl_select(yours, item.interfaces, nccl_version=item.nccl_version)["bootstrap"] != item.interface
    if name == "GLOO_SOCKET_IFNAME" and item.interface:
        gloo = gloo_select(yours, item.interfaces)  # every name is used: eth0,eth0 (or eth0,) is eth0 alone
        return gloo["empty"] or set(gloo["selected"]) != {item.interface} or len(gloo["selected"]) != len(gloo["names"])
    return yours.strip() != item.value


#: torchrun's options after which the first training word is a module or an executable, not a script file
NOT_A_SCRIPT = frozenset({"-m", "--module", "--no-python", "--no_python"})
#: the modules a Python interpreter runs as torchrun (``python -m torch.distributed.run``)
TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")


def torchrun_options(torchrun: Sequence[str]) -> list[str]:
    """The words of a torchrun command that are torchrun's own: after ``-m torch.distributed.run`` (that ``-m`` is
    the interpreter's, naming torchrun itself), else after the first word (the ``torchrun`` executable)."""
    words = list(torchrun)
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words) and words[i + 1] in TORCHRUN_MODULES:
            return words[i + 2:]
        if word.startswith("-m") and word[2:] in TORCHRUN_MODULES:
            return words[i + 1:]
    return words[1:]


def training_script(training: Sequence[str], torchrun: Sequence[str] | None = None) -> str | None:
    """The script file torchrun will run, which must exist; None when it runs a module or an executable
    (``-m``/``--module``/``--no-python`` among torchrun's own options, or first after ``--``). The ``-m`` of
    ``python -m torch.distributed.run`` is the interpreter's: the training word is still a script."""
    if not training or training[0].startswith("-") or NOT_A_SCRIPT & set(torchrun_options(torchrun or ())):
        return None
    return training[0]


#: torchrun's own spellings of its log directory option, and the variable it reads the default from (``PET_*``)
LOG_DIR_FLAGS = ("--log-dir", "--log_dir")
LOG_DIR_VAR = "PET_LOG_DIR"


def sets_log_dir(torchrun: Sequence[str], environ: Mapping[str, str]) -> bool:
    """Whether the user already chose torchrun's log directory (a flag in the torchrun command, or PET_LOG_DIR)."""
    return bool(environ.get(LOG_DIR_VAR, "").strip()) or any(
        arg in LOG_DIR_FLAGS or arg.startswith(tuple(f"{flag}=" for flag in LOG_DIR_FLAGS)) for arg in torchrun)


def torchrun_argv(profile: Any, training: Sequence[str], *, torchrun: Sequence[str], node_rank: int | None = None,
                  log_dir: str | None = None) -> list[str]:
    """torchrun's argv: the users' flags, from the profile, then the training script and its arguments.

    ``log_dir``: torchrun's ``--log-dir`` (its error files, ``<dir>/<run id>/attempt_<n>/<local rank>/error.json``,
    beside the launch log instead of a ``$TMPDIR/torchelastic_*`` directory torchrun never removes)."""
    rank = profile.node_rank if node_rank is None else node_rank
    return [
        *torchrun,
        f"--nnodes={profile.nnodes}",
        f"--nproc_per_node={profile.nproc_per_node}",
        f"--node_rank={rank}",
        f"--master_addr={profile.master_addr}",
        f"--master_port={profile.master_port}",
        "--max_restarts=0",
        *([f"--log-dir={log_dir}"] if log_dir else []),
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
    log_dir: str | None = None,
) -> LaunchCommand:
    """The launch: argv from the profile, env = derived values merged under the user's explicit ones.

    ``log_dir`` is torchrun's ``--log-dir`` unless the user chose one (``sets_log_dir``)."""
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
            if _contradicts(name, yours, item):
                warnings.append(
                    f"{name}={yours} is yours and is kept, but the preflight derived {name}={item.value}: {item.reason}"
                )
            continue
        env[name] = item.value
        diff.append((name, item.value))
    if log_dir and sets_log_dir(torchrun, environ):
        log_dir = None
    argv = torchrun_argv(profile, training, torchrun=torchrun, node_rank=node_rank, log_dir=log_dir)
    return LaunchCommand(tuple(argv), env, tuple(diff), tuple(kept), tuple(warnings), tuple(notes))


def shell_text(command: LaunchCommand) -> str:
    """The launch as shell text to paste on a node: the exports it adds, then the command, all quoted."""
    lines = [f"export {name}={shlex.quote(value)}" for name, value in command.diff]
    lines += [f"# {name}={shlex.quote(yours)} kept from your environment (derived: {shlex.quote(derived)})"
              for name, yours, derived in command.kept]
    lines.append(shlex.join(command.argv))
    return "\n".join(lines) + "\n"
