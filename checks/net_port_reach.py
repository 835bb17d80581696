"""net.port_reach: a worker reaches MASTER_ADDR:MASTER_PORT over TCP (and our listener answers there)."""
from __future__ import annotations

from dsv3_preflight import Result, check

LISTEN_HINT = "on the head: dsv3-preflight listen --port {port} --deadline 120   # then re-run this check here"


@check("net.port_reach", needs=["port_reach", "profile"], tags=["network"], timeout=30)
def port_reach(port_reach, profile):
    """On a worker: TCP to MASTER_ADDR:MASTER_PORT is ok, refused, filtered, unreachable or unresolvable — each with its fix."""
    f = port_reach
    host, port = f.get("host"), f.get("port")
    where = f"{host}:{port}"
    if not f.get("attempted"):
        return Result.skipped(f"this node is the head ({f.get('role_reason')}); workers test reach to {where}",
                              {"role": f.get("role")})
    evidence = {k: f.get(k) for k in ("host", "address", "port", "outcome", "latency_ms", "elapsed_s", "timeout_s",
                                      "errno", "error", "invalid", "listener", "token", "expected_token", "token_match", "banner")}
    outcome = f.get("outcome")
    hint = LISTEN_HINT.format(port=port)
    if outcome == "ok":
        if f.get("listener") == "ours":
            if f.get("token_match") is False:
                return Result.warned(
                    f"reached a dsv3-preflight listener at {where} in {f['latency_ms']:.1f} ms, but its token "
                    f"{f.get('token')} is not the expected {f.get('expected_token')} (a listener of another session?)",
                    evidence,
                    # worded so that secret masking (which hides the value after a `--token` flag) leaves it pasteable
                    "echo $DSV3_PREFLIGHT_LISTENER_TOKEN   # on this worker: the token it expects\n"
                    "# on the head: stop the other `dsv3-preflight listen`, export that value there as "
                    "DSV3_PREFLIGHT_LISTENER_TOKEN, then:\n"
                    f"dsv3-preflight listen --port {port} --deadline 120")
            return Result.passed(f"reached the dsv3-preflight listener at {where} in {f['latency_ms']:.1f} ms"
                                 + (" (token matches)" if f.get("token_match") else ""), evidence)
        return Result.failed(
            f"something other than the dsv3-preflight listener accepts on {where}"
            + (f" (it said {f['banner']!r})" if f.get("banner") else " (it sent nothing)")
            + ": torchrun's rendezvous cannot bind there",
            evidence, f"on the head: ss -ltnp 'sport = :{port}'   # stop that process, or pick another MASTER_PORT")
    if outcome == "refused":
        return Result.failed(
            f"connection to {where} refused: the head is up but nothing listens on {port} (no `dsv3-preflight listen` "
            "running?) or a firewall REJECTs it",
            evidence, f"{hint}\n# if it is still refused: on the head, iptables -S INPUT | grep {port}; "
                      f"iptables -I INPUT -p tcp --dport {port} -j ACCEPT")
    if outcome == "filtered":
        return Result.failed(
            f"no answer from {where} within {f.get('timeout_s')} s: a firewall DROPs it or packets are lost"
            + ("" if (f.get("error") or "").startswith("no answer") else f" ({f.get('error')})"),
            evidence, f"on the head: iptables -I INPUT -p tcp --dport {port} -j ACCEPT   # or open {port}/tcp in the "
                      "cloud security group / nft ruleset between the nodes")
    if outcome == "unreachable":
        return Result.failed(
            f"{where} is unreachable from this node: {f.get('error')}", evidence,
            f"ip route get {f.get('address') or host}   # the route or the head's address is wrong; check MASTER_ADDR")
    if outcome == "name_resolution":
        return Result.failed(
            f"MASTER_ADDR {host!r} does not resolve on this node: {f.get('error')}", evidence,
            f"export MASTER_ADDR=<head IP>   # or add '<head IP> {host}' to /etc/hosts on every node")
    if outcome == "invalid":
        fix = ("export MASTER_ADDR=<head node's global or private IP on the training network>"
               if f.get("invalid") == "address" else "export MASTER_PORT=39500")
        return Result.failed(f"cannot test {where}: {f.get('error')}", evidence, fix)
    return Result.failed(f"TCP connect to {where} failed: {f.get('error')} (errno {f.get('errno')})", evidence,
                         f"ip route get {f.get('address') or host}")
