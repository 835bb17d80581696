"""cluster.unique_hostnames: every node answers a host name of its own (cloned images and containers started
with one ``--hostname`` make two nodes one for every tool that groups ranks by host name)."""
from __future__ import annotations

from dsv3_preflight import check
from dsv3_preflight.host.identity import node_address, rule_shared_hostname
from dsv3_preflight.result import Findings


@check("cluster.unique_hostnames", scope="cluster", needs=["host", "node_states"], tags=["cluster", "host"], timeout=5)
def unique_hostnames(host, node_states):
    """No two nodes on different machines share a host name (nodes are named by address in the finding)."""
    table = {n: {"hostname": (f or {}).get("hostname"), "address": node_address(f, node_states.get(n)),
                 "machine_id": (f or {}).get("machine_id")} for n, f in host.items()}
    found = Findings()
    found.extend(rule_shared_hostname(host, node_states))
    return found.result("no host name shared by nodes at different addresses: "
                        + ", ".join(f"{n}={v['hostname']}" for n, v in table.items()), {"nodes": table})
