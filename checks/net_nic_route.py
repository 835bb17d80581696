"""net.nic_route: the interface toward MASTER_ADDR is up, usable, and the one NCCL and Gloo will select.

Each rule is a small pure function of the ``nic_route`` fact and the profile returning a finding or
None; :func:`nic_route` runs the gate rules (MASTER_ADDR resolves, the kernel has a route, the route names
an interface), then every other rule (only those about the variables' names when a gate failed: the rest
compare with the route's interface), and the accumulator keeps each problem with its own fix."""
from __future__ import annotations

from dsv3_preflight import check
from dsv3_preflight.net.facts import NicRouteFact
from dsv3_preflight.net.route_rules import GATES, NAME_RULES, RULES, evidence_of, ok_summary
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Findings


@check("net.nic_route", needs=["nic_route", "profile"], tags=["network"], timeout=10)
def nic_route(nic_route: NicRouteFact, profile: Profile):
    """MASTER_ADDR's interface (from the kernel's route) is up, not loopback on multi-node, and selected by NCCL_/GLOO_SOCKET_IFNAME."""
    f = nic_route
    found = Findings()
    rules = RULES
    for gate in GATES:
        if found.check(gate, f, profile):
            rules = NAME_RULES  # the others compare with the route's interface
            break
    for rule in rules:
        found.check(rule, f, profile)
    return found.result(ok_summary(f, profile), evidence_of(f))
