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


HOSTS_FILE = "/etc/hosts"


def hosts_entries(name: str, path: str = HOSTS_FILE, limit: int = 1 << 20) -> list[dict]:
    """The lines of the hosts file that map ``name`` (case-insensitive): ``{"line", "address", "names", "text"}``.

    Inside ``ip netns exec`` this is the namespace's own ``/etc/netns/<ns>/hosts``. A file that cannot be
    read gives no entries. At most ``limit`` bytes are read.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return []
    wanted = name.strip().lower().rstrip(".")
    found = []
    for number, raw in enumerate(data.splitlines(), 1):
        fields = raw.split("#", 1)[0].split()
        if len(fields) < 2:
            continue
        names = fields[1:]
        if wanted in (n.lower().rstrip(".") for n in names):
            found.append({"line": number, "address": fields[0], "names": names, "text": " ".join(raw.split())[:200]})
    return found
