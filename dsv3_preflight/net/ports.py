"""The kernel's port lists as /proc/sys/net/ipv4 writes them, parsed (pure: the probe reads the files).

``ip_local_port_range`` is ``"32768\\t60999"``; ``ip_local_reserved_ports`` is ``"39500,40000-40010"`` (empty when
nothing is reserved).
"""
from __future__ import annotations


def parse_port_range(text: str) -> list[int]:
    """``"32768\\t60999"`` -> ``[32768, 60999]``; ValueError when it is not two ports, low first."""
    words = text.split()
    if len(words) != 2:
        raise ValueError(f"not a port range: {text!r}")
    lo, hi = int(words[0]), int(words[1])
    if not 0 < lo <= hi <= 65535:
        raise ValueError(f"not a port range: {text!r}")
    return [lo, hi]


def in_port_list(port: int, text: str) -> bool:
    """Whether ``port`` is in a kernel port list (``"39500,40000-40010"``); ValueError on a malformed item."""
    for item in text.strip().split(","):
        item = item.strip()
        if not item:
            continue
        lo, _, hi = item.partition("-")
        if int(lo) <= port <= int(hi or lo):
            return True
    return False
