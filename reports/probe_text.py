"""Text for the collective probes, from a result document (pure: a document in, text out; no judging).

- :func:`render_probe_text`: what `dsv3-preflight probe` shows above the console report: this node's ranks
  (phase reached, timings, the sum), the interfaces NCCL used, each rank's error, the bandwidth sweep,
  and the log tail of ranks that did not finish.
- :func:`render_pairs_text`: the pair matrix of `run --all-nodes --probe=pairs` (``dist.pairs``' evidence):
  p50 latency and busbw node × node, the culprits marked, the worst pairs and the coverage line.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsv3_preflight.text import safe_terminal

PAIRS_CHECK = "dist.pairs"
NOT_STARTED = "not started"   # a pair's status (collective/localise.py): a side had not started when its time ran out


def _s(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}s"


def _t(value: Any) -> str:
    return safe_terminal(value)


def render_probe_text(doc: Mapping[str, Any]) -> str:
    """The per-rank table of the `collective` fact(s) in the document's nodes ('' when there is none)."""
    lines: list[str] = []
    for node in doc.get("nodes") or []:
        fact = (node.get("facts") or {}).get("collective")
        if not isinstance(fact, Mapping) or not fact.get("requested") or not fact.get("outcome"):
            continue
        outcome = fact["outcome"]
        lines.append(f"{_t(node.get('node'))}: ranks {outcome.get('rank_offset')}..{outcome.get('rank_offset', 0) + outcome.get('nproc_per_node', 1) - 1}"
                     f" of world {outcome.get('world_size')}, {_t(outcome.get('backend'))}, rendezvous "
                     f"{_t(outcome.get('master_addr'))}:{outcome.get('master_port')}, {outcome.get('elapsed_s')} s "
                     f"of {outcome.get('timeout_s'):g} s")
        if fact.get("backend_note"):
            lines.append(f"  note: {_t(fact['backend_note'])}")
        for r in outcome.get("ranks") or []:
            t = r.get("timings") or {}
            line = (f"  rank {r.get('rank'):>3} pid {r.get('pid')} {_t(r.get('host') or '?')} {_t(r.get('device') or '')}"
                    f"{' ' + _t(r['pci_bus_id']) if r.get('pci_bus_id') else ''}: last phase {_t(r.get('last_phase'))}; "
                    f"init {_s(t.get('init_s'))} first {_s(t.get('first_collective_s'))} steady {_s(t.get('steady_s'))}")
            if r.get("sum_ok") is not None:
                line += f"; sum {r.get('got_sum'):g} (expected {r.get('expected_sum'):g}) {'ok' if r['sum_ok'] else 'WRONG'}"
            if r.get("killed"):
                line += f"; {_t(r['killed'])}"
            lines.append(line)
            for iface in r.get("nccl_interfaces") or []:
                lines.append(f"      NCCL uses {_t(iface['ifname'])} ({_t(iface['address'])}) [{_t(iface['source'])}]")
            if r.get("error"):
                e = r["error"]
                lines.append(f"      error in phase {_t(e.get('phase'))}: {_t(e.get('exc_type'))}: {_t(str(e.get('message'))[:300])}")
            if r.get("last_phase") != "done" and not r.get("findings"):
                lines.append(f"      log tail of rank {r.get('rank')}:")
                lines += [f"        {_t(x)}" for x in (r.get("log_tail") or [])[-10:]]
        if outcome.get("sweep"):
            lines.append(f"  {'size (B)':>12} {'time (us)':>12} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}")
            for row in outcome["sweep"]:
                lines.append(f"  {row['size_bytes']:>12} {row['time_us']:>12.1f} {row['algbw_gbps']:>13.4f} "
                             f"{row['busbw_gbps']:>13.4f}")
    return "\n".join(lines) + ("\n" if lines else "")


def _cell(value: Any, status: str, fmt: str) -> str:
    if status == "self":
        return "·"
    if status == "failed":
        return "FAIL"
    if status == NOT_STARTED:
        return "late"
    if value is None:
        return "-"
    return format(value, fmt)


