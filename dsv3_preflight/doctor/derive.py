"""Derived findings: the evidence that is more than one line, added to the timeline once, before the passes.

Stage 2b of the doctor's pipeline (docs/DEVELOPING.md): NCCL facts that drift between nodes, collectives out of
step (TORCH_DISTRIBUTED_DEBUG=DETAIL), two nodes with one node rank, a C10d store nobody hosted, the preflight's own
failed checks, RAS reports, and a Flight Recorder dump. Each becomes a finding of a ``signatures.DERIVED`` entry,
recorded like a matched line (``timeline.record``).
"""
from __future__ import annotations

from ..result import Actor
from .signatures import DERIVED, GATE_ERROR_NOTE, GATE_LAUNCHED, gate_rerun, gate_signature
from .timeline import Event, Timeline, groups_of, record

_DERIVED = {s.id: s for s in DERIVED}
_DRIFT = {"nccl_version": "nccl.version_drift", "cuda_driver": "cuda.driver_drift", "net_plugin": "nccl.plugin_drift",
          "network": "nccl.network_drift"}
_RAS = (("mismatch", "ras.mismatch"), ("dead", "ras.dead"), ("missing", "ras.incomplete"), ("errors", "ras.rank_error"))


def flight_recorder(tl: Timeline, analysis: dict, trace_dir: str) -> None:
    """The ranks a Flight Recorder analysis (``flight_recorder.analyse``) finds behind, and its desynchronised
    collectives."""
    tl.flight = analysis
    for b in analysis["behind"]:
        for rank in b["ranks"]:
            ev = Event(-1, trace_dir, 0, None, None, rank, None,
                       f"flight recorder: rank {rank} last collective #{b['behind_at'][str(rank)]}, "
                       f"ranks {b['ahead']} at #{b['seq']} ({b['op']})")
            record(tl, _DERIVED["fr.rank_behind"], {"rank": str(rank), "seq": str(b["seq"]), "op": str(b["op"]),
                                                    "ahead": ",".join(map(str, b["ahead"]))}, ev)
    for d in analysis["desync"]:
        ev = Event(-1, trace_dir, 0, None, None, None, None,
                   "flight recorder: at #{} {}".format(d["seq"], "; ".join(f"rank {r}: {v[0]} {v[1]}"
                                                                          for r, v in d["ops"].items())))
        record(tl, _DERIVED["fr.desync"], {"seq": str(d["seq"])}, ev)


def derive(tl: Timeline) -> None:
    """Findings from the per-node NCCL facts and the RAS reports (once, before judging)."""
    file_of = {f["path"]: i for i, f in enumerate(tl.files)}
    _drift(tl, file_of)
    _divergence(tl)
    _node_rank(tl)
    _c10d_store(tl)
    _store_clients(tl)
    _gate(tl, file_of)
    _ras(tl, file_of)


def _drift(tl: Timeline, file_of: dict[str, int]) -> None:
    for d in tl.facts.drift():
        sid = _DRIFT[d["key"]]
        values = "; ".join(f"{v} on {', '.join(ns[:4])}{'…' if len(ns) > 4 else ''}" for v, ns in d["values"].items())
        for where in d["evidence"] or [{"file": None, "line": 0}]:
            node = next((n for v, ns in d["values"].items() for n in ns
                         if (d["key"], n, v) in tl.facts.evidence and tl.facts.evidence[(d["key"], n, v)] == where), None)
            ev = Event(file_of.get(where["file"], -1), where["file"] or "", where["line"], None, node, None, None,
                       f"{d['key']} {values}")
            f = record(tl, _DERIVED[sid], {"values": values}, ev, extra={"values": d["values"]})
            f.evidence[-1]["text"] = f"{d['key']}: {values}"


def _divergence(tl: Timeline) -> None:
    d = tl.trail.divergence()
    if d is None or not (tl.error_count or not tl.progress):   # a log cut mid-run is always out of step
        return
    groups = {"behind": ", ".join(map(str, d["behind"])), "ahead": ", ".join(map(str, d["ahead"])),
              "seq_behind": str(d["seq_behind"]), "op_behind": d["op_behind"],
              "seq_ahead": str(d["seq_ahead"]), "op_ahead": d["op_ahead"]}
    for w in d["where"]:
        record(tl, _DERIVED["c10d.fingerprints_diverge"], groups,
               Event(w["fi"], w["path"], w["line"], w["ts"], w["node"], w["rank"], None, w["text"]))


def _ras(tl: Timeline, file_of: dict[str, int]) -> None:
    for ras in tl.ras:
        for key, sid in _RAS:
            for e in getattr(ras, key):
                groups = {k: str(v) for k, v in e.items() if v is not None and k in ("rank", "node", "pid", "error")}
                ev = Event(file_of.get(e["file"], -1), e["file"], e["line"], None, e.get("node"),
                           e.get("rank"), None, "RAS " + ", ".join(f"{k} {v}" for k, v in groups.items()))
                f = record(tl, _DERIVED[sid], groups, ev)
                if ras.mismatch_detail:
                    f.extra.setdefault("detail", ras.mismatch_detail[:4])


