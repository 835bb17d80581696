"""Collective probe, pure parts: decoding real torch/Gloo/NCCL errors, combining outcomes. The judges of the fact:
test_dist_allreduce.py and test_dist_allreduce_cluster.py."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from collective_judge_lab import _outcome, _rank
from paste_lint import paste_problems

from dsv3_preflight.collective import combine, decode, nccl_interfaces

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


# -- the decoded fixes -----------------------------------------------------------------------------------------


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


def test_the_decoder_reads_the_doctors_message_table():
    """One table, one place to add a library message: the decoder's patterns are the ``decode`` of the doctor's
    signature records, each once, in the decoder's stated order."""
    from dsv3_preflight.collective.decode import ORDER, patterns
    from dsv3_preflight.doctor.signatures import SIGNATURES

    on_records = [d for s in SIGNATURES for d in s.decode]
    assert list(patterns()) == sorted(on_records, key=lambda d: ORDER.index(d.kind))
    assert [d.kind for d in patterns()] == list(ORDER)   # every kind of the order is on a record, once
    carriers = {d.kind: s.id for s in SIGNATURES for d in s.decode}
    assert carriers["gloo_ifname_missing"] == "gloo.no_address_for_interface"
    assert carriers["duplicate_gpu"] == "nccl.duplicate_gpu"
