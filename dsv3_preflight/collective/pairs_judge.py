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
from dataclasses import replace
from typing import Any, Mapping, Sequence

from dsv3_preflight.result import Actor, Finding, Findings, Result, failure, warning

from .localise import (FAILED, NOT_STARTED, OK, UNTESTED, Localisation, PairRecord, Thresholds, localise, matrix, pair_records,
                       requested_facts, summary_stats)
from .schedule import total_pairs

COMMAND = "dsv3-preflight run --all-nodes --probe=pairs"
WORST = 3


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

def coverage(schedule: Mapping[str, Any], records: Sequence[PairRecord], loc: Localisation,
             node_count: int) -> dict[str, Any]:
    nodes = max(node_count, len(schedule["nodes"]))
    total = total_pairs(nodes)
    tested = sum(1 for r in records if r.status in (OK, FAILED))
    planned = len(schedule["planned"])
    text = f"{tested} of {total} pairs tested"
    if schedule.get("sample") is not None:
        unjudged = nodes - len(loc.judged_nodes)
        text += (f" (--pairs-sample {schedule['sample']}: {planned} sampled in {schedule['rounds']} round(s); "
                 f"{total - planned} pair(s) not tested"
                 + (f"; {unjudged} node(s) met fewer than 2 partners, so a bad node there cannot be told from a bad link"
                    if unjudged else "") + ")")
    elif planned > tested:
        text += f" ({planned} planned)"
    return {"text": text, "tested": tested, "total": total, "planned": planned, "rounds": schedule["rounds"],
            "sample": schedule.get("sample"), "judged_nodes": loc.judged_nodes}


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
    nodes = schedule["nodes"] or sorted(node_ranks, key=lambda n: node_ranks[n])
    loc = localise(nodes, records, th)
    addrs, ifaces = node_addresses(facts), node_interfaces(facts)
    cover = coverage(schedule, records, loc, len(node_ranks))
    stats = summary_stats(records)
    size = next((r.size_bytes for r in records if r.size_bytes), None)
    evidence = {
        "coverage": cover, "thresholds": {"pairs_latency_ratio": th.latency_ratio, "pairs_busbw_ratio": th.busbw_ratio},
        "reference": stats, "busbw_bytes": size, "culprits": loc.culprits(), "worst": _worst(records),
        "matrix": matrix(nodes, records), "pairs": [r.as_dict() for r in records], "addresses": addrs,
    }
    found = Findings()
    found.check(rule_bad_nodes, loc, th, addrs, ifaces)
    found.check(rule_failed_pairs, loc, addrs)
    found.check(rule_slow_links, loc, th, addrs)
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
