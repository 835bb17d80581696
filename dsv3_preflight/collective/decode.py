"""Decoding what torch, Gloo and NCCL print when a rendezvous or a collective fails.

Pure functions of text: :func:`decode` turns an exception message plus a log into findings (a kind,
the one-line cause a person understands, the matched line, and what to change), and
:func:`nccl_interfaces` parses the interface NCCL says it uses (``NET/Socket : Using [0]eth0:…``).
The messages are the doctor's (``dsv3_preflight.doctor.signatures``): a signature's record carries how this decoder
reads the same message (its ``decode``), so a library message is added in one place. They are the messages the
libraries really print (quoted in the tests' data and in each signature's example).
"""
from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any

from ..text import IFACE, NCCL_EXACT, NCCL_IFACE

if TYPE_CHECKING:
    from ..doctor.signatures import Decode

__all__ = ["IFACE", "NCCL_EXACT", "NCCL_IFACE", "ORDER", "decode", "fill_interface", "nccl_interfaces", "patterns",
           "phase_finding"]

#: what replaces the interface when it is not known (never `ip route get $MASTER_ADDR`: on the head that says lo)
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


#: the decoder's kinds, most specific first: a text's findings are listed in this order, one per kind. A library
#: message is added once, as a ``decode`` of its signature's record (dsv3_preflight/doctor/signatures/<family>.py);
#: a kind not named here is tried after these, in the table's order.
ORDER = ("torch_missing", "gloo_ifname_missing", "nccl_ifname_missing", "master_unresolvable", "store_connect_timeout",
         "store_connect_refused", "store_port_in_use", "no_route", "store_closed", "gloo_full_mesh_connect",
         "duplicate_gpu", "ranks_missing", "store_wait_timeout", "nccl_socket_connect", "nccl_system_error",
         "peer_crashed", "collective_timeout")


@functools.cache
def patterns() -> tuple[Decode, ...]:
    """Every library message the decoder reads, ``ORDER`` first: the decodes of the doctor's signature records.

    Read on the first decode (importing the doctor's table compiles its patterns; the CLI that only lists or runs
    checks does not pay for it)."""
    from ..doctor.signatures import SIGNATURES

    found = [d for sig in SIGNATURES for d in sig.decode]
    rank = {kind: i for i, kind in enumerate(ORDER)}
    return tuple(sorted(found, key=lambda d: rank.get(d.kind, len(ORDER))))

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
    for pattern in patterns():
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
