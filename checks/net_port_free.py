"""net.port_free: on the head, MASTER_PORT can be bound; else who holds it and how to free it.

Small pure rules over the ``port_bind`` and ``port_holders`` facts (and ``nic_route`` for this node's own
addresses), each returning a finding with its fix."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.net.facts import NicRouteFact, PortBindFact
from dsv3_preflight.net.port_rules import (
    held_only_by_our_listener,
    holders_on_port,
    ok_summary,
    port_binds,
    rank0_holds_master_addr,
)
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Findings


@check("net.port_free", needs=["port_bind", "port_holders", "profile", "nic_route"], tags=["network"], timeout=10)
def port_free(port_bind: PortBindFact, port_holders, profile: Profile, nic_route: NicRouteFact | None = None):
    """On the head: MASTER_PORT can be bound where workers connect; names the process holding it."""
    port = port_bind["port"]
    if port_bind.get("role") != "head":
        return Result.skipped(f"not the head: {port_bind.get('role_reason')}; the head checks that port {port} is free",
                              {"role": port_bind.get("role")})
    evidence: dict = {"port": port, "role_reason": port_bind.get("role_reason"), "attempts": port_bind.get("attempts", []),
                      "holders": holders_on_port(port_bind, port_holders)}
    if port_bind.get("ephemeral_range") is not None:
        evidence.update({k: port_bind.get(k) for k in ("ephemeral_range", "in_ephemeral_range", "reserved")})
    found = Findings()
    if found.check(rank0_holds_master_addr, port_bind, profile, nic_route):
        return found.result("", evidence)
    found.check(port_binds, port_bind, port_holders)
    if held_only_by_our_listener(port_bind, port_holders):
        evidence["held_by_listener"] = True
    return found.result(ok_summary(port_bind, port_holders), evidence)
