"""Judging the collective probe: the rules `dist.allreduce` (this node's ranks) and `dist.allreduce_cluster`
(the gang over all nodes) share, so every rule applies the same way under both.

Pure functions, no I/O: facts in, a :class:`~dsv3_preflight.result.Result` out. Each rule is a small
function returning findings (``rule_*``); :func:`judge_outcomes` runs them all through the findings
accumulator:

- ``rule_duplicate_gpus``: two ranks on one GPU in the rank map the ranks registered (NCCL's own wording);
- ``rule_mesh_blocked``: a node the others cannot reach on its ephemeral ports (the ranks' own connect test
  from each node to each other node, run once all joined): named, with the nodes it refuses and the fix that
  opens its ephemeral range on its training interface;
- ``rule_completed``: every rank joined, finished and got the exact sum (else the decoded cause, most
  specific first, with the fix for this node's interface);
- ``rule_busbw``: the bandwidth sweep's peak bus bandwidth is at least ``min_busbw_gbps`` when set;
- ``rule_nic_mismatch``: NCCL/Gloo used the interface the route to MASTER_ADDR leaves by.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from dsv3_preflight.net.ifselect import recommended_nccl_value, split_gloo_value
from dsv3_preflight.result import Actor, Finding, Findings, Result, failure, warning

from .combine import combine

#: the decoded kinds, most telling first: the first one present leads the summary and the fix
CAUSE_ORDER = ("gloo_ifname_missing", "nccl_ifname_missing", "duplicate_gpu", "master_unresolvable",
               "store_connect_refused", "store_connect_timeout", "store_port_in_use", "store_closed", "no_route",
               "gloo_full_mesh_connect", "nccl_socket_connect", "ranks_missing", "store_wait_timeout",
               "nccl_system_error", "collective_timeout")
DUPLICATE_FIX = "export CUDA_DEVICE_ORDER=PCI_BUS_ID   # on every node; one local rank per GPU"
DEFAULT_FIX = ("export NCCL_DEBUG=INFO   # then rerun the probe on every node and read the log tail in the evidence\n"
               "dsv3-preflight run --all-nodes --probe")
GANG_COMMAND = "dsv3-preflight run --all-nodes --probe"


def _order(kind: str) -> int:
    return CAUSE_ORDER.index(kind) if kind in CAUSE_ORDER else len(CAUSE_ORDER)


def observed_duplicates(rank_map: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Pairs of ranks that registered the same (host, PCI bus id): ``gpu.rankmap.find_duplicates`` rows."""
    from dsv3_preflight.gpu.rankmap import find_duplicates

    rows = [dict(r) for r in rank_map if r.get("pci_bus_id")]
    return find_duplicates(rows) if rows else []


def network_context(nic_route: Mapping[str, Any] | None, port_reach: Mapping[str, Any] | None,
                    outcomes: Iterable[Mapping[str, Any]]) -> list[str]:
    """What the network checks' facts say that explains a failed rendezvous (lines for evidence)."""
    notes = []
    if port_reach and port_reach.get("attempted") and port_reach.get("outcome") not in (None, "ok"):
        notes.append(f"net.port_reach: {port_reach.get('host')}:{port_reach.get('port')} is "
                     f"{port_reach.get('outcome')} from this node ({port_reach.get('error')})")
    route_if = (nic_route or {}).get("ifname")
    used: set[str] = set()
    for outcome in outcomes:
        for r in outcome.get("ranks", []):
            used.update(e["ifname"] for e in r.get("nccl_interfaces") or [])
        gloo = (outcome.get("env") or {}).get("GLOO_SOCKET_IFNAME") or ""
        if len(gloo) > 1:  # torch ignores a shorter value; the names as torch splits them ("eth0," is eth0)
            used.update(name for name in split_gloo_value(gloo) if name)
    if route_if and used and route_if not in used and not (nic_route or {}).get("loopback"):
        notes.append(f"NIC mismatch: the route to MASTER_ADDR leaves through {route_if} (net.nic_route) but the probe used "
                     f"{', '.join(sorted(used))}")
    return notes


# -- the rules ------------------------------------------------------------------------------------------------

def rule_duplicate_gpus(duplicates: Sequence[Mapping[str, Any]]) -> list[Finding]:
    """Two ranks on one GPU, as the ranks themselves registered it: NCCL's "Duplicate GPU detected"."""
    return [failure(f"{d['message']} ({d.get('host')}, PCI {d.get('pci_bus_id')})", DUPLICATE_FIX,
                    actor=Actor.JOB, cause="gpu.duplicate_gpu") for d in duplicates]


