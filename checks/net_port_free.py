"""net.port_free: on the head, MASTER_PORT can be bound; else who holds it and how to free it."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.text import one_line


def _is_our_listener(proc: dict | None) -> bool:
    cmd = (proc or {}).get("cmdline") or ""
    return ("dsv3-preflight listen" in cmd or "dsv3_preflight listen" in cmd) if cmd else False


def _who(proc: dict | None) -> str:
    if not proc:
        return "a process this user cannot see (run as root, or it lives in another network namespace)"
    return (f"pid {proc['pid']} ({one_line(proc.get('cmdline')) or proc.get('name') or '?'}, user {proc.get('user')}, "
            f"since {proc.get('started')})")


@check("net.port_free", needs=["port_bind", "port_holders", "profile"], tags=["network"], timeout=10)
def port_free(port_bind, port_holders, profile):
    """On the head: MASTER_PORT can be bound where workers connect; names the process holding it; NCCL_PORT_RANGE holds nothing."""
    port = port_bind["port"]
    if port_bind.get("role") != "head":
        return Result.skipped(f"not the head: {port_bind.get('role_reason')}; the head checks that port {port} is free",
                              {"role": port_bind.get("role")})
    evidence: dict = {"port": port, "role_reason": port_bind.get("role_reason"), "attempts": port_bind.get("attempts", [])}
    if port_bind.get("rank0_without_master_addr"):
        return Result.failed(
            f"this node has node_rank 0 but MASTER_ADDR {profile.master_addr} is not one of its addresses: "
            "workers would wait for a rendezvous nobody serves",
            evidence,
            "export MASTER_ADDR=<this node's IP on the training network>   # or run rank 0 on the node that holds MASTER_ADDR",
        )
    holders = port_holders.get("holders", [])
    on_port = [h for h in holders if h["port"] == port]
    in_range = [h for h in holders if h["port"] != port]
    evidence["holders"] = on_port
    failed = [a for a in port_bind.get("attempts", []) if not a["ok"]]
    if failed:
        first = failed[0]
        where = f"{first['address']}:{port}"
        if first.get("errno_name") == "EACCES":
            return Result.failed(f"cannot bind {where}: permission denied (ports below 1024 need root)", evidence,
                                 "export MASTER_PORT=39500")
        if first.get("errno_name") == "EADDRNOTAVAIL":
            return Result.failed(f"cannot bind {where}: the address is not on this node", evidence,
                                 "export MASTER_ADDR=<this node's IP on the training network>")
        if on_port and all(_is_our_listener(h.get("process")) for h in on_port):
            pids = ", ".join(str(h["process"]["pid"]) for h in on_port)
            evidence["held_by_listener"] = True
            return Result.passed(f"port {port} is held only by the dsv3-preflight listener (pid {pids}) serving the "
                                 "workers' reach test; it exits at its deadline", evidence)
        if on_port:
            procs = [h.get("process") for h in on_port]
            who = _who(procs[0])
            fixes = [f"kill {p['pid']}   # after checking it is a leftover of the previous run: {one_line(p.get('cmdline'))}\n"
                     f"sleep 2; kill -0 {p['pid']} 2>/dev/null && kill -9 {p['pid']}"
                     for p in procs if p]
            remediation = "\n".join(dict.fromkeys(fixes)) or f"ss -ltnp 'sport = :{port}'   # then stop the holder (fuser -k {port}/tcp)"
            return Result.failed(f"port {port} cannot be bound on {first['address']} ({first['error']}): held by {who}",
                                 evidence, remediation)
        return Result.failed(f"port {port} cannot be bound on {first['address']}: {first['error']}", evidence,
                             f"ss -ltnp 'sport = :{port}'   # find the holder, then: fuser -k {port}/tcp")
    if in_range:
        evidence["range_holders"] = in_range
        lo, hi = port_holders.get("nccl_port_range") or (None, None)
        listing = ", ".join(f"{h['port']} ({_who(h.get('process'))})" for h in in_range[:5])
        fixes = [f"kill {h['process']['pid']}   # holds {h['port']}, inside NCCL_PORT_RANGE" for h in in_range if h.get("process")]
        return Result.warned(f"NCCL_PORT_RANGE {lo}-{hi} overlaps ports already held: {listing}", evidence,
                             "\n".join(dict.fromkeys(fixes)) or f"export NCCL_PORT_RANGE=<a free range>")
    bound = ", ".join(a["address"] for a in port_bind.get("attempts", []))
    return Result.passed(f"port {port} can be bound on {bound}", evidence)
