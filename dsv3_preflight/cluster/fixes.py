"""The fixes of the cluster's own ERROR rows: a node lost, unreachable, or lacking the package; Ray unreachable."""
from __future__ import annotations

import shlex
from typing import Any

from ..engine import error_result
from ..result import Actor, Result
from .dispatch import NodeReport
from .liveness import Lost
from .node_side import NODE_RUN_CHECK
from .nodes import NodeInfo


def connect_fix(error: str) -> str:
    """What to do when Ray cannot be reached: the token, else the cluster's address."""
    if "token" in error:
        return ("export RAY_AUTH_MODE=token   # the cluster's token in ~/.ray/auth_token or $RAY_AUTH_TOKEN "
                "(`ray get-auth-token` on the head)")
    return ("ray status   # on the head: is the cluster up? then pass its address:\n"
            "dsv3-preflight run --all-nodes --ray-address \"${RAY_HEAD:?the GCS address of the head, host:port}\"")


def node_error_row(node: NodeInfo, report: NodeReport | None, lost: Lost | None, error: str, gcs: str | None) -> Result:
    """The ERROR row of a node that could not run (lost, hung, crashed, no package), with its fix."""
    kind = "died" if lost else (report.kind if report else "died")
    evidence: dict[str, Any] = {"kind": kind, "node_id": node.node_id, "ip": node.ip, "node_rank": node.node_rank,
                                **(report.details if report else {})}
    if lost:
        evidence.update(lost.as_dict())
    cause = "cluster.node_lost" if lost else None
    if report is not None and report.kind == "package_missing":
        fix = ("pip install dsv3-preflight   # in the Python Ray uses on that node, or export "
               "DSV3_PREFLIGHT_SHIP_PACKAGE=1 to ship it with the job (runtime_env py_modules)")
    elif report is not None and report.kind == "unreachable" and not lost:
        fix, cause = ray_ports_fix(node, report.details.get("reach") or {}), "cluster.node_unreachable"
    else:
        fix = lost_node_fix(node, lost, gcs)
    return error_result(NODE_RUN_CHECK, node.name, error, evidence, fix,
                        duration_s=report.elapsed_s if report else 0.0, actor=Actor.NODE, cause=cause)


def ray_ports_fix(node: NodeInfo, reach: dict[str, Any]) -> str:
    """Open Ray's ports on the firewall of a node that is alive and unreachable: its worker port range, its raylet's
    and object manager's ports (the real ones Ray reports), from the other nodes; then the connect that must work."""
    where = f"{node.name} ({node.ip})" if node.name != node.ip else node.ip
    lo, hi = (reach.get("worker_ports") or [10002, 19999])[:2]
    ports = reach.get("ports") or {}
    lines = [f"# {where} is alive in Ray but drops or refuses what the other nodes send its Ray workers: open Ray's "
             "ports on its firewall",
             f"iptables -I INPUT -p tcp --dport {lo}:{hi} -j ACCEPT   # on {where}: Ray's worker ports "
             f"(ray start --min-worker-port/--max-worker-port, default {lo}-{hi})"]
    for key, what in (("node_manager_port", "the raylet's node manager port"),
                      ("object_manager_port", "the object manager port")):
        if key in ports:
            lines.append(f"iptables -I INPUT -p tcp --dport {ports[key]['port']} -j ACCEPT   # on {where}: {what} "
                         f"(ray start --{key.replace('_', '-')}; it changes at each start unless set)")
    lines += [f"# with nftables instead: nft insert rule inet filter input tcp dport {lo}-{hi} accept   # on {where}",
              f"# with ufw instead: ufw allow proto tcp to any port {lo}:{hi}   # on {where}",
              f"timeout 3 bash -c 'exec 3<>/dev/tcp/{node.ip}/{lo}' ; echo $?   # from the head: 0 or 1 (refused) once "
              "open, 124 while it is filtered",
              "dsv3-preflight run --all-nodes   # again"]
    return "\n".join(lines)


def lost_node_fix(node: NodeInfo, lost: Lost | None, gcs: str | None) -> str:
    """Ray's log of the node (from the head, and on the node itself), then how it rejoins: real ids and paths."""
    lines = [f"ray logs raylet.out --node-id {node.node_id} --tail 100   # on the head: Ray's log of {node.name} ({node.ip})"]
    if lost is not None and lost.logs_dir:
        lines.append(f"tail -n 100 {shlex.quote(lost.logs_dir + '/raylet.out')}   # on {node.name} itself, when the head "
                     "cannot fetch it (the node's log agent went down with it)")
    if lost is not None:
        join = f"ray start --address={gcs}" if gcs else "ray start --address=\"${RAY_HEAD:?the GCS address of the head, host:port}\""
        lines.append(f"{join}   # on {node.name} once it is repaired, then re-run: dsv3-preflight run --all-nodes")
    else:
        lines.append("ray status   # is the node alive and not overloaded? then re-run; the other nodes' results are above")
    return "\n".join(lines)
