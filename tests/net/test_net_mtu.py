"""net.mtu (checks/net_mtu.py) on facts recorded in the netns lab (tests/data/net/lab_*.json), varied per row."""
from net_facts_lab import (
    MULTI,
    facts,  # noqa: F401 (pytest fixtures)
)

from dsv3_preflight.checks.net_mtu import mtu
from dsv3_preflight.result import Status


# -- net.mtu ---------------------------------------------------------------------------------------
def test_mtu_mismatch_between_nodes_fails_and_names_the_odd_node(facts):
    routes = {f"lab-node{i}": facts(n)["nic_route"] for i, n in enumerate(("head", "worker_two_nics", "worker"))}
    assert routes["lab-node2"]["mtu"] == 1400  # recorded after `ip link set dev eth0 mtu 1400` on node 2
    result = mtu(nic_route=routes, node_states={}, profile=MULTI)
    assert result.status == Status.FAIL and "lab-node2 eth0=1400" in result.summary
    assert result.remediation.startswith("ip link set dev eth0 mtu 1500   # on lab-node2:")


def test_mtu_equal_on_all_nodes_passes(facts):
    routes = {f"lab-node{i}": facts(n)["nic_route"] for i, n in enumerate(("head", "worker_two_nics", "worker"))}
    routes["lab-node2"]["mtu"] = 1500
    assert mtu(nic_route=routes, node_states={}, profile=MULTI).status == Status.PASS


def test_mtu_warns_when_a_node_did_not_report(facts):
    routes = {"lab-node0": facts("head")["nic_route"], "lab-node1": facts("worker_two_nics")["nic_route"]}
    result = mtu(nic_route=routes, node_states={}, profile=MULTI)
    assert result.status == Status.WARN and "1 of 3" in result.summary
