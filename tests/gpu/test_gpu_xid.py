"""gpu.xid (checks/gpu_xid.py): recorded kernel logs (tests/data/gpu/kmsg/) read by the real kernel-log probe and
judged by NVIDIA's Xid catalogue (dsv3_preflight/gpu/xid.py, xid_rules.py)."""
from __future__ import annotations

import os
import time

import pytest
from gpu_health_lab import fixes_paste
from gpu_lab import KMSG, gather_kernel_log, gather_nvml, profile

from dsv3_preflight.checks.gpu_xid import xid
from dsv3_preflight.gpu import xid_rules
from dsv3_preflight.gpu.xid import meaning, parse_line, parse_lines
from dsv3_preflight.result import Actor, Status


@pytest.fixture
def kernel_log(monkeypatch):
    return lambda name: gather_kernel_log(name, monkeypatch)


@pytest.mark.parametrize("log, status, cause, words", [
    ("xe9680_h100_xid119", Status.FAIL, "gpu.reset_pending:0000:9b:00.0",
     "PCI 0000:9b:00 (not among the GPUs NVML lists now): Xid 119 GSP RPC Timeout"),
    ("gpud_xid13_109", Status.FAIL, "gpu.reset_pending:0000:cb:00.0", "Xid 109 Context Switch Timeout Error, once"),
    ("nvsentinel155_fallen_off_bus", Status.FAIL, "gpu.fallen_off_bus:0000:b3:00.0", "Xid 79 GPU has fallen off the bus"),
    ("ogkm1151_xid79", Status.FAIL, "gpu.fallen_off_bus:0000:2b:00.0", "Xid 79 GPU has fallen off the bus: the driver could not reach it over PCI Express, once since boot"),
    ("akash_h100_xid_43_31_94", Status.WARN, "gpu.reset_pending:0000:00:08.0", "Xid 94 Contained memory error"),
])
def test_recorded_kernel_logs_are_judged_by_nvidias_catalogue(kernel_log, log, status, cause, words):
    r = xid(kernel_xid=kernel_log(log), nvml=gather_nvml("h100_sxm_healthy"), profile=profile())
    assert (r.status, r.cause) == (status, cause) and words in r.summary, r.summary
    fixes_paste(r)


@pytest.mark.parametrize("log, summary", [
    ("ogkm1150_xid45", "(4 informational)"),  # Xid 45: cleanup after other Xids: NVIDIA says follow those
    ("stas00_xid63", "(1 informational)"),   # Xid 63: the row remapping, judged by gpu.memory_errors through NVML
])
def test_xids_nvidia_says_to_ignore_stay_in_the_evidence(kernel_log, log, summary):
    r = xid(kernel_xid=kernel_log(log), nvml=gather_nvml("h100_sxm_healthy"), profile=profile())
    assert r.status is Status.PASS and r.summary.endswith(summary)


def test_an_xid_is_named_by_nvmls_gpu_when_the_bus_matches(kernel_log):
    """The XE9680's Xid 119 on bus 9b, judged on a recorded H100 node moved onto that bus (the same board layout)."""
    nvml = gather_nvml("h100_sxm_healthy", g4={"pci_bus_id": "00000000:9B:00.0"})
    (found,) = xid_rules.rule_node_xids(kernel_log("xe9680_h100_xid119")["events"], nvml["gpus"])
    assert found.message.startswith("GPU 4 (00000000:9B:00.0): Xid 119") and found.cause == "gpu.reset_pending:00000000:9B:00.0"
    assert "nvidia-smi -r -i 00000000:9B:00.0" in found.fix and "until the next boot" in found.fix


def test_rule_application_xids_is_the_jobs_warning_with_the_process_names(kernel_log):
    found = xid_rules.rule_application_xids(kernel_log("akash_h100_xid_43_31_94")["events"], [])
    assert found.status is Status.WARN and found.actor is Actor.JOB and found.cause == "gpu.xid_application"
    assert "Xid 43 2×" in found.message and "(pt_main_thread)" in found.message and "(python3.10)" in found.message


def test_rule_reset_soon_xids_warns_on_a_contained_error(kernel_log):
    (found,) = xid_rules.rule_reset_soon_xids(kernel_log("akash_h100_xid_43_31_94")["events"], [])
    assert found.status is Status.WARN and found.actor is Actor.NODE and "nvidia-smi -r -i 0000:00:08.0" in found.fix


def test_xid_154_follows_the_recovery_action_it_announces():
    line = "NVRM: Xid (PCI:0000:9b:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
    events = [dict(parse_line(line), count=1, last=parse_line(line)["rest"])]
    (found,) = xid_rules.rule_node_xids(events, [])
    assert found.cause == "gpu.reboot_required" and "reboot" in found.fix.splitlines()[2]


def test_the_fallen_off_bus_echo_line_is_not_a_second_event():
    lines = (KMSG / "ogkm1151_xid79.log").read_text().splitlines()
    assert [(e["xid"], e["pci"]) for e in parse_lines(lines)] == [(79, "0000:2b:00")]


def test_xid_line_formats_of_old_and_new_drivers_and_of_dev_kmsg():
    assert parse_line("[ 1.0] NVRM: Xid (0000:03:00): 14, Channel 00000001")["pci"] == "0000:03:00"
    # /dev/kmsg record format (Documentation/ABI/testing/dev-kmsg: "prio,seq,usec,flags;message")
    event = parse_line("4,1234,206764307,-;NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping")
    assert (event["xid"], event["pci"], event["time"], event["pid"]) == (63, "0000:10:1c", "206.764307s", "1896")
    assert meaning(63).kind == "info" and meaning(79).nvidia_action == "RESTART_BM" and meaning(999).kind == "node"


def test_the_kernel_log_probe_reads_this_hosts_dev_kmsg_without_blocking():
    from dsv3_preflight.gpu.probes.kernel_log import kernel_xid, read_kmsg

    if not os.access("/dev/kmsg", os.R_OK):
        pytest.skip("/dev/kmsg is not readable here (not root, or dmesg_restrict)")
    started = time.monotonic()
    read = read_kmsg()
    assert time.monotonic() - started < 5 and read["records"] > 0 and read["oldest"].endswith("s")
    facts = kernel_xid.gather()
    assert facts["available"] and facts["source"] == "/dev/kmsg"


def test_an_unreadable_kernel_log_is_a_skip_with_the_reason_not_a_pass():
    r = xid(kernel_xid={"available": False, "error": "/dev/kmsg: Operation not permitted; journalctl -k -b: journalctl is not installed",
                        "events": [], "lines": []}, nvml=gather_nvml("h100_sxm_healthy"), profile=profile())
    assert r.status is Status.SKIP and r.summary.startswith("cannot read the kernel log: /dev/kmsg: Operation not permitted")
