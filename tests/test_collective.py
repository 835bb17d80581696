"""Collective probe, pure parts: decoding real torch/Gloo/NCCL errors, combining outcomes, judging the fact."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dsv3_preflight.checks.dist_allreduce import judge_collective
from dsv3_preflight.collective import combine, decode, nccl_interfaces
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Status

CASES = json.loads((__import__("pathlib").Path(__file__).parent / "data" / "collective" / "errors.json").read_text())["cases"]


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
    return {"requested": True, "mode": "full", "backend": "gloo", "outcome": outcomes[0], "combined": combine(outcomes, world), **extra}


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
    assert "NCCL_SOCKET_IFNAME=eth0" in r.remediation


def test_interface_remediations_name_the_nodes_interface_never_ip_route_get_which_says_lo_on_the_head():
    # `ip -4 route get $MASTER_ADDR` on the head answers "local … dev lo": pasting the old one-liner there
    # pinned GLOO_SOCKET_IFNAME=lo. The probe now names the interface (on the head, the one holding MASTER_ADDR).
    texts = ["Unable to find address for: eth7", "NET/Socket : no socket interface found", "connect: No route to host"]
    for text in texts:
        unknown = decode(text)[0]["remediation"]
        assert "route get" not in unknown and "net.nic_route" in unknown and "never lo" in unknown, unknown
        known = decode(text, interface="eth0")[0]["remediation"]
        assert "SOCKET_IFNAME=eth0" in known and "<" not in known, known
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