def _table(title: str, nodes: Sequence[str], values: Sequence[Sequence[Any]], status: Sequence[Sequence[str]],
           fmt: str, marked: set[str]) -> list[str]:
    names = [("*" if n in marked else "") + _t(n) for n in nodes]
    width = max([len(n) for n in names] + [9])
    lines = [title, " " * width + " " + " ".join(f"{n:>{width}}" for n in names)]
    for i, name in enumerate(names):
        lines.append(f"{name:>{width}} " + " ".join(f"{_cell(values[i][j], status[i][j], fmt):>{width}}"
                                                     for j in range(len(nodes))))
    return lines


def _suspects_text(result: Mapping[str, Any]) -> str:
    """A large cluster's pairs (no matrix above 32 nodes): the coverage, then each named or unresolved node with every
    pair it was in."""
    ev = result["evidence"]
    lines = [f"pairs: {_t((ev.get('coverage') or {}).get('text', ''))}"]
    rows = ev.get("suspect_rows") or []
    if rows:
        lines.append("the nodes named or not resolved, with every pair each was in:")
    for row in rows:
        lines.append(f"  {_t(row.get('node'))} ({_t(row.get('state'))})")
        for p in row.get("pairs") or []:
            lat = "-" if p.get("latency_us") is None else f"{p['latency_us'] / 1000:.3f} ms"
            bw = "-" if p.get("busbw_gbps") is None else f"{p['busbw_gbps']:.3g} GB/s"
            lines.append(f"    with {_t(p.get('peer'))} (round {p.get('round')}): {_t(p.get('status'))}"
                         + (", slow" if p.get("slow") else "") + f"; p50 {lat}, busbw {bw}"
                         + (f"; {_t(p.get('failure'))}" if p.get("status") == "failed" else ""))
    lines.append(f"{result.get('status', '').upper()} dist.pairs: {_t(result.get('summary'))}")
    return "\n".join(lines) + "\n"


def render_pairs_text(doc: Mapping[str, Any]) -> str:
    """The pair matrix of a `--probe=pairs` run ('' when the document has no judged pair matrix)."""
    result = next((r for r in doc.get("results") or [] if r.get("name") == PAIRS_CHECK
                   and (isinstance((r.get("evidence") or {}).get("matrix"), Mapping)
                        or isinstance((r.get("evidence") or {}).get("suspect_rows"), list))), None)
    if result is None:
        return ""
    ev = result["evidence"]
    if not isinstance(ev.get("matrix"), Mapping):
        return _suspects_text(result)
    m = ev["matrix"]
    culprits = ev.get("culprits") or {}
    marked = set(culprits.get("nodes") or [])
    lat = [[None if v is None else v / 1000 for v in row] for row in m["latency_us"]]
    late = any(st == NOT_STARTED for row in m["status"] for st in row)
    lines = [f"pairs: {_t((ev.get('coverage') or {}).get('text', ''))} (* = the culprit node"
             + ("; late = a side still starting when the pair's time ran out, not measured" if late else "") + ")"]
    lines += _table("p50 latency of a 4 KiB all_reduce (ms)", m["nodes"], lat, m["status"], ".3f", marked)
    size = ev.get("busbw_bytes")
    lines += _table(f"busbw at {size} B (GB/s)", m["nodes"], m["busbw_gbps"], m["status"], ".3g", marked)
    for link in culprits.get("links") or []:
        lines.append(f"slow link: {_t(link[0])}↔{_t(link[1])}")
    for link in culprits.get("failed") or []:
        lines.append(f"failed pair: {_t(link[0])}↔{_t(link[1])}")
    worst = ev.get("worst") or []
    if worst:
        lines.append("worst pairs:")
        for w in worst[:6]:
            if w.get("status") == "failed":
                lines.append(f"  {_t(w['pair'])}: {_t(w.get('failure'))}")
            else:
                lat_ms = "-" if w.get("latency_us") is None else f"{w['latency_us'] / 1000:.3f} ms"
                bw = "-" if w.get("busbw_gbps") is None else f"{w['busbw_gbps']:.3g} GB/s"
                lines.append(f"  {_t(w['pair'])}: p50 {lat_ms}, busbw {bw}")
    lines.append(f"{result.get('status', '').upper()} dist.pairs: {_t(result.get('summary'))}")
    return "\n".join(lines) + "\n"
