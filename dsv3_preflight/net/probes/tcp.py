"""One TCP connect, as data: what a closed, filtered or open port answers.

A closed port answers at once (refused), a filtered one not at all (timeout) or with an ICMP prohibition
(unreachable). Used by the collective probe's rank-to-rank mesh test and by the cluster runner's look at a node
whose Ray workers do not answer.
"""
from __future__ import annotations

import socket
import time
from typing import Any


def connect(host: str, port: int, timeout: float) -> dict[str, Any]:
    """{"port", "outcome": ok | refused | timeout | unreachable, "error", "seconds"}; never raises for the network."""
    t0 = time.monotonic()
    try:
        with socket.create_connection((host, port), timeout=timeout):
            outcome, error = "ok", None
    except TimeoutError:
        outcome, error = "timeout", f"no answer in {timeout:g} s"
    except ConnectionRefusedError as exc:
        outcome, error = "refused", str(exc)
    except OSError as exc:
        outcome, error = "unreachable", str(exc)
    return {"port": port, "outcome": outcome, "error": error, "seconds": round(time.monotonic() - t0, 3)}
