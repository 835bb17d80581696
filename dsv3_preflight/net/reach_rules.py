"""The rules of net.port_reach (pure: facts in, findings out): a worker reaches MASTER_ADDR:MASTER_PORT over TCP (and our listener answers there).

The ``port_reach`` fact classifies the connect (ok, refused, filtered, unreachable, name_resolution,
invalid, error); each outcome has its own small pure rule returning the finding with its fix."""
from __future__ import annotations

import errno
import ipaddress
from collections.abc import Callable

from dsv3_preflight.net import causes
from dsv3_preflight.net.facts import HostsEntry, PortReachFact
from dsv3_preflight.net.master import HEAD_ADDR, unresolvable_fix
from dsv3_preflight.result import Actor, Finding, failure, warning

#: the rules read the port_reach fact
Fact = PortReachFact


EVIDENCE_KEYS = ("host", "address", "port", "outcome", "latency_ms", "elapsed_s", "timeout_s", "errno", "error", "invalid",
                 "listener", "listener_expected", "token", "expected_token", "token_match", "banner", "hosts_entries")


def target_of(f: Fact) -> str:
    return f"{f.get('host')}:{f.get('port')}"


def by_name(f: Fact) -> bool:
    """MASTER_ADDR is a host name this node resolved to ``address`` (not an address given as is)."""
    host, address = str(f.get("host") or ""), f.get("address")
    if not address or host == address:
        return False
    try:
        ipaddress.ip_address(host.strip("[]"))
        return False
    except ValueError:
        return True


def hosts_lines(f: Fact) -> list[HostsEntry]:
    """This node's /etc/hosts lines that map MASTER_ADDR to the address it connected to."""
    return [e for e in f.get("hosts_entries") or [] if e.get("address") == f.get("address")]


def _head(f: Fact) -> str:
    """The head as this node reached it: ``the head (10.77.0.10)``; for a host name, the address it resolved to
    here, which is the head's only if this node resolves the name as the head does."""
    address = f.get("address")
    if by_name(f):
        return f"{address} (what {f.get('host')} resolves to on this node)"
    return f"the head ({address})" if address else "the head"


def resolution_fix(f: Fact) -> str:
    """Compare what the name resolves to here with the head's own addresses; correct /etc/hosts or DNS here."""
    host, address = f.get("host"), f.get("address")
    lines = [f"# {host} resolves to {address} on this node; on the head, its own addresses "
             f"(one of them is what {host} must resolve to on every node):",
             "hostname -I",
             f"getent ahosts {host}   # on this node, and on a node that reaches the head: compare"]
    if hosts_lines(f):
        lines.append(f"grep -n '{host}' /etc/hosts   # on this node: the line mapping {host} to {address}; as root, "
                     "correct its address to the head's (or delete it and let DNS answer)")
    else:
        lines.append(f"# {address} comes from DNS here: fix the record of {host}, or this node's resolver "
                     "(/etc/resolv.conf), if it is not the head's")
    lines.append("# then here: dsv3-preflight run --only net.port_reach")
    return "\n".join(lines)


def stale_hosts_line(f: Fact, what: str) -> Finding | None:
    """MASTER_ADDR is a name this node maps to the address it could not reach through its own /etc/hosts: the
    likely cause is this node's stale line, not a firewall (the head and the other nodes may resolve the name
    elsewhere). None when the address did not come from /etc/hosts."""
    if not by_name(f) or not hosts_lines(f):
        return None
    shown = "; ".join(f"line {e.get('line')}: {e.get('text')!r}" for e in hosts_lines(f)[:2])
    return failure(f"connection to {target_of(f)} {what} at {f.get('address')}, the address this node's /etc/hosts "
                   f"gives {f.get('host')} ({shown}): most likely a stale line here, so this node resolves "
                   f"{f.get('host')} to another address than the head and the other nodes do",
                   resolution_fix(f) + "\n# if it is the head's address after all: a firewall on the way; as root "
                                       f"on the head: iptables -L INPUT -n --line-numbers | grep -E 'REJECT|DROP|dpt:{f.get('port')}'",
                   actor=Actor.NODE, cause=causes.MASTER_NAME_STALE)