def rule_completed(combined: Mapping[str, Any], notes: Sequence[str] = (),
                   rank_names: Mapping[int, str] | None = None) -> Finding | None:
    """Every rank joined, finished and returned the exact sum; else the decoded cause and its fix."""
    if combined["ok"]:
        return None
    findings = sorted(combined["findings"], key=lambda f: _order(f["kind"]))
    summary = combined["summary"]
    missing = [rank_names[r] for r in combined.get("never_joined") or [] if rank_names and r in rank_names]
    if missing:
        summary += f" (node{'s' if len(missing) > 1 else ''} {', '.join(missing)})"
    if notes and not findings:
        summary += f" — {notes[0]}"
    fix = "\n".join(dict.fromkeys(f["remediation"] for f in findings if f.get("remediation"))) or DEFAULT_FIX
    lead = findings[0] if findings else {}
    return failure(summary, fix, actor=lead.get("actor") or Actor.NETWORK,
                   cause=lead.get("cause_id") or "collective.failed")


def mesh_of(outcomes: Iterable[Mapping[str, Any]]) -> tuple[dict[int, dict[str, Any]], list[dict[str, Any]]]:
    """(every node's ephemeral-port listener by rank, every connect between them, deduplicated) from the ranks' ``mesh``."""
    listeners: dict[int, dict[str, Any]] = {}
    reach: dict[tuple[int, int], dict[str, Any]] = {}
    for o in outcomes:
        for r in o.get("ranks", []):
            mesh = r.get("mesh") or {}
            for key, rec in (mesh.get("listeners") or {}).items():
                listeners.setdefault(int(key), dict(rec))
            for row in mesh.get("reach") or []:
                reach.setdefault((int(row["from_rank"]), int(row["to_rank"])), dict(row))
    return listeners, [reach[k] for k in sorted(reach)]


def _node(rank: int, listeners: Mapping[int, Mapping[str, Any]], rank_names: Mapping[int, str] | None) -> str:
    addr = (listeners.get(rank) or {}).get("addr")
    name = (rank_names or {}).get(rank) or f"rank {rank}"
    return f"{name} ({addr})" if addr else name


def rule_mesh_blocked(outcomes: Sequence[Mapping[str, Any]],
                      rank_names: Mapping[int, str] | None = None) -> list[Finding]:
    """A node whose ephemeral ports the other nodes cannot reach (only the rendezvous port open): named, with the
    nodes it refuses, and the fix that opens its ephemeral range on its training interface (Gloo and NCCL listen
    there for their peers; MASTER_PORT alone does not make a process group)."""
    listeners, reach = mesh_of(outcomes)
    blocked: dict[int, list[dict[str, Any]]] = {}
    for row in reach:
        if row.get("outcome") != "ok":
            blocked.setdefault(int(row["to_rank"]), []).append(row)
    found = []
    for target, rows in sorted(blocked.items()):
        me = listeners.get(target) or {}
        who = _node(target, listeners, rank_names)
        sources = ", ".join(_node(int(r["from_rank"]), listeners, rank_names) for r in rows)
        how = "; ".join(sorted({f"{r['outcome']}" + (f" ({r['error']})" if r.get("error") and r["outcome"] != "timeout" else "")
                                for r in rows}))
        lo, hi = (me.get("ephemeral_range") or [None, None])[:2]
        dev = me.get("ifname") or '"${IFACE:?the training interface of this node}"'
        if lo and hi:
            ports, nft_ports, shown = f"{lo}:{hi}", f"{lo}-{hi}", f"{lo}-{hi}"
            range_line = f"cat /proc/sys/net/ipv4/ip_local_port_range   # on {who}: {lo} {hi}, where Gloo and NCCL listen\n"
        else:
            ports = nft_ports = '"${EPHEMERAL:?the range in /proc/sys/net/ipv4/ip_local_port_range, LOW:HIGH}"'
            shown = "its ephemeral range"
            range_line = f"cat /proc/sys/net/ipv4/ip_local_port_range   # on {who}: where Gloo and NCCL listen\n"
        fix = (f"# {who} lets the other nodes reach MASTER_PORT but not its ephemeral ports: open {shown} on its training "
               f"interface {dev} to the other nodes\n"
               + range_line
               + f"iptables -I INPUT -i {dev} -p tcp --dport {ports} -j ACCEPT   # on {who}, with iptables\n"
               f"# with nftables instead: nft insert rule inet filter input iifname {dev} tcp dport {nft_ports} accept\n"
               f"# with ufw instead: ufw allow in on {dev} proto tcp to any port {ports}\n"
               f"{GANG_COMMAND}   # again once it is open")
        found.append(failure(
            f"{who} refuses TCP on its ephemeral ports from {sources} (a connect to {me.get('addr')}:{me.get('port')}: "
            f"{how}); the process group needs them, MASTER_PORT alone is not enough", fix,
            actor=Actor.NODE, cause="collective.ports_blocked_between_nodes"))
    return found


