"""Network facts: what MASTER_ADDR resolves to (``resolve_master``), the kernel's route to it
(``nic_route``), whether the head can bind the rendezvous port (``port_bind``), and whether a worker
reaches it over TCP (``port_reach``).

Who is the head: a node that holds MASTER_ADDR; also a node whose NODE_RANK is explicitly 0 (then
``rank0_without_master_addr`` tells when it does not hold MASTER_ADDR). With one node, it is the head.
"""
from __future__ import annotations

import errno as _errno
import ipaddress
import os
import socket
import time
from typing import Any

from dsv3_preflight.registry import probe

IFNAME_VARS = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY", "NCCL_COMM_ID")
REACH_TIMEOUT_ENV = "DSV3_PREFLIGHT_REACH_TIMEOUT"
DEFAULT_REACH_TIMEOUT_S = 3.0


RESOLVE_TIMEOUT_S = 5.0


def _resolve(name: str, timeout: float = RESOLVE_TIMEOUT_S) -> tuple[list[str], str | None]:
    from .resolve import resolve

    addresses, error, _errno = resolve(name, timeout)
    return addresses, error


@probe("resolve_master", needs=["profile"], timeout=10)
def resolve_master(profile) -> dict[str, Any]:
    """MASTER_ADDR resolved with the system resolver (getaddrinfo order, as torch's TCPStore tries them), within
    a deadline, with the /etc/hosts lines that map the name."""
    from .resolve import hosts_entries, resolve

    name = profile.master_addr
    started = time.monotonic()
    addresses, error, err_no = resolve(name, RESOLVE_TIMEOUT_S)
    return {"name": name, "ok": bool(addresses), "error": error, "errno": err_no, "addresses": addresses,
            "elapsed_s": round(time.monotonic() - started, 4), "hosts_entries": hosts_entries(name)}


def _role(profile, local: bool) -> tuple[str, str, bool]:
    """(role, why, rank0_without_master_addr)."""
    if profile.nnodes == 1:
        return "head", "single-node profile (nnodes=1)", False
    if local:
        return "head", f"MASTER_ADDR {profile.master_addr} is an address of this node", False
    explicit = profile.sources.get("node_rank", "default") != "default"
    if profile.node_rank == 0 and explicit:
        return "head", f"node_rank is 0 ({profile.sources.get('node_rank')})", True
    return "worker", f"MASTER_ADDR {profile.master_addr} is not an address of this node (node_rank {profile.node_rank})", False


#: a settings file larger than this is not NCCL's (it is read whole)
MAX_NCCL_CONF_BYTES = 1 << 20


def nccl_conf_files(env: dict[str, Any]) -> list[dict[str, Any]]:
    """The files NCCL reads its settings from, in its order (src/misc/param.cc initEnvFunc): ``$NCCL_CONF_FILE`` when
    set and not empty, else ``~/.nccl.conf`` of the process's user (getpwuid, not $HOME), then /etc/nccl.conf.
    Each: ``{"path", "exists", "values": {NCCL_* name: value}, "error"}``."""
    import pwd

    from ..ifselect import ETC_NCCL_CONF, parse_nccl_conf

    paths = []
    if env.get("NCCL_CONF_FILE"):
        paths.append(env["NCCL_CONF_FILE"])
    else:
        try:
            paths.append(os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".nccl.conf"))
        except KeyError:   # a uid without a passwd entry (containers): NCCL reads no user file either
            pass
    paths.append(ETC_NCCL_CONF)
    files = []
    for path in paths:
        entry: dict[str, Any] = {"path": path, "exists": os.path.isfile(path), "values": {}, "error": None}
        if entry["exists"]:
            try:
                with open(path, "rb") as fh:
                    text = fh.read(MAX_NCCL_CONF_BYTES).decode("utf-8", "replace")
                entry["values"] = {k: v for k, v in parse_nccl_conf(text).items() if k.startswith("NCCL_")}
            except OSError as exc:   # NCCL skips a file it cannot open
                entry["error"] = f"{type(exc).__name__}: {exc.strerror or exc}"
        files.append(entry)
    return files


@probe("nccl_conf", needs=["env"], timeout=5)
def nccl_conf(env) -> list[dict[str, Any]]:
    """NCCL's settings files on this node, as it reads them (:func:`nccl_conf_files`): a fact of its own, so the checks
    that compare NCCL_* (net.nic_route, cluster.env_consistency) do not depend on the network probes."""
    return nccl_conf_files(env)


