"""Collective probe, pure parts: decoding real torch/Gloo/NCCL errors, combining outcomes, judging the fact."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from paste_lint import paste_problems

from dsv3_preflight.collective import combine, decode, nccl_interfaces
from dsv3_preflight.collective.judge import (
    judge_collective,
    judge_gang,
    rule_busbw,
    rule_completed,
    rule_duplicate_gpus,
    rule_nic_mismatch,
)
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.registry import load_registry
from dsv3_preflight.result import Actor, Status

CASES = json.loads((__import__("pathlib").Path(__file__).parents[1] / "data" / "collective" / "errors.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["kind"] + str(i) for i, c in enumerate(CASES)])
def test_decode_recognises_the_real_library_message(case):
    findings = decode(case["text"])
    kinds = [f["kind"] for f in findings]
    assert case["kind"] in kinds, (case["text"], kinds)
    finding = findings[kinds.index(case["kind"])]
    assert case["cause_has"] in finding["cause"]
    assert finding["remediation"] and finding["line"]


def test_decode_drops_generic_timeouts_when_a_precise_cause_is_known():
    text = ("Unable to find address for: eth7\n"
            "Timed out waiting 1000ms for recv operation to complete")
    assert [f["kind"] for f in decode(text)] == ["gloo_ifname_missing"]


def test_decode_finds_nothing_in_a_clean_log():
    assert decode("all good\nNCCL INFO Init COMPLETE") == []


def test_nccl_interface_is_parsed_from_net_socket_line(data_dir):
    log = (data_dir / "collective" / "nccl_info.log").read_text()
    assert nccl_interfaces(log) == [{"ifname": "eth0", "address": "10.77.0.10", "source": "NET/Socket"}]


def test_nccl_interface_falls_back_to_bootstrap_line():
    log = "h:1:1 [0] NCCL INFO Bootstrap : Using ib0:192.168.5.3<0>\n"
    assert nccl_interfaces(log) == [{"ifname": "ib0", "address": "192.168.5.3", "source": "Bootstrap"}]


def test_nccl_interface_lists_every_socket_interface():
    log = "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0> [1]eth1:10.0.1.1<0>\n"
    assert [e["ifname"] for e in nccl_interfaces(log)] == ["eth0", "eth1"]


# -- combine ---------------------------------------------------------------------------------
def _rank(rank, last="done", *, sum_ok=True, host="n0", pci=None, missing=None, findings=(), rank_map=None):
    return {"rank": rank, "host": host, "last_phase": last, "sum_ok": sum_ok if last in ("first_collective", "steady_state", "done") else None,
            "never_joined": missing, "findings": list(findings), "pci_bus_id": pci, "device": "cpu",
            "timings": {"init_s": 0.5, "first_collective_s": 0.01, "steady_s": 0.001}, "rank_map": rank_map,
            "nccl_interfaces": [], "log_tail": []}


def _outcome(node_rank, ranks, **extra):
    return {"node_rank": node_rank, "ranks": ranks, "sweep": None, "deadline_hit": False, "env": {}, **extra}


def test_combine_passes_when_every_rank_finished_with_the_sum():
    c = combine([_outcome(0, [_rank(0)]), _outcome(1, [_rank(1, host="n1")])], 2)
    assert c["ok"] and c["never_joined"] == [] and c["sum_ok"]
    assert "2 ranks correct" in c["summary"]


def test_combine_names_ranks_of_a_node_that_never_reported():
    c = combine([_outcome(0, [_rank(0), _rank(1)]), _outcome(1, [_rank(2, host="n1"), _rank(3, host="n1")])], 6)
    assert not c["ok"]
    assert c["never_joined"] == [4, 5] and c["not_run"] == [4, 5]
    assert c["summary"].startswith("rank(s) 4-5 of 6 never joined")


def test_combine_one_node_view_trusts_only_what_the_store_saw():
    ok_alone = combine([_outcome(1, [_rank(1)])], 2, assume_absent=False)
    assert ok_alone["never_joined"] == []
    seen_missing = combine([_outcome(0, [_rank(0, "store_connected", missing=[1])])], 2, assume_absent=False)
    assert seen_missing["never_joined"] == [1] and not seen_missing["ok"]


def test_combine_reports_a_wrong_sum():
    c = combine([_outcome(0, [_rank(0, sum_ok=False), _rank(1)])], 2)
    assert not c["ok"] and c["wrong_sum"] == [0]
    assert "wrong sum on rank(s) 0" in c["summary"]


def test_combine_says_where_a_stuck_rank_stopped_and_why():
    f = {"kind": "gloo_full_mesh_connect", "cause": "Gloo's full-mesh connect between ranks failed", "remediation": "x", "line": "l"}
    c = combine([_outcome(0, [_rank(0, "all_joined", findings=[f]), _rank(1, "all_joined", findings=[f])])], 2)
    assert c["stuck"] == {"0": "all_joined", "1": "all_joined"}
    assert "all ranks joined the store" in c["summary"] and "full-mesh" in c["summary"]
    assert c["findings"][0]["ranks"] == [0, 1]


# -- the check's judge ---------------------------------------------------------------------------
def _profile(**values):
    return resolve_profile(cli=values, environ={}, profile_name="cpu")


def _fact(outcomes, world, **extra):
    """A `collective` fact of the shape the probe writes (collective/probes/local.py): the outcome, no verdict."""
    return {"requested": True, "mode": "full", "backend": "gloo", "world": world, "partial": False,
            "outcome": outcomes[0], **extra}


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


def test_help_and_the_probe_modules_do_not_import_torch():
    code = ("import sys, contextlib, io\n"
            "from dsv3_preflight import cli\n"
            "import dsv3_preflight.collective, dsv3_preflight.collective.probes.local, dsv3_preflight.commands.probe\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    try: cli.main(['probe', '--help'])\n"
            "    except SystemExit: pass\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_check_warns_when_nccl_chose_another_interface_than_the_route(data_dir):
    log = (data_dir / "collective" / "nccl_info.log").read_text()
    ranks = [_rank(0), _rank(1)]
    for r in ranks:
        r["nccl_interfaces"] = nccl_interfaces(log.replace("eth0", "docker0"))
    r = judge_collective(_fact([_outcome(0, ranks)], 2), _profile(), {"ifname": "eth0", "loopback": False}, None)
    assert r.status is Status.WARN and "docker0" in r.summary and "eth0" in r.summary
    assert "NCCL_SOCKET_IFNAME==eth0 GLOO_SOCKET_IFNAME=eth0" in r.remediation   # the node's interfaces unknown: exact


def test_interface_remediations_name_the_nodes_interface_never_ip_route_get_which_says_lo_on_the_head():
    # `ip -4 route get $MASTER_ADDR` on the head answers "local … dev lo": pasting the old one-liner there
    # pinned GLOO_SOCKET_IFNAME=lo. The probe now names the interface (on the head, the one holding MASTER_ADDR).
    texts = {"Unable to find address for: eth7": "export GLOO_SOCKET_IFNAME=eth0 ",
             "NET/Socket : no socket interface found": "export NCCL_SOCKET_IFNAME==eth0 ",
             "connect: No route to host": "export NCCL_SOCKET_IFNAME==eth0 GLOO_SOCKET_IFNAME=eth0 "}
    for text, export in texts.items():
        unknown = decode(text)[0]["remediation"]
        assert "route get" not in unknown and "net.nic_route" in unknown and "never lo" in unknown, unknown
        known = decode(text, interface="eth0")[0]["remediation"]
        assert known.startswith(export) and "<" not in known, known
    from dsv3_preflight.collective.decode import phase_finding

    stuck = phase_finding("all_joined", master="10.0.0.1:39500", ifnames="", interface="eth0")
    assert "GLOO_SOCKET_IFNAME=eth0" in stuck["remediation"] and "route get" not in stuck["remediation"]


def test_remediation_interface_never_pins_loopback_when_the_world_spans_nodes():
    from dsv3_preflight.collective.probes.node import remediation_interface

    assert remediation_interface({"ifname": "lo", "source": "127.0.0.1"}, spans_nodes=True) is None
    assert remediation_interface({"ifname": "lo", "source": "127.0.0.1"}, spans_nodes=False) == "lo"
    assert remediation_interface({"ifname": "eth0", "source": "10.0.0.1"}, spans_nodes=True) == "eth0"
    assert remediation_interface({"ifname": None, "source": None, "error": "x"}, spans_nodes=True) is None


def test_a_store_that_closed_under_a_rank_blames_rank_0_not_blocked_ports():
    # What rank 1 printed when rank 0 (the store host) died of GLOO_SOCKET_IFNAME=eth7 (netns lab, torch 2.13):
    # the stack passes through connectFullMesh, which used to read as "the ranks' own ports are blocked".
    text = ("DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server "
            "shutdown or crash?\n"
            "frame #12: gloo::rendezvous::Context::connectFullMesh(std::shared_ptr<gloo::rendezvous::Store>, "
            "std::shared_ptr<gloo::transport::Device>&) + 0x5c")
    findings = decode(text)
    assert [f["kind"] for f in findings] == ["store_closed"]
    assert "rank 0" in findings[0]["cause"] and "rank 0" in findings[0]["remediation"]


def test_an_unresolvable_master_addr_is_the_first_cause_not_a_store_that_did_not_answer():
    # What `dsv3-preflight probe --master-addr nosuch.invalid` printed (torch 2.13): both lines appear; the
    # summary used to say "the master is not running yet, or the port is filtered".
    text = ("[W1122 08:14:35.661091618 socket.cpp:764] [c10d] The IPv6 network addresses of (nosuch.invalid, 39500) "
            "cannot be retrieved (gai error: -2 - Name or service not known).\n"
            "[E1122 08:14:38.197789692 socket.cpp:1028] [c10d] The client socket has timed out after 3588ms while "
            "trying to connect to (nosuch.invalid, 39500).")
    assert [f["kind"] for f in decode(text)][0] == "master_unresolvable"
    outcome = {"ranks": [{"rank": 0, "last_phase": "imported", "findings": decode(text), "timings": {}}]}
    assert "does not resolve" in combine([outcome], 2)["summary"]


# -- the shared rules, one by one ----------------------------------------------------------------------------
DUP_PCI = "00000000:53:00.0"


def _dup_ranks(host="n0"):
    rank_map = {"0": {"host": host, "pci_bus_id": DUP_PCI}, "1": {"host": host, "pci_bus_id": DUP_PCI}}
    return [_rank(0, host=host, pci=DUP_PCI, rank_map=rank_map), _rank(1, host=host, pci=DUP_PCI)]


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


def _exported(fix: str, variable: str, iface: str | None) -> str:
    """The value ``variable`` has after bash runs the fix's export lines (with IFACE set when given)."""
    exports = "\n".join(line for line in fix.splitlines() if line.startswith("export ") and f"{variable}=" in line)
    script = (f"IFACE={iface}\n" if iface else "") + exports + f'\nprintf %s "${variable}"'
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=10)
    assert proc.returncode == 0, (script, proc.stderr)
    return proc.stdout


