"""Facts about this host and its environment: identity and environment variables (MASTER_ADDR's name
resolution is the network domain's: ``net.probes.facts.resolve_master``)."""
from __future__ import annotations

import os
import platform
import socket
from pathlib import Path
from typing import Any

from dsv3_preflight.registry import probe


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip() or None
    except OSError:
        return None


@probe("host", timeout=5)
def host() -> dict[str, Any]:
    """Who this node is: host name, machine id, boot id, kernel, Python, CPUs, addresses."""
    import psutil

    addrs = {}
    for ifname, entries in psutil.net_if_addrs().items():
        addrs[ifname] = [e.address for e in entries if e.family in (socket.AF_INET, socket.AF_INET6)]
    return {
        "hostname": socket.gethostname(),
        "node_name": os.environ.get("DSV3_PREFLIGHT_NODE_NAME") or socket.gethostname(),
        "machine_id": _read("/etc/machine-id"),
        "boot_id": _read("/proc/sys/kernel/random/boot_id"),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": psutil.virtual_memory().total,
        "addresses": addrs,
    }


@probe("env", timeout=2)
def env() -> dict[str, str]:
    """The process environment as the launch will inherit it (secrets are masked in every document)."""
    return dict(os.environ)
