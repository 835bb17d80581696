"""Which interfaces NCCL and Gloo would use, computed with each library's own rules (pure functions).

NCCL (``ncclFindInterfaces`` / ``findInterfaces`` / ``matchIfList``: ``src/misc/socket.cc``, from 2.28.3 with the
walk in ``src/os/linux.cc``; the version is the node's when the fact has it, else :data:`ASSUMED_NCCL_VERSION`):

* ``NCCL_SOCKET_IFNAME`` is honoured only when it is longer than one character; otherwise NCCL picks
  automatically: interfaces starting with ``ib``; else anything but ``^docker,lo,virbr``; else
  ``docker``; else ``lo``; else ``virbr`` (before 2.28.3: ``^docker,lo``, ``docker``, ``lo``).
* The value is a comma-separated list of prefixes (an entry may carry ``:port``, ignored for sockets: NCCL cuts
  an entry at its first ``:``, whatever follows). NCCL reads at most 16 entries (``parseStringList``, ``MAX_IFS``);
  empty ones do not count, later ones are ignored.
  A leading ``^`` excludes the listed prefixes; then a leading ``=`` makes the entries exact names
  (``^=docker0`` excludes exactly docker0). ``eth`` selects eth0, eth1, eth10…
* Interfaces are walked in ``getifaddrs`` order — IPv4 addresses first, in interface-index order, then
  IPv6 ones — keeping those with an address of the family ``NCCL_SOCKET_FAMILY`` forces (``AF_INET`` /
  ``AF_INET6``; anything else means both), skipping ``::1``, each interface once. Since 2.28.3 NCCL also
  skips every interface without IFF_RUNNING (down, or up without carrier), whether the value names it or
  NCCL picks by itself; older versions do not look at the state.
* Bootstrap (the out-of-band connection every rank makes first) uses the *first* selected interface;
  the socket transport uses all of them (up to 16) as separate devices.

Gloo (torch ``ProcessGroupGloo``): ``GLOO_SOCKET_IFNAME`` longer than one character is a comma-separated list
of *exact* interface names, split as torch splits it (a trailing comma is dropped, an empty name before it
fails init); torch makes one Gloo device per name and spreads work over them round-robin, so every name must
exist, carry an address and reach the peers. Unset (or one character or less), Gloo binds the first address
the host name resolves to that this node can bind, loopback included; only when none can does torch warn and
bind 127.0.0.1 (:func:`gloo_default_address`).

NCCL also reads ``NCCL_*`` settings from files (``src/misc/param.cc`` ``initEnv``): ``$NCCL_CONF_FILE`` when set,
else ``~/.nccl.conf`` (the home of the process's user), then ``/etc/nccl.conf``; ``VAR=value`` lines, ``#`` lines
skipped, nothing trimmed; each value is ``setenv(..., 0)``: the environment wins, then the first file that sets it
(:func:`nccl_settings`).

An interface record, as the ``nic_route`` fact lists them: ``{"name", "index", "ipv4": [...],
"ipv6": [...], "up", "running", "operstate", "loopback", ...}``.
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

NCCL_DEFAULT_STEPS = ("ib", "^docker,lo,virbr", "docker", "lo", "virbr")
#: the automatic steps before 2.28.3 (v2.27.7 src/misc/socket.cc: no virbr)
NCCL_DEFAULT_STEPS_BEFORE_RUNNING = ("ib", "^docker,lo", "docker", "lo")
#: the first NCCL that skips interfaces without IFF_RUNNING (v2.28.3-1 src/misc/socket.cc findInterfaces)
SKIPS_NOT_RUNNING_SINCE = (2, 28, 3)
#: the NCCL judged when the node's is unknown: the one torch 2.13's wheel pins (nvidia-nccl-cu13==2.29.7)
ASSUMED_NCCL_VERSION = "2.29.7"
#: operstates with which the kernel sets IFF_RUNNING (dev_get_flags: up, and netif_oper_up)
RUNNING_OPERSTATES = frozenset({"up", "unknown"})
MAX_IFS = 16
IFNAMSIZ = 16  # including the terminating NUL: names have at most 15 characters
_VALID_NAME = re.compile(r"[^\s/:,=^]{1,15}")


def invalid_entries(value: str) -> list[str]:
    """Entries of an *_SOCKET_IFNAME value that cannot be a Linux interface name (or prefix)."""
    body = value
    if body.startswith("^"):
        body = body[1:]
    if body.startswith("="):
        body = body[1:]
    bad = []
    for raw in body.split(","):
        entry = raw.split(":", 1)[0]   # NCCL cuts at the first ':' (eth0:1:2 and eth0: are eth0)
        if entry == "":
            continue
        if not _VALID_NAME.fullmatch(entry):
            bad.append(raw)
    return bad


def parse_nccl_ifname(value: str) -> tuple[bool, bool, list[str]]:
    """``(exclude, exact, prefixes)`` as NCCL's parser reads the value."""
    exclude = value.startswith("^")
    if exclude:
        value = value[1:]
    exact = value.startswith("=")
    if exact:
        value = value[1:]
    prefixes = []
    for entry in value.split(","):
        prefix = entry.split(":", 1)[0]  # "eth0:1" -> prefix "eth0", port 1 (ports do not matter for sockets)
        if prefix:
            prefixes.append(prefix)
    return exclude, exact, prefixes[:MAX_IFS]   # parseStringList stops at MAX_IFS entries


