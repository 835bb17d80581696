"""Decoding what torch, Gloo and NCCL print when a rendezvous or a collective fails.

Pure functions of text: :func:`decode` turns an exception message plus a log into findings (a kind,
the one-line cause a person understands, the matched line, and what to change), and
:func:`nccl_interfaces` parses the interface NCCL says it uses (``NET/Socket : Using [0]eth0:…``).
The patterns are the messages the libraries really print (quoted in the tests' data).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

#: where a remediation names this node's interface toward MASTER_ADDR; :func:`decode` fills it in
IFACE = "<IFACE>"
#: NCCL_SOCKET_IFNAME's value for that interface: NCCL reads a bare name as a prefix (eth0 also selects eth01,
#: eth1 also eth10), ``=NAME`` selects exactly NAME (net.nic_route prints the bare name where it is exact)
NCCL_IFACE = "=" + IFACE
NCCL_EXACT = "# =NAME: exactly that interface (NCCL reads a bare name as a prefix)"
#: what replaces it when the interface is not known (never `ip route get $MASTER_ADDR`: on the head that says lo)
IFACE_UNKNOWN = '"${IFACE:?the interface toward MASTER_ADDR}"'
IFACE_HOW = ("IFACE: `dsv3-preflight run --only net.nic_route` on this node names it "
             "(on the head: the interface holding MASTER_ADDR, never lo)")

#: who acts on each kind of finding (result.Actor values: "job", "node", "network"); the cause keys are the network
#: domain's (dsv3_preflight/net/causes.py) where the root cause is the same, so a report shows it once
JOB, NODE, NETWORK = "job", "node", "network"


def fill_interface(remediation: str, interface: str | None) -> str:
    """The remediation with this node's interface toward MASTER_ADDR in it (or a placeholder and how to find it)."""
    if IFACE not in remediation:
        return remediation
    if interface:
        return remediation.replace(IFACE, interface)
    lines = remediation.replace(IFACE, IFACE_UNKNOWN).splitlines()
    first = next(i for i, line in enumerate(lines) if IFACE_UNKNOWN in line)
    lines[first] += ("; " if "#" in lines[first] else "   # ") + IFACE_HOW
    return "\n".join(lines)


@dataclass(frozen=True)
class Pattern:
    kind: str
    regex: re.Pattern
    cause: Callable[[re.Match], str]
    remediation: Callable[[re.Match], str]
    actor: str
    #: the root-cause key shared with the checks that fail for the same reason (result.Finding.cause)
    cause_id: str


def _p(kind: str, regex: str, cause, remediation, actor: str, cause_id: str) -> Pattern:
    return Pattern(kind, re.compile(regex, re.IGNORECASE), cause, remediation, actor, cause_id)


