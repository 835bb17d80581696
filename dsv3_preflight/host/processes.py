"""Processes as the checks name them: one line to read, and the kill lines to paste (pure functions over
the process records the probes gather: ``{"pid", "user", "cmdline", "name", "started"}``)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dsv3_preflight.text import one_line

UNSEEN = "a process this user cannot see (run as root, or it lives in another network namespace)"


def describe(proc: Mapping[str, Any] | None) -> str:
    """``pid 4242 (python train.py, user ubuntu, since 2026-11-21T23:10:00+0000)``, on one line."""
    if not proc:
        return UNSEEN
    return (f"pid {proc['pid']} ({one_line(proc.get('cmdline')) or proc.get('name') or '?'}, user {proc.get('user')}, "
            f"since {proc.get('started')})")


def is_preflight_listener(proc: Mapping[str, Any] | None) -> bool:
    """Whether the process is a ``dsv3-preflight listen`` serving the workers' reach test."""
    cmd = (proc or {}).get("cmdline") or ""
    return "dsv3-preflight listen" in cmd or "dsv3_preflight listen" in cmd


def kill_fix(proc: Mapping[str, Any], what: str = "a leftover of the previous run") -> str:
    """Stop one process by its pid: TERM, then KILL if it is still there 2 s later. Its command line stays
    on the comment line (a ``python -c`` script's newlines would otherwise run when pasted)."""
    pid = int(proc["pid"])
    return (f"kill {pid}   # after checking it is {what}: {one_line(proc.get('cmdline'))}\n"
            f"sleep 2; kill -0 {pid} 2>/dev/null && kill -9 {pid}")


def find_holder_fix(port: int) -> str:
    """When the holder of a port cannot be seen: how to find it and free the port."""
    return (f"ss -ltnp 'sport = :{int(port)}'   # as root: shows the pid holding port {int(port)}\n"
            f"# then stop it by that pid, or: fuser -k {int(port)}/tcp")