def rule_busbw(combined: Mapping[str, Any], threshold: float | None, backend: str | None) -> Finding | None:
    """The sweep's peak bus bandwidth reaches ``min_busbw_gbps`` (nccl-tests' busbw) when the profile sets it."""
    if threshold is None or not combined["ok"]:
        return None
    sweep = combined.get("sweep") or []
    if not sweep:
        return warning(f"min_busbw_gbps={threshold:g} is set but the sweep did not run",
                       "dsv3-preflight probe --sweep   # on every node at once, or: dsv3-preflight run --all-nodes --probe",
                       actor=Actor.JOB)
    best = max(row["busbw_gbps"] for row in sweep)
    if best >= threshold:
        return None
    return failure(
        f"all_reduce bus bandwidth peaks at {best:.3g} GB/s, below min_busbw_gbps={threshold:g} "
        f"({combined['expected_world']} ranks, {backend})",
        "# the collectives run on a slow path: check the NIC they use, InfiniBand, and the link speed\n"
        "env | grep -E '^(NCCL_SOCKET_IFNAME|NCCL_IB_DISABLE|NCCL_IB_HCA)='\n"
        "ethtool \"${NCCL_SOCKET_IFNAME:?the interface the collectives use}\" | grep -i speed\n"
        "# or, when this is the expected fabric: lower min_busbw_gbps in the profile",
        actor=Actor.NETWORK, cause="collective.low_busbw")


def rule_nic_mismatch(combined: Mapping[str, Any], notes: Sequence[str],
                      nic_route: Mapping[str, Any] | None) -> Finding | None:
    """NCCL/Gloo used another interface than the one the route to MASTER_ADDR leaves by."""
    mismatch = next((n for n in notes if n.startswith("NIC mismatch")), None)
    if not combined["ok"] or mismatch is None or not nic_route:
        return None
    ifname = nic_route.get("ifname")
    # NCCL reads a bare name as a prefix: the value that selects exactly this interface among the node's (=NAME when
    # they are not known)
    nccl = recommended_nccl_value(ifname, nic_route.get("interfaces") or [], (nic_route.get("env") or {}).get("NCCL_SOCKET_FAMILY"))
    return warning(f"{combined['summary']}, but {mismatch[0].lower()}{mismatch[1:]}",
                   f"export NCCL_SOCKET_IFNAME={nccl} GLOO_SOCKET_IFNAME={ifname}"
                   "   # the interface the kernel uses towards MASTER_ADDR",
                   actor=Actor.JOB, cause="net.nccl_socket_ifname")


# -- judging outcomes ------------------------------------------------------------------------------------------

def judge_outcomes(outcomes: Sequence[Mapping[str, Any]], world: int, profile: Any, *, partial: bool = False,
                   backend: str | None = None, nic_route: Mapping[str, Any] | None = None,
                   port_reach: Mapping[str, Any] | None = None, rank_names: Mapping[int, str] | None = None,
                   evidence: Mapping[str, Any] | None = None) -> Result:
    """Every collective rule over the outcomes that came back (one node's, or every node's of a gang).

    ``partial``: the outcomes are one node's view of a larger world (ranks nobody reported are not
    counted as absent unless a rank saw them missing from the store).
    """
    combined = combine(list(outcomes), world, assume_absent=not partial)
    notes = network_context(nic_route, port_reach, outcomes)
    duplicates = observed_duplicates(combined["rank_map"])
    ev: dict[str, Any] = {
        "world": combined["expected_world"], "backend": backend, "timings_s": combined["timings"],
        "rank_map": combined["rank_map"], "stuck": combined["stuck_labels"], "never_joined": combined["never_joined"],
        "findings": combined["findings"], "nccl_interfaces": combined["nccl_interfaces"], **dict(evidence or {}),
    }
    failed = [r for o in outcomes for r in o.get("ranks", []) if r.get("last_phase") != "done"]
    if failed:
        ev["log_tail"] = {str(r["rank"]): (r.get("log_tail") or [])[-15:] for r in failed}
    if combined.get("sweep"):
        ev["sweep"] = combined["sweep"]
        ev["best_busbw_gbps"] = max(row["busbw_gbps"] for row in combined["sweep"])
    if notes:
        ev["network"] = notes
    if duplicates:
        ev["duplicates"] = duplicates
    listeners, reach = mesh_of(outcomes)
    if reach:
        ev["mesh"] = {"listeners": {str(k): v for k, v in listeners.items()}, "reach": reach}
    found = Findings()
    found.check(rule_duplicate_gpus, duplicates)
    if not combined["ok"]:   # who refuses whom leads: it names the node to open, the hang below is its consequence
        found.check(rule_mesh_blocked, outcomes, rank_names)
    found.check(rule_completed, combined, notes, rank_names)
    found.check(rule_busbw, combined, profile.min_busbw_gbps, backend)
    found.check(rule_nic_mismatch, combined, notes, nic_route)
    ok = combined["summary"]
    if profile.min_busbw_gbps is not None and combined.get("sweep"):
        ok += f"; busbw peak {ev['best_busbw_gbps']:.3g} GB/s ≥ {profile.min_busbw_gbps:g}"
    return found.result(ok, ev)


