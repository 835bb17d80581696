"""A one-node job: loopback or a container bridge is the right interface, and the multi-node-only causes do not
hold; their lines read as the rest of the table reads them."""
from __future__ import annotations

from ..timeline import MAX_LISTED, Finding, Timeline


def as_one_node(tl: Timeline, found: list[Finding]) -> list[Finding]:
    """The findings as a one-node job reads them: no multi-node-only cause, no stall suspect of a multi-node job.
    The lines those causes took read as the rest of the table reads them (a store timeout, a closed connection);
    the ones no other signature takes are ``tl.one_node_errors``: a failure line is never dropped."""
    found = [f for f in found if f.sig.stall != "multi_node" and not f.sig.multi_node_only]
    for alt in tl.one_node_findings.values():
        mine = tl.findings.get(alt.sig.id)
        if mine is None:
            found.append(alt)
        elif mine in found:   # (one set aside as teardown after the end takes these with it)
            mine.count += alt.count
            mine.events += [e for e in alt.events if len(mine.events) < MAX_LISTED]
            for fi, ln in alt.last.items():
                mine.last[fi] = max(ln, mine.last.get(fi, 0))
    return found


__all__ = ["as_one_node"]
