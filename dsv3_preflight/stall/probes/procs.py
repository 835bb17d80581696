"""Probes of the launched ranks through /proc: which processes are ranks, their CPU time, where the kernel has them
wait (wchan, state) and their TCP connections with send and receive queues. Reading /proc is all the watch does
while a run is healthy. Plain data out; nothing is judged here.
"""
from __future__ import annotations

import os
import socket
import struct
from typing import TypedDict

_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: /proc/net/tcp's state numbers (include/net/tcp_states.h)
TCP_STATES = {1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2", 6: "TIME_WAIT",
              7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN", 11: "CLOSING"}


class RankProc(TypedDict):
    """A worker process torchrun started: its pid and the ranks its environment names."""

    pid: int
    rank: int
    local_rank: int
    node_rank: int | None
    world_size: int | None


class TcpConn(TypedDict):
    """One TCP socket of a rank (/proc/<pid>/net/tcp row of one of its socket inodes)."""

    local: str
    peer: str
    state: str
    send_q: int
    recv_q: int


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (every thread's)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out += [int(c) for c in fh.read().split()]
        except OSError:
            continue
    return out


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (breadth first)."""
    seen, queue = [], [pid]
    while queue:
        kids = children(queue.pop(0))
        seen += kids
        queue += kids
    return seen


def environ(pid: int) -> dict[str, str]:
    """The process's environment at its start (empty when unreadable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def _int(value: str | None) -> int | None:
    return int(value) if value is not None and value.strip().lstrip("-").isdigit() else None


def rank_processes(root: int) -> list[RankProc]:
    """The ranks under ``root`` (torchrun, or the launcher's shim): processes whose environment has RANK and
    LOCAL_RANK (torchrun sets them for each worker), the outermost of each rank (a worker's own children inherit it)."""
    found: dict[int, RankProc] = {}
    for pid in descendants(root):
        env = environ(pid)
        rank, local = _int(env.get("RANK")), _int(env.get("LOCAL_RANK"))
        if rank is None or local is None or rank in found:
            continue
        found[rank] = RankProc(pid=pid, rank=rank, local_rank=local, node_rank=_int(env.get("GROUP_RANK")),
                               world_size=_int(env.get("WORLD_SIZE")))
    return [found[r] for r in sorted(found)]


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of the process (all its threads), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK   # utime, stime (fields 14 and 15 of stat(5))


def wchan(pid: int) -> dict[str, str]:
    """Where the kernel has each thread wait (``/proc/<pid>/task/<tid>/wchan``; "0"/"" when running): tid → symbol."""
    out: dict[str, str] = {}
    try:
        tasks = sorted(os.listdir(f"/proc/{pid}/task"), key=int)
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/wchan") as fh:
                out[tid] = fh.read().strip()
        except OSError:
            continue
    return out


def status(pid: int) -> dict[str, str]:
    """The fields of ``/proc/<pid>/status`` the report shows (State, Threads, VmRSS, voluntary switches)."""
    keep = ("Name", "State", "Threads", "VmRSS", "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")
    out: dict[str, str] = {}
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key in keep:
                    out[key] = value.strip()
    except OSError:
        pass
    return out


def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets the process holds open."""
    out: set[int] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return out
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(int(target[8:-1]))
    return out


def _addr(hexaddr: str) -> str:
    ip, port = hexaddr.split(":")
    if len(ip) == 8:
        text = socket.inet_ntop(socket.AF_INET, struct.pack("<I", int(ip, 16)))
    else:
        raw = bytes.fromhex(ip)
        text = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
        text = text[7:] if text.startswith("::ffff:") and "." in text else f"[{text}]"
    return f"{text}:{int(port, 16)}"


def parse_net_tcp(text: str, inodes: set[int] | None = None) -> list[TcpConn]:
    """Rows of a /proc/net/tcp or tcp6 table (of the given socket inodes only, when given)."""
    out: list[TcpConn] = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 10:
            continue
        if inodes is not None and int(f[9]) not in inodes:
            continue
        tx, rx = f[4].split(":")
        out.append(TcpConn(local=_addr(f[1]), peer=_addr(f[2]), state=TCP_STATES.get(int(f[3], 16), f[3]),
                           send_q=int(tx, 16), recv_q=int(rx, 16)))
    return out


def tcp_connections(pid: int) -> list[TcpConn]:
    """The process's TCP sockets (in its own network namespace): peer, state, send and receive queues."""
    inodes = socket_inodes(pid)
    out: list[TcpConn] = []
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as fh:
                out += parse_net_tcp(fh.read(), inodes)
        except OSError:
            continue
    return out
