"""dist.allreduce: torch.distributed comes up and all_reduce returns the exact sum, within the timeout."""
from __future__ import annotations

from typing import Any

from dsv3_preflight import Result, check

_CAUSE_ORDER = ("gloo_ifname_missing", "nccl_ifname_missing", "duplicate_gpu", "master_unresolvable",
                "store_connect_refused", "store_connect_timeout", "store_port_in_use", "store_closed", "no_route",
                "gloo_full_mesh_connect", "nccl_socket_connect", "ranks_missing", "store_wait_timeout",
                "nccl_system_error", "collective_timeout")


def _duplicates(rank_map: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = [r for r in rank_map if r.get("pci_bus_id")]
    if not rows:
        return []
    try:
        from dsv3_preflight.gpu.rankmap import find_duplicates
    except ImportError:  # the GPU area's module is not installed in this build
        return []
    return find_duplicates(rows)


def _network_context(nic_route: dict | None, port_reach: dict | None, outcome: dict | None) -> list[str]:
    """What the network checks' facts say that explains a failed rendezvous."""
    notes = []
    if port_reach and port_reach.get("attempted") and port_reach.get("outcome") not in (None, "ok"):
        notes.append(f"net.port_reach: {port_reach.get('host')}:{port_reach.get('port')} is "
                     f"{port_reach.get('outcome')} from this node ({port_reach.get('error')})")
    route_if = (nic_route or {}).get("ifname")
    used: set[str] = set()
    for r in (outcome or {}).get("ranks", []):
        used.update(e["ifname"] for e in r.get("nccl_interfaces") or [])
    env = (outcome or {}).get("env", {})
    if env.get("GLOO_SOCKET_IFNAME"):
        used.add(env["GLOO_SOCKET_IFNAME"])
    if route_if and used and route_if not in used and not (nic_route or {}).get("loopback"):
        notes.append(f"NIC mismatch: the route to MASTER_ADDR leaves through {route_if} (net.nic_route) but the probe used "
                     f"{', '.join(sorted(used))}")
    return notes


def _nic_mismatch(notes: list[str]) -> str | None:
    return next((n for n in notes if n.startswith("NIC mismatch")), None)


def judge_collective(collective: dict, profile, nic_route: dict | None = None, port_reach: dict | None = None) -> Result:
    """The verdict on a `collective` fact (shared by the node check and tests)."""
    if not collective.get("requested"):
        return Result.skipped(f"collective probe not run here: {collective.get('reason')}; run "
                              + " ; ".join(c.split("   #")[0] for c in collective.get("commands", [])[:1])
                              + " on every node, or `dsv3-preflight run --all-nodes --probe`",
                              {"commands": collective.get("commands", []), "reason": collective.get("reason")})
    combined = collective["combined"]
    outcome = collective["outcome"]
    evidence: dict[str, Any] = {
        "mode": collective.get("mode"), "backend": collective.get("backend"), "world": combined["expected_world"],
        "timings_s": combined["timings"], "rank_map": combined["rank_map"], "stuck": combined["stuck_labels"],
        "never_joined": combined["never_joined"], "findings": combined["findings"],
        "nccl_interfaces": combined["nccl_interfaces"], "route_interface": outcome.get("route_interface"),
        "env": outcome.get("env"), "elapsed_s": outcome.get("elapsed_s"), "timeout_s": outcome.get("timeout_s"),
    }
    for key in ("backend_note", "port_note"):
        if collective.get(key):
            evidence[key] = collective[key]
    failed_ranks = [r for r in outcome.get("ranks", []) if r.get("last_phase") != "done"]
    if failed_ranks:
        evidence["log_tail"] = {str(r["rank"]): r.get("log_tail", [])[-15:] for r in failed_ranks}
    if combined.get("sweep"):
        evidence["sweep"] = combined["sweep"]
    notes = _network_context(nic_route, port_reach, outcome)
    if notes:
        evidence["network"] = notes

    duplicates = _duplicates(combined["rank_map"])
    if duplicates:
        evidence["duplicates"] = duplicates
        return Result.failed(duplicates[0]["message"] + f" ({duplicates[0].get('host')}, PCI {duplicates[0].get('pci_bus_id')})",
                             evidence, "export CUDA_DEVICE_ORDER=PCI_BUS_ID   # on every node; one local rank per GPU")
    if not combined["ok"]:
        findings = sorted(combined["findings"], key=lambda f: _CAUSE_ORDER.index(f["kind"]) if f["kind"] in _CAUSE_ORDER else 99)
        summary = combined["summary"]
        if notes and not findings:
            summary += f" — {notes[0]}"
        remediation = "\n".join(dict.fromkeys(f["remediation"] for f in findings)) or (
            "rerun `dsv3-preflight probe` with NCCL_DEBUG=INFO and read the log tail in the evidence")
        return Result.failed(summary, evidence, remediation)

    threshold = profile.min_busbw_gbps
    sweep = combined.get("sweep") or []
    if threshold is not None:
        if not sweep:
            return Result.warned(f"min_busbw_gbps={threshold:g} is set but the sweep did not run", evidence)
        best = max(row["busbw_gbps"] for row in sweep)
        evidence["best_busbw_gbps"] = best
        if best < threshold:
            return Result.failed(
                f"all_reduce bus bandwidth peaks at {best:.3g} GB/s, below min_busbw_gbps={threshold:g} "
                f"({combined['expected_world']} ranks, {collective.get('backend')})", evidence,
                "check the NIC the collectives use (NCCL_SOCKET_IFNAME), NCCL_IB_DISABLE and the link speed; "
                "or lower min_busbw_gbps in the profile if this is the expected fabric")
        return Result.passed(combined["summary"] + f"; busbw peak {best:.3g} GB/s ≥ {threshold:g}", evidence)
    mismatch = _nic_mismatch(notes)
    if mismatch:
        return Result.warned(f"{combined['summary']}, but {mismatch[0].lower()}{mismatch[1:]}", evidence,
                             f"export NCCL_SOCKET_IFNAME={nic_route.get('ifname')} GLOO_SOCKET_IFNAME={nic_route.get('ifname')}"
                             "   # the interface the kernel uses towards MASTER_ADDR")
    return Result.passed(combined["summary"], evidence)


@check("dist.allreduce", needs=["collective", "profile", "nic_route", "port_reach"], tags=["dist", "network"],
       timeout=3600)
def allreduce(collective, profile, nic_route, port_reach):
    """torch.distributed init + all_reduce of a known sum across this node's ranks (hang-proof, with the cause)."""
    return judge_collective(collective, profile, nic_route, port_reach)
