"""Name the culprit of a stall from the capture: pure functions of the ranks' captured stacks, wchan and TCP queues.

1. Each rank's *wait site*: the collective it waits in (the torch.distributed call and the training line that made
   it), set-up (init_process_group, the store, rendezvous), I/O (its main thread blocked in a read, a write, a FIFO,
   NFS: wchan or native frames), or plain Python (the innermost line of the training code).
2. Ranks are grouped by site. The largest group waiting in a collective (or in set-up) is where "the others wait";
   every rank outside it is a suspect, by kind: blocked in I/O, in Python far from any collective, or in another
   collective.
3. When every rank waits in the same collective, a TCP send queue that stays full toward one peer names that link.
4. Before communicators exist: a node rank with no rank process (its torchrun gone, or never past rendezvous) while
   the others wait in set-up never joined.

The answer is a cause in the doctor's terms: id, summary, evidence, who acts, and a fix that pastes.
"""
from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: torch.distributed functions that wait for the other ranks (the frame's function name in distributed_c10d.py)
COLLECTIVES = frozenset({
    "all_reduce", "all_gather", "all_gather_into_tensor", "all_gather_object", "reduce_scatter", "reduce_scatter_tensor",
    "broadcast", "broadcast_object_list", "barrier", "monitored_barrier", "reduce", "all_to_all", "all_to_all_single",
    "gather", "gather_object", "scatter", "scatter_object_list", "send", "recv", "isend", "irecv", "batch_isend_irecv",
    "wait", "_wait", "synchronize"})
#: functions of the set-up phase (before communicators exist)
SETUP = frozenset({"init_process_group", "_store_based_barrier", "rendezvous", "_create_c10d_store", "_env_rendezvous_handler",
                   "_tcp_rendezvous_handler", "next_rendezvous", "init_device_mesh", "new_group", "get", "wait_for_workers"})
#: kernel wait channels of a thread blocked in I/O (pipes and FIFOs, NFS, disks)
IO_WCHAN = ("pipe_read", "pipe_write", "pipe_wait", "wait_for_partner", "fifo_open", "nfs", "rpc_wait", "io_schedule",
            "folio_wait", "wait_on_page", "blkdev", "ext4", "xfs", "fuse", "jbd2", "do_fsync", "__lock_page")
#: native frames of a blocked read or write (glibc's names)
IO_NATIVE = ("read", "__libc_read", "__read", "write", "__libc_write", "pread64", "pwrite64", "__open", "open64", "fsync",
             "__libc_open64", "readv", "writev")


@dataclass(frozen=True)
class Site:
    """Where one rank waits: kind (collective, setup, io, python, unknown), what (the call) and the training line."""

    kind: str
    what: str
    where: str   # "file:line" of the innermost training-code frame ("" when none)

    @property
    def label(self) -> str:
        at = f" at {self.where}" if self.where else ""
        return {"collective": f"in {self.what}{at}", "setup": f"in set-up ({self.what}){at}",
                "io": f"blocked in I/O ({self.what}){at}", "python": f"in Python{at} ({self.what})"}.get(
                    self.kind, f"unknown ({self.what})")


def _is_library(path: str) -> bool:
    return any(p in path for p in ("/site-packages/", "/dist-packages/", "/lib/python3", "<frozen", "/torch/"))


def _main_thread(rank: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    threads = ((rank.get("stacks") or {}).get("threads")) or []
    with_module = [t for t in threads if any(f["name"] == "<module>" for f in t["frames"])]
    chosen = with_module[0] if with_module else (threads[0] if threads else None)
    return list(chosen["frames"]) if chosen else []


def _main_wchan(rank: Mapping[str, Any]) -> str:
    wchan = rank.get("wchan") or {}
    return str(wchan.get(str(rank.get("pid")), "") or next(iter(wchan.values()), ""))


def _distributed_call(python: Sequence[Mapping[str, Any]], names: frozenset[str]) -> str | None:
    """The innermost torch.distributed frame among ``names``."""
    return next((f["name"] for f in python if f["name"] in names and "distributed" in f["file"]), None)


def _io_wait(frames: Sequence[Mapping[str, Any]], wchan: str) -> str | None:
    """The I/O the main thread is blocked in: its wchan, else a native read/write on top of its stack."""
    if any(w in wchan for w in IO_WCHAN):
        return wchan
    return next((f["name"] for f in frames[:3] if f.get("native") and f["name"] in IO_NATIVE), None)


def site_of(rank: Mapping[str, Any]) -> Site:
    """Where the rank waits, from its main thread's frames (innermost first) and its wchan."""
    frames = _main_thread(rank)
    python = [f for f in frames if not f.get("native")]
    user = next((f for f in python if not _is_library(f["file"])), None)
    where = f"{user['file']}:{user['line']}" if user else ""
    collective = _distributed_call(python, COLLECTIVES)
    if collective:
        return Site("collective", collective, where)
    setup = _distributed_call(python, SETUP)
    if setup:
        return Site("setup", setup, where)
    wchan = _main_wchan(rank)
    io = _io_wait(frames, wchan)
    if io:
        return Site("io", io, where)
    if python:
        top = python[0]
        return Site("python", top["name"] if top is user else f"{top['name']} at {top['file']}:{top['line']}", where)
    why = (rank.get("stacks") or {}).get("error") or "no stack"
    return Site("unknown", f"{why}; wchan {wchan or '?'}", "")


@dataclass
class Group:
    """Ranks that wait at the same site; one of them stands for the group's stack."""

    site: Site
    ranks: list[int] = field(default_factory=list)
    example: int | None = None


def group_ranks(ranks: Sequence[Mapping[str, Any]]) -> list[Group]:
    """Ranks grouped by site, largest group first (ties: collectives first, then the lowest rank)."""
    groups: dict[Site, Group] = {}
    for r in sorted(ranks, key=lambda r: r["rank"]):
        site = site_of(r)
        g = groups.setdefault(site, Group(site, example=r["rank"]))
        g.ranks.append(r["rank"])
    order = {"collective": 0, "setup": 1, "io": 2, "python": 3, "unknown": 4}
    return sorted(groups.values(), key=lambda g: (-len(g.ranks), order[g.site.kind], g.ranks[0]))


def _waiting_group(groups: Sequence[Group]) -> Group | None:
    """The group "the others wait in": the largest one in a collective or in set-up."""
    return next((g for g in groups if g.site.kind in ("collective", "setup")), None)


# -- causes -------------------------------------------------------------------------------------------------------------

ACTOR_LABELS = {"job": "the job's owner (the training code or its configuration)",
                "node": "the node's administrator (repair or drain the node)",
                "network": "the network's administrator (the link between the nodes)"}


def _cause(cid: str, title: str, summary: str, actor: str | None, fix: str, evidence: list[str], **extra: Any) -> dict:
    return {"id": cid, "class": "stall", "kind": "cause", "title": title, "summary": summary, "actor": actor,
            "actor_label": ACTOR_LABELS.get(actor or ""), "fix": fix, "evidence": evidence, **extra}


def _who(rank: Mapping[str, Any]) -> str:
    return f"rank {rank['rank']} (node {rank.get('node_rank')} {rank.get('node')}, local rank {rank.get('local_rank')})"


def _node_facts(facts: Mapping[str, Mapping[str, Any]], rank: Mapping[str, Any]) -> dict[str, Any]:
    """The preflight's facts for the rank's node: its GPU's bus id, the NIC and route toward MASTER_ADDR."""
    f = facts.get(str(rank.get("node"))) or {}
    route: Mapping[str, Any] = f["nic_route"] if isinstance(f.get("nic_route"), Mapping) else {}
    gpus = (f["nvml"].get("gpus") or []) if isinstance(f.get("nvml"), Mapping) else []
    local = rank.get("local_rank")
    gpu: Mapping[str, Any] = gpus[local] if isinstance(local, int) and 0 <= local < len(gpus) else {}
    out = {"gpu_bus_id": gpu.get("pci_bus_id"), "nic": route.get("ifname"), "src": route.get("src"),
           "route_to": route.get("target")}
    return {k: v for k, v in out.items() if v}


def _stack_evidence(rank: Mapping[str, Any], limit: int = 6) -> list[str]:
    return [f"  {f['name']} ({f['file']}{':' + str(f['line']) if f['line'] else ''})" for f in _main_thread(rank)[:limit]]


def _suspect_cause(rank: Mapping[str, Any], site: Site, waiting: Group | None, facts: Mapping[str, Any]) -> dict:
    who = _who(rank)
    others = f"the others (ranks {_ranks_text(waiting.ranks)}) wait {waiting.site.label}" if waiting else "no other rank waits"
    joined = _node_facts(facts, rank)
    host = rank.get("node") or "its node"
    pid = rank.get("pid")
    evidence = [f"{who}: {site.label}; wchan {_main_wchan(rank) or '-'}", f"{others}", *_stack_evidence(rank)]
    if site.kind == "io":
        cid, title, actor = "stall.rank_blocked_io", "a rank is blocked in I/O", "job"
        fix = (f"# on {host}: what rank {rank['rank']} (pid {pid}) waits for\n"
               f"cat /proc/{pid}/wchan; echo; ls -l /proc/{pid}/fd | grep -v -e socket -e anon_inode\n"
               f"# then unblock it (the file, FIFO or mount it reads or writes at {site.where or '?'}), or end the run:\n"
               "kill -TERM \"${TORCHRUN_PID:?the pid of torchrun on that node}\"")
    elif site.kind in ("collective", "setup"):
        cid, title, actor = "stall.rank_elsewhere", "a rank waits in another collective than the others", "job"
        fix = (f"# rank {rank['rank']} called {site.what} at {site.where or '?'} while the others wait {waiting.site.label if waiting else ''}:\n"
               "# the ranks took different code paths; make every rank issue the same collectives in the same order\n"
               "export TORCH_DISTRIBUTED_DEBUG=DETAIL    # before the next run: torch checks the collectives match")
    else:
        cid, title, actor = "stall.rank_in_python", "a rank is in Python, far from the collective the others wait in", "job"
        fix = (f"# on {host}: rank {rank['rank']} (pid {pid}) is at {site.where or site.what}, not in a collective\n"
               f"py-spy dump --pid {pid}    # again: the same line means it is stuck there\n"
               "# fix what holds it there (a sleep, a lock, an endless loop, a rank-dependent branch), or end the run:\n"
               "kill -TERM \"${TORCHRUN_PID:?the pid of torchrun on that node}\"")
    summary = f"{who} is {site.label}; {others}" + (f"; its node: {_facts_text(joined)}" if joined else "")
    return _cause(cid, title, summary, actor, fix, evidence, rank=rank["rank"], node=rank.get("node"),
                  node_rank=rank.get("node_rank"), local_rank=rank.get("local_rank"), where=site.where, site=site.label,
                  node_facts=joined)


def _facts_text(joined: Mapping[str, Any]) -> str:
    parts = [f"GPU {joined['gpu_bus_id']}" if joined.get("gpu_bus_id") else "",
             f"NIC {joined['nic']}" + (f" ({joined['src']})" if joined.get("src") else "") if joined.get("nic") else "",
             f"route to {joined['route_to']}" if joined.get("route_to") else ""]
    return ", ".join(p for p in parts if p)


def _ranks_text(ranks: Iterable[int]) -> str:
    r = sorted(ranks)
    return f"{r[0]}-{r[-1]}" if len(r) > 2 and r == list(range(r[0], r[-1] + 1)) else ", ".join(map(str, r))


def stuck_links(ranks: Sequence[Mapping[str, Any]], ip_nodes: Mapping[str, str]) -> list[dict]:
    """TCP connections whose send queue stayed full (the same or more, above 0, in both reads) on an established
    socket: the rank, its node, the peer and the peer's node (from ``ip_nodes``: address → node name)."""
    out = []
    for r in ranks:
        for c in r.get("tcp") or []:
            later = c.get("send_q_later")
            if c["state"] != "ESTABLISHED" or c["send_q"] <= 0 or later is None or later < c["send_q"]:
                continue
            peer_ip = c["peer"].rsplit(":", 1)[0].strip("[]")
            out.append({"rank": r["rank"], "node": r.get("node"), "node_rank": r.get("node_rank"), "local": c["local"],
                        "peer": c["peer"], "peer_node": ip_nodes.get(peer_ip), "send_q": later})
    return out


def _link_cause(links: Sequence[dict], group: Group, facts: Mapping[str, Any], ranks: Sequence[Mapping[str, Any]]) -> dict:
    pairs = sorted({(str(link["node"]), str(link["peer_node"] or link["peer"])) for link in links})
    a, b = pairs[0]
    peer_ip = links[0]["peer"].rsplit(":", 1)[0].strip("[]")
    first = next(r for r in ranks if r["rank"] == links[0]["rank"])
    joined = _node_facts(facts, first)
    evidence = [f"rank {x['rank']} on {x['node']}: {x['local']} -> {x['peer']} ({x['peer_node'] or '?'}): "
                f"{x['send_q']} bytes queued, not draining" for x in links[:8]]
    evidence.append(f"every rank (ranks {_ranks_text(group.ranks)}) waits {group.site.label}")
    fix = (f"# from {a}: is {b} ({peer_ip}) reachable on the training network?\n"
           f"ping -c 3 -W 2 {shlex.quote(peer_ip)}\n"
           f"dsv3-preflight run --all-nodes --only dist.allreduce    # the data path between every pair, with the cause\n"
           "# a firewall or a failed switch port between the two: the network's administrator repairs the link")
    summary = (f"every rank waits {group.site.label}, and the TCP send queue from {a} toward {b} ({peer_ip}) stays "
               f"full: the link {a} <-> {b} carries nothing" + (f"; {a}: {_facts_text(joined)}" if joined else ""))
    return _cause("stall.link_stuck", "the link between two nodes is stuck", summary, "network", fix, evidence,
                  link={"from": a, "to": b, "peer": peer_ip}, node=a, node_facts=joined)


def _never_joined_cause(missing: Sequence[int], names: Mapping[int, str], group: Group | None, why: Mapping[int, str],
                        store: Mapping[str, Any] | None = None) -> dict:
    named = ", ".join(f"node {n} {names.get(n, '?')}" for n in missing)
    waiting = (f"the ranks of the other nodes wait {group.site.label}" if group else
               "the other nodes' torchrun agents wait for it in the rendezvous"
               if store or any("rendezvous" in t for t in why.values()) else "no rank of the other nodes started")
    evidence = [f"node {n} {names.get(n, '?')}: {why.get(n, 'no rank process')}" for n in missing] + [waiting]
    evidence += [f"node {n} {names[n]}: {text}" for n, text in sorted(why.items()) if n not in missing and "rendezvous" in text]
    if store:
        evidence.append(f"the rendezvous store {store['store']} holds the agents' keys ({store['run_id']}/torchelastic/"
                        f"role_info/N) of node ranks {_ranks_text(store['joined']) or 'none'}, not of {_ranks_text(missing)}")
    fix = (f"# on {names.get(missing[0], 'that node')}: did torchrun start, and does it reach the rendezvous?\n"
           "nc -vz -w 3 \"${MASTER_ADDR:?the head node address}\" \"${MASTER_PORT:?the rendezvous port}\"\n"
           "dsv3-preflight run --all-nodes    # the preflight names what keeps that node out")
    return _cause("stall.node_never_joined", "a node never joined", f"{named} never joined: {waiting}", "node", fix,
                  evidence, nodes=[names.get(n) for n in missing], node_ranks=list(missing))


#: frames of torchrun's agent waiting for the other nodes' agents (static or c10d rendezvous, the agents' keys)
RENDEZVOUS_FRAMES = ("next_rendezvous", "_rendezvous", "_share_and_gather", "synchronize", "get_all", "_assign_worker_ranks")


def agent_in_rendezvous(node: Mapping[str, Any]) -> str | None:
    """The frame of torchrun's agent (a node without rank process) waiting in the rendezvous, else None."""
    frames = _main_thread(node.get("agent") or {})
    hit = next((f for f in frames if f["name"].rsplit(".", 1)[-1] in RENDEZVOUS_FRAMES and "elastic" in f["file"]), None)
    return f"{hit['name']} ({hit['file'].rsplit('/', 1)[-1]}:{hit['line']})" if hit else None


def _agent_text(node: Mapping[str, Any]) -> str:
    """What the node's torchrun does when it has no rank process."""
    if not node.get("torchrun_alive"):
        return "torchrun not running"
    waits = agent_in_rendezvous(node)
    if waits:
        return f"torchrun's agent waits for the other nodes in the rendezvous: {waits}"
    top = next((f for f in _main_thread(node.get("agent") or {}) if not f.get("native")), None)
    return f"torchrun runs, no rank process; it is at {top['name']} ({top['file']}:{top['line']})" if top else \
        "torchrun runs, no rank process"


def _missing_nodes(nodes: Sequence[Mapping[str, Any]], expected: Sequence[int], store: Mapping[str, Any] | None) -> list[int]:
    """Node ranks that never joined: no rank process, torchrun's agent not waiting in the rendezvous, and no agent key
    in the rendezvous store (when it answered)."""
    present = {int(n["node_rank"]) for n in nodes if n.get("ranks") or agent_in_rendezvous(n)}
    joined = set(store.get("joined") or []) if store and store.get("available") else set()
    return sorted(set(expected) - present - joined)


def name_culprit(nodes: Sequence[Mapping[str, Any]], *, expected_nodes: Sequence[int] = (), facts: Mapping[str, Any] | None = None,
                 ip_nodes: Mapping[str, str] | None = None, store: Mapping[str, Any] | None = None) -> dict:
    """The stall's causes (suspects first) and the ranks grouped by site, from every node's capture.

    ``nodes``: NodeCapture dicts; ``expected_nodes``: the node ranks the launch started; ``facts``: node name → the
    preflight's facts; ``ip_nodes``: address → node name (for a link's peer); ``store``: the rendezvous store's
    agent keys (store.agents_joined), when some node had no rank process."""
    facts = facts or {}
    ranks = [r for n in nodes for r in n.get("ranks") or []]
    groups = group_ranks(ranks)
    waiting = _waiting_group(groups)
    names = {int(n["node_rank"]): str(n["node"]) for n in nodes}
    missing = _missing_nodes(nodes, expected_nodes, store)
    why = {int(n["node_rank"]): _agent_text(n) for n in nodes}
    causes: list[dict] = []
    if missing:
        causes.append(_never_joined_cause(missing, names, waiting, why, store if store and store.get("available") else None))
    by_rank = {r["rank"]: r for r in ranks}
    causes += _odd_ones_out(groups, waiting, by_rank, facts)
    if not causes and waiting is not None and len(groups) == 1:
        links = stuck_links(ranks, ip_nodes or {})
        causes += [_link_cause(links, waiting, facts, ranks)] if links else []
    if not causes:
        causes.append(_unresolved(groups, ranks))
    return {"causes": causes, "groups": [_group_view(g, by_rank) for g in groups]}


def _odd_ones_out(groups: Sequence[Group], waiting: Group | None, by_rank: Mapping[int, Mapping[str, Any]],
                  facts: Mapping[str, Any]) -> list[dict]:
    """A suspect cause for every rank outside the group the others wait in."""
    if waiting is None:
        return []
    return [_suspect_cause(by_rank[r], g.site, waiting, facts) for g in groups if g is not waiting for r in g.ranks]


def _unresolved(groups: Sequence[Group], ranks: Sequence[Mapping[str, Any]]) -> dict:
    where = groups[0].site.label if groups else "nowhere (no rank process found)"
    fr = [r for r in ranks if (r.get("flight_recorder") or {}).get("available")]
    summary = (f"every rank waits {where}; no rank stands out and no TCP queue is stuck"
               + ("" if fr else "; no Flight Recorder dump (Gloo/CPU, or NCCL without the dump pipe)"))
    fix = ("dsv3-preflight run --all-nodes --only dist.allreduce    # the data path between every pair, with the cause\n"
           "export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1    # for the next run: which rank is behind")
    return _cause("stall.unresolved", "a stall with no rank standing out", summary, None, fix,
                  [f"ranks {_ranks_text(g.ranks)}: {g.site.label}" for g in groups[:6]])


def _group_view(g: Group, by_rank: Mapping[int, Mapping[str, Any]]) -> dict:
    example = by_rank[g.example] if g.example is not None else {}
    return {"site": g.site.label, "kind": g.site.kind, "where": g.site.where, "ranks": list(g.ranks),
            "example_rank": g.example, "stack": [f"{f['name']} ({f['file']}{':' + str(f['line']) if f['line'] else ''})"
                                                 for f in _main_thread(example)][:40]}