# Every remediation is shell that pastes (`bash -n`): commands, `#` comments, `${NAME:?what}` placeholders.
PATTERNS: tuple[Pattern, ...] = (
    # the rank's Python has no torch (or a torch that fails to import): no deadline was involved
    _p("torch_missing",
       r"(?:ModuleNotFoundError|ImportError): (?P<what>No module named '?torch[\w.]*'?|.*\btorch\b.*)",
       lambda m: f"torch cannot be imported in the Python that runs the probe ({m['what'][:200]}): install it in the "
                 "environment the training runs in",
       lambda m: "python -c 'import sys, torch; print(sys.executable, torch.__version__)'   # in the training "
                 "environment: the one the preflight must run in",
       JOB, "gpu.torch_missing"),
    _p("gloo_ifname_missing",
       r"Unable to find address for:\s*(?P<ifname>\S+)",
       lambda m: f"GLOO_SOCKET_IFNAME names {m['ifname']!r}, an interface with no IPv4/IPv6 address on this host "
                 "(or no such interface)",
       lambda m: f"export GLOO_SOCKET_IFNAME={IFACE}   # one exact interface name, not a list, not an address",
       JOB, "net.gloo_socket_ifname"),
    _p("nccl_ifname_missing",
       r"(Bootstrap|NET/Socket)\s*:\s*no (usable listening )?(socket )?interface found",
       lambda m: "NCCL found no interface matching NCCL_SOCKET_IFNAME on this host (from NCCL 2.28.3: none of those "
                 "matching is up with a carrier)",
       lambda m: f"export NCCL_SOCKET_IFNAME={NCCL_IFACE}   {NCCL_EXACT}",
       JOB, "net.nccl_socket_ifname"),
    # before the store's connect timeout: a name that does not resolve is why the store did not answer
    _p("master_unresolvable",
       r"(Name or service not known|nodename nor servname provided|Temporary failure in name resolution|getaddrinfo.*failed)",
       lambda m: "MASTER_ADDR does not resolve on this host",
       lambda m: 'export MASTER_ADDR="${HEAD_ADDR:?the head node address on the training network}"   # on every node',
       JOB, "net.master_unresolvable"),
    _p("store_connect_timeout",
       r"The client socket has timed out after (?P<ms>\d+)\s*m?s while trying to connect to \((?P<host>[^,]+),\s*(?P<port>\d+)\)",
       lambda m: f"the rendezvous store at {m['host']}:{m['port']} did not answer within {int(m['ms']) / 1000:g} s: "
                 "the master is not running yet, or the port is filtered on the way",
       lambda m: (f"# start node 0 first (it hosts the store); then, from this node, test the port:\n"
                  f"timeout 3 bash -c 'exec 3<>/dev/tcp/{m['host'].strip()}/{m['port']}' && echo open"),
       NETWORK, "net.port_filtered"),
    _p("store_connect_refused",
       r"(Connection refused|ECONNREFUSED).{0,200}?(\((?P<host>[^,()]+),\s*(?P<port>\d+)\))?",
       lambda m: "the rendezvous store refused the connection: nothing listens on MASTER_ADDR:MASTER_PORT"
                 + (f" ({m['host']}:{m['port']})" if m["host"] else ""),
       lambda m: ("# start node 0 (it hosts the store) first; MASTER_ADDR and MASTER_PORT must be the same on every node:\n"
                  'echo "MASTER_ADDR=${MASTER_ADDR:-unset} MASTER_PORT=${MASTER_PORT:-unset}"   # compare on every node'),
       JOB, "net.port_not_listening"),
    _p("store_port_in_use",
       r"(address already in use|EADDRINUSE)",
       lambda m: "MASTER_PORT is already in use on the master: a leftover process holds it",
       lambda m: 'sudo fuser -v "${MASTER_PORT:-39500}/tcp"   # then end the leftover process it names',
       NODE, "net.port_held"),
    _p("no_route",
       r"(No route to host|Network is unreachable|EHOSTUNREACH|ENETUNREACH)",
       lambda m: "no route from this host to a peer (wrong interface or subnet)",
       lambda m: f"export NCCL_SOCKET_IFNAME={NCCL_IFACE} GLOO_SOCKET_IFNAME={IFACE}   # and check the peers are on a subnet it reaches",
       NETWORK, "collective.no_route_to_peer"),
    _p("store_closed",
       r"Failed to recv, got 0 bytes\. Connection was likely closed",
       lambda m: "the rendezvous store (hosted by rank 0 on MASTER_ADDR) closed the connection: rank 0 failed or "
                 "was ended, so the other ranks cannot go on",
       lambda m: ("# read rank 0's error first (node 0's output): it is the cause; fix it, then rerun on every node\n"
                  "dsv3-preflight probe --node-rank 0   # on node 0, with the same MASTER_ADDR and MASTER_PORT"),
       NODE, "collective.rank0_failed"),
    _p("gloo_full_mesh_connect",
       r"(connectFullMesh|Connect timeout|gloo/transport/tcp/pair\.cc.*(timed out|Timed out|Connection reset|refused))",
       lambda m: "Gloo's full-mesh connect between ranks failed: the store port is open but the ranks' own "
                 "listening ports (ephemeral, chosen per run) are blocked or the addresses they advertise are unreachable",
       lambda m: ("# open TCP between all nodes on the training interface, not only MASTER_PORT (Gloo's ranks listen on ephemeral ports)\n"
                  f"export GLOO_SOCKET_IFNAME={IFACE}   # the interface that routes between the nodes"),
       NETWORK, "collective.ports_blocked_between_nodes"),
    _p("duplicate_gpu",
       r"Duplicate GPU detected\s*:\s*rank (?P<a>\d+) and rank (?P<b>\d+) both on CUDA device (?P<dev>[0-9a-fA-F]+)",
       lambda m: f"ranks {m['a']} and {m['b']} are both on CUDA device {m['dev']}: two processes share one GPU",
       lambda m: "export CUDA_DEVICE_ORDER=PCI_BUS_ID   # on every node, and one local rank per GPU (LOCAL_RANK → cuda:LOCAL_RANK)",
       JOB, "gpu.duplicate_gpu"),
    _p("ranks_missing",
       r"ranks \[(?P<ranks>[\d, ]+)\] never joined",
       lambda m: f"ranks {m['ranks']} never reached the rendezvous store",
       lambda m: ("# run `dsv3-preflight probe` on every node with the same MASTER_ADDR and MASTER_PORT, or all at once from the Ray head:\n"
                  "dsv3-preflight run --all-nodes --probe"),
       JOB, "collective.ranks_missing"),
    _p("store_wait_timeout",
       r"(Wait timeout|Timed out (waiting|after).{0,80}for (key|keys)|Socket Timeout)",
       lambda m: "a rank waited for the others in the rendezvous store until the timeout: some rank is missing or stuck",
       lambda m: "# see which ranks never joined (the evidence); start the missing node or fix its network",
       JOB, "collective.ranks_missing"),
    _p("nccl_socket_connect",
       r"socketStartConnect: Connect to (?P<addr>\S+) failed\s*:\s*(?P<why>[^\n]+)",
       lambda m: f"NCCL could not connect to {m['addr']}: {m['why'].strip()}",
       lambda m: ("# open TCP between the nodes on the training interface: NCCL connects on the kernel's ephemeral ports\n"
                  "cat /proc/sys/net/ipv4/ip_local_port_range   # the range to open, then pin the interface:\n"
                  f"export NCCL_SOCKET_IFNAME={NCCL_IFACE}   {NCCL_EXACT}"),
       NETWORK, "collective.ports_blocked_between_nodes"),
    _p("nccl_system_error",
       r"(unhandled system error|remote process exited or there was a network error)",
       lambda m: "NCCL reported a system/network error (see the NCCL WARN lines in the log tail)",
       lambda m: "export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET   # rerun, then read the NCCL WARN lines",
       NODE, "collective.nccl_system_error"),
    _p("peer_crashed",
       r"Connection closed by peer \[?(?P<peer>[^\]\s]+)\]?:(?P<port>\d+)",
       lambda m: f"the peer at {m['peer']} closed the connection mid-collective: that rank crashed or was ended",
       lambda m: f"# read the log of the rank on {m['peer']}: its own error is the cause",
       NODE, "collective.peer_crashed"),
    _p("collective_timeout",
       r"(Watchdog caught collective operation timeout|ProcessGroupGloo.*timed out|Timed out waiting \d+ms for (send|recv) operation)",
       lambda m: "a collective started but did not complete before the timeout",
       lambda m: "# a rank is stuck or a link is blocked mid-collective: read the other ranks' last phase in the evidence",
       NETWORK, "collective.stalled"),
)

