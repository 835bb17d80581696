"""net.port_reach: a worker reaches MASTER_ADDR:MASTER_PORT over TCP (and our listener answers there).

The ``port_reach`` fact classifies the connect (ok, refused, filtered, unreachable, name_resolution,
invalid, error); each outcome has its own small pure rule returning the finding with its fix."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.net.facts import PortReachFact
from dsv3_preflight.net.reach_rules import EVIDENCE_KEYS, RULES, other_error, target_of
from dsv3_preflight.profile import Profile
from dsv3_preflight.result import Findings


@check("net.port_reach", needs=["port_reach", "profile"], tags=["network"], timeout=30)
def port_reach(port_reach: PortReachFact, profile: Profile):
    """On a worker: TCP to MASTER_ADDR:MASTER_PORT is ok, refused, filtered, unreachable or unresolvable — each with its fix."""
    f = port_reach
    if not f.get("attempted"):
        return Result.skipped(f"this node is the head ({f.get('role_reason')}); workers test reach to {target_of(f)}",
                              {"role": f.get("role")})
    found = Findings().check(RULES.get(f.get("outcome"), other_error), f)
    ok = (f"reached the dsv3-preflight listener at {target_of(f)} in {(f.get('latency_ms') or 0):.1f} ms"
          + (" (token matches)" if f.get("token_match") else ""))
    return found.result(ok, {k: f.get(k) for k in EVIDENCE_KEYS})
