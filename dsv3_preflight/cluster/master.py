"""MASTER_ADDR as the nodes resolve it: moved to :mod:`dsv3_preflight.net.master`, the one module that owns
MASTER_ADDR (one ``is_loopback``). Re-exported here for the cluster runner's imports."""
from __future__ import annotations

from ..net.master import (
    interface_holding,
    is_loopback,
    job_interface,
    resolutions,
    route_is_loopback,
    training_address,
)

__all__ = ["interface_holding", "is_loopback", "job_interface", "resolutions", "route_is_loopback", "training_address"]
