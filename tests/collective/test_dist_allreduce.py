"""dist.allreduce (checks/dist_allreduce.py): the node check's judge of the `collective` fact and the rules it
shares with dist.allreduce_cluster (dsv3_preflight/collective/judge.py), one by one."""
from __future__ import annotations

import pytest
from collective_judge_lab import DUP_PCI, _fact, _outcome, _profile, _rank
from paste_lint import paste_problems

from dsv3_preflight.collective import combine, decode, nccl_interfaces
from dsv3_preflight.collective.judge import (
    judge_collective,
    rule_busbw,
    rule_completed,
    rule_duplicate_gpus,
    rule_nic_mismatch,
)
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Actor, Status


def test_check_skips_multi_node_with_the_commands_to_run():
    from dsv3_preflight.collective.probes.local import gang_commands

    profile = resolve_profile(cli={"master_addr": "10.77.0.10"}, environ={}, profile_name="dsv3")
    fact = {"requested": False, "reason": "the profile has 3 nodes", "commands": gang_commands(profile)}
    r = judge_collective(fact, profile)
    assert r.status is Status.SKIP
    assert "dsv3-preflight probe --node-rank 0" in r.summary and "--all-nodes --probe" in r.summary
    assert any("--node-rank 2" in c for c in r.evidence["commands"])


def test_check_passes_a_healthy_outcome():
    r = judge_collective(_fact([_outcome(0, [_rank(0), _rank(1)])], 2), _profile())
    assert r.status is Status.PASS and "2 ranks correct" in r.summary
    assert r.evidence["timings_s"]["first_collective_s"] == 0.01


def test_check_fails_naming_the_missing_rank_with_a_remediation():
    f = decode("rendezvous: ranks [1] never joined the store at 127.0.0.1:39500 (world 2) before the deadline")
    r = judge_collective(_fact([_outcome(0, [_rank(0, "store_connected", missing=[1], findings=f)])], 2), _profile())
    assert r.status is Status.FAIL and "rank(s) 1 of 2 never joined" in r.summary
    assert "dsv3-preflight probe" in r.remediation


def test_check_flags_duplicate_gpus_in_the_observed_rank_map():
    pytest.importorskip("dsv3_preflight.gpu.rankmap")
    rank_map = {"0": {"host": "n0", "pci_bus_id": "00000000:53:00.0"}, "1": {"host": "n0", "pci_bus_id": "00000000:53:00.0"}}
    ranks = [_rank(0, pci="00000000:53:00.0", rank_map=rank_map), _rank(1, pci="00000000:53:00.0")]
    r = judge_collective(_fact([_outcome(0, ranks)], 2), _profile())
    assert r.status is Status.FAIL and "Duplicate GPU detected" in r.summary and "53000" in r.summary
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in r.remediation


def test_check_fails_busbw_below_the_profile_minimum():
    sweep = [{"size_bytes": 4096, "busbw_gbps": 0.01, "algbw_gbps": 0.01, "time_us": 400.0},
             {"size_bytes": 1 << 20, "busbw_gbps": 0.2, "algbw_gbps": 0.2, "time_us": 5000.0}]
    fact = _fact([_outcome(0, [_rank(0), _rank(1)], sweep=sweep)], 2)
    r = judge_collective(fact, _profile(min_busbw_gbps=5))
    assert r.status is Status.FAIL and "0.2 GB/s" in r.summary and "min_busbw_gbps=5" in r.summary
    assert judge_collective(fact, _profile(min_busbw_gbps=0.1)).status is Status.PASS


def test_check_uses_port_reach_and_nic_route_to_explain_a_failure():
    f = decode("The client socket has timed out after 9000ms while trying to connect to (10.77.0.10, 39500).")
    fact = _fact([_outcome(1, [_rank(1, "imported", findings=f)], env={"GLOO_SOCKET_IFNAME": "eth1"})], 2)
    nic_route = {"ifname": "eth0", "loopback": False}
    port_reach = {"attempted": True, "outcome": "filtered", "host": "10.77.0.10", "port": 39500, "error": "no answer within 3 s"}
    r = judge_collective(fact, _profile(), nic_route, port_reach)
    assert r.status is Status.FAIL
    assert any("filtered" in n for n in r.evidence["network"])
    assert any("NIC mismatch" in n and "eth0" in n and "eth1" in n for n in r.evidence["network"])