_NCCL_IF_RE = re.compile(r"NET/Socket\s*:\s*Using\s+(?P<list>.+)$", re.MULTILINE)
_NCCL_BOOT_RE = re.compile(r"Bootstrap\s*:\s*Using\s+(?P<list>.+)$", re.MULTILINE)
_IF_ENTRY_RE = re.compile(r"(?:\[(?P<idx>\d+)\])?(?P<ifname>[A-Za-z0-9_.@-]+):(?P<addr>[0-9A-Fa-f:.%]+?)<\d+>")


def decode(*texts: str | None, interface: str | None = None) -> list[dict[str, Any]]:
    """Findings in the given texts (exception message, log), most specific first, one per kind.

    ``interface``: this node's interface toward MASTER_ADDR (on the head, the one holding it), named in
    the remediations that set NCCL_/GLOO_SOCKET_IFNAME; None: they say how to find it.
    """
    text = "\n".join(t for t in texts if t)
    findings: list[dict[str, Any]] = []
    seen: set[str] = set()
    for pattern in PATTERNS:
        if pattern.kind in seen:
            continue
        match = pattern.regex.search(text)
        if match is None:
            continue
        seen.add(pattern.kind)
        line_start = text.rfind("\n", 0, match.start()) + 1
        line_end = text.find("\n", match.end())
        line = text[line_start: line_end if line_end != -1 else len(text)].strip()
        findings.append({"kind": pattern.kind, "cause": pattern.cause(match),
                         "remediation": fill_interface(pattern.remediation(match), interface),
                         "actor": pattern.actor, "cause_id": pattern.cause_id, "line": line[:400]})
    # a precise cause makes the generic ones noise
    kinds = {f["kind"] for f in findings}
    if kinds & {"gloo_ifname_missing", "store_connect_timeout", "store_connect_refused", "duplicate_gpu",
                "gloo_full_mesh_connect", "master_unresolvable", "nccl_ifname_missing"}:
        findings = [f for f in findings if f["kind"] not in ("store_wait_timeout", "collective_timeout", "nccl_system_error", "peer_crashed")]
    if "store_closed" in kinds:  # Gloo's full-mesh connect waits in the store: the store going away is the cause
        findings = [f for f in findings if f["kind"] != "gloo_full_mesh_connect"]
    return findings