def _also_resolution(f: Fact, fix: str) -> str:
    """A firewall fix for a host name's address: first make sure the address is the head's."""
    return (resolution_fix(f) + "\n# if it is the head's address:\n" + fix) if by_name(f) else fix


def listener_expected(f: Fact) -> bool:
    """A dsv3-preflight listener was started for this check (this node expects its token)."""
    return bool(f.get("listener_expected") or f.get("expected_token"))


def listen_fix(f: Fact) -> str:
    port = f.get("port")
    return (f"# on {_head(f)}: serve the port for 120 s\n"
            f"dsv3-preflight listen --port {port} --deadline 120\n"
            "# then here: dsv3-preflight run --only net.port_reach")


def firewall_fix(f: Fact) -> str:
    """How to find the REJECT rule (iptables and nft listings with the real port) and open the port."""
    port = f.get("port")
    return (f"# on {_head(f)}, as root: list the rules that reject TCP port {port}\n"
            f"iptables -L INPUT -n -v --line-numbers | grep -E 'REJECT|dpt:{port}'\n"
            f"nft -a list ruleset | grep -E 'reject|dport {port}'\n"
            f"# open it: insert an ACCEPT before the REJECT (or delete the REJECT by its number: iptables -D INPUT NUMBER)\n"
            f"iptables -I INPUT -p tcp --dport {port} -j ACCEPT\n"
            f"# on this node, an OUTPUT rule can reject it too: iptables -L OUTPUT -n -v --line-numbers | grep -E 'REJECT|dpt:{port}'\n"
            f"# a REJECT on a router or in a cloud security group between the nodes shows in neither: open {port}/tcp there")


def reached(f: Fact) -> Finding | None:
    """Connected: our listener with the expected token, ours with another token, or something else."""
    if f.get("listener") == "ours":
        if f.get("token_match") is not False:
            return None
        return warning(
            f"reached a dsv3-preflight listener at {target_of(f)} in {f['latency_ms']:.1f} ms, but its token "
            f"{f.get('token')} is not the expected {f.get('expected_token')} (a listener of another session?)",
            # worded so that secret masking (which hides the value after a `--token` flag) leaves it pasteable
            "echo $DSV3_PREFLIGHT_LISTENER_TOKEN   # on this worker: the token it expects\n"
            "# on the head: stop the other `dsv3-preflight listen`, export that value there as "
            "DSV3_PREFLIGHT_LISTENER_TOKEN, then:\n"
            f"dsv3-preflight listen --port {f.get('port')} --deadline 120", actor=Actor.JOB)
    return failure(
        f"something other than the dsv3-preflight listener accepts on {target_of(f)}"
        + (f" (it said {f['banner']!r})" if f.get("banner") else " (it sent nothing)")
        + ": torchrun's rendezvous cannot bind there",
        f"# on {_head(f)}: find the process holding port {f.get('port')}, then stop it or pick another MASTER_PORT\n"
        f"ss -ltnp 'sport = :{f.get('port')}'", actor=Actor.NODE, cause=causes.PORT_HELD)


def refused(f: Fact) -> Finding:
    """Refused (TCP RST, or ICMP port unreachable). With our listener up, a firewall REJECTs it."""
    port = f.get("port")
    stale = stale_hosts_line(f, "actively refused")
    if stale:
        return stale
    if listener_expected(f):
        return failure(
            f"connection to {target_of(f)} actively refused while the dsv3-preflight listener started for this check "
            f"serves it: most likely a firewall REJECT rule for port {port} on {_head(f)} or on the path"
            + (f", unless {f.get('address')} is not the head's address (this node may resolve {f.get('host')} "
               "elsewhere than the head does)" if by_name(f) else ""),
            _also_resolution(f, firewall_fix(f)) + f"\n# if that listener has stopped (its deadline passed), start it again on the head: "
                              f"dsv3-preflight listen --port {port} --deadline 120",
            actor=Actor.NETWORK, cause=causes.PORT_REJECTED)
    return failure(
        f"connection to {target_of(f)} refused: {_head(f)} answers but nothing listens on {port} (no `dsv3-preflight listen` "
        "running?) or a firewall REJECTs it",
        listen_fix(f) + f"\n# still refused while the listener runs: a firewall REJECT; on the head: "
                        f"iptables -L INPUT -n --line-numbers | grep -E 'REJECT|dpt:{port}'",
        actor=Actor.JOB, cause=causes.PORT_NOT_LISTENING)


