"""MASTER_ADDR as the checks judge it: loopback or not, this node's candidate training addresses, and the
fixes that name real values (pure functions; the facts come from ``net.probes``).

The fixes are shell that passes ``bash -n``: ``#`` comments for the explanation, the placeholder
:data:`HEAD_ADDR` where the head's address is not known here, the real address where it is, and the
``/etc/hosts`` line itself when that file is what maps the name to loopback. env.launch_vars, net.nic_route
and net.port_reach build the same fix for the same cause, so a report shows it once.
"""
from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: the placeholder for the head's address (no apostrophe: an open quote inside ``${...}`` breaks the paste)
HEAD_ADDR = "${HEAD_ADDR:?set HEAD_ADDR to the head node address on the training network}"
#: names that mean loopback without asking a resolver
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
#: interfaces that do not carry a training job between nodes (container and VM bridges, veth ends, overlays)
VIRTUAL_PREFIXES = ("docker", "virbr", "veth", "br-", "cni", "flannel", "cali", "lxc", "vxlan", "podman")
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")
RERUN = ("# then rerun dsv3-preflight on every node: net.nic_route prints the NCCL_/GLOO_SOCKET_IFNAME exports "
         "for the route to the new address")


def is_loopback(addr: str | None) -> bool:
    """127.0.0.0/8 or ::1 (with or without a ``%scope``), or a name that always means loopback."""
    text = (addr or "").split("%")[0].strip()
    if text.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False


def is_address(text: str | None) -> bool:
    """Whether text is an IP address literal (not a name)."""
    try:
        ipaddress.ip_address((text or "").split("%")[0])
        return True
    except ValueError:
        return False


def training_addresses(interfaces: Iterable[Mapping[str, Any]] | None) -> list[tuple[str, str]]:
    """``(interface, address)`` of this node's addresses that can carry the job between nodes.

    Interfaces that are up (or whose state is unknown), not loopback and not a container/VM bridge; their
    IPv4 addresses, else their global IPv6 ones. In interface-index order.
    """
    out: list[tuple[str, str]] = []
    for iface in sorted(interfaces or [], key=lambda i: (i.get("index") or 0, i.get("name") or "")):
        name = iface.get("name") or ""
        if iface.get("loopback") or iface.get("up") is False or name.startswith(VIRTUAL_PREFIXES):
            continue
        v4 = [a for a in iface.get("ipv4") or [] if not is_loopback(a)]
        v6 = [a for a in iface.get("ipv6") or [] if not is_loopback(a) and not _link_local(a)]
        out += [(name, a) for a in (v4 or v6)]
    return out


def _link_local(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr.split("%")[0]).is_link_local
    except ValueError:
        return False


def known_head_address(candidates: Sequence[tuple[str, str]], this_is_head: bool) -> tuple[str, str] | None:
    """This node's one training address when this node is known to be the head (else None)."""
    return candidates[0] if this_is_head and len(candidates) == 1 else None


def unresolvable_fix(name: str) -> str:
    """The fix for a MASTER_ADDR that does not resolve on this node."""
    return (f"# MASTER_ADDR {name} does not resolve on this node: export the head's address instead\n"
            f'export MASTER_ADDR="{HEAD_ADDR}"\n'
            f'# or keep the name and map it on every node: echo "$HEAD_ADDR {name}" | sudo tee -a /etc/hosts')


def loopback_fix(name: str, addresses: Sequence[str], hosts_entries: Sequence[Mapping[str, Any]],
                 candidates: Sequence[tuple[str, str]], this_is_head: bool,
                 head_address: tuple[str, str] | None = None) -> str:
    """The fix for a MASTER_ADDR that is, or resolves to, loopback on a multi-node job.

    ``hosts_entries``: the ``/etc/hosts`` lines naming MASTER_ADDR (``{"line", "address", "text"}``), as the
    ``resolve_master`` fact records them; ``candidates``: :func:`training_addresses` of this node;
    ``this_is_head``: node_rank 0 was set explicitly, so this node's address is the head's.
    ``head_address``: ``(where it was learnt, address)`` when the caller knows the head's address otherwise
    (a cluster-scope check: what the workers resolve MASTER_ADDR to); it wins over this node's guess.
    """
    head = head_address or known_head_address(candidates, this_is_head)
    value = head[1] if head else HEAD_ADDR
    lines: list[str] = []
    mapped = [e for e in hosts_entries if is_loopback(str(e.get("address")))]
    if mapped and not is_address(name) and _HOST_NAME.fullmatch(name):
        pattern = re.escape(name).replace("\\-", "-")
        sed = "; ".join(f"{int(e['line'])}s/[[:space:]]+{pattern}([[:space:]]|$)/\\1/" for e in mapped)
        for entry in mapped:
            lines.append(f"# /etc/hosts line {entry['line']} maps {name} to loopback: {' '.join(str(entry.get('text')).split())}")
        if candidates and not head:
            lines.append(_own_addresses(candidates))
        lines.append(f"# drop {name} from {'that line' if len(mapped) == 1 else 'those lines'} and map it to "
                     + (_head_words(head, head_address is not None) if head else "the head's address")
                     + "; cp writes in place, also where /etc/hosts is a bind mount")
        lines.append("new_hosts=$(mktemp) &&")
        lines.append(f"  sed -E '{sed}' /etc/hosts > \"$new_hosts\" &&")
        lines.append(f'  echo "{value} {name}" >> "$new_hosts" &&')
        lines.append('  sudo cp "$new_hosts" /etc/hosts && rm -f "$new_hosts"')
    else:
        via = f" (it resolves to {', '.join(addresses)})" if addresses and list(addresses) != [name] else ""
        lines.append(f"# MASTER_ADDR {name} is loopback{via}: the other nodes cannot reach it")
        if head:
            lines.append(f"export MASTER_ADDR={head[1]}   # "
                         + (f"the head's address ({head[0]})" if head_address
                            else f"this node is the head (node_rank 0): its address on {head[0]}"))
        else:
            if candidates:
                lines.append(_own_addresses(candidates))
            lines.append(f'export MASTER_ADDR="{HEAD_ADDR}"')
    lines.append(RERUN)
    return "\n".join(lines)


def _head_words(head: tuple[str, str], given: bool) -> str:
    if given:
        return f"{head[1]}, the head's address ({head[0]})"
    return f"this node's address on {head[0]}, {head[1]} (node_rank 0: this node is the head)"


def _own_addresses(candidates: Sequence[tuple[str, str]]) -> str:
    return "# this node's addresses (the head's address is one of its own): " + ", ".join(f"{i} {a}" for i, a in candidates)


def this_node_fix(candidates: Sequence[tuple[str, str]], variable: str = "MASTER_ADDR") -> str:
    """``export MASTER_ADDR=...`` with this node's address when it has exactly one training address."""
    if len(candidates) == 1:
        ifname, addr = candidates[0]
        return f"export {variable}={addr}   # this node's address on {ifname}"
    listed = ", ".join(f"{i} {a}" for i, a in candidates)
    return ((f"# this node's addresses: {listed}\n" if listed else "")
            + f'export {variable}="${{THIS_ADDR:?set THIS_ADDR to this node address on the training network}}"')