_STUCK = {
    None: ("never_started", "the rank's process never reported (Python or the package failed to start)",
           "python -m dsv3_preflight.collective.probes.worker --help   # on this node: shows the start-up error",
           NODE, "collective.worker_start"),
    "started": ("stuck_importing", "the rank did not finish importing torch before the deadline",
                "python -c 'import torch'   # the node is overloaded or torch is broken; or raise collective_timeout",
                NODE, "collective.torch_import"),
    "imported": ("stuck_store_connect", "the rank could not connect to the rendezvous store at {master}",
                 "# start node 0 first; MASTER_ADDR/MASTER_PORT must be the same everywhere and the port open from this node:\n"
                 "timeout 3 bash -c 'exec 3<>/dev/tcp/{host}/{port}' && echo open",
                 NETWORK, "net.port_filtered"),
    "store_connected": ("stuck_waiting_for_ranks", "the rank waited in the store for ranks that never came",
                        "# start the probe on every node with the same MASTER_ADDR/MASTER_PORT, or all at once from the Ray head:\n"
                        "dsv3-preflight run --all-nodes --probe",
                        JOB, "collective.ranks_missing"),
    "all_joined": ("stuck_in_init", "every rank reached the store but the process group did not come up: the ranks "
                   "could not connect to each other (ports other than MASTER_PORT blocked, or a socket interface "
                   "the others cannot reach: {ifnames})",
                   "# open TCP between the nodes on the training interface (Gloo and NCCL listen on ephemeral ports: "
                   "/proc/sys/net/ipv4/ip_local_port_range), then:\n"
                   "export GLOO_SOCKET_IFNAME=" + IFACE + " NCCL_SOCKET_IFNAME=" + NCCL_IFACE + "   " + NCCL_EXACT,
                   NETWORK, "collective.ports_blocked_between_nodes"),
    "pg_up": ("stuck_first_collective", "the process group came up but the first all_reduce never completed",
              "export NCCL_DEBUG=INFO   # rerun: a data path between ranks is broken (firewall on the NCCL/Gloo ports, MTU, or a wedged GPU)",
              NETWORK, "collective.stalled"),
    "first_collective": ("stuck_collectives", "all_reduces stalled after the first one",
                         "export NCCL_DEBUG=INFO   # rerun and read the WARN lines", NETWORK, "collective.stalled"),
    "steady_state": ("stuck_collectives", "the rank stalled in the bandwidth sweep or the final barrier",
                     "export NCCL_DEBUG=INFO   # rerun and read the WARN lines", NETWORK, "collective.stalled"),
    "sweep_done": ("stuck_collectives", "the rank stalled in the final barrier",
                   "export NCCL_DEBUG=INFO   # rerun and read the WARN lines", NETWORK, "collective.stalled"),
}


def phase_finding(last_phase: str | None, *, master: str, ifnames: str,
                  interface: str | None = None) -> dict[str, Any] | None:
    """What a rank that stopped after ``last_phase`` (killed or timed out, no error text) most likely hit.

    ``master`` is ``host:port``; ``interface`` as for :func:`decode`.
    """
    if last_phase == "done" or last_phase not in _STUCK:
        return None
    kind, cause, remediation, actor, cause_id = _STUCK[last_phase]
    host, _, port = master.rpartition(":")
    return {"kind": kind, "cause": cause.format(master=master, ifnames=ifnames or "the default interface"),
            "remediation": fill_interface(remediation.format(host=host or master, port=port or "${MASTER_PORT:?}"), interface),
            "actor": actor, "cause_id": cause_id, "line": f"last phase reached: {last_phase}"}


def nccl_interfaces(log: str | None) -> list[dict[str, str]]:
    """The interfaces NCCL says it uses for its socket transport (or, failing that, for bootstrap)."""
    if not log:
        return []
    for regex, source in ((_NCCL_IF_RE, "NET/Socket"), (_NCCL_BOOT_RE, "Bootstrap")):
        found = []
        for m in regex.finditer(log):
            for e in _IF_ENTRY_RE.finditer(m.group("list")):
                entry = {"ifname": e["ifname"], "address": e["addr"], "source": source}
                if entry not in found:
                    found.append(entry)
        if found:
            return found
    return []