def test_check_warns_when_nccl_chose_another_interface_than_the_route(data_dir):
    log = (data_dir / "collective" / "nccl_info.log").read_text()
    ranks = [_rank(0), _rank(1)]
    for r in ranks:
        r["nccl_interfaces"] = nccl_interfaces(log.replace("eth0", "docker0"))
    r = judge_collective(_fact([_outcome(0, ranks)], 2), _profile(), {"ifname": "eth0", "loopback": False}, None)
    assert r.status is Status.WARN and "docker0" in r.summary and "eth0" in r.summary
    assert "NCCL_SOCKET_IFNAME==eth0 GLOO_SOCKET_IFNAME=eth0" in r.remediation   # the node's interfaces unknown: exact


def test_rule_duplicate_gpus_names_both_ranks_in_nccls_words_and_the_job_acts():
    dup = [{"host": "n0", "pci_bus_id": DUP_PCI, "message": "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 53000"}]
    [f] = rule_duplicate_gpus(dup)
    assert f.status is Status.FAIL and f.actor is Actor.JOB and f.cause == "gpu.duplicate_gpu"
    assert f.message == f"Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 53000 (n0, PCI {DUP_PCI})"
    assert rule_duplicate_gpus([]) == []


def test_rule_completed_leads_with_the_most_telling_cause_and_names_the_missing_node():
    missing = decode("rendezvous: ranks [2] never joined the store at 10.0.0.1:39500 (world 3) before the deadline")
    c = combine([_outcome(0, [_rank(0, "store_connected", missing=[2], findings=missing)]), _outcome(1, [_rank(1, host="n1")])], 3)
    f = rule_completed(c, rank_names={0: "n0", 1: "n1", 2: "n2"})
    assert f.status is Status.FAIL and f.message.startswith("rank(s) 2 of 3 never joined the rendezvous")
    assert "(node n2)" in f.message and f.actor is Actor.JOB
    assert rule_completed(combine([_outcome(0, [_rank(0), _rank(1)])], 2)) is None


def test_rule_busbw_fails_below_the_floor_passes_above_and_warns_without_a_sweep():
    sweep = [{"size_bytes": 1 << 20, "busbw_gbps": 0.2, "algbw_gbps": 0.2, "time_us": 5000.0}]
    c = combine([_outcome(0, [_rank(0), _rank(1)], sweep=sweep)], 2)
    low = rule_busbw(c, 5.0, "gloo")
    assert low.status is Status.FAIL and low.actor is Actor.NETWORK and "0.2 GB/s" in low.message
    assert paste_problems(low.fix) == []
    assert rule_busbw(c, 0.1, "gloo") is None and rule_busbw(c, None, "gloo") is None
    nosweep = rule_busbw(combine([_outcome(0, [_rank(0), _rank(1)])], 2), 5.0, "gloo")
    assert nosweep.status is Status.WARN and paste_problems(nosweep.fix) == []


def test_rule_nic_mismatch_warns_with_the_route_interface_in_the_fix():
    c = combine([_outcome(0, [_rank(0), _rank(1)])], 2)
    notes = ["NIC mismatch: the route to MASTER_ADDR leaves through eth0 (net.nic_route) but the probe used docker0"]
    only_eth0 = [{"name": "lo", "index": 1, "ipv4": ["127.0.0.1"]}, {"name": "eth0", "index": 2, "ipv4": ["10.0.0.5"]}]
    f = rule_nic_mismatch(c, notes, {"ifname": "eth0", "interfaces": only_eth0})
    assert f.status is Status.WARN and f.fix.startswith("export NCCL_SOCKET_IFNAME=eth0 GLOO_SOCKET_IFNAME=eth0")
    assert rule_nic_mismatch(c, [], {"ifname": "eth0"}) is None


