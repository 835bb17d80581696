"""Pure parts of cluster mode: node ranks and names, the node watch, and the cluster judges on node facts
recorded from real Ray nodes in network namespaces (tests/data/cluster/netns_three_nodes.json)."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from dataclasses import replace

from cluster_judges_lab import data_dir_module, facts, judge_all, recorded  # noqa: F401 - the fixtures
from paste_lint import paste_problems

from dsv3_preflight.checks.net_mtu import mtu
from dsv3_preflight.cluster import NodeInfo, assign_node_ranks, unique_names
from dsv3_preflight.cluster.driver import lost_node_fix
from dsv3_preflight.cluster.liveness import Lost, NodeWatch, logs_dir
from dsv3_preflight.net.mtu_rules import rule_mtu_differs, rule_nodes_missing, rule_unknown, used_interfaces
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Actor, Status


def node(node_id, ip, hostname, **kw):
    return NodeInfo(node_id=node_id, ip=ip, hostname=hostname, **kw)


NODES = [node("cc" * 14, "10.0.0.12", "gpu-c"), node("aa" * 14, "10.0.0.9", "gpu-a", is_head=True),
         node("bb" * 14, "10.0.0.130", "gpu-b")]


# -- node ranks and names -------------------------------------------------------------------------------------


def test_node_holding_master_addr_is_rank_0_and_the_others_follow_by_ip_numerically():
    ranked = assign_node_ranks(unique_names(NODES), "10.0.0.130", addresses={"10.0.0.130"})
    assert [(n.hostname, n.node_rank) for n in ranked] == [("gpu-b", 0), ("gpu-a", 1), ("gpu-c", 2)]


def test_node_ranks_do_not_depend_on_the_order_ray_lists_nodes():
    for order in (NODES, NODES[::-1], NODES[1:] + NODES[:1]):
        assert [n.hostname for n in assign_node_ranks(order, "10.0.0.12", addresses={"10.0.0.12"})] == ["gpu-c", "gpu-a", "gpu-b"]


def test_master_addr_given_as_host_name_picks_that_node():
    ranked = assign_node_ranks(NODES, "gpu-c", addresses={"gpu-c"})
    assert ranked[0].hostname == "gpu-c"


def test_no_node_holding_master_addr_makes_the_ray_head_node_0():
    ranked = assign_node_ranks(NODES, "10.9.9.9", addresses={"10.9.9.9"})
    assert ranked[0].hostname == "gpu-a" and ranked[0].is_head


def test_loopback_master_addr_means_the_drivers_node():
    nodes = [NODES[0], NodeInfo("dd" * 14, "10.0.0.200", "driver-host", is_driver=True)]
    assert assign_node_ranks(nodes, "127.0.0.1")[0].hostname == "driver-host"


def test_co_hosted_ray_nodes_holding_master_addr_prefer_the_drivers_node_then_the_head():
    same = [node("01" * 14, "10.0.0.5", "box"), node("02" * 14, "10.0.0.5", "box", is_head=True),
            node("03" * 14, "10.0.0.5", "box", is_driver=True)]
    assert assign_node_ranks(same, "10.0.0.5", {"10.0.0.5"})[0].node_id == "03" * 14
    no_driver = [n if not n.is_driver else node(n.node_id, n.ip, n.hostname) for n in same]
    assert assign_node_ranks(no_driver, "10.0.0.5", {"10.0.0.5"})[0].node_id == "02" * 14


def test_names_shared_by_ray_nodes_on_one_host_get_the_short_node_id_and_reported_names_win():
    same = [node("0a1b2c" + "0" * 22, "10.0.0.5", "box"), node("ffeedd" + "0" * 22, "10.0.0.5", "box"),
            node("123456" + "0" * 22, "10.0.0.6", "other")]
    assert [n.name for n in unique_names(same)] == ["box-0a1b2c", "box-ffeedd", "other"]
    reported = {same[0].node_id: "head", same[1].node_id: "w1"}
    assert [n.name for n in unique_names(same, reported)] == ["head", "w1", "other"]


def test_a_node_that_never_said_its_name_keeps_the_node_id_when_its_host_name_is_shared():
    # issue 19.3: three nodes on host "vm"; two reported their names, the third died first
    vm = [node("aaaaaa" + "0" * 22, "10.0.0.10", "vm"), node("bbbbbb" + "0" * 22, "10.0.0.11", "vm"),
          node("cccccc" + "0" * 22, "10.0.0.12", "vm")]
    named = unique_names(vm, {vm[0].node_id: "lab-head", vm[1].node_id: "lab-w1"})
    # issue 46.12: a host name other nodes share at other addresses is not its own; the address Ray reports is
    assert [n.name for n in named] == ["lab-head", "lab-w1", "10.0.0.12"]
    assert [n.name for n in unique_names(vm)] == ["10.0.0.10", "10.0.0.11", "10.0.0.12"]


# -- recorded node facts --------------------------------------------------------------------------------------


def test_the_recorded_green_cluster_passes_every_cluster_judge(recorded):
    for name, result in judge_all(recorded["green"]).items():
        assert result.status is Status.PASS, (name, result.summary)


def test_every_fix_of_the_recorded_red_runs_pastes_and_says_who_acts(recorded):
    for key in ("loopback_head", "duplicate_rank_and_mtu"):
        for name, result in judge_all(recorded[key]).items():
            if result.status in (Status.FAIL, Status.WARN):
                assert result.actor is not None, (key, name)
                assert paste_problems(result.remediation) == [], (key, name, result.remediation)
                for finding in result.findings:
                    assert paste_problems(finding.fix) == [], (key, name, finding.fix)


# -- net.mtu ------------------------------------------------------------------------------------------------------


def test_mtu_on_a_loopback_head_is_judged_on_the_interface_holding_the_workers_address(recorded):
    scenario = recorded["loopback_head"]
    result = judge_all(scenario)["net.mtu"]
    assert result.status is Status.PASS, result.summary
    assert result.summary == "MTU 1500 on lab-node0 (eth0), lab-node1 (eth0), lab-node2 (eth0)"
    assert "holds 10.77.0.10" in result.evidence["nodes"]["lab-node0"]["how"]
    assert scenario["facts"]["lab-node0"]["nic_route"]["ifname"] == "lo"  # its own route says lo (mtu 65536)


def test_mtu_mismatch_tells_only_the_odd_node_to_change_its_interface(recorded):
    result = judge_all(recorded["duplicate_rank_and_mtu"])["net.mtu"]
    assert result.status is Status.FAIL and result.actor is Actor.NETWORK
    assert result.remediation == ("ip link set dev eth0 mtu 1500   # on lab-node2: as on lab-node0, lab-node1 "
                                  "(the switch ports must carry it too)")


def test_rule_mtu_differs_takes_the_mtu_most_nodes_use():
    known = {"a": {"interface": "eth0", "mtu": 9000}, "b": {"interface": "eth0", "mtu": 1500},
             "c": {"interface": "ens5", "mtu": 1500}}
    assert rule_mtu_differs(known).fix.startswith("ip link set dev eth0 mtu 1500   # on a: as on b, c")


def test_rule_unknown_names_a_loopback_head_with_no_interface_holding_the_address(recorded):
    nic = copy.deepcopy(facts(recorded["loopback_head"], "nic_route"))
    nic["lab-node0"]["interfaces"] = [i for i in nic["lab-node0"]["interfaces"] if i["name"] == "lo"]
    per_node = used_interfaces(nic, "lab-node0")
    found = rule_unknown(per_node, 3)
    assert found.status is Status.WARN and found.message.startswith("MTU not judged on lab-node0 (its route to MASTER_ADDR is loopback (lo)")
    assert rule_nodes_missing({"a": {}}, 3, {}).message == "MTU known on 1 node(s); 2 of 3 did not report it"
    lost = rule_nodes_missing({"a": {}, "b": {}}, 3, {"c": {"state": "dead"}})
    assert lost.message == "MTU known on 2 node(s); not on c, lost during the run" and lost.cause == "cluster.node_lost"


# -- what the runner records of a lost node ----------------------------------------------------------------------

# one entry of ray.nodes() for a node whose raylet was SIGKILLed (recorded in the RayLab, Ray 2.60)
DEAD_ENTRY = {"NodeID": "8d9d6cbc0dda7fcbcf3591655398269320a9b6dd7ff2d81e71bdb164", "Alive": False,
              "NodeManagerAddress": "10.77.0.12", "DeathReason": 1,
              "DeathReasonMessage": "health check failed due to missing too many heartbeats",
              "RayletSocketName": "/tmp/ray/session_2026-11-23_12-01-08_660227_18352/sockets/raylet.2"}


def test_the_watch_records_a_node_ray_lists_dead_with_what_it_was_doing_and_its_logs():
    lost_node = node(DEAD_ENTRY["NodeID"], "10.77.0.12", "vm", name="lab-node2", node_rank=2)
    table = {DEAD_ENTRY["NodeID"]: {**DEAD_ENTRY, "Alive": True}}
    watch = NodeWatch([lost_node], table=lambda: table, poll_s=0.0)
    watch.busy(lost_node.node_id, "during the port-reach wave")
    assert watch.poll(force=True) == []
    table[DEAD_ENTRY["NodeID"]] = DEAD_ENTRY
    (lost,) = watch.poll(force=True)
    assert lost.phase == "during the port-reach wave" and lost.source == "node table"
    assert lost.reason == "health check failed due to missing too many heartbeats"
    assert lost.logs_dir == "/tmp/ray/session_2026-11-23_12-01-08_660227_18352/logs"
    states = watch.states({lost_node.node_id: "lab-node2"}, {lost_node.node_id: {"ip": "10.77.0.12"}})
    assert states["lab-node2"]["state"] == "dead" and states["lab-node2"]["phase"] == "during the port-reach wave"
    assert watch.poll(force=True) == []  # once


def test_a_node_that_finished_its_part_of_a_wave_is_lost_after_it_not_during_it():
    n = node("ab" * 14, "10.0.0.2", "w")
    watch = NodeWatch([n], table=lambda: {}, idle_phase="before its node checks")
    watch.busy(n.node_id, "during its node checks")
    watch.idle(n.node_id, "after its node checks, before the port-reach wave")
    assert watch.phase_of(n.node_id) == "after its node checks, before the port-reach wave"
    watch.sweep("during the cluster checks")
    assert watch.phase_of(n.node_id) == "during the cluster checks"


def test_the_lost_node_fix_names_ray_logs_for_that_node_its_log_file_and_the_real_join_address():
    n = node(DEAD_ENTRY["NodeID"], "10.77.0.12", "vm", name="lab-node2")
    lost = Lost(n.node_id, "during its node checks", "2026-11-23T12:02:27+00:00", 16.2, "x", "task error",
                logs_dir(DEAD_ENTRY["RayletSocketName"]))
    fix = lost_node_fix(n, lost, "10.77.0.10:6390")
    assert fix.splitlines()[0].startswith(f"ray logs raylet.out --node-id {n.node_id} --tail 100   # on the head")
    assert "tail -n 100 /tmp/ray/session_2026-11-23_12-01-08_660227_18352/logs/raylet.out   # on lab-node2" in fix
    assert "ray start --address=10.77.0.10:6390   # on lab-node2" in fix
    assert paste_problems(fix) == [] and paste_problems(lost_node_fix(n, None, None)) == []


def test_help_does_not_import_ray():
    code = "import sys; from dsv3_preflight.cli import main\ntry:\n main(['run','--help'])\nexcept SystemExit: pass\nimport dsv3_preflight.cluster\nprint('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout + out.stderr


def test_a_single_node_job_judges_mtu_on_its_loopback_route(recorded):
    nic = {"lab-node0": facts(recorded["loopback_head"], "nic_route")["lab-node0"]}
    result = mtu(nic, {"lab-node0": {"state": "alive"}}, resolve_profile({"nnodes": 1, "master_addr": "lab-node0"}, {}))
    assert result.status is Status.PASS and result.summary == "MTU 65536 on lab-node0 (lo)"


def test_a_node_tasks_wave_reaches_its_probes_for_that_task_only(monkeypatch):
    """Ray reuses its worker processes: a wave's parameters (a listener token, a gang's part) reach the probes of
    their own task (the engine fact `wave`, never os.environ) and must not leak into the next task that process
    runs. The task runs through the runner and answers facts and results."""
    import os

    from dsv3_preflight.cluster.node_side import NodeAnswer, NodeTask, run_node
    from dsv3_preflight.wave import Wave

    monkeypatch.setenv("MASTER_PORT", "29999")
    monkeypatch.delenv("DSV3_PREFLIGHT_LISTENER_TOKEN", raising=False)
    before = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    profile = resolve_profile(profile_name="cpu", cli={}, environ={}).to_dict()
    first = run_node(NodeTask(profile=profile, checks=["net.port_reach", "env.launch_vars"], timeout=30,
                              wave=Wave(listener_token="wave-token-1")).to_wire())
    second = run_node(NodeTask(profile=profile, checks=["net.port_reach"], timeout=30).to_wire())
    assert [r["name"] for r in first["results"]] == ["env.launch_vars", "net.port_reach"]
    assert first["entry"]["facts"]["port_reach"]["listener_expected"] is True    # the task's probe saw its wave
    assert second["entry"]["facts"]["port_reach"]["listener_expected"] is False  # and the next task did not
    assert "29999" in json.dumps(first["entry"]["facts"]["env"])                 # the node's own environment
    # which no wave touched (importing ray adds its own RAY_* variables)
    assert {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} == before
    answer = NodeAnswer.from_wire(first)
    assert {r.name: r.status.value for r in answer.results} == {r["name"]: r["status"] for r in first["results"]}
    ray = sys.modules.get("ray")
    assert ray is None or not ray.is_initialized(), "run_node outside Ray started a local Ray instance"


def test_the_gang_budget_grants_a_start_up_allowance_only_from_time_the_run_has_left():
    from dsv3_preflight.cluster.dispatch import STARTUP_ALLOWANCE_S
    from dsv3_preflight.cluster.gang import TASK_MARGIN_S, gang_budget

    assert gang_budget(60, 1000) == (60.0, STARTUP_ALLOWANCE_S)            # plenty of time: the whole allowance
    room = 90 - TASK_MARGIN_S - 5.0
    assert gang_budget(60, 90) == (60.0, room - 60)                         # what is left after the timeout
    assert gang_budget(60, 40) == (40 - TASK_MARGIN_S - 5.0, 0.0)            # none: the timeout comes first
    assert gang_budget(6, 1000) == (6.0, 6.0)                               # never more than the timeout itself


def test_the_unreachable_node_fix_opens_rays_worker_range_and_its_real_ports_and_pastes():
    from dsv3_preflight.cluster.driver import ray_ports_fix

    n = node("cccccc" + "0" * 22, "10.0.0.12", "vm")
    reach = {"worker_ports": [10002, 19999], "ports": {
        "worker_port_low": {"port": 10002, "outcome": "timeout"}, "worker_port_mid": {"port": 15000, "outcome": "timeout"},
        "node_manager_port": {"port": 38837, "outcome": "ok"}, "object_manager_port": {"port": 44455, "outcome": "ok"}}}
    fix = ray_ports_fix(replace(n, name="10.0.0.12"), reach)
    assert "iptables -I INPUT -p tcp --dport 10002:19999 -j ACCEPT   # on 10.0.0.12: Ray's worker ports" in fix
    assert "--dport 38837 -j ACCEPT" in fix and "--dport 44455 -j ACCEPT" in fix
    assert "exec 3<>/dev/tcp/10.0.0.12/10002" in fix and paste_problems(fix) == []
    assert "# on lab-node2 (10.0.0.12)" in ray_ports_fix(replace(n, name="lab-node2"), reach)


def test_a_wave_crosses_ray_as_plain_data_and_comes_back_typed():
    """The driver's wave parameters (a pair's part here) travel inside the node task as plain data and are the same
    typed Wave on the node; a part missing a field is refused with what is wrong."""
    import pickle

    import pytest

    from dsv3_preflight.cluster.node_side import NodeTask
    from dsv3_preflight.wave import NO_WAVE, GangPart, PairPart, Wave

    part = PairPart(round=2, rounds=5, pair=("n0", "n3"), addrs={"n0": "10.0.0.1", "n3": "10.0.0.4"}, role=1,
                    port=29501, backend="gloo", timeout_s=20.0, iters=5, busbw_bytes=1 << 20,
                    planned=[["n0", "n1"], ["n0", "n3"]], nodes=["n0", "n3"], startup_s=4.0)
    task = NodeTask(profile={"name": "cpu"}, checks=["dist.pairs"], timeout=30.0, wave=Wave(pair=part), hello_key="k")
    wire = pickle.loads(pickle.dumps(task.to_wire()))
    assert json.loads(json.dumps(wire))["wave"]["pair"]["addrs"] == part.addrs   # plain data: no class of ours
    back = NodeTask.from_wire(wire)
    assert back.wave == Wave(pair=part) and back.wave.pair.me == "n3" and back.wave.pair.peer == "n0"
    assert back.wave.pair.store_addr == "10.0.0.1" and back.checks == ("dist.pairs",) and back.hello_key == "k"
    gang = Wave(gang=GangPart(master_addr="10.0.0.1", master_port=29500, world=3, node_rank=2, backend="gloo",
                              timeout_s=60.0))
    assert Wave.from_dict(gang.to_dict()) == gang and Wave.from_dict({}) == NO_WAVE == Wave.from_dict(None)
    with pytest.raises(ValueError, match="malformed wave parameters"):
        Wave.from_dict({"gang": {"master_addr": "10.0.0.1"}})
