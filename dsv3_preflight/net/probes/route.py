"""The kernel's own routing decision for an address, and this host's interfaces — without iproute2.

``route_get(ip)`` asks the kernel through an rtnetlink ``RTM_GETROUTE`` request (what ``ip route get``
does), sent and parsed by pyroute2 (imported only when a route is asked), and returns the output interface, preferred source address, gateway and route type. Where
netlink is unavailable it falls back to a connected UDP socket (no packet is sent): the source
address the kernel picks, mapped to the interface holding it, with the gateway from
``/proc/net/route`` (IPv4). ``interfaces()`` lists every interface with its addresses, flags, MTU,
operstate and speed: the flags from the ``SIOCGIFFLAGS`` ioctl, which is where getifaddrs (and so NCCL) reads
IFF_RUNNING; sysfs ``flags`` holds only the administrative flags and never carries it.
"""
from __future__ import annotations

import errno
import fcntl
import ipaddress
import os
import socket
import struct
from pathlib import Path
from typing import Any

#: rtm_type of a route (linux/rtnetlink.h), as the facts name it
RTN_TYPES = {1: "unicast", 2: "local", 3: "broadcast", 4: "anycast", 5: "multicast", 6: "blackhole",
             7: "unreachable", 8: "prohibit", 9: "throw", 10: "nat"}
IFF_UP, IFF_LOOPBACK, IFF_RUNNING = 0x1, 0x8, 0x40
SIOCGIFFLAGS = 0x8913
#: operstates in which the kernel sets IFF_RUNNING on an interface that is up (dev_get_flags: netif_oper_up)
RUNNING_OPERSTATES = frozenset({"up", "unknown"})
SYS_NET = Path("/sys/class/net")


def _sysfs(name: str, attr: str) -> str | None:
    try:
        return (SYS_NET / name / attr).read_text().strip()
    except OSError:  # EINVAL for speed of virtual links, ENOENT outside Linux
        return None


def _int_or_none(text: str | None, base: int = 10) -> int | None:
    try:
        return int(text, base) if text is not None else None
    except ValueError:
        return None


def ioctl_flags(name: str) -> int | None:
    """The interface's flags as the kernel reports them to getifaddrs (``SIOCGIFFLAGS``: IFF_RUNNING included);
    None when the ioctl fails (the interface went away, not Linux)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            answer = fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, struct.pack("16s24x", name.encode()[:15]))
    except (OSError, UnicodeError):
        return None
    flags: int = struct.unpack_from("H", answer, 16)[0]
    return flags


def _running(flags: int | None, admin_up: bool | None, operstate: str | None) -> bool | None:
    """IFF_RUNNING from the ioctl's flags; else as the kernel derives it: up, with operstate up or unknown."""
    if flags is not None:
        return bool(flags & IFF_RUNNING)
    if operstate is None or admin_up is None:
        return None
    return admin_up and operstate.lower() in RUNNING_OPERSTATES


def interfaces() -> list[dict[str, Any]]:
    """Every interface, by index: name, index, IPv4/IPv6 addresses, up/running/loopback, MTU, operstate, speed."""
    import netifaces

    result = []
    for index, name in sorted(socket.if_nameindex()):
        try:
            addrs = netifaces.ifaddresses(name)
        except ValueError:
            addrs = {}
        ipv4 = [a["addr"] for a in addrs.get(netifaces.AF_INET, []) if a.get("addr")]
        ipv6 = [a["addr"].split("%")[0] for a in addrs.get(netifaces.AF_INET6, []) if a.get("addr")]
        prefixes = []
        for a in addrs.get(netifaces.AF_INET, []):
            try:
                prefixes.append(str(ipaddress.ip_interface(f"{a['addr']}/{a.get('netmask') or '32'}")))
            except ValueError:
                pass
        from_ioctl = ioctl_flags(name)
        flags = from_ioctl if from_ioctl is not None else _int_or_none(_sysfs(name, "flags"), 16)
        up = bool(flags & IFF_UP) if flags is not None else None
        operstate = _sysfs(name, "operstate")
        speed = _int_or_none(_sysfs(name, "speed"))
        result.append({
            "name": name,
            "index": index,
            "ipv4": ipv4,
            "ipv4_cidr": prefixes,
            "ipv6": ipv6,
            "flags": flags,
            "up": up,
            "running": _running(from_ioctl, up, operstate),
            "loopback": bool(flags & IFF_LOOPBACK) if flags is not None else name == "lo",
            "mtu": _int_or_none(_sysfs(name, "mtu")),
            "operstate": operstate,
            "speed_mbps": speed if speed is not None and speed > 0 else None,
        })
    return result