def judge_collective(collective: Mapping[str, Any], profile: Any, nic_route: Mapping[str, Any] | None = None,
                     port_reach: Mapping[str, Any] | None = None) -> Result:
    """`dist.allreduce`: the verdict on this node's `collective` fact."""
    if not collective.get("requested"):
        return Result.skipped(f"collective probe not run here: {collective.get('reason')}; run "
                              + " ; ".join(c.split("   #")[0] for c in collective.get("commands", [])[:1])
                              + f" on every node, or `{GANG_COMMAND}`",
                              {"commands": collective.get("commands", []), "reason": collective.get("reason")})
    outcome = collective["outcome"]
    extra = {"mode": collective.get("mode"), "route_interface": outcome.get("route_interface"), "env": outcome.get("env"),
             "elapsed_s": outcome.get("elapsed_s"), "timeout_s": outcome.get("timeout_s")}
    for key in ("backend_note", "port_note"):
        if collective.get(key):
            extra[key] = collective[key]
    world = int(collective.get("world") or outcome.get("world_size") or 1)
    return judge_outcomes([outcome], world, profile, partial=bool(collective.get("partial")),
                          backend=collective.get("backend"), nic_route=nic_route, port_reach=port_reach, evidence=extra)


def judge_gang(gang: Mapping[str, Mapping[str, Any]], profile: Any, node_ranks: Mapping[str, int],
               node_states: Mapping[str, Mapping[str, Any]] | None = None) -> Result:
    """`dist.allreduce_cluster`: the verdict on every node's `collective_gang` fact (one rank per node).

    A node that has no requested outcome (its task died, or it never ran) has its rank counted as never
    joined; the summary names it. A node Ray lost during the run is that node's problem, never the
    network's: the gang is failed under the lost node's cause, and the network is not judged.
    """
    requested = {node: f for node, f in gang.items() if isinstance(f, Mapping) and f.get("requested")}
    lost = [node for node, state in (node_states or {}).items()
            if isinstance(state, Mapping) and state.get("state") == "dead"]
    if requested and lost:
        return Result.failed(
            f"the gang could not complete: {', '.join(lost)} lost during the run (its own ERROR says when and why); "
            "the network between the nodes is not judged", {"lost": lost, "node_states": dict(node_states or {})},
            f"dsv3-preflight run --all-nodes --probe   # once {', '.join(lost)} is back in the cluster",
            actor=Actor.NODE, cause="cluster.node_lost")
    if not requested:
        reason = next((f.get("reason") for f in gang.values() if isinstance(f, Mapping) and f.get("reason")), None)
        return Result.skipped(f"the gang probe was not requested: `{GANG_COMMAND}` runs one all_reduce over all "
                              "nodes at once", {"reason": reason})
    world = max(int(f.get("world") or 0) for f in requested.values())
    names = {int(f["node_rank"]): node for node, f in requested.items() if f.get("node_rank") is not None}
    names.update({rank: node for node, rank in node_ranks.items() if rank not in names})
    first = next(iter(requested.values()))
    per_node = {node: {"node_rank": f.get("node_rank"), "backend": f.get("backend"),
                       "route_interface": (f.get("outcome") or {}).get("route_interface"),
                       "elapsed_s": (f.get("outcome") or {}).get("elapsed_s"), "env": (f.get("outcome") or {}).get("env"),
                       **({"backend_note": f["backend_note"]} if f.get("backend_note") else {})}
                for node, f in requested.items()}
    extra = {"mode": "gang", "master": f"{first.get('master_addr')}:{first.get('master_port')}",
             "timeout_s": first.get("timeout_s"), "nodes": per_node,
             "not_reported": sorted(set(node_ranks) - set(requested), key=lambda n: node_ranks[n])}
    backends = sorted({str(f.get("backend")) for f in requested.values()})
    return judge_outcomes([f["outcome"] for f in requested.values()], world, profile, partial=False,
                          backend="/".join(backends), rank_names=names, evidence=extra)
