"""`dist.pairs`: the verdict on every node's `collective_pairs` fact. Pure: facts in, a Result out.

Rules (each a small function returning findings, see :mod:`.localise` for the statistics):

- ``rule_bad_nodes``: a node that is the outlier with every partner (its administrator acts);
- ``rule_failed_pairs``: a pair that timed out or could not connect, naming both sides and which one could
  not connect (the network's administrator acts);
- ``rule_slow_links``: one slow pair between two nodes that are fine with their other partners;
- ``rule_slow_start``: pairs whose side was still starting (Python, importing torch) when their time ran out: the
  link was not measured, and the node is named (a warning: unknown is never healthy, and never a bad link);
- ``rule_untested``: a planned pair that neither side reported (unknown is never healthy).

The summary always states the coverage, "P of P pairs tested", and what a sample leaves out.
"""
from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from dsv3_preflight.result import Actor, Finding, Findings, Result, failure, warning

from .localise import (
    FAILED,
    NOT_STARTED,
    OK,
    UNTESTED,
    Localisation,
    PairRecord,
    Thresholds,
    localise,
    matrix,
    node_states,
    pair_records,
    requested_facts,
    summary_stats,
)
from .schedule import FAST, total_pairs

COMMAND = "dsv3-preflight run --all-nodes --probe=pairs"
WORST = 3
#: up to this many nodes the evidence holds the node × node matrix; above it, the rows of the suspects only (a
#: 512-node matrix is 262,144 cells, most of them pairs the fast schedule never ran)
MATRIX_NODES = 32
#: the most nodes the evidence names one by one in a list of the coverage (the counts are always there)
LISTED = 64


def _ms(us: float | None) -> str:
    return "?" if us is None else (f"{us / 1000:.3g} ms" if us >= 100 else f"{us:.3g} µs")


def _gbps(value: float | None) -> str:
    return "?" if value is None else f"{value:.3g} GB/s"


def _size(n: int | None) -> str:
    if not n:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:g} {unit}"
        n /= 1024
    return f"{n}"


