"""MASTER_ADDR, in one place: loopback or not, what the nodes resolve it to, this node's candidate training
addresses, the interface the job uses toward it, and the fixes that name real values (pure functions; the facts
come from ``net.probes``).

Loopback (:func:`is_loopback`): 127.0.0.0/8, ::1, the IPv4-mapped ::ffff:127.x.y.z (a dual-stack socket's view
of 127.0.0.1), each with or without a ``%scope``; and the names that always mean this host (``localhost``, its
``.localdomain``/``ip6-`` spellings, and every ``*.localhost`` name, RFC 6761), in any case. Any other name is
loopback when it *resolves* to loopback: the rules read the addresses the ``resolve_master``/``nic_route`` facts
recorded (:func:`resolves_to_loopback`), never a resolver of their own.

Cluster scope: each node's ``nic_route`` fact records what MASTER_ADDR resolved to there and the interfaces the
node has. The workers connect to what *they* resolve; the head's own resolution may be loopback (a Debian
/etc/hosts maps the host's name to 127.0.1.1) while it holds the address the workers use.

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

from .facts import HostsEntry, Interface, NicRouteFact

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
    """127.0.0.0/8, ::1 or ::ffff:127.x.y.z (with or without a ``%scope``), or a name that always means loopback."""
    text = str(addr or "").split("%")[0].strip()
    name = text.lower().rstrip(".")
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return ip.is_loopback or (mapped is not None and mapped.is_loopback)


def resolves_to_loopback(name: str | None, addresses: Iterable[str] | None) -> bool:
    """MASTER_ADDR means this host: it is loopback itself, or one of the addresses it resolved to is."""
    return is_loopback(name) or any(is_loopback(a) for a in addresses or [])


def is_address(text: str | None) -> bool:
    """Whether text is an IP address literal (not a name)."""
    try:
        ipaddress.ip_address((text or "").split("%")[0])
        return True
    except ValueError:
        return False


def training_addresses(interfaces: Iterable[Interface] | None) -> list[tuple[str, str]]:
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


def loopback_fix(name: str, addresses: Sequence[str], hosts_entries: Sequence[HostsEntry],
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


# -- MASTER_ADDR as the nodes resolve it (cluster scope: cluster.master_node, net.mtu) ----------------------

def resolutions(nic_route: Mapping[str, NicRouteFact]) -> dict[str, list[str]]:
    """{node: the addresses MASTER_ADDR resolved to there, in getaddrinfo order} (empty: did not resolve)."""
    return {n: list((f or {}).get("addresses") or []) for n, f in nic_route.items()}


def training_address(res: Mapping[str, list[str]], master_addr: str) -> str | None:
    """The address the nodes connect to: MASTER_ADDR itself when it is an address, else the first
    non-loopback address a node resolves it to (None when every node resolves it to loopback or not at all)."""
    if not is_loopback(master_addr) and is_address(master_addr):
        return master_addr.split("%")[0]
    for addresses in res.values():
        for a in addresses:
            if not is_loopback(a):
                return a
    return None


def route_is_loopback(fact: NicRouteFact) -> bool:
    """The node's own route to MASTER_ADDR goes through loopback (lo, or a loopback target)."""
    target = fact.get("target")
    return bool(fact.get("loopback")) or fact.get("ifname") == "lo" or (target is not None and is_loopback(target))


def interface_holding(fact: NicRouteFact, address: str) -> Interface | None:
    """The node's interface (from its nic_route fact) that holds ``address``, if any."""
    for iface in fact.get("interfaces") or []:
        if address in (iface.get("ipv4") or []) or address in (iface.get("ipv6") or []):
            return iface
    return None


def job_interface(fact: NicRouteFact, want: str | None) -> dict[str, Any]:
    """The interface the job uses on this node toward the others, and how it was found.

    Normally the interface of the node's route to MASTER_ADDR. When that route is loopback (the head resolves
    its own name to 127.0.1.1) it is the interface holding the address the other nodes resolve MASTER_ADDR to;
    unknown (``interface`` None) when no interface holds it.
    """
    if not route_is_loopback(fact):
        return {"interface": fact.get("ifname"), "mtu": fact.get("mtu"), "how": "route to MASTER_ADDR"}
    iface = interface_holding(fact, want) if want else None
    if iface is None:
        return {"interface": None, "mtu": None,
                "how": f"its route to MASTER_ADDR is loopback ({fact.get('ifname')}) and no interface holds "
                       f"{want or 'an address the other nodes resolve MASTER_ADDR to'}"}
    return {"interface": iface.get("name"), "mtu": iface.get("mtu"),
            "how": f"holds {want}, which the other nodes resolve MASTER_ADDR to (its own route says {fact.get('ifname')})"}
