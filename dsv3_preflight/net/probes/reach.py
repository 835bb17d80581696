"""A TCP connect to host:port within a timeout, classified, and whether our listener answered.

Outcomes: ``ok`` (connected; ``listener`` says ``ours`` when the dsv3-preflight banner came back,
``other`` when something else accepted), ``refused`` (the host answered: nothing listens, or a
REJECT rule), ``filtered`` (no answer within the timeout: a DROP rule, or packets lost on the way;
also a local firewall refusing with EPERM), ``unreachable`` (the kernel or a router says there is no
route or host), ``name_resolution`` (the name does not resolve), ``invalid`` (bad port or address),
``error`` (anything else, with errno).
"""
from __future__ import annotations

import errno
import ipaddress
import socket
import time
from typing import Any

from .listener import BANNER
from .resolve import resolve

_UNREACHABLE = {errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN, errno.ENETDOWN, errno.EADDRNOTAVAIL}
_FILTERED = {errno.ETIMEDOUT, errno.EPERM, errno.EACCES}


def tcp_reach(host: str, port: int, timeout: float = 3.0, read_timeout: float = 1.0,
              expected_token: str | None = None, resolve_timeout: float = 5.0) -> dict[str, Any]:
    """Connect to host:port (first address getaddrinfo gives, like torch's TCPStore client) and classify."""
    out: dict[str, Any] = {"host": host, "port": port, "address": None, "outcome": None, "elapsed_s": None,
                           "latency_ms": None, "errno": None, "error": None, "listener": None, "token": None,
                           "expected_token": expected_token, "token_match": None, "timeout_s": timeout}
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        out.update(outcome="invalid", invalid="port", error=f"port {port!r} is outside 1..65535")
        return out
    started = time.monotonic()
    addresses, error, err_no = resolve(host, resolve_timeout)
    if not addresses:
        out.update(outcome="name_resolution", errno=err_no, error=error, elapsed_s=round(time.monotonic() - started, 4))
        return out
    address = addresses[0]  # the first, as torch's TCPStore client tries it first
    out["address"] = address
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sockaddr = (address, port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        t0 = time.monotonic()
        try:
            sock.connect(sockaddr)
        except TimeoutError:
            out.update(outcome="filtered", error=f"no answer within {timeout:g} s", elapsed_s=round(time.monotonic() - t0, 4))
            return out
        except ConnectionRefusedError as exc:
            out.update(outcome="refused", errno=exc.errno, error=exc.strerror, elapsed_s=round(time.monotonic() - t0, 4))
            return out
        except OSError as exc:
            if exc.errno == errno.EINVAL and family == socket.AF_INET6 and ipaddress.ip_address(address).is_link_local:
                out.update(outcome="invalid", errno=exc.errno, invalid="address", elapsed_s=round(time.monotonic() - t0, 4),
                           error=f"{address} is an IPv6 link-local address: it needs an interface scope (%eth0), "
                                 "which torch's rendezvous does not take")
                return out
            kind = "unreachable" if exc.errno in _UNREACHABLE else "filtered" if exc.errno in _FILTERED else "error"
            out.update(outcome=kind, errno=exc.errno, error=exc.strerror or str(exc), elapsed_s=round(time.monotonic() - t0, 4))
            return out
        connected = time.monotonic()
        out["latency_ms"] = round((connected - t0) * 1000, 3)
        out["outcome"] = "ok"
        data = b""
        sock.settimeout(read_timeout)
        deadline = connected + read_timeout
        try:
            while b"\n" not in data and len(data) < 256 and time.monotonic() < deadline:
                chunk = sock.recv(256)
                if not chunk:
                    break
                data += chunk
        except (TimeoutError, OSError):
            pass
        out["elapsed_s"] = round(time.monotonic() - t0, 4)
        line = data.split(b"\n", 1)[0].decode("utf-8", "replace")
        parts = line.split(" ")
        if len(parts) == 2 and parts[0] == BANNER:
            out["listener"] = "ours"
            out["token"] = parts[1]
            out["token_match"] = None if expected_token is None else parts[1] == expected_token
        else:
            out["listener"] = "other"
            out["banner"] = line[:120] if line else None
        return out
    finally:
        sock.close()
