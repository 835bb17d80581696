"""A TCP port for a test to hand to a process it starts: free now, and outside the kernel's ephemeral range.

``bind(port 0)`` gives a port inside ``ip_local_port_range``: between the test's check and the run's own bind,
any outgoing connection on the host (the other xdist worker's Ray, gloo, torch) may be handed that very port,
and the run then rightly reports it held (seen in CI: net.port_free failed on 127.0.0.1:53851 with no process
holding it). A port below the range is never handed out by the kernel, only taken by an explicit bind.
"""
from __future__ import annotations

import random
import socket

from dsv3_preflight.net.probes.facts import ephemeral_ports

LOWEST = 20000


def _ephemeral_range() -> tuple[int, int]:
    lo, hi = ephemeral_ports(0)["ephemeral_range"] or (32768, 60999)   # as port_bind reads it
    return lo, hi


def _bindable(port: int) -> bool:
    for family, address in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.bind((address, port))  # no SO_REUSEADDR: a TIME-WAIT leftover counts as taken
        except OSError as exc:
            if family == socket.AF_INET6 and exc.errno in (97, 99):  # no IPv6 here: IPv4 decides
                continue
            return False
    return True


def free_port() -> int:
    """A port no socket of this host's network namespace uses, below the ephemeral range (above it if the range
    starts too low)."""
    lo, hi = _ephemeral_range()
    span = range(LOWEST, lo) if lo - LOWEST >= 1000 else range(hi + 1, 65536)
    rng = random.Random()
    for _ in range(200):
        port = rng.choice(span)
        if _bindable(port):
            return port
    raise RuntimeError(f"no free port found in {span.start}-{span.stop - 1}")