def test_every_decoded_fix_that_pins_nccl_exports_the_exact_interface_name():
    from dsv3_preflight.collective.decode import phase_finding
    from dsv3_preflight.net.ifselect import nccl_select

    fixes = [f["remediation"] for case in CASES for interface in (None, "eth0")
             for f in decode(case["text"], interface=interface)]
    fixes += [phase_finding(phase, master="10.0.0.1:39500", ifnames="", interface=interface)["remediation"]
              for phase in ("all_joined",) for interface in (None, "eth0")]
    pinning = [fix for fix in fixes if "NCCL_SOCKET_IFNAME=" in fix]
    assert len(pinning) >= 6
    ifaces = [{"name": "eth0", "index": 2, "ipv4": ["10.0.0.5"]}, {"name": "eth01", "index": 3, "ipv4": ["10.9.1.1"]}]
    for fix in pinning:
        value = _exported(fix, "NCCL_SOCKET_IFNAME", "eth0" if "${IFACE:?" in fix else None)
        assert value == "=eth0", fix
        assert nccl_select(value, ifaces)["selected"] == ["eth0"]


def test_every_decoded_fix_pastes_into_bash_with_and_without_the_interface():
    for case in CASES:
        for interface in (None, "eth0"):
            for f in decode(case["text"], interface=interface):
                assert paste_problems(f["remediation"]) == [], (case["text"], f["remediation"])
                assert f["actor"] in ("job", "node", "network") and f["cause_id"], f
    from dsv3_preflight.collective.decode import phase_finding

    for phase in (None, "started", "imported", "store_connected", "all_joined", "pg_up", "first_collective"):
        for interface in (None, "eth0"):
            f = phase_finding(phase, master="10.0.0.1:39500", ifnames="", interface=interface)
            assert paste_problems(f["remediation"]) == [], f


