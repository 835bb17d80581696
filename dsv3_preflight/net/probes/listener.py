"""A temporary TCP listener on the rendezvous port, so workers can test reach before anything listens.

API (the CLI ``dsv3-preflight listen`` and the Ray cluster mode call exactly this)::

    from dsv3_preflight.net.probes.listener import Listener

    with Listener(host="0.0.0.0", port=39500, deadline_s=60.0, token=None) as lst:   # start() on enter
        print(lst.port, lst.token)        # the bound port (useful with port=0) and the token served
        ...                               # workers run the port_reach probe meanwhile
    # close() on exit; or call lst.start() / lst.close() yourself

* ``Listener(host: str = "0.0.0.0", port: int = 39500, deadline_s: float = 60.0, token: str | None = None)``
  — ``token`` defaults to a random hex string; ``host`` may be an IPv6 address (``"::"``).
* ``.start()`` binds and listens (SO_REUSEADDR, like torch's TCPStore) and starts serving in a daemon
  thread. It raises ``OSError`` with ``errno`` set (EADDRINUSE when the port is taken, EACCES for a
  privileged port, EADDRNOTAVAIL for an address this host lacks) and ``ValueError`` for a port
  outside 0..65535. Returns self.
* Each accepted connection gets one line ``dsv3-preflight-listener <token>\\n`` and is closed.
* The listener stops by itself ``deadline_s`` seconds after ``start()``; ``.close()`` stops it earlier
  (idempotent). ``.wait(timeout=None)`` blocks until it has stopped; ``.running`` says whether it serves.
* ``.served`` is the list of connections served so far: ``{"peer": "10.77.0.11", "port": 51234, "at": 1712.3}``
  (``at``: seconds since start).

The worker side reads the token from ``DSV3_PREFLIGHT_LISTENER_TOKEN`` to tell *our* listener (from
this session) from any other process that happens to accept on the port.
"""
from __future__ import annotations

import secrets
import select
import socket
import threading
import time
from typing import Any

BANNER = "dsv3-preflight-listener"
TOKEN_ENV = "DSV3_PREFLIGHT_LISTENER_TOKEN"
DEFAULT_PORT = 39500


class Listener:
    """Serves one token line per connection on host:port until deadline_s have passed or close()."""

    def __init__(self, host: str = "0.0.0.0", port: int = DEFAULT_PORT, deadline_s: float = 60.0,
                 token: str | None = None) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an integer 0..65535, got {port!r}")
        if not deadline_s > 0:
            raise ValueError(f"deadline_s must be positive, got {deadline_s!r}")
        if token is not None and (not token or any(c.isspace() for c in token)):
            raise ValueError("token must be a non-empty string without whitespace")
        self.host = host
        self._requested_port = port
        self.deadline_s = float(deadline_s)
        self.token = token or secrets.token_hex(8)
        self.served: list[dict[str, Any]] = []
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._started_at = 0.0
        self.port = port

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> Listener:
        if self._sock is not None:
            return self
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self.host, self._requested_port))
            sock.listen(64)
        except OSError:
            sock.close()
            raise
        sock.setblocking(False)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._started_at = time.monotonic()
        self._thread = threading.Thread(target=self._serve, name=f"dsv3-preflight-listener:{self.port}", daemon=True)
        self._thread.start()
        return self

    @property
    def running(self) -> bool:
        return self._thread is not None and not self._stopped.is_set()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        self._stopped.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the listener has stopped (deadline or close); True when it has."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def __enter__(self) -> Listener:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- serving -----------------------------------------------------------------------
    def _serve(self) -> None:
        assert self._sock is not None
        line = f"{BANNER} {self.token}\n".encode()
        end = self._started_at + self.deadline_s
        try:
            while not self._stop.is_set():
                left = end - time.monotonic()
                if left <= 0:
                    break
                try:
                    ready, _, _ = select.select([self._sock], [], [], min(left, 0.2))
                except (OSError, ValueError):
                    break
                if not ready:
                    continue
                try:
                    conn, peer = self._sock.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    break
                with conn:
                    conn.settimeout(1.0)
                    try:
                        conn.sendall(line)
                        conn.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                self.served.append({"peer": peer[0], "port": peer[1], "at": round(time.monotonic() - self._started_at, 3)})
        finally:
            try:
                self._sock.close()
            except OSError:
                pass
            self._stopped.set()
