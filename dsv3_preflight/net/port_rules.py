"""The rules of net.port_free (pure: facts in, findings out): on the head, MASTER_PORT can be bound; else who holds it and how to free it.

Small pure rules over the ``port_bind`` and ``port_holders`` facts (and ``nic_route`` for this node's own
addresses), each returning a finding with its fix."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsv3_preflight.host.facts import PortHolder, PortHoldersFact
from dsv3_preflight.host.processes import describe, find_holder_fix, is_preflight_listener, kill_fix
from dsv3_preflight.net import causes
from dsv3_preflight.net.facts import BindAttempt, NicRouteFact, PortBindFact
from dsv3_preflight.net.master import HEAD_ADDR, this_node_fix, training_addresses
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Actor, Finding, failure

Fact = Mapping[str, Any]


def failed_attempts(port_bind: PortBindFact) -> list[BindAttempt]:
    return [a for a in port_bind.get("attempts", []) if not a["ok"]]


def holders_on_port(port_bind: PortBindFact, port_holders: PortHoldersFact) -> list[PortHolder]:
    return [h for h in port_holders.get("holders", []) if h["port"] == port_bind["port"]]


def held_only_by_our_listener(port_bind: PortBindFact, port_holders: PortHoldersFact) -> bool:
    """The port is held, and only by the dsv3-preflight listener serving the workers' reach test."""
    on_port = holders_on_port(port_bind, port_holders)
    return bool(on_port) and all(is_preflight_listener(h.get("process")) for h in on_port)


def rank0_holds_master_addr(port_bind: PortBindFact, profile: Profile, nic_route: NicRouteFact | None = None) -> Finding | None:
    if not port_bind.get("rank0_without_master_addr"):
        return None
    candidates = training_addresses((nic_route or {}).get("interfaces"))
    return failure(f"this node has node_rank 0 but MASTER_ADDR {profile.master_addr} is not one of its addresses: "
                   "workers would wait for a rendezvous nobody serves",
                   "# run rank 0 on the node that holds MASTER_ADDR, or make this node the head on every node:\n"
                   + this_node_fix(candidates), actor=Actor.JOB, cause=causes.RANK0_NOT_MASTER)


def port_binds(port_bind: PortBindFact, port_holders: PortHoldersFact) -> Finding | None:
    """The first failed bind, explained: a privileged port, an address not on this node, a holder, or the error."""
    failed = failed_attempts(port_bind)
    if not failed or held_only_by_our_listener(port_bind, port_holders):
        return None
    first, port = failed[0], port_bind["port"]
    where = f"{first['address']}:{port}"
    if first.get("errno_name") == "EACCES":
        return failure(f"cannot bind {where}: permission denied (ports below 1024 need root)", "export MASTER_PORT=39500",
                       actor=Actor.JOB, cause=causes.PORT_PRIVILEGED)
    if first.get("errno_name") == "EADDRNOTAVAIL":
        return failure(f"cannot bind {where}: the address is not on this node",
                       f'export MASTER_ADDR="{HEAD_ADDR}"   # an address of the head, which binds it',
                       actor=Actor.JOB, cause=causes.RANK0_NOT_MASTER)
    procs = [h.get("process") for h in holders_on_port(port_bind, port_holders)]
    if procs:
        fixes = [kill_fix(p) for p in procs if p] or [find_holder_fix(port)]
        return failure(f"port {port} cannot be bound on {first['address']} ({first['error']}): held by {describe(procs[0])}",
                       "\n".join(dict.fromkeys(fixes)), actor=Actor.NODE, cause=causes.PORT_HELD)
    span = port_bind.get("ephemeral_range")
    if first.get("errno_name") == "EADDRINUSE" and ephemeral_unreserved(port_bind) and span:
        lo, hi = span
        return failure(f"port {port} cannot be bound on {first['address']} ({first['error']}) and no process listens "
                       f"on it: it lies in the kernel's ephemeral range {lo}-{hi}, so an outgoing connection of any "
                       "program can take it (and keep it for up to 60 s after closing)",
                       reserve_port_fix(port_bind, lo), actor=Actor.NODE, cause=causes.PORT_HELD)
    return failure(f"port {port} cannot be bound on {first['address']}: {first['error']}", find_holder_fix(port),
                   actor=Actor.NODE, cause=causes.PORT_HELD)


def ephemeral_unreserved(port_bind: PortBindFact) -> bool:
    """MASTER_PORT is one the kernel may hand to an outgoing connection: in ip_local_port_range, not reserved."""
    return bool(port_bind.get("in_ephemeral_range")) and port_bind.get("reserved") is False


def reserve_port_fix(port_bind: PortBindFact, lo: int) -> str:
    """Reserve MASTER_PORT (keeping the ports already reserved), now and for every boot; or move the job off the range."""
    port = int(port_bind["port"])
    reserved = ",".join(p for p in [str(port_bind.get("reserved_ports") or "").strip(), str(port)] if p)
    return (f"ss -tanp 'sport = :{port}'   # as root: every socket on port {port}; TIME-WAIT ones have no process\n"
            f"# keep the kernel from handing port {port} to outgoing connections (as root, on every node):\n"
            f"sysctl -w net.ipv4.ip_local_reserved_ports={reserved}\n"
            f"echo 'net.ipv4.ip_local_reserved_ports = {reserved}' > /etc/sysctl.d/60-dsv3-master-port.conf\n"
            f"# or give the job a port below {lo}, the same on every node:\n"
            f'export MASTER_PORT="${{MASTER_PORT_FREE:?a free port below {lo}, the same on every node}}"')


def ok_summary(port_bind: PortBindFact, port_holders: PortHoldersFact) -> str:
    port = port_bind["port"]
    if held_only_by_our_listener(port_bind, port_holders):
        pids = ", ".join(str(proc["pid"]) for h in holders_on_port(port_bind, port_holders)
                         if (proc := h["process"]) is not None)
        return (f"port {port} is held only by the dsv3-preflight listener (pid {pids}) serving the workers' reach test; "
                "it exits at its deadline")
    attempts = port_bind.get("attempts", [])
    retried = [a for a in attempts if a.get("first_error")]
    note = (f" (it was in use for a moment: bound on try {max(a['tries'] for a in retried)})" if retried else "")
    return f"port {port} can be bound on {', '.join(a['address'] for a in attempts)}{note}"