# -- the gang is judged exactly as the node check: every rule, through the registered checks -----------------
def _gang_facts(outcomes, world):
    """`collective_gang` facts of the shape the probe writes (collective/probes/gang.py), one per node."""
    return {f"n{o['node_rank']}": {"requested": True, "mode": "gang", "world": world, "node_rank": o["node_rank"],
                                   "master_addr": "10.0.0.1", "master_port": 39500, "backend": "gloo",
                                   "timeout_s": 60.0, "outcome": o} for o in outcomes}


CHECKS = load_registry().checks


def test_a_duplicate_gpu_in_gang_facts_fails_the_cluster_check_exactly_as_dist_allreduce():
    ranks = _dup_ranks()
    node = CHECKS["dist.allreduce"](collective=_fact([_outcome(0, ranks)], 2), profile=_profile(), nic_route=None,
                                     port_reach=None)
    one_per_node = [_outcome(0, [ranks[0]]), _outcome(1, [dict(ranks[1], host="n0")])]
    gang = CHECKS["dist.allreduce_cluster"](collective_gang=_gang_facts(one_per_node, 2), profile=_profile(),
                                            node_ranks={"n0": 0, "n1": 1}, node_states={})
    assert node.status is Status.FAIL and gang.status is Status.FAIL
    assert gang.summary == node.summary and "Duplicate GPU detected" in gang.summary
    assert gang.remediation == node.remediation and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in gang.remediation
    assert gang.actor is node.actor is Actor.JOB and gang.cause == node.cause == "gpu.duplicate_gpu"