def test_rule_nic_mismatch_pins_nccl_to_the_exact_name_where_it_is_the_prefix_of_another_interface():
    # NCCL_SOCKET_IFNAME=eth0 selects eth0 and eth01 (NCCL 2.29.7's own code, the audit's namespace)
    c = combine([_outcome(0, [_rank(0), _rank(1)])], 2)
    notes = ["NIC mismatch: the route to MASTER_ADDR leaves through eth0 (net.nic_route) but the probe used docker0"]
    ifaces = [{"name": "eth0", "index": 2, "ipv4": ["10.0.0.5"]}, {"name": "eth01", "index": 3, "ipv4": ["10.9.1.1"]}]
    f = rule_nic_mismatch(c, notes, {"ifname": "eth0", "interfaces": ifaces})
    assert f.fix.startswith("export NCCL_SOCKET_IFNAME==eth0 GLOO_SOCKET_IFNAME=eth0")
    assert rule_nic_mismatch(c, notes, {"ifname": "eth0"}).fix.startswith("export NCCL_SOCKET_IFNAME==eth0 ")


@pytest.mark.parametrize("gloo, mismatch", [("eth0,", False), ("eth0,eth0", False), ("e", False), ("docker0", True)])
def test_network_context_reads_gloo_socket_ifname_as_torch_does(gloo, mismatch):
    from dsv3_preflight.collective.judge import network_context

    notes = network_context({"ifname": "eth0", "loopback": False}, None, [{"ranks": [], "env": {"GLOO_SOCKET_IFNAME": gloo}}])
    assert any(n.startswith("NIC mismatch") for n in notes) is mismatch, notes


def test_rule_mesh_blocked_names_the_node_refusing_the_others_by_node_name_with_its_range_and_interface():
    """Issue 46.9: only MASTER_PORT open on the head. The ranks' connect test (each node's first rank to every other
    node's ephemeral-port listener) says the head refuses both workers; the gang names nodes by their names."""
    from dsv3_preflight.collective.judge import rule_mesh_blocked

    listeners = {str(r): {"rank": r, "addr": f"10.77.0.1{r}", "port": 40000 + r, "ifname": "eth0",
                          "ephemeral_range": [32768, 60999]} for r in range(3)}
    reach = [{"from_rank": a, "to_rank": b, "addr": f"10.77.0.1{b}", "port": 40000 + b,
              "outcome": "timeout" if b == 0 else "ok", "error": "no answer in 3 s" if b == 0 else None}
             for a in range(3) for b in range(3) if a != b]
    outcomes = [{"ranks": [{"rank": r, "mesh": {"listeners": listeners, "reach": reach}}]} for r in range(3)]
    [f] = rule_mesh_blocked(outcomes, {0: "lab-node0", 1: "lab-node1", 2: "lab-node2"})
    assert f.message.startswith("lab-node0 (10.77.0.10) refuses TCP on its ephemeral ports from lab-node1 (10.77.0.11), "
                                "lab-node2 (10.77.0.12) (a connect to 10.77.0.10:40000: timeout)")
    assert f.actor is Actor.NODE and f.cause == "collective.ports_blocked_between_nodes"
    assert "iptables -I INPUT -i eth0 -p tcp --dport 32768:60999 -j ACCEPT   # on lab-node0 (10.77.0.10)" in f.fix
    assert "NCCL_PORT_RANGE" not in f.fix and paste_problems(f.fix) == []
    unknown = [{"ranks": [{"rank": 1, "mesh": {"listeners": {"0": {"rank": 0, "addr": "10.0.0.1", "port": 5}},
                                               "reach": [{**reach[2], "from_rank": 1}]}}]}]
    [g] = rule_mesh_blocked(unknown)
    assert '"${IFACE:?the training interface of this node}"' in g.fix and paste_problems(g.fix) == []
    fine = [r for r in reach if r["outcome"] == "ok"]
    assert rule_mesh_blocked([{"ranks": [{"rank": 0, "mesh": {"listeners": listeners, "reach": fine}}]}]) == []