def node_addresses(facts: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Each node's address as the driver gave it to the pairs."""
    out: dict[str, str] = {}
    for f in facts.values():
        for m in f.get("pairs") or []:
            out.update(m.get("addrs") or {})
    return out


def node_interfaces(facts: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The interface each node's pair traffic left by (the route its probe saw toward the pair's store)."""
    out: dict[str, str] = {}
    for node, f in facts.items():
        for m in f.get("pairs") or []:
            ifname = ((m.get("outcome") or {}).get("route_interface") or {}).get("ifname")
            if ifname and ifname != "lo":
                out.setdefault(node, ifname)
    return out


def _bandwidth(rec: PairRecord) -> str:
    """The pair's busbw as measured: from how many iterations, or an upper bound when no op finished."""
    if rec.busbw_bound:
        return f"below {_gbps(rec.busbw_gbps)} (no all_reduce of {_size(rec.size_bytes)} finished)"
    return _gbps(rec.busbw_gbps)


def _why_slow(rec: PairRecord, th: Thresholds) -> str:
    """'p50 313 ms against a median of 0.66 ms, bandwidth X against Y' (the figures against the medians of the
    reference pairs), and what cut the pair short."""
    lat_slow = rec.latency_ratio is not None and rec.latency_ratio > th.latency_ratio
    bw_slow = rec.busbw_ratio is not None and rec.busbw_ratio < th.busbw_ratio
    if rec.status == FAILED or not (lat_slow or bw_slow):
        return ("failed: " + (rec.failure or "?")) if rec.status == FAILED else "slow"
    parts = []
    if rec.latency_us is not None:
        parts.append(f"p50 {_ms(rec.latency_us)} against a median of {_ms(rec.latency_ref_us)}"
                     + (f" ({rec.latency_ratio:.3g}×)" if lat_slow else ""))
    if rec.busbw_gbps is not None:
        parts.append(f"bandwidth {_bandwidth(rec)} against {_gbps(rec.busbw_ref_gbps)}"
                     + (f" ({rec.busbw_ratio:.2g}×)" if bw_slow else ""))
    text = ", ".join(parts)
    if rec.cut_short:
        text += f" [{rec.cut_short}]"
    return text


# -- the rules --------------------------------------------------------------------------------------------------

def rule_bad_nodes(loc: Localisation, th: Thresholds, addrs: Mapping[str, str],
                   ifaces: Mapping[str, str]) -> list[Finding]:
    """A node that is the outlier with every partner it met: its link or the node itself is bad."""
    found = []
    for node, recs in loc.bad_nodes.items():
        failed = [r for r in recs if r.status == FAILED]
        detail = "; ".join(f"with {r.b if r.a == node else r.a}: {'' if r.status == FAILED else 'slow link: '}"
                           f"{_why_slow(r, th)}" for r in recs[:4])
        more = f"; and {len(recs) - 4} more" if len(recs) > 4 else ""
        verb = ("could not complete a pair with any partner" if len(failed) == len(recs)
                else "is slow with every partner")
        ifname = ifaces.get(node)
        dev = shlex.quote(ifname) if ifname else '"${IFACE:?the node interface toward its peers}"'
        where = f"{node} ({addrs[node]})" if node in addrs else node
        fix = (f"# {where} {verb} ({len(recs)} of {len(recs)} pairs): drain it from the job, or repair its link first\n"
               f"ip -s link show dev {dev}   # on {node}: errors, drops, carrier changes\n"
               f"tc -s qdisc show dev {dev}   # on {node}: shaping, a full queue, its drops and overlimits\n"
               f"ethtool {dev} | grep -iE 'speed|duplex'   # on {node}: the negotiated speed\n"
               f"ethtool -S {dev} | grep -iE 'err|drop|discard|crc|timeout'   # on {node}: the NIC's own counters\n"
               f"# then the NIC and its cable or transceiver on {node}, and the switch port it plugs into (its error counters)\n"
               f"{COMMAND}   # again after the repair")
        found.append(failure(f"node {node} {verb} ({len(recs)} of {len(recs)} pairs: {detail}{more})", fix,
                             actor=Actor.NODE, cause="collective.bad_node"))
    return found


def rule_failed_pairs(loc: Localisation, addrs: Mapping[str, str]) -> list[Finding]:
    """A pair of otherwise healthy nodes that timed out or could not connect: both named, and which side failed."""
    found = []
    for rec in loc.failed_links:
        verb = "timed out" if rec.timed_out else "failed"
        side = rec.could_not_connect
        other = (rec.b if side == rec.a else rec.a) if side else rec.b
        target = addrs.get(other)
        probe_line = (f"ping -c 3 -W 1 {target}   # on {side}: does anything reach {other}?\n" if side and target else "")
        fix = (f"# {rec.a} and {rec.b} each work with their other partners: something drops traffic between these two only\n"
               f"iptables -S | grep -E 'DROP|REJECT'   # on {rec.a} and on {rec.b}\n"
               f"{probe_line}"
               f"{COMMAND}   # again once the path is open")
        found.append(failure(f"pair {rec.a}↔{rec.b} {verb}: {rec.failure}", fix, actor=Actor.NETWORK,
                             cause="collective.pair_unreachable"))
    return found


def rule_slow_links(loc: Localisation, th: Thresholds, addrs: Mapping[str, str]) -> list[Finding]:
    """One slow pair between two nodes that are fine with their other partners: the link between them."""
    found = []
    for rec in loc.slow_links:
        target = addrs.get(rec.b, "${PEER:?the address of " + rec.b + "}")
        fix = (f"# the path between {rec.a} and {rec.b} is slow; each is fine with its other partners (a cable, switch port or route)\n"
               f"ping -c 20 -i 0.2 {target}   # on {rec.a}: loss and round-trip time on this path\n"
               f"tracepath -n {target}   # on {rec.a}: the hops and the path MTU")
        found.append(failure(f"link {rec.a}↔{rec.b} is slow ({_why_slow(rec, th)}); both nodes are fine with their "
                             "other partners", fix, actor=Actor.NETWORK, cause="collective.slow_link"))
    return found


def rule_unresolved(loc: Localisation, th: Thresholds, addrs: Mapping[str, str], max_rounds: Any) -> list[Finding]:
    """A slow or failed pair whose node(s) no other pair proved good: the fast schedule stopped (its round limit, or
    no free proven-good partner) before it could tell the node from the link. Both nodes are named; `--pairs=all`
    tests every pair."""
    found = []
    for rec in loc.unresolved:
        what = _why_slow(rec, th)
        fix = (f"# {rec.a} or {rec.b}, or the link between them: the schedule stopped before it could tell which\n"
               f"{COMMAND} --pairs=all   # every pair: each node meets every partner\n"
               f"ping -c 20 -i 0.2 {addrs.get(rec.b, '${PEER:?the address of ' + rec.b + '}')}   # on {rec.a}: loss and round-trip time")
        found.append(failure(f"pair {rec.a}↔{rec.b} is {'failed' if rec.status == FAILED else 'slow'} ({what}); "
                             f"not resolved to a node or the link within {max_rounds or '?'} round(s)", fix,
                             actor=Actor.NETWORK, cause="collective.pair_unresolved"))
    return found


def rule_slow_start(records: Sequence[PairRecord], timeout_s: float) -> Finding | None:
    """Pairs not measured because a side had not finished starting when their time ran out: that node's load or its
    torch import, not the link between the two."""
    slow = [r for r in records if r.status == NOT_STARTED]
    if not slow:
        return None
    nodes = list(dict.fromkeys(n for r in slow for n in r.slow_start))
    more = f"; and {len(slow) - 1} more pair(s)" if len(slow) > 1 else ""
    checks = "".join(f"uptime; time python -c 'import torch'    # on {n}: its load, and how long torch takes to import there\n"
                     for n in nodes[:4])
    return warning(f"{len(slow)} pair(s) not measured, a side still starting: {slow[0].label()}: {slow[0].failure}{more}",
                   f"# {', '.join(nodes)} had not started its rank when the pair's time ran out: the links were not measured\n"
                   f"{checks}{COMMAND} --pairs-timeout {max(2 * timeout_s, 60):g}    # again, with more time per pair",
                   actor=Actor.NODE, cause="collective.pair_slow_start")


def rule_untested(records: Sequence[PairRecord]) -> Finding | None:
    """Planned pairs neither side reported: unknown, never healthy."""
    missing = [r for r in records if r.status == UNTESTED]
    if not missing:
        return None
    names = ", ".join(r.label() for r in missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
    return warning(f"{len(missing)} planned pair(s) were not measured: {names} (neither side's task reported)",
                   "ray status   # are those nodes alive? then:\n" + COMMAND, actor=Actor.NODE,
                   cause="collective.pairs_untested")


# -- coverage and the verdict ----------------------------------------------------------------------------------

def _names(nodes: Sequence[str]) -> str:
    return ", ".join(nodes[:6]) + (f" and {len(nodes) - 6} more" if len(nodes) > 6 else "")


def coverage(schedule: Mapping[str, Any], records: Sequence[PairRecord], loc: Localisation,
             node_count: int, states: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Which pairs were tested, which nodes were proven good, what remains untested: the text and the counts."""
    nodes = max(node_count, len(schedule["nodes"]))
    total = total_pairs(nodes)
    tested = sum(1 for r in records if r.status in (OK, FAILED))
    planned = len(schedule["planned"])
    text = f"{tested} of {total} pairs tested"
    states = dict(states or {})
    counts = {k: sum(1 for v in states.values() if v == k) for k in ("good", "suspect", "untested")}
    counts["bad"] = len(loc.bad_nodes)   # the verdict's bad nodes (the rule's), not the schedule's view of them
    open_nodes = [n for n, v in states.items() if v in ("suspect", "untested", "bad") and n not in loc.bad_nodes]
    if schedule.get("kind") == FAST:
        text += (f" (fast schedule, {schedule['rounds']} round(s): {counts['good']} of {nodes} node(s) proven good"
                 + (f", {counts['bad']} named bad" if counts["bad"] else "")
                 + (f", {len(open_nodes)} not resolved ({_names(open_nodes)})" if open_nodes else "")
                 + (f", {planned - tested} planned pair(s) not measured" if planned > tested else "")
                 + f"; the other {total - planned} pairs were not tested: --pairs=all tests every pair)")
    elif schedule.get("sample") is not None:
        unjudged = nodes - len(loc.judged_nodes)
        text += (f" (--pairs-sample {schedule['sample']}: {planned} sampled in {schedule['rounds']} round(s); "
                 f"{total - planned} pair(s) not tested"
                 + (f"; {unjudged} node(s) met fewer than 2 partners, so a bad node there cannot be told from a bad link"
                    if unjudged else "") + ")")
    elif planned > tested:
        text += f" ({planned} planned)"
    out = {"text": text, "tested": tested, "total": total, "planned": planned, "untested_pairs": total - tested,
           "rounds": schedule["rounds"], "schedule": schedule.get("kind") or "all",
           "max_rounds": schedule.get("max_rounds"), "sample": schedule.get("sample"),
           "nodes_good": counts["good"], "nodes_bad": counts["bad"], "nodes_open": len(open_nodes),
           "open_nodes": open_nodes[:LISTED]}
    # the node lists (a round-robin's judged nodes: every node) stay short at 512 nodes: counts, and names up to LISTED
    out["judged_nodes"] = loc.judged_nodes if len(loc.judged_nodes) <= LISTED else loc.judged_nodes[:LISTED]
    out["judged_count"] = len(loc.judged_nodes)
    return out


def suspect_rows(nodes: Sequence[str], records: Sequence[PairRecord], loc: Localisation,
                 states: Mapping[str, str]) -> list[dict[str, Any]]:
    """The rows the report shows instead of a large matrix: each culprit or unresolved node and every pair it was
    in (the culprit links' two nodes too). Linear in the pairs."""
    wanted = list(loc.bad_nodes)
    for rec in loc.slow_links + loc.failed_links + loc.unresolved:
        wanted += [rec.a, rec.b]
    wanted += [n for n in nodes if states.get(n) in ("suspect", "untested")][:LISTED]
    wanted = list(dict.fromkeys(wanted))
    mine: dict[str, list[PairRecord]] = {n: [] for n in wanted}   # each in round order below
    for r in records:
        for n in (r.a, r.b):
            if n in mine:
                mine[n].append(r)
    return [{"node": n, "state": "bad" if n in loc.bad_nodes else states.get(n, "?"),
             "pairs": [{"peer": r.b if r.a == n else r.a, "round": r.round, "status": r.status,
                        "latency_us": r.latency_us, "busbw_gbps": r.busbw_gbps, "latency_ratio": r.latency_ratio,
                        "busbw_ratio": r.busbw_ratio, "slow": r.slow, "failure": r.failure}
                       for r in sorted(mine[n], key=lambda r: r.round or 0)]}
            for n in wanted]


def _worst(records: Sequence[PairRecord]) -> list[dict[str, Any]]:
    ok = [r for r in records if r.status == OK]
    by_lat = sorted(ok, key=lambda r: -(r.latency_us or 0))[:WORST]
    by_bw = sorted(ok, key=lambda r: r.busbw_gbps or 0)[:WORST]
    rows = []
    for r in [r for r in records if r.status == FAILED] + by_bw + by_lat:
        entry = {"pair": r.label(), "status": r.status, "latency_us": r.latency_us, "busbw_gbps": r.busbw_gbps,
                 "latency_ratio": r.latency_ratio, "busbw_ratio": r.busbw_ratio, "failure": r.failure}
        if entry not in rows:
            rows.append(entry)
    return rows


def judge_pairs(collective_pairs: Mapping[str, Any], profile: Any, node_ranks: Mapping[str, int]) -> Result:
    """`dist.pairs`: every rule over the pair matrix, with the coverage in the summary."""
    facts = requested_facts(collective_pairs)
    if not facts:
        return Result.skipped(f"the pairwise probe was not requested: `{COMMAND}` tests every pair of nodes "
                              "and names a slow node or link")
    th = Thresholds(float(profile.pairs_latency_ratio), float(profile.pairs_busbw_ratio))
    schedule, records = pair_records(facts)
    # the nodes in rank order (the fast schedule's facts name only their own pairs' nodes), then any other the facts name
    ranked = sorted(node_ranks, key=lambda n: node_ranks[n])
    known = set(ranked)
    nodes = ranked + [n for n in schedule["nodes"] if n not in known]
    fast = schedule.get("kind") == FAST
    states = node_states(nodes, records, th)
    loc = localise(nodes, records, th, resolve_links=fast)
    addrs, ifaces = node_addresses(facts), node_interfaces(facts)
    cover = coverage(schedule, records, loc, len(node_ranks), states)
    stats = summary_stats(records)
    size = next((r.size_bytes for r in records if r.size_bytes), None)
    evidence = {
        "coverage": cover, "thresholds": {"pairs_latency_ratio": th.latency_ratio, "pairs_busbw_ratio": th.busbw_ratio},
        "reference": stats, "busbw_bytes": size, "culprits": loc.culprits(), "worst": _worst(records),
        # the node × node matrix while it is readable; above MATRIX_NODES the suspects' rows say the same
        "matrix": matrix(nodes, records) if len(nodes) <= MATRIX_NODES else None,
        "suspect_rows": suspect_rows(nodes, records, loc, states) if len(nodes) > MATRIX_NODES else None,
        "pairs": [r.as_dict() for r in records], "addresses": addrs if len(addrs) <= LISTED else None,
    }
    found = Findings()
    found.check(rule_bad_nodes, loc, th, addrs, ifaces)
    found.check(rule_failed_pairs, loc, addrs)
    found.check(rule_slow_links, loc, th, addrs)
    found.check(rule_unresolved, loc, th, addrs, schedule.get("max_rounds"))
    found.check(rule_slow_start, records, float(profile.pairs_timeout))
    found.check(rule_untested, records)
    if len(nodes) == 2 and not found:
        ok = f"{cover['text']}: the pair finished; with 2 nodes no other pair can serve as a reference"
    else:
        lat_worst = max((r for r in records if r.status == OK), key=lambda r: r.latency_us or 0, default=None)
        bw_worst = min((r for r in records if r.status == OK), key=lambda r: r.busbw_gbps or 0, default=None)
        ok = (f"{cover['text']}: no slow node or link; p50 latency median {_ms(stats['latency_us_median'])}"
              + (f" (worst {lat_worst.label()} {_ms(lat_worst.latency_us)})" if lat_worst else "")
              + f", busbw median {_gbps(stats['busbw_gbps_median'])} at {_size(size)}"
              + (f" (lowest {bw_worst.label()} {_gbps(bw_worst.busbw_gbps)})" if bw_worst else ""))
    result = found.result(ok, evidence)
    return replace(result, summary=f"{result.summary} — {cover['text']}") if found else result