def test_a_busbw_below_min_busbw_gbps_in_gang_facts_fails_the_cluster_check_exactly_as_dist_allreduce():
    sweep = [{"size_bytes": 1 << 20, "busbw_gbps": 0.2, "algbw_gbps": 0.2, "time_us": 5000.0}]
    profile = _profile(min_busbw_gbps=5)
    node = CHECKS["dist.allreduce"](collective=_fact([_outcome(0, [_rank(0), _rank(1)], sweep=sweep)], 2),
                                     profile=profile, nic_route=None, port_reach=None)
    gang = CHECKS["dist.allreduce_cluster"](
        collective_gang=_gang_facts([_outcome(0, [_rank(0)], sweep=sweep), _outcome(1, [_rank(1, host="n1")])], 2),
        profile=profile, node_ranks={"n0": 0, "n1": 1}, node_states={"n0": {"state": "alive"}, "n1": {"state": "alive"}})
    assert node.status is gang.status is Status.FAIL
    assert gang.summary == node.summary == "all_reduce bus bandwidth peaks at 0.2 GB/s, below min_busbw_gbps=5 (2 ranks, gloo)"
    assert gang.remediation == node.remediation


def test_the_gang_check_names_the_node_whose_rank_never_joined():
    facts = _gang_facts([_outcome(0, [_rank(0, "store_connected", missing=[2])]), _outcome(1, [_rank(1, host="n1")])], 3)
    facts["n2"] = {"requested": False, "reason": "not requested"}   # its gang task never ran
    r = judge_gang(facts, _profile(), {"n0": 0, "n1": 1, "n2": 2})
    assert r.status is Status.FAIL and r.summary.startswith("rank(s) 2 of 3 never joined the rendezvous (node n2)")
    assert r.evidence["not_reported"] == ["n2"]


def test_a_node_lost_during_the_gang_is_that_nodes_cause_never_the_networks():
    facts = _gang_facts([_outcome(0, [_rank(0, "store_connected", missing=[2])]), _outcome(1, [_rank(1, host="n1")])], 3)
    facts["n2"] = {"requested": False, "reason": "its task died with the node"}
    states = {"n0": {"state": "alive"}, "n1": {"state": "alive"}, "n2": {"state": "dead", "reason": "raylet died"}}
    r = CHECKS["dist.allreduce_cluster"](collective_gang=facts, profile=_profile(), node_ranks={"n0": 0, "n1": 1, "n2": 2},
                                         node_states=states)
    assert r.status is Status.FAIL and r.cause == "cluster.node_lost" and r.actor is Actor.NODE
    assert "n2 lost during the run" in r.summary and "not judged" in r.summary
    assert paste_problems(r.remediation) == []
    alive = dict(states, n2={"state": "alive"})   # the same facts with n2 alive: its rank never joined, judged as such
    r = CHECKS["dist.allreduce_cluster"](collective_gang=facts, profile=_profile(), node_ranks={"n0": 0, "n1": 1, "n2": 2},
                                         node_states=alive)
    assert r.status is Status.FAIL and r.cause != "cluster.node_lost" and "never joined" in r.summary


def test_the_gang_check_skips_when_no_node_was_asked_to_run_it():
    r = judge_gang({"n0": {"requested": False, "reason": "not requested"}}, _profile(), {"n0": 0})
    assert r.status is Status.SKIP and "--all-nodes --probe" in r.summary


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