def filtered(f: Fact) -> Finding:
    port = f.get("port")
    stale = stale_hosts_line(f, f"got no answer within {f.get('timeout_s')} s")
    if stale:
        return stale
    return failure(
        f"no answer from {target_of(f)} within {f.get('timeout_s')} s: a firewall DROPs it or packets are lost"
        + ("" if (f.get("error") or "").startswith("no answer") else f" ({f.get('error')})"),
        _also_resolution(f, f"# on {_head(f)}, as root: find the rule that drops TCP port {port}, then open it\n"
                            f"iptables -L INPUT -n -v --line-numbers | grep -E 'DROP|dpt:{port}'\n"
                            f"iptables -I INPUT -p tcp --dport {port} -j ACCEPT   # or open {port}/tcp in the cloud "
                            "security group / nft ruleset between the nodes"),
        actor=Actor.NETWORK, cause=causes.PORT_FILTERED)


def unreachable(f: Fact) -> Finding:
    target = f.get("address") or f.get("host")
    stale = stale_hosts_line(f, f"is unreachable ({f.get('error')})")
    if stale and f.get("errno") != errno.ENETUNREACH:
        return stale
    if f.get("errno") == errno.ENETUNREACH:  # this node's kernel has no route: net.nic_route says the same
        return failure(f"{target_of(f)} is unreachable from this node: {f.get('error')}",
                       f"ip route get {target}   # then add a route, or bring up the interface that should reach the head",
                       actor=Actor.NODE, cause=causes.NO_ROUTE_TO_MASTER)
    return failure(
        f"{target_of(f)} is unreachable from this node: {f.get('error')} (the head is down, its address is wrong, "
        "or a firewall rejects with icmp-host-prohibited)",
        f"ip route get {target}   # the route this node takes; then check MASTER_ADDR and that {target} is up\n"
        f"# on {_head(f)}, as root: iptables -L INPUT -n --line-numbers | grep -E 'REJECT|dpt:{f.get('port')}'",
        actor=Actor.NETWORK, cause=causes.MASTER_UNREACHABLE)


def name_resolution(f: Fact) -> Finding:
    host = f.get("host")
    return failure(f"MASTER_ADDR {host!r} does not resolve on this node: {f.get('error')}", unresolvable_fix(str(host)),
                   actor=Actor.JOB, cause=causes.MASTER_UNRESOLVABLE)


def invalid(f: Fact) -> Finding:
    if f.get("invalid") == "address":
        return failure(f"cannot test {target_of(f)}: {f.get('error')}",
                       f'export MASTER_ADDR="{HEAD_ADDR}"'
                       "   # a global or private address of the head, not a link-local one",
                       actor=Actor.JOB, cause=causes.MASTER_ADDR_INVALID)
    return failure(f"cannot test {target_of(f)}: {f.get('error')}", "export MASTER_PORT=39500", actor=Actor.JOB)


def other_error(f: Fact) -> Finding:
    target = f.get("address") or f.get("host")
    return failure(f"TCP connect to {target_of(f)} failed: {f.get('error')} (errno {f.get('errno')})",
                   f"ip route get {target}   # the route this node takes toward the head", actor=Actor.NETWORK)


RULES: dict[str, Callable[[Fact], Finding | None]] = {
    "ok": reached, "refused": refused, "filtered": filtered, "unreachable": unreachable,
    "name_resolution": name_resolution, "invalid": invalid,
}