def netlink_route_get(dst: str) -> dict[str, Any]:
    """RTM_GETROUTE for ``dst`` through pyroute2; raises OSError (errno of the kernel's answer, e.g. ENETUNREACH).

    The kernel answers a route request at once (no I/O behind it); the probe's timeout bounds the call."""
    ip = ipaddress.ip_address(dst)
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        from pyroute2 import IPRoute
        from pyroute2.netlink.exceptions import NetlinkError
    except ImportError as exc:  # not Linux, or pyroute2 missing: the UDP fallback answers
        raise OSError(errno.ENOPROTOOPT, f"rtnetlink through pyroute2 unavailable: {exc}") from None
    try:
        with IPRoute() as ipr:
            answer = list(ipr.route("get", dst=str(ip), family=family))
    except NetlinkError as exc:
        raise OSError(exc.code, os.strerror(exc.code)) from None
    if not answer or answer[0].get("event") != "RTM_NEWROUTE":
        raise OSError(errno.EPROTO, f"unexpected netlink answer: {answer[0].get('event') if answer else 'none'}")
    route = answer[0]
    rtype = route.get("type")
    out: dict[str, Any] = {"route_type": RTN_TYPES.get(rtype, str(rtype)), "ifindex": None, "ifname": None,
                           "src": route.get_attr("RTA_PREFSRC"), "gateway": route.get_attr("RTA_GATEWAY")}
    index = route.get_attr("RTA_OIF")
    if index is not None:
        out["ifindex"] = int(index)
        try:
            out["ifname"] = socket.if_indextoname(int(index))
        except OSError:
            pass
    return out


def _proc_route_gateway(dst: str, ifname: str | None) -> str | None:
    """The IPv4 gateway of the longest /proc/net/route prefix containing dst (None when on-link)."""
    try:
        lines = Path("/proc/net/route").read_text().splitlines()[1:]
    except OSError:
        return None
    target = int(ipaddress.IPv4Address(dst))
    best: tuple[int, str | None] | None = None
    for line in lines:
        f = line.split()
        if len(f) < 8 or (ifname and f[0] != ifname):
            continue
        net = int.from_bytes(bytes.fromhex(f[1]), "little")
        mask = int.from_bytes(bytes.fromhex(f[7]), "little")
        gw = int.from_bytes(bytes.fromhex(f[2]), "little")
        if target & mask == net & mask:
            plen = bin(mask).count("1")
            if best is None or plen > best[0]:
                best = (plen, str(ipaddress.IPv4Address(gw)) if gw else None)
    return best[1] if best else None


def udp_route_get(dst: str, ifaces: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Fallback: the source address of a connected UDP socket (nothing is sent) mapped to its interface."""
    ip = ipaddress.ip_address(dst)
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as sock:
        sock.connect((dst, 9))
        src = sock.getsockname()[0]
    ifaces = interfaces() if ifaces is None else ifaces
    holder = next((i for i in ifaces if src in i["ipv4"] or src in i["ipv6"]), None)
    local = any(dst in i["ipv4"] or dst in i["ipv6"] for i in ifaces)
    ifname = holder["name"] if holder else None
    return {"route_type": "local" if local else "unicast", "ifindex": holder["index"] if holder else None,
            "ifname": ifname, "src": src,
            "gateway": _proc_route_gateway(dst, ifname) if ip.version == 4 and not local else None}


def route_get(dst: str, ifaces: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The kernel's route to dst: ``{"method", "route_type", "ifname", "ifindex", "src", "gateway", "error", "errno"}``.

    ``error`` is set (and the rest None) when the kernel has no route (ENETUNREACH, EHOSTUNREACH…).
    """
    try:
        out = netlink_route_get(dst)
        out["method"] = "netlink"
    except OSError as exc:
        if exc.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EINVAL, errno.EACCES):
            return {"method": "netlink", "route_type": None, "ifname": None, "ifindex": None, "src": None,
                    "gateway": None, "error": exc.strerror or str(exc), "errno": exc.errno}
        try:
            out = udp_route_get(dst, ifaces)
            out["method"] = "udp_connect"
        except OSError as exc2:
            return {"method": "udp_connect", "route_type": None, "ifname": None, "ifindex": None, "src": None,
                    "gateway": None, "error": exc2.strerror or str(exc2), "errno": exc2.errno}
    out["error"] = None
    out["errno"] = None
    return out
