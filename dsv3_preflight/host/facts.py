"""The shapes of the host domain's facts, as its probes return them (``probes/identity.py``: ``host``, ``env``;
``probes/resources.py``: ``shm``, ``port_holders``, ``gpu_holders``; ``probes/storage.py``: ``output_dir``).

A fact is plain JSON data: these are :class:`~typing.TypedDict` shapes, so a rule's annotations say which keys it
reads. ``total=False`` where a key may be absent (a path that does not exist, a directory not configured).
"""
from __future__ import annotations

from typing import Any, TypedDict


class HostFact(TypedDict, total=False):
    """The fact ``host``: who this node is (``addresses``: {interface: its IPv4 and IPv6 addresses})."""

    hostname: str
    node_name: str
    machine_id: str | None
    boot_id: str | None
    kernel: str
    python: str
    cpu_count: int | None
    memory_bytes: int
    addresses: dict[str, list[str]]


#: The fact ``env``: the process environment as the launch will inherit it.
EnvFact = dict[str, str]


class ShmFact(TypedDict, total=False):
    """The fact ``shm``: size and free space of /dev/shm (NCCL's shared-memory segments)."""

    path: str
    exists: bool
    total_bytes: int
    free_bytes: int


class ProcessInfo(TypedDict):
    """A process as a fix names it (fields it cannot read are None)."""

    pid: int
    user: str | None
    cmdline: str | None
    name: str | None
    started: str | None


class PortHolder(TypedDict):
    port: int
    address: str
    status: str
    type: str
    process: ProcessInfo | None


class PortHoldersFact(TypedDict, total=False):
    """The fact ``port_holders``: the sockets of other processes on MASTER_PORT (this run's own left out)."""

    port: int
    holders: list[PortHolder]


class GpuHolder(ProcessInfo):
    devices: list[str]


class GpuHoldersFact(TypedDict):
    """The fact ``gpu_holders``: the processes of other runs holding /dev/nvidia* open."""

    device_files: list[str]
    holders: list[GpuHolder]


class Mount(TypedDict):
    device: str
    mountpoint: str
    fstype: str


class OutputDirFact(TypedDict, total=False):
    """The fact ``output_dir``: the training run's output (or checkpoint) directory: where it is mounted, its
    room, and whether it (or, when it does not exist yet, its nearest existing parent) is writable."""

    configured: bool
    path: str
    setting: str
    exists: bool
    is_dir: bool
    mount: Mount | None
    network_fs: bool
    free_bytes: int
    total_bytes: int
    statvfs_error: str
    parent: str
    parent_is_dir: bool
    parent_writable: bool
    writable: bool
    write_error: str


class InspectedCommand(TypedDict, total=False):
    """A torchrun command looked at (``probes/python_env.py``): the interpreter it runs, and that interpreter's
    report (its Python, torch, NCCL and libraries' versions), or why it could not be asked."""

    text: str
    words: list[str]
    executable: str | None
    interpreter: str | None
    how: str | None
    unknown: str | None
    not_found: str | None   # the command or interpreter that is not on PATH
    report: dict[str, Any] | None
    error: str | None
    timed_out: bool


class TorchrunPythonFact(TypedDict, total=False):
    """The fact ``torchrun_python``: this interpreter's report (``self``), the profile's torchrun command judged
    (``judged``), or, without one, the ``torchrun`` on PATH (``path_torchrun``, None when there is none)."""

    self: dict[str, Any]
    command: str | None
    source: str
    judged: InspectedCommand | None
    path_torchrun: InspectedCommand | None
