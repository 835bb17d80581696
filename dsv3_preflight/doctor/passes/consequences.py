"""Root causes and consequences: which failing findings are listed as causes (the headline first) and which as
consequences of one (``explained_by``)."""
from __future__ import annotations

from ..timeline import Finding, earliest, order_key
from .first_failure import Heads


def roots_and_consequences(h: Heads) -> tuple[list[Finding], list[Finding], str | None]:
    """(root causes, consequences, the id a consequence nothing else explains is a consequence of), each list in
    the order it is shown: the headline first, then by tier, then by time."""
    head, recognised = h.head, h.recognised

    def order(f: Finding) -> tuple:
        return (0 if f is head else 1, f.sig.tier, order_key(earliest(f.events)))

    roots = [f for f in h.heads if f.sig.kind in ("cause", "suspect") and f.sig.cls is not None]
    if recognised and head not in roots:
        roots.insert(0, head)   # type: ignore[arg-type]
    if not recognised and head is not None and head.sig.tier >= 3:
        roots = [f for f in roots if f.sig.tier < 3 and f is not head]
    roots.sort(key=order)
    consequences = sorted((f for f in h.candidates if f not in roots), key=order)
    head_id = roots[0].sig.id if roots and recognised else None
    return roots, consequences, head_id


__all__ = ["roots_and_consequences"]