@probe("nic_route", needs=["profile", "env", "resolve_master", "nccl_conf"], timeout=10)
def nic_route(profile, env, resolve_master, nccl_conf=None) -> dict[str, Any]:
    """The interface the kernel uses to reach MASTER_ADDR (the one holding it on the head), with its state; every
    interface; the host name's addresses and /etc/hosts lines (Gloo binds them when GLOO_SOCKET_IFNAME is unset);
    the NCCL version torch loads (its interface rules depend on it)."""
    from dsv3_preflight.gpu.probes.fabric import nccl_wheel

    from .resolve import hosts_entries
    from .route import interfaces, route_get

    ifaces = interfaces()
    fact: dict[str, Any] = {
        "master_addr": profile.master_addr, "master_port": profile.master_port, "nnodes": profile.nnodes,
        "env": {k: env.get(k) for k in IFNAME_VARS}, "nccl_conf": nccl_conf_files(env) if nccl_conf is None else nccl_conf, "interfaces": ifaces,
        "resolved": False, "resolve_error": None, "addresses": [], "target": None, "family": None,
        "local": False, "method": None, "route_type": None, "route_error": None, "route_errno": None,
        "ifname": None, "ifindex": None, "src": None, "gateway": None,
        "hosts_entries": resolve_master.get("hosts_entries") or [],
        # the kernel's ephemeral range: the ports NCCL and Gloo connect on between nodes (a firewall must open them)
        "ephemeral_range": ephemeral_ports(profile.master_port)["ephemeral_range"],
    }
    addresses, error = list(resolve_master.get("addresses") or []), resolve_master.get("error")
    fact["addresses"], fact["resolve_error"] = addresses, error
    fact["hostname"] = socket.gethostname()
    fact["hostname_addresses"], _ = _resolve(fact["hostname"], timeout=3.0)
    fact["hostname_hosts_entries"] = hosts_entries(fact["hostname"])
    fact["nccl_version"], fact["nccl_version_source"] = nccl_wheel()
    if not addresses:
        fact["role"], fact["role_reason"], fact["rank0_without_master_addr"] = (
            ("head", "single-node profile (nnodes=1)", False) if profile.nnodes == 1 else
            ("unknown", "MASTER_ADDR does not resolve", False))
        return fact
    fact["resolved"] = True
    target = addresses[0]
    fact["target"] = target
    fact["family"] = ipaddress.ip_address(target).version
    route = route_get(target, ifaces)
    fact.update(method=route["method"], route_type=route["route_type"], route_error=route["error"],
                route_errno=route["errno"], ifname=route["ifname"], ifindex=route["ifindex"], src=route["src"],
                gateway=route["gateway"])
    holder = next((i for i in ifaces if target in i["ipv4"] or target in i["ipv6"]), None)
    local = route["route_type"] == "local" or holder is not None
    fact["local"] = local
    if local and holder is not None:
        # The kernel routes a local address through lo; what the workers reach is the interface holding it.
        fact["ifname"], fact["ifindex"], fact["src"], fact["gateway"] = holder["name"], holder["index"], target, None
    fact["role"], fact["role_reason"], fact["rank0_without_master_addr"] = _role(profile, local)
    iface = next((i for i in ifaces if i["name"] == fact["ifname"]), None)
    for key in ("mtu", "operstate", "up", "loopback", "speed_mbps", "ipv4", "ipv6", "ipv4_cidr"):
        fact[key] = iface.get(key) if iface else None
    return fact


#: how long port_bind keeps trying an address that is in use (a port held for a moment is not held: the
#: rendezvous binds it seconds later); a leftover holding it fails after this
BIND_RETRY_S = 2.0
BIND_RETRY_EVERY_S = 0.2


def _bind_once(address: str, port: int) -> OSError | None:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as torch's TCPStore server does
            sock.bind((address, port))
            sock.listen(1)
    except OSError as exc:
        return exc
    return None


def _try_bind(address: str, port: int, retry_until: float = 0.0) -> dict[str, Any]:
    """Bind and listen on address:port; an address in use is tried again until ``retry_until`` (monotonic).
    ``tries`` and, after a retry, ``first_error`` say what happened on the way."""
    entry: dict[str, Any] = {"address": address, "ok": False, "errno": None, "error": None, "tries": 0}
    first_error = None
    while True:
        entry["tries"] += 1
        exc = _bind_once(address, port)
        if exc is None:
            entry.update(ok=True, errno=None, error=None)
            entry.pop("errno_name", None)
            break
        entry["errno"], entry["error"] = exc.errno, exc.strerror or str(exc)
        entry["errno_name"] = _errno.errorcode.get(exc.errno or 0)
        first_error = first_error or entry["errno_name"]
        if exc.errno != _errno.EADDRINUSE or time.monotonic() >= retry_until:
            break
        time.sleep(BIND_RETRY_EVERY_S)
    if entry["tries"] > 1:
        entry["first_error"] = first_error
    return entry