def ignored_entries(value: str) -> list[str]:
    """The entries of an NCCL_SOCKET_IFNAME value past the 16 NCCL reads (empty entries do not count)."""
    body = value[1:] if value.startswith("^") else value
    body = body[1:] if body.startswith("=") else body
    entries = [e for e in body.split(",") if e.split(":", 1)[0]]
    return entries[MAX_IFS:]


#: NCCL's settings files after $NCCL_CONF_FILE or ~/.nccl.conf (src/misc/param.cc initEnvFunc)
ETC_NCCL_CONF = "/etc/nccl.conf"


def parse_nccl_conf(text: str) -> dict[str, str]:
    """``VAR=value`` lines as NCCL's setEnvFile reads them: a line starting with ``#`` is skipped, the name is what
    precedes the first ``=`` and the value all that follows, untrimmed (``export X=1`` sets ``export X``); within
    one file a later line does not replace an earlier one (setenv without overwrite)."""
    values: dict[str, str] = {}
    for line in text.split("\n"):
        if line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        values.setdefault(name[:1023], value[:1023])
    return values


def nccl_settings(env: Mapping[str, Any], files: Sequence[Mapping[str, Any]], names: Iterable[str]
                  ) -> dict[str, tuple[str | None, str | None]]:
    """``{name: (value, source)}`` for NCCL variables as NCCL sees them: the process environment wins (source
    None), else the first of ``files`` (``{"path", "values"}``, in NCCL's load order) that sets it; (None, None)
    when nothing does."""
    out: dict[str, tuple[str | None, str | None]] = {}
    for name in names:
        if env.get(name) is not None:
            out[name] = (env[name], None)
            continue
        out[name] = next(((f["values"][name], f["path"]) for f in files if name in (f.get("values") or {})),
                         (None, None))
    return out


def _match(name: str, prefixes: Sequence[str], exact: bool) -> bool:
    if not prefixes:
        return True  # NCCL: "an exception for the case where no user list is defined"
    return any(name == p if exact else name.startswith(p) for p in prefixes)


def _family_code(nccl_socket_family: str | None) -> int | None:
    if nccl_socket_family == "AF_INET":
        return 4
    if nccl_socket_family == "AF_INET6":
        return 6
    return None


def nccl_version_tuple(version: str | None) -> tuple[int, int, int] | None:
    """``"2.29.7"`` (or ``"2.29.7+cuda12.9"``) as ``(2, 29, 7)``; None when it is not a version."""
    m = re.match(r"\s*(\d+)\.(\d+)\.(\d+)", str(version or ""))
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def skips_not_running(nccl_version: str | None) -> bool:
    """Whether this NCCL skips interfaces without IFF_RUNNING (2.28.3 and later; an unknown version is judged as
    :data:`ASSUMED_NCCL_VERSION`)."""
    parsed = nccl_version_tuple(nccl_version) or nccl_version_tuple(ASSUMED_NCCL_VERSION)
    return parsed is not None and parsed >= SKIPS_NOT_RUNNING_SINCE


