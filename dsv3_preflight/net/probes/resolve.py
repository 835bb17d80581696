"""Name resolution with a deadline: getaddrinfo itself has none, and a broken resolver can stall for tens of seconds."""
from __future__ import annotations

import socket
import threading

DEFAULT_TIMEOUT_S = 5.0


def resolve(name: str, timeout: float = DEFAULT_TIMEOUT_S) -> tuple[list[str], str | None, int | None]:
    """``(addresses in getaddrinfo order, error, errno)`` for a TCP connection to ``name``.

    The lookup runs in a daemon thread; past ``timeout`` the answer is an error, never a hang.
    """
    box: dict = {}

    def lookup() -> None:
        try:
            box["infos"] = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            box["error"] = (f"{exc.strerror or exc} (errno {exc.errno})", exc.errno)
        except (UnicodeError, ValueError, OSError) as exc:
            box["error"] = (str(exc) or type(exc).__name__, None)

    thread = threading.Thread(target=lookup, name=f"resolve:{name[:40]}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        return [], f"name resolution did not answer within {timeout:g} s (check /etc/resolv.conf)", None
    if "error" in box:
        return [], box["error"][0], box["error"][1]
    seen: list[str] = []
    for info in box["infos"]:
        addr = info[4][0].split("%")[0]
        if addr not in seen:
            seen.append(addr)
    return seen, None, None
