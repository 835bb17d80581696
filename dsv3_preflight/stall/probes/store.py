"""Probe of the rendezvous store before communicators exist: which node ranks' torchrun agents joined it.

Each torchrun agent writes ``<run id>/torchelastic/role_info/<node rank>`` into the store that node rank 0's agent
hosts at MASTER_ADDR:MASTER_PORT (torch.distributed.elastic.agent.server.api, ``_share_and_gather``), then waits
for every other node rank's key. The probe connects as one more client, with a timeout, and checks the keys; it
writes nothing.

In torchrun's static rendezvous (``--master_addr``/``--master_port``, as the launcher starts it) node rank 0's agent
waits in the store's creation until every other agent connected, and only then do the agents write their keys:
while one node is missing no key exists (the probe's own connection does not count as an agent). There the agents'
stacks say who joined (stall/culprit.py): an agent waiting in the rendezvous joined, one elsewhere (or no torchrun)
did not."""
from __future__ import annotations

import datetime
import time
from typing import Any

ROLE_INFO_KEY = "torchelastic/role_info/"
DEFAULT_RUN_ID = "none"   # torchrun's --rdzv-id default
STORE_TIMEOUT_S = 5.0
SETTLE_S = 0.5


def agents_joined(host: str, port: int, nnodes: int, run_id: str = DEFAULT_RUN_ID,
                  timeout: float = STORE_TIMEOUT_S, settle: float = SETTLE_S) -> dict[str, Any]:
    """``{"available": True, "joined": [...], "missing": [...], "store": "host:port"}``, or available False and why."""
    where = f"{host}:{port}"
    try:
        from torch.distributed import PrefixStore, TCPStore

        base = TCPStore(host, int(port), is_master=False, timeout=datetime.timedelta(seconds=timeout),
                        wait_for_workers=False)
        store = PrefixStore(run_id, base)
        deadline = time.monotonic() + settle
        while True:
            joined = [r for r in range(nnodes) if store.check([f"{ROLE_INFO_KEY}{r}"])]
            if len(joined) == nnodes or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    except Exception as exc:  # noqa: BLE001 - no store (not started, unreachable, torch missing): said, not raised
        return {"available": False, "store": where, "why": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"}
    return {"available": True, "store": where, "run_id": run_id, "joined": joined,
            "missing": [r for r in range(nnodes) if r not in joined]}
