"""Which interfaces NCCL and Gloo would use, computed with each library's own rules (pure functions).

NCCL (``src/misc/socket.cc``: ``ncclFindInterfaces`` / ``findInterfaces`` / ``matchIfList``):

* ``NCCL_SOCKET_IFNAME`` is honoured only when it is longer than one character; otherwise NCCL picks
  automatically: interfaces starting with ``ib``; else anything but ``^docker,lo,virbr``; else
  ``docker``; else ``lo``; else ``virbr``.
* The value is a comma-separated list of prefixes (an entry may carry ``:port``, ignored for sockets).
  A leading ``^`` excludes the listed prefixes; then a leading ``=`` makes the entries exact names
  (``^=docker0`` excludes exactly docker0). ``eth`` selects eth0, eth1, eth10…
* Interfaces are walked in ``getifaddrs`` order — IPv4 addresses first, in interface-index order, then
  IPv6 ones — keeping those with an address of the family ``NCCL_SOCKET_FAMILY`` forces (``AF_INET`` /
  ``AF_INET6``; anything else means both), skipping ``::1``, each interface once. NCCL does not look at
  whether an interface is up.
* Bootstrap (the out-of-band connection every rank makes first) uses the *first* selected interface;
  the socket transport uses all of them (up to 16) as separate devices.

Gloo (torch ``ProcessGroupGloo``): ``GLOO_SOCKET_IFNAME`` is a comma-separated list of *exact* interface
names; torch makes one Gloo device per name and spreads work over them round-robin, so every name must
exist, carry an address and reach the peers. Unset, Gloo binds the address the host name resolves to,
falling back to loopback when that is not a local address.

An interface record, as the ``nic_route`` fact lists them: ``{"name", "index", "ipv4": [...],
"ipv6": [...], "up", "loopback", ...}``.
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

NCCL_DEFAULT_STEPS = ("ib", "^docker,lo,virbr", "docker", "lo", "virbr")
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
        entry = raw.split(":", 1)[0] if ":" in raw and raw.split(":", 1)[1].strip().isdigit() else raw
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
    return exclude, exact, prefixes


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


def getifaddrs_order(interfaces: Iterable[Mapping[str, Any]], family: int | None = None) -> list[tuple[str, int, str]]:
    """``(name, family, address)`` entries as getifaddrs lists them: IPv4 by index, then IPv6 by index."""
    ordered = sorted(interfaces, key=lambda i: (i.get("index") or 0, i["name"]))
    entries: list[tuple[str, int, str]] = []
    if family in (None, 4):
        entries += [(i["name"], 4, a) for i in ordered for a in i.get("ipv4") or []]
    if family in (None, 6):
        entries += [(i["name"], 6, a) for i in ordered for a in i.get("ipv6") or [] if a.split("%")[0] != "::1"]
    return entries


def find_interfaces(spec: str, interfaces: Iterable[Mapping[str, Any]], family: int | None = None) -> list[str]:
    """NCCL's findInterfaces: the names ``spec`` selects, in the order NCCL finds them (at most 16)."""
    exclude, exact, prefixes = parse_nccl_ifname(spec)
    found: list[str] = []
    for name, _fam, _addr in getifaddrs_order(interfaces, family):
        if not (_match(name, prefixes, exact) ^ exclude):
            continue
        if name not in found:
            found.append(name)
            if len(found) == MAX_IFS:
                break
    return found


def nccl_select(value: str | None, interfaces: Sequence[Mapping[str, Any]], socket_family: str | None = None) -> dict[str, Any]:
    """What NCCL selects for ``NCCL_SOCKET_IFNAME=value`` (None: unset) on these interfaces.

    Returns ``{"honoured", "spec", "selected", "bootstrap", "invalid", "note"}``: ``selected`` in NCCL's
    order, ``bootstrap`` the first of them (None when nothing matches: NCCL then fails at init).
    """
    family = _family_code(socket_family)
    note = None
    if value is not None and len(value) > 1:
        selected = find_interfaces(value, interfaces, family)
        return {"honoured": True, "spec": value, "selected": selected, "bootstrap": selected[0] if selected else None,
                "invalid": invalid_entries(value), "note": note}
    if value is not None:
        note = f"NCCL ignores NCCL_SOCKET_IFNAME={value!r} (one character or less) and picks automatically"
    selected: list[str] = []
    spec = None
    for step in NCCL_DEFAULT_STEPS:
        selected = find_interfaces(step, interfaces, family)
        if selected:
            spec = step
            break
    return {"honoured": False, "spec": spec, "selected": selected, "bootstrap": selected[0] if selected else None,
            "invalid": [], "note": note}


def gloo_select(value: str | None, interfaces: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What Gloo (through torch) uses for ``GLOO_SOCKET_IFNAME=value``; None when unset.

    Returns ``{"names", "selected", "missing", "no_address", "invalid"}``: every listed name is used
    (round-robin); a missing one or one without an address makes init_process_group fail.
    """
    if value is None:
        return {"names": [], "selected": [], "missing": [], "no_address": [], "invalid": []}
    by_name = {i["name"]: i for i in interfaces}
    names = [n for n in value.split(",")]
    selected, missing, no_address = [], [], []
    for name in names:
        iface = by_name.get(name)
        if iface is None:
            missing.append(name)
        elif not (iface.get("ipv4") or iface.get("ipv6")):
            no_address.append(name)
        else:
            selected.append(name)
    invalid = [n for n in names if not _VALID_NAME.fullmatch(n)]
    return {"names": names, "selected": selected, "missing": missing, "no_address": no_address, "invalid": invalid}


def recommended_nccl_value(ifname: str, interfaces: Sequence[Mapping[str, Any]], socket_family: str | None = None) -> str:
    """The shortest NCCL_SOCKET_IFNAME that selects exactly ``ifname`` here: the name, else ``=name``."""
    if find_interfaces(ifname, interfaces, _family_code(socket_family)) == [ifname]:
        return ifname
    return "=" + ifname
