"""The shapes of the network domain's facts, as its probes return them (``probes/facts.py``: ``resolve_master``,
``nccl_conf``, ``nic_route``, ``port_bind``, ``port_reach``; ``probes/route.py``: each interface; ``probes/reach.py``:
the TCP connect that ``port_reach`` carries).

A fact is plain JSON data: these are :class:`~typing.TypedDict` shapes, so a rule's annotations say which keys it
reads. ``total=False`` where a key may be absent (a probe that stopped early: MASTER_ADDR did not resolve, this
node is the head and tries no connect). ``None`` is unknown, never healthy.
"""
from __future__ import annotations

from typing import TypedDict


class HostsEntry(TypedDict):
    """An /etc/hosts line naming a host: its number, the address it maps the name to, its names, the line itself."""

    line: int
    address: str
    names: list[str]
    text: str


class ResolveMasterFact(TypedDict, total=False):
    """The fact ``resolve_master``: MASTER_ADDR through getaddrinfo, under a deadline, and the /etc/hosts lines
    naming it."""

    name: str
    ok: bool
    error: str | None
    errno: int | None
    addresses: list[str]
    elapsed_s: float
    hosts_entries: list[HostsEntry]


class NcclConfFile(TypedDict):
    """One of NCCL's settings files (``NCCL_CONF_FILE``, ~/.nccl.conf, /etc/nccl.conf) and the NCCL_* it sets."""

    path: str
    exists: bool
    values: dict[str, str]
    error: str | None


class Interface(TypedDict, total=False):
    """One network interface (netlink/netifaces, sysfs, SIOCGIFFLAGS)."""

    name: str
    index: int
    ipv4: list[str]
    ipv4_cidr: list[str]
    ipv6: list[str]
    flags: int | None
    up: bool | None
    running: bool | None
    loopback: bool
    mtu: int | None
    operstate: str | None
    speed_mbps: int | None


class NicRouteFact(TypedDict, total=False):
    """The fact ``nic_route``: the kernel's route to MASTER_ADDR and the interface it leaves by (the one holding
    MASTER_ADDR on the head), that interface's state, every interface, the socket-interface variables as the
    environment and nccl.conf set them, the host name's addresses (Gloo binds them when GLOO_SOCKET_IFNAME is
    unset) and this node's role (head, worker, unknown)."""

    master_addr: str
    master_port: int
    nnodes: int
    env: dict[str, str | None]
    nccl_conf: list[NcclConfFile]
    interfaces: list[Interface]
    resolved: bool
    resolve_error: str | None
    addresses: list[str]
    target: str | None
    family: int | None
    local: bool
    method: str | None
    route_type: str | None
    route_error: str | None
    route_errno: int | None
    ifname: str | None
    ifindex: int | None
    src: str | None
    gateway: str | None
    hosts_entries: list[HostsEntry]
    ephemeral_range: list[int] | tuple[int, int] | None
    hostname: str
    hostname_addresses: list[str]
    hostname_hosts_entries: list[HostsEntry]
    nccl_version: str | None
    nccl_version_source: str | None
    role: str
    role_reason: str
    rank0_without_master_addr: bool
    # the route interface's state (None when the route names no interface)
    mtu: int | None
    operstate: str | None
    up: bool | None
    loopback: bool | None
    speed_mbps: int | None
    ipv4: list[str] | None
    ipv6: list[str] | None
    ipv4_cidr: list[str] | None


class BindAttempt(TypedDict):
    """One bind of MASTER_PORT (the wildcard, as TCPStore binds, then MASTER_ADDR itself), retried a moment."""

    address: str
    ok: bool
    errno: int | None
    error: str | None
    tries: int


class PortBindFact(TypedDict, total=False):
    """The fact ``port_bind``: on the head, whether MASTER_PORT can be bound, and the ephemeral range around it."""

    port: int
    role: str | None
    role_reason: str | None
    rank0_without_master_addr: bool
    attempted: bool
    attempts: list[BindAttempt]
    ephemeral_range: list[int] | tuple[int, int] | None
    in_ephemeral_range: bool | None
    reserved: bool | None
    reserved_ports: str | None


class PortReachFact(TypedDict, total=False):
    """The fact ``port_reach``: on a worker, TCP to MASTER_ADDR:MASTER_PORT classified (``outcome``: ok, refused,
    filtered, unreachable, name_resolution, invalid, error) and whether our listener answered with its token."""

    role: str | None
    role_reason: str | None
    attempted: bool
    host: str
    port: int
    listener_expected: bool
    hosts_entries: list[HostsEntry]
    address: str | None
    outcome: str | None
    invalid: str
    elapsed_s: float | None
    latency_ms: float | None
    errno: int | None
    error: str | None
    listener: str | None
    banner: str | None
    token: str | None
    expected_token: str | None
    token_match: bool | None
    timeout_s: float
    total_s: float
    pid: int
