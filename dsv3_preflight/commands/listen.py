"""`dsv3-preflight listen`: serve a token on the rendezvous port so workers can test reach before launch."""
from __future__ import annotations

NAME = "listen"
HELP = "on the head: listen on MASTER_PORT for a while so workers' net.port_reach can reach it"


def add_arguments(parser) -> None:
    parser.add_argument("--host", default="0.0.0.0", help="address to bind (default 0.0.0.0, like torch's TCPStore; '::' for IPv6)")
    parser.add_argument("--port", default=None, metavar="P",
                        help="TCP port (default $MASTER_PORT, else 39500)")
    parser.add_argument("--deadline", type=float, default=60.0, metavar="S", help="stop after S seconds (default 60)")
    parser.add_argument("--token", default=None, metavar="T",
                        help="token to serve (default $DSV3_PREFLIGHT_LISTENER_TOKEN, else a random one)")
    parser.add_argument("--quiet", "-q", action="store_true", help="print only the token line and the summary")


def _port(raw: str | None) -> int:
    import os

    from ..cli import UsageError

    source = "--port"
    if raw is None:
        raw, source = os.environ.get("MASTER_PORT"), "MASTER_PORT"
        if raw is None:
            return 39500
    text = str(raw).strip()
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise UsageError(f"{source}: {raw!r} is not a TCP port (1..65535)")
    return int(text)


def run(args) -> int:
    import errno
    import os
    import socket

    from ..cli import UsageError
    from ..net.probes.listener import TOKEN_ENV, Listener

    port = _port(args.port)
    if not args.deadline > 0 or args.deadline > 24 * 3600:
        raise UsageError(f"--deadline: {args.deadline:g} must be between 0 and 86400 seconds")
    token = args.token or os.environ.get(TOKEN_ENV) or None
    try:
        listener = Listener(host=args.host, port=port, deadline_s=args.deadline, token=token)
        listener.start()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except socket.gaierror as exc:
        raise UsageError(f"--host {args.host!r}: {exc}") from None
    except OSError as exc:
        name = errno.errorcode.get(exc.errno or 0, "?")
        print(f"cannot listen on {args.host}:{port}: {exc.strerror or exc} ({name})")
        if exc.errno == errno.EADDRINUSE:
            holders = _holders(port)
            for _pid, line in holders:
                print(f"  held by {line}")
            pids = " ".join(dict.fromkeys(str(pid) for pid, _ in holders if pid))
            if pids:
                print(f"  free it (after checking it is a leftover): kill {pids}   # or pick another MASTER_PORT")
            else:  # the holder is not visible to this user: how to find it, never a `kill <pid>` to fill in
                print(f"  find it: ss -ltnp 'sport = :{port}'   # as root; then kill that pid, or pick another MASTER_PORT")
        return 1
    print(f"listening on {args.host}:{listener.port} for {args.deadline:g} s (token {listener.token})")
    print(f"on each worker: export {TOKEN_ENV}={listener.token}; dsv3-preflight run --only net.port_reach", flush=True)
    shown = 0
    try:
        while not listener.wait(timeout=0.2):
            while shown < len(listener.served):
                s = listener.served[shown]
                shown += 1
                if not args.quiet:
                    print(f"served {s['peer']}:{s['port']} at +{s['at']:.1f}s", flush=True)
    except KeyboardInterrupt:
        listener.close()
        raise
    finally:
        listener.close()
    for s in listener.served[shown:]:
        if not args.quiet:
            print(f"served {s['peer']}:{s['port']} at +{s['at']:.1f}s")
    peers = sorted({s["peer"] for s in listener.served})
    print(f"deadline reached: served {len(listener.served)} connection(s)" + (f" from {', '.join(peers)}" if peers else ""))
    return 0


def _holders(port: int) -> list[tuple[int | None, str]]:
    """(pid, description) of the processes listening on port (as the port_holders fact describes them)."""
    try:
        import psutil

        from ..host.probes.resources import process_info
    except ImportError:  # pragma: no cover
        return []
    lines = []
    try:
        conns = psutil.net_connections(kind="inet")
    except (psutil.Error, OSError):
        return []
    for conn in conns:
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
            info = process_info(conn.pid) if conn.pid else None
            if info:
                cmdline = " ".join((info.get("cmdline") or "").split())[:200]  # one line, even for `python -c` scripts
                lines.append((info["pid"], f"pid {info['pid']} ({cmdline}, user {info.get('user')}, "
                                           f"since {info.get('started')})"))
            else:
                lines.append((None, "a process this user cannot see"))
    return lines