def is_running(iface: Mapping[str, Any]) -> bool:
    """IFF_RUNNING as getifaddrs gives it to NCCL: the interface is up and its operstate is up or unknown (the
    kernel's dev_get_flags), read from the recorded operstate; a record without one counts as running unless
    it says the interface is down."""
    state = iface.get("operstate")
    if state is None:
        return iface.get("up") is not False and iface.get("running") is not False
    return iface.get("up") is not False and str(state).lower() in RUNNING_OPERSTATES


def getifaddrs_order(interfaces: Iterable[Mapping[str, Any]], family: int | None = None) -> list[tuple[str, int, str]]:
    """``(name, family, address)`` entries as getifaddrs lists them: IPv4 by index, then IPv6 by index."""
    ordered = sorted(interfaces, key=lambda i: (i.get("index") or 0, i["name"]))
    entries: list[tuple[str, int, str]] = []
    if family in (None, 4):
        entries += [(i["name"], 4, a) for i in ordered for a in i.get("ipv4") or []]
    if family in (None, 6):
        entries += [(i["name"], 6, a) for i in ordered for a in i.get("ipv6") or [] if a.split("%")[0] != "::1"]
    return entries


def find_interfaces(spec: str, interfaces: Iterable[Mapping[str, Any]], family: int | None = None,
                    running_only: bool = True) -> list[str]:
    """NCCL's findInterfaces: the names ``spec`` selects, in the order NCCL finds them (at most 16).

    ``running_only``: skip interfaces that are not RUNNING (:func:`is_running`), as NCCL 2.28.3 and later do.
    """
    exclude, exact, prefixes = parse_nccl_ifname(spec)
    found: list[str] = []
    if running_only:
        interfaces = [i for i in interfaces if is_running(i)]
    for name, _fam, _addr in getifaddrs_order(interfaces, family):
        if not (_match(name, prefixes, exact) ^ exclude):
            continue
        if name not in found:
            found.append(name)
            if len(found) == MAX_IFS:
                break
    return found


def nccl_select(value: str | None, interfaces: Sequence[Mapping[str, Any]], socket_family: str | None = None,
                nccl_version: str | None = None) -> dict[str, Any]:
    """What NCCL ``nccl_version`` (None: unknown, judged as :data:`ASSUMED_NCCL_VERSION`) selects for
    ``NCCL_SOCKET_IFNAME=value`` (None: unset) on these interfaces.

    Returns ``{"honoured", "spec", "selected", "bootstrap", "invalid", "note", "not_running", "nccl_version",
    "version_assumed", "skips_not_running"}``: ``selected`` in NCCL's order, ``bootstrap`` the first of them (None
    when nothing matches: NCCL then fails at init), ``not_running`` the interfaces the value matches that NCCL
    skips because they are not RUNNING.
    """
    family = _family_code(socket_family)
    skip = skips_not_running(nccl_version)
    known = nccl_version_tuple(nccl_version) is not None
    about = {"nccl_version": nccl_version if known else ASSUMED_NCCL_VERSION, "version_assumed": not known,
             "skips_not_running": skip}
    note = None
    if value is not None and len(value) > 1:
        selected = find_interfaces(value, interfaces, family, running_only=skip)
        not_running = [n for n in find_interfaces(value, interfaces, family, running_only=False)
                       if n not in selected] if skip else []
        ignored = ignored_entries(value)
        if ignored:
            note = (f"NCCL reads only the first {MAX_IFS} entries of NCCL_SOCKET_IFNAME and ignores the "
                    f"{len(ignored)} after them: {','.join(ignored)}")
        return {"honoured": True, "spec": value, "selected": selected, "bootstrap": selected[0] if selected else None,
                "invalid": invalid_entries(value), "note": note, "not_running": not_running, **about}
    if value is not None:
        note = f"NCCL ignores NCCL_SOCKET_IFNAME={value!r} (one character or less) and picks automatically"
    selected = []
    spec = None
    for step in NCCL_DEFAULT_STEPS if skip else NCCL_DEFAULT_STEPS_BEFORE_RUNNING:
        selected = find_interfaces(step, interfaces, family, running_only=skip)
        if selected:
            spec = step
            break
    return {"honoured": False, "spec": spec, "selected": selected, "bootstrap": selected[0] if selected else None,
            "invalid": [], "note": note, "not_running": [], **about}