def ephemeral_ports(port: int, proc_sys: str = "/proc/sys/net/ipv4") -> dict[str, Any]:
    """Whether ``port`` lies in this network namespace's ephemeral range (``ip_local_port_range``: the ports the
    kernel hands to outgoing connections and to ``bind(port 0)``) and whether ``ip_local_reserved_ports`` keeps
    it out of that use. None where the files cannot be read."""
    from dsv3_preflight.net.ports import in_port_list, parse_port_range

    fact: dict[str, Any] = {"ephemeral_range": None, "in_ephemeral_range": None, "reserved": None,
                            "reserved_ports": None}
    try:
        with open(os.path.join(proc_sys, "ip_local_port_range")) as fh:
            fact["ephemeral_range"] = parse_port_range(fh.read())
    except (OSError, ValueError):
        return fact
    lo, hi = fact["ephemeral_range"]
    fact["in_ephemeral_range"] = lo <= port <= hi
    try:
        with open(os.path.join(proc_sys, "ip_local_reserved_ports")) as fh:
            fact["reserved_ports"] = fh.read().strip()
        fact["reserved"] = in_port_list(port, fact["reserved_ports"])
    except (OSError, ValueError):
        pass
    return fact


@probe("port_bind", needs=["profile", "nic_route"], timeout=10, claims=["master_port"])
def port_bind(profile, nic_route) -> dict[str, Any]:
    """On the head: whether MASTER_PORT can be bound (wildcard, as TCPStore does, and MASTER_ADDR itself)."""
    port = profile.master_port
    fact: dict[str, Any] = {"port": port, "role": nic_route.get("role"), "role_reason": nic_route.get("role_reason"),
                            "rank0_without_master_addr": nic_route.get("rank0_without_master_addr", False),
                            "attempted": False, "attempts": []}
    if nic_route.get("role") != "head":
        return fact
    fact["attempted"] = True
    family = nic_route.get("family") or 4
    addresses = ["::" if family == 6 else "0.0.0.0"]
    target = nic_route.get("target")
    if target and nic_route.get("local"):
        addresses.append(target)
    retry_until = time.monotonic() + BIND_RETRY_S   # one budget for all addresses
    fact["attempts"] = [_try_bind(a, port, retry_until) for a in addresses]
    fact.update(ephemeral_ports(port))
    return fact


@probe("port_reach", needs=["profile", "nic_route", "env", "wave"], timeout=20)
def port_reach(profile, nic_route, env, wave) -> dict[str, Any]:
    """On a worker: TCP connect to MASTER_ADDR:MASTER_PORT, classified, and whether our listener answered."""
    from .listener import TOKEN_ENV
    from .reach import tcp_reach

    # the listener's token: from `run --all-nodes` (its port-reach wave), else exported by hand beside `listen`
    token = wave.listener_token or env.get(TOKEN_ENV) or None

    fact: dict[str, Any] = {"role": nic_route.get("role"), "role_reason": nic_route.get("role_reason"),
                            "attempted": False, "host": profile.master_addr, "port": profile.master_port,
                            # a token to expect means a dsv3-preflight listener was started for this check (by
                            # `run --all-nodes` on node 0, or by hand with `dsv3-preflight listen`)
                            "listener_expected": bool(token),
                            # where a host name's address came from on this node: a stale /etc/hosts line sends the
                            # worker to an old address, which net.port_reach must not call the head's
                            "hosts_entries": nic_route.get("hosts_entries") or []}
    if nic_route.get("role") == "head":
        return fact
    try:
        timeout = float(env.get(REACH_TIMEOUT_ENV) or DEFAULT_REACH_TIMEOUT_S)
    except ValueError:
        timeout = DEFAULT_REACH_TIMEOUT_S
    timeout = min(max(timeout, 0.1), 15.0)
    started = time.monotonic()
    result = tcp_reach(profile.master_addr, profile.master_port, timeout=timeout,
                       expected_token=token)
    fact.update(result)
    fact["attempted"] = True
    fact["total_s"] = round(time.monotonic() - started, 4)
    fact["pid"] = os.getpid()
    return fact