def _node_rank(tl: Timeline) -> None:
    """Two nodes (files) whose torchrun agents waited for the same node rank's share of the global ranks, or both
    as node rank 0 for every node's info: two nodes run with one --node-rank."""
    f = tl.findings.get("elastic.ranks_not_assigned")
    if f is None:
        return
    by_rank: dict[str, list[Event]] = {}
    for ev in f.events:
        m = f.sig.regex.search(ev.text)
        if m is None:
            continue
        rank = "0" if m.group("kind") == "role_info" else m.group("rank")   # only node rank 0 waits for role_info
        if all((e.file, e.node) != (ev.file, ev.node) for e in by_rank.get(rank, [])):
            by_rank.setdefault(rank, []).append(ev)
    for rank, evs in sorted(by_rank.items()):
        if len(evs) < 2:
            continue
        names = [ev.node or ev.path for ev in evs]
        for ev in evs:
            record(tl, _DERIVED["elastic.duplicate_node_rank"], {"rank": rank, "nodes": ", ".join(names)}, ev)


#: what a node that failed to reach the rendezvous store prints (its own side of a network or address problem)
_UNREACHED = ("c10d.client_connect_failed", "c10d.store_on_local_address", "c10d.numeric_hostname", "net.name_resolution",
              "elastic.rendezvous_connection", "elastic.c10d_store_not_hosted")


def _store_clients(tl: Timeline) -> None:
    """The store's host gave up waiting for its clients ("3/4 clients joined"), more than itself joined, and no file
    shows a node that failed to reach the store (every store timeout read is the host's wait): the store was
    reachable, a node or rank never came. The nodes that came may have been stopped before their own waits on the
    store timed out, so nothing is asked of them."""
    timeout = tl.findings.get("c10d.store_timeout")
    if timeout is None or any(sid in tl.findings for sid in _UNREACHED):
        return
    sig = _DERIVED["elastic.store_clients_missing"]
    counted = [(ev, m) for ev in timeout.events if (m := sig.regex.search(ev.text))]
    if len(counted) != timeout.count:
        # a client's own timeout is among them (the network's case: c10d.store_timeout stays the cause), or lines
        # the finding does not list (one per file, node and rank) that could be one
        return
    for ev, m in counted:
        joined, expected = int(m["joined"]), int(m["expected"])
        if 1 < joined < expected:
            record(tl, sig, {"node": ev.node or ev.path, "joined": str(joined), "expected": str(expected)}, ev)


def _c10d_store(tl: Timeline) -> None:
    """Every file read is a node whose torchrun timed out connecting to one rendezvous endpoint, the C10d
    backend's RendezvousConnectionError in one of them at least, two files at least, no progress anywhere:
    nobody hosted the store. A node that hosted it would wait for the others instead, so one file without the
    timeout (or a launcher's log beside them) and nothing is derived."""
    conn, timeout = tl.findings.get("elastic.rendezvous_connection"), tl.findings.get("c10d.store_timeout")
    if conn is None or timeout is None or tl.progress or len(tl.files) < 2:
        return
    endpoints: dict[int, set[tuple[str, str]]] = {}
    events: dict[int, Event] = {}
    for ev in timeout.events:
        m = timeout.sig.regex.search(ev.text)
        groups = groups_of(m) if m else {}
        if groups.get("host") and groups.get("port"):
            endpoints.setdefault(ev.file, set()).add((groups["host"], groups["port"]))
            events.setdefault(ev.file, ev)
    files = set(endpoints)   # (the others, stopped once one failed, may not have printed the backend's error)
    if len(files) != len(tl.files):
        return
    common = set.intersection(*(endpoints[fi] for fi in files))
    if len(common) != 1:
        return
    host, port = next(iter(common))
    names = ", ".join(events[fi].node or events[fi].path for fi in sorted(files))
    for fi in sorted(files):
        record(tl, _DERIVED["elastic.c10d_store_not_hosted"], {"host": host, "port": port, "nodes": names}, events[fi])


def _gate_groups(e: dict, launched: bool, report: str | None) -> dict:
    groups = {k: e[k] for k in ("check", "status", "summary", "who", "also") if e.get(k)}
    if launched:
        groups["launched"] = GATE_LAUNCHED
    if e["nodes"]:
        groups["nodes"] = ", ".join(e["nodes"])
    if report:
        groups["report"] = report
    if e["status"] == "ERROR":
        groups["error_note"] = GATE_ERROR_NOTE
    return groups


def _gate(tl: Timeline, file_of: dict[str, int]) -> None:
    """One finding per check our preflight reported FAIL or ERROR; its NO-GO line alone when no input names one."""
    report = next((g.report for g in tl.gates if g.report), None)
    launched = any(g.launched for g in tl.gates)
    for gate in tl.gates:
        for e in gate.entries:
            groups = _gate_groups(e, launched, report)
            sig = gate_signature(e["check"])
            for node in e["nodes"] or [e.get("node")]:
                f = record(tl, sig, groups, Event(file_of.get(e["file"], -1), e["file"], e["line"], None, node,
                                                  None, None, e["text"]))
            named = Actor.from_text(e.get("who"))
            f.actor = named.value if named else None
            if e.get("fix"):   # the preflight's own fix (JSON report), with the node's values: pasted as it is
                f.fix = e["fix"] + "\n" + gate_rerun(e["check"])
            f.extra["launched"] = launched
    if any(g.entries for g in tl.gates):
        return
    for gate in tl.gates:
        for c in gate.closed:
            groups = dict(c["groups"], **({"report": report} if report else {}))
            f = record(tl, _DERIVED["preflight.no_go"], groups,
                       Event(file_of.get(c["file"], -1), c["file"], c["line"], None, c.get("node"), None, None, c["text"]))
            f.extra["launched"] = True   # the launcher's line


__all__ = ["derive", "flight_recorder"]