GLOO_EMPTY_NAME = "GlooDeviceFactory::makeTCPDevice(): interface or hostname can't be empty"


def split_gloo_value(value: str) -> list[str]:
    """GLOO_SOCKET_IFNAME's names as torch splits them (``c10d::split``, i.e. ``std::getline`` on ','): a
    trailing empty piece disappears (``eth0,`` is ``eth0``); a leading or middle one stays (``,eth0``)."""
    pieces = value.split(",")
    if pieces[-1] == "":
        pieces.pop()
    return pieces


def gloo_select(value: str | None, interfaces: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What Gloo (through torch) uses for ``GLOO_SOCKET_IFNAME=value``; None when unset.

    Returns ``{"honoured", "names", "selected", "missing", "no_address", "invalid", "empty", "note"}``: torch
    honours a value longer than one character (else it binds as if unset: ``note`` says so); every listed name
    is used (round-robin); an empty name (``empty``), a missing one or one without an address makes
    init_process_group fail.
    """
    if value is None or len(value) <= 1:
        note = None if value is None else (f"torch ignores GLOO_SOCKET_IFNAME={value!r} (one character or less) "
                                           "and binds as if it were unset")
        return {"honoured": False, "names": [], "selected": [], "missing": [], "no_address": [], "invalid": [],
                "empty": False, "note": note}
    by_name = {i["name"]: i for i in interfaces}
    names = split_gloo_value(value)
    selected, missing, no_address = [], [], []
    for name in names:
        if name == "":
            continue
        iface = by_name.get(name)
        if iface is None:
            missing.append(name)
        elif not (iface.get("ipv4") or iface.get("ipv6")):
            no_address.append(name)
        else:
            selected.append(name)
    invalid = [n for n in names if n and not _VALID_NAME.fullmatch(n)]
    return {"honoured": True, "names": names, "selected": selected, "missing": missing, "no_address": no_address,
            "invalid": invalid, "empty": "" in names, "note": None}


def _bindable(address: str, interfaces: Sequence[Mapping[str, Any]]) -> bool:
    """Whether bind(2) takes ``address`` here: an address of an interface, or any 127/8 address while a loopback
    interface holds one (the kernel's local route covers the whole /8)."""
    held = {a.split("%")[0] for i in interfaces for a in (i.get("ipv4") or []) + (i.get("ipv6") or [])}
    if address in held:
        return True
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return ip.version == 4 and ip.is_loopback and any(ipaddress.ip_address(a).is_loopback for a in held if "." in a)


def gloo_default_address(hostname_addresses: Sequence[str], interfaces: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The address Gloo binds when GLOO_SOCKET_IFNAME is unset or ignored.

    torch's ``createDefaultDevice`` uses the host name when any address it resolves to can be bound, and Gloo
    then binds the *first* that can, in getaddrinfo order (gloo ``tcp/device.cc`` ``lookupAddrForHostname``):
    a loopback address first in ``/etc/hosts`` wins over the node's real one. Only when none can does torch
    warn and bind 127.0.0.1. Returns ``{"address", "fallback", "loopback"}``.
    """
    for address in hostname_addresses:
        if _bindable(address, interfaces):
            return {"address": address, "fallback": False, "loopback": ipaddress.ip_address(address).is_loopback}
    return {"address": "127.0.0.1", "fallback": True, "loopback": True}


def recommended_nccl_value(ifname: str, interfaces: Sequence[Mapping[str, Any]], socket_family: str | None = None) -> str:
    """The shortest NCCL_SOCKET_IFNAME that selects exactly ``ifname`` here, whatever state the other interfaces
    are in (one that comes up later must not join): the name, else ``=name``; ``=name`` when the interfaces are
    not known (NCCL reads a bare name as a prefix: ``eth0`` also takes ``eth01``)."""
    if find_interfaces(ifname, interfaces, _family_code(socket_family), running_only=False) == [ifname]:
        return ifname
    return "=" + ifname
