"""GPU health in depth (issue 20): memory errors, PCIe and NVLink links, clocks, modes, reset status, Xid events.

Facts come from real machines only: recorded `nvidia-smi -q` (and `nvlink -s`) outputs converted to NVML replay
documents (tests/data/gpu/health/*.json, each with its provenance) read by the real NVML probe, and recorded
kernel logs (tests/data/gpu/kmsg/*.log) read by the real kernel-log probe. Variants change one value of a
recorded document and gather it through the probe again.
"""
from __future__ import annotations

import json
import os
import time

import pytest
from gpu_lab import HEALTH, KMSG, cpu_profile, gather_kernel_log, gather_nvml, health_doc, profile
from paste_lint import paste_problems

from dsv3_preflight.checks.gpu_clocks import clocks
from dsv3_preflight.checks.gpu_memory_errors import memory_errors
from dsv3_preflight.checks.gpu_modes import modes
from dsv3_preflight.checks.gpu_nvlink import nvlink
from dsv3_preflight.checks.gpu_pcie_link import pcie_link
from dsv3_preflight.checks.gpu_reset_pending import reset_pending
from dsv3_preflight.checks.gpu_xid import xid
from dsv3_preflight.gpu import clocks as clock_rules
from dsv3_preflight.gpu import links, memory, recovery, xid_rules
from dsv3_preflight.gpu import modes as mode_rules
from dsv3_preflight.gpu.fabric_rules import Cause
from dsv3_preflight.gpu.xid import meaning, parse_line, parse_lines
from dsv3_preflight.result import Actor, Status

NODE_CHECKS = {"gpu.memory_errors": memory_errors, "gpu.pcie_link": pcie_link, "gpu.clocks": clocks,
               "gpu.modes": modes, "gpu.reset_pending": reset_pending}


def judge(name: str, nvml: dict):
    if name == "gpu.nvlink":
        return nvlink(nvml=nvml, fabric_manager={}, profile=profile())
    return NODE_CHECKS[name](nvml=nvml, profile=profile())


def fixes_paste(result) -> None:
    for text in [result.remediation] + [f.fix for f in result.findings]:
        assert paste_problems(text) == [], text


# -- the recorded documents and the probe -----------------------------------------------------------

def test_every_recorded_health_document_and_kernel_log_names_its_public_source():
    for f in HEALTH.glob("*.json"):
        doc = json.loads(f.read_text())
        assert doc["source"] and doc["provenance"] and all(u.startswith("https://") for u in doc["provenance"]), f.name
        assert "derived" in doc, f.name
    for f in KMSG.glob("*.log"):
        assert "https://" in f.read_text().splitlines()[1] or "https://" in f.read_text().splitlines()[0], f.name


def test_nvml_probe_reads_the_h100s_health_as_nvidia_smi_printed_it():
    gpu = gather_nvml("h100_sxm_healthy")["gpus"][0]
    assert gpu["pci_bus_id"] == "00000000:18:00.0"
    assert gpu["pcie"] == {"gen_current": 5, "gen_max": 5, "gen_device_max": 5, "width_current": 16, "width_max": 16,
                           "replay_counter": 7}
    assert gpu["performance_state"] == 0 and gpu["clocks_event_reasons"] == clock_rules.IDLE
    assert gpu["mig"] == {"supported": True, "current": 0, "pending": 0} and gpu["compute_mode"] == 0
    assert gpu["reset"] == {"reset_required": 0, "drain_and_reset": 0, "recovery_action": 0}
    assert len(gpu["nvlink"]["links"]) == 18 and all(link["active"] for link in gpu["nvlink"]["links"])
    assert gpu["retired_pages_pending"] is None and "retired_pages_pending" in gpu["errors"]  # N/A: Not Supported


def test_a_value_the_recording_lacks_is_unknown_not_healthy():
    gpu = gather_nvml("v100_sxm2_power_brake")["gpus"][0]
    assert gpu["pcie"] is None and gpu["nvlink"] is None and gpu["compute_mode"] is None
    assert gpu["errors"]["compute_mode"] == "Function Not Found"
    r = modes(nvml=gather_nvml("v100_sxm2_power_brake"), profile=profile())
    assert r.status is Status.SKIP and r.summary == "NVML reported no compute mode nor MIG mode: Function Not Found"


def test_a_gpu_without_nvlink_says_not_supported_and_passes_as_pcie_only():
    doc = health_doc("a10g_pcie_x8")["nvml"]
    doc["devices"][0]["nvlink"] = {"nvml_error": 3}
    from dsv3_preflight.gpu.probes.nvml import nvml_facts
    from dsv3_preflight.gpu.probes.replay import NvmlReplay

    facts = nvml_facts(NvmlReplay(doc))
    assert facts["gpus"][0]["nvlink"] == {"supported": False, "links": []}
    r = nvlink(nvml=facts, fabric_manager={}, profile=profile())
    assert r.status is Status.PASS and r.summary.startswith("no NVLink on these 1 GPUs")


# -- green on healthy recorded machines, red with the right cause on faulty ones ------------------------

@pytest.mark.parametrize("check", sorted(NODE_CHECKS) + ["gpu.nvlink"])
def test_the_healthy_h100_node_is_green_on_every_health_check(check):
    r = judge(check, gather_nvml("h100_sxm_healthy"))
    assert r.status is Status.PASS, r.summary


def test_the_recorded_a100_nvswitch_links_are_all_up():
    r = judge("gpu.nvlink", gather_nvml("a100_sxm4_nvlink"))
    assert r.status is Status.PASS and r.summary == "96 NVLink links active on 8 GPUs, no data-link errors"


@pytest.mark.parametrize("doc, check, status, cause, words", [
    ("a10g_pcie_x8", "gpu.pcie_link", Status.FAIL, "gpu.pcie_degraded:00000000:00:1E.0",
     "GPU 0 (00000000:00:1E.0): PCIe link trained at x8 of x16"),
    ("v100_sxm2_nvlink_inactive", "gpu.nvlink", Status.FAIL, "gpu.nvlink:0", "GPU 0: NVLink links 3, 5 of 6 are inactive"),
    ("v100_sxm2_power_brake", "gpu.clocks", Status.FAIL, "gpu.hw_slowdown:0",
     "GPU 0: clocks held down by HW slowdown, HW power brake slowdown"),
    ("a100_mig_enabled", "gpu.modes", Status.FAIL, "gpu.mig_enabled", "MIG mode is enabled on GPU 0 (00000000:C1:00.0)"),
    ("gpud80_remap_pending", "gpu.memory_errors", Status.FAIL, "gpu.reset_pending:0",
     "GPU 0: a row remapping after uncorrectable errors is pending until the GPU is reset (4 rows remapped for uncorrectable"),
    ("a100_sxm4_remap_pending", "gpu.memory_errors", Status.WARN, "gpu.reset_pending:00000000:9E:00.0",
     "GPU 1 (00000000:9E:00.0): a row remapping is pending until the GPU is reset (0 rows remapped for uncorrectable, 1 for correctable"),
])
def test_a_faulty_recorded_gpu_is_red_with_its_cause_and_a_fix_that_pastes(doc, check, status, cause, words):
    r = judge(check, gather_nvml(doc))
    assert (r.status, r.cause, r.actor) == (status, cause, Actor.NODE)
    assert words in r.summary, r.summary
    fixes_paste(r)


def test_the_a10g_fix_names_its_real_bus_id_for_lspci_and_nvidia_smi():
    r = judge("gpu.pcie_link", gather_nvml("a10g_pcie_x8"))
    assert "lspci -vv -s 0000:00:1e.0 | grep -E 'LnkCap:|LnkSta:'" in r.remediation
    assert "nvidia-smi -q -i 00000000:00:1E.0 -d PCIE" in r.remediation


def test_without_a_driver_the_health_checks_skip_under_the_shared_no_driver_cause():
    no_nvml = {"available": False, "error": "NVML Shared Library Not Found", "gpus": []}
    for name in list(NODE_CHECKS) + ["gpu.nvlink"]:
        r = judge(name, no_nvml)
        assert r.status is Status.SKIP and r.cause == "gpu.no_driver", name


def test_the_health_checks_skip_under_the_cpu_profile():
    nvml = gather_nvml("h100_sxm_healthy")
    for check in NODE_CHECKS.values():
        assert check(nvml=nvml, profile=cpu_profile()).status is Status.SKIP


# -- memory rules ---------------------------------------------------------------------------------------

def test_rule_uncorrectable_since_boot_fails_each_gpu_with_its_reset():
    gpus = gather_nvml("h100_sxm_healthy", g3={"ecc_uncorrected_volatile": 2})["gpus"]
    (found,) = memory.rule_uncorrectable_since_boot(gpus)
    assert found.message == "GPU 3 (00000000:5D:00.0): 2 uncorrectable ECC errors since boot"
    assert "nvidia-smi -r -i 00000000:5D:00.0" in found.fix and found.cause == "gpu.reset_pending:00000000:5D:00.0"


def test_rule_uncorrectable_lifetime_warns_with_the_count():
    gpus = gather_nvml("h100_sxm_healthy", g6={"ecc_uncorrected_aggregate": 1})["gpus"]
    found = memory.rule_uncorrectable_lifetime(gpus)
    assert found.status is Status.WARN and "GPU 6 (00000000:BA:00.0) (1)" in found.message


def test_rule_ecc_enabled_warns_when_ecc_is_off():
    found = memory.rule_ecc_enabled(gather_nvml("h100_sxm_healthy", g0={"ecc_mode": [0, 0]})["gpus"])
    assert found.status is Status.WARN and found.fix.startswith("nvidia-smi -i 00000000:18:00.0 -e 1")


def test_rule_remap_failure_asks_for_replacement_not_a_reset():
    (found,) = memory.rule_remap_failure(gather_nvml("h100_sxm_healthy", g2={"remapped_rows": [0, 8, 0, 1]})["gpus"])
    assert "needs replacing" in found.message and found.cause == "gpu.replace:00000000:3A:00.0"
    assert "nvidia-bug-report.sh" in found.fix and "nvidia-smi -r" not in found.fix


def test_rule_remap_pending_fails_after_uncorrectable_errors_and_warns_after_correctable_ones():
    (hard,) = memory.rule_remap_pending(gather_nvml("gpud80_remap_pending")["gpus"])
    (soft,) = memory.rule_remap_pending(gather_nvml("a100_sxm4_remap_pending")["gpus"])
    assert (hard.status, soft.status) == (Status.FAIL, Status.WARN)


def test_rule_retired_pages_pending_and_counts_on_page_retirement_gpus():
    gpus = gather_nvml("h100_sxm_healthy", g1={"retired_pages_pending": 1, "retired_pages_dbe": [4096, 8192]})["gpus"]
    (pending,) = memory.rule_retired_pages_pending(gpus)
    counted = memory.rule_retired_pages(gpus)
    assert pending.status is Status.FAIL and "retired memory pages are pending" in pending.message
    assert counted.status is Status.WARN and "GPU 1 (00000000:2A:00.0) (2)" in counted.message


# -- PCIe rules: width always, generation with care --------------------------------------------------------

def test_rule_pcie_width_fails_below_the_maximum_at_any_load():
    gpus = gather_nvml("h100_sxm_healthy", g5={"pcie": {"gen_current": 5, "gen_max": 5, "width_current": 8, "width_max": 16}})["gpus"]
    (found,) = links.rule_pcie_width(gpus)
    assert found.message.startswith("GPU 5 (00000000:AB:00.0): PCIe link trained at x8 of x16")


def test_rule_pcie_generation_fails_a_busy_gpu_below_its_maximum():
    gpus = gather_nvml("h100_sxm_healthy", g4={"pcie": {"gen_current": 1, "gen_max": 5, "width_current": 16, "width_max": 16},
                                              "utilization": {"gpu": 37, "memory": 5}})["gpus"]
    (found,) = links.rule_pcie_generation(gpus)
    assert found.status is Status.FAIL and "PCIe Gen1 of Gen5 while busy (37% utilisation)" in found.message
    assert "pin_memory=True" in found.fix and paste_problems(found.fix) == []


def test_rule_pcie_generation_warns_an_idle_gpu_below_idle_peers_at_their_maximum():
    gpus = gather_nvml("h100_sxm_healthy", g4={"pcie": {"gen_current": 1, "gen_max": 5, "width_current": 16, "width_max": 16}})["gpus"]
    (found,) = links.rule_pcie_generation(gpus)
    assert found.status is Status.WARN and "while idle GPUs 0, 1, 2, 3, 5, 6, 7 of the same model run Gen5" in found.message


def test_idle_gpus_that_all_downshifted_are_not_judged_and_the_evidence_says_why():
    low = {"pcie": {"gen_current": 1, "gen_max": 4, "width_current": 16, "width_max": 16}}
    nvml = gather_nvml("a100_sxm4_remap_pending", g0=low, g1=low, g2=low, g3=low)
    r = pcie_link(nvml=nvml, profile=profile())
    assert r.status is Status.PASS and "idle GPUs downshifted their generation (normal)" in r.summary
    assert r.evidence["not_judged"].startswith("GPUs 0, 1, 2, 3 are idle below their maximum generation")


# -- NVLink rules ------------------------------------------------------------------------------------------

def test_rule_links_active_names_the_inactive_links_of_each_gpu():
    (found,) = links.rule_links_active(gather_nvml("v100_sxm2_nvlink_inactive")["gpus"])
    assert "links 3, 5 of 6 are inactive" in found.message and "nvidia-smi nvlink -s -i 0" in found.fix


def test_rule_links_active_puts_all_links_down_under_fabric_managers_cause():
    down = [{"active": 0} for _ in range(12)]
    gpus = gather_nvml("a100_sxm4_nvlink", **{f"g{i}": {"nvlink": down} for i in range(8)})["gpus"]
    fm = Cause("NVSwitch system and Fabric Manager is inactive (dead)", "systemctl enable --now nvidia-fabricmanager",
               "gpu.fm_stopped")
    (found,) = links.rule_links_active(gpus, fm)
    assert found.cause == "gpu.fm_stopped" and found.message.startswith("all 96 NVLink links of the 8 GPUs are down")


def test_gpu_nvlink_blames_a_stopped_fabric_manager_recorded_on_the_same_kind_of_node(tmp_path, monkeypatch):
    from gpu_lab import compile_libcuda, gather, stand_up

    down = [{"active": 0} for _ in range(12)]
    nvml = gather_nvml("a100_sxm4_nvlink", **{f"g{i}": {"nvlink": down} for i in range(8)})
    facts = gather(stand_up("a100_nvswitch_fm_stopped", tmp_path / "machine", compile_libcuda(tmp_path / "cc")), monkeypatch)
    r = nvlink(nvml=nvml, fabric_manager=facts["fabric_manager"], profile=profile())
    assert r.cause == "gpu.fm_stopped" and r.remediation.startswith("systemctl enable --now nvidia-fabricmanager")


def test_rule_link_errors_warns_with_the_counts():
    nv = [{"active": 1, "errors": {"replay": 0, "recovery": 0, "crc_flit": 0}} for _ in range(18)]
    nv[7] = {"active": 1, "errors": {"replay": 12, "recovery": 1, "crc_flit": 40}}
    (found,) = links.rule_link_errors(gather_nvml("h100_sxm_healthy", g2={"nvlink": nv})["gpus"])
    assert found.status is Status.WARN and found.message == "GPU 2 (00000000:3A:00.0): NVLink errors on links 7 (replay 12, recovery 1, crc flit 40)"


# -- clocks, modes, reset status ------------------------------------------------------------------------------

def test_rule_hardware_slowdown_names_the_power_brake_and_the_bmc():
    (found,) = clock_rules.rule_hardware_slowdown(gather_nvml("v100_sxm2_power_brake")["gpus"])
    assert "ipmitool sdr type 'Power Supply'" in found.fix and paste_problems(found.fix) == []


def test_rule_software_thermal_warns_with_the_temperature():
    gpus = gather_nvml("h100_sxm_healthy", g1={"clocks_event_reasons": clock_rules.SW_THERMAL, "temperature": 87})["gpus"]
    (found,) = clock_rules.rule_software_thermal(gpus)
    assert found.status is Status.WARN and "SW thermal slowdown at 87 C" in found.message


def test_the_power_cap_and_idle_reasons_are_normal_operation():
    gpus = gather_nvml("h100_sxm_healthy", g0={"clocks_event_reasons": clock_rules.SW_POWER_CAP | clock_rules.IDLE})["gpus"]
    assert clock_rules.rule_hardware_slowdown(gpus) == [] and clock_rules.rule_software_thermal(gpus) == []


def test_rule_mig_disabled_turns_mig_off_by_bus_id_and_resets():
    found = mode_rules.rule_mig_disabled(gather_nvml("a100_mig_enabled")["gpus"])
    assert found.fix.splitlines() == ["nvidia-smi -i 00000000:C1:00.0 -mig 0",
                                      "nvidia-smi -r -i 00000000:C1:00.0   # the mode changes at the reset (drain the node first)"]


def test_rule_mig_not_pending_warns_on_a_change_waiting_for_a_reset():
    found = mode_rules.rule_mig_not_pending(gather_nvml("h100_sxm_healthy", g7={"mig_mode": [0, 1]})["gpus"])
    assert found.status is Status.WARN and "GPU 7 (00000000:DB:00.0)" in found.message


@pytest.mark.parametrize("mode, rule, status", [(2, mode_rules.rule_compute_mode_not_prohibited, Status.FAIL),
                                                (3, mode_rules.rule_compute_mode_shared, Status.WARN)])
def test_compute_modes_other_than_default(mode, rule, status):
    found = rule(gather_nvml("h100_sxm_healthy", g0={"compute_mode": mode})["gpus"])
    assert found.status is status and found.fix == "nvidia-smi -i 00000000:18:00.0 -c DEFAULT"


@pytest.mark.parametrize("fields, words, cause", [
    ({"226": 1, "227": 0, "230": 0}, "the driver asks for GPU Reset Required", "gpu.reset_pending:00000000:9A:00.0"),
    ({"226": 0, "227": 1}, "the driver asks for Drain and Reset", "gpu.reset_pending:00000000:9A:00.0"),
    ({"226": 0, "227": 0, "230": 2}, "the driver asks for Node Reboot Required", "gpu.reboot_required"),
])
def test_rule_no_reset_pending_follows_the_drivers_recovery_action(fields, words, cause):
    (found,) = recovery.rule_no_reset_pending(gather_nvml("h100_sxm_healthy", g4={"field_values": fields})["gpus"])
    assert words in found.message and found.cause == cause and paste_problems(found.fix) == []


def test_a_driver_without_reset_fields_skips_reset_pending_and_says_which_check_still_covers_it():
    r = reset_pending(nvml=gather_nvml("h100_sxm_healthy", **{f"g{i}": {"field_values": {}} for i in range(8)}),
                      profile=profile())
    assert r.status is Status.SKIP and "gpu.memory_errors still reports pending row remapping" in r.summary


# -- Xid events -----------------------------------------------------------------------------------------------

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


def test_a_committed_gpu_scenario_is_what_the_cli_records_from_its_machine_today(tmp_path):
    """tests/data/scenarios/gpu_*.facts.json are recorded by `run --facts-out` (tests/gpu_lab.py record): a fresh
    recording of one must give the same NVML facts, so the scenarios cannot drift from the probes silently."""
    from conftest import REPO
    from gpu_lab import record_scenario

    committed = json.loads((REPO / "tests/data/scenarios/gpu_a10g_pcie_x8.facts.json").read_text())
    fresh = record_scenario("gpu_a10g_pcie_x8", tmp_path / "fresh.facts.json", tmp_path / "work")
    assert fresh["facts"]["nvml"] == committed["facts"]["nvml"]
    assert fresh["provenance"] == committed["provenance"]


def test_a_pcie_card_without_an_nvlink_bridge_is_not_an_nvlink_fault():
    """NVML lists an unbridged PCIe card's links as down (NVIDIA/NVSentinel#1481: A100 80GB PCIe, all 12 links down)."""
    down = {"name": "NVIDIA A100 80GB PCIe", "nvlink": [{"active": 0} for _ in range(12)]}
    nvml = gather_nvml("a100_sxm4_nvlink", g0=down, g1=down)
    r = nvlink(nvml=gather_nvml("a100_sxm4_nvlink", **{f"g{i}": down for i in range(8)}), fabric_manager={}, profile=profile())
    assert r.status is Status.PASS and r.summary == "no NVLink bridge on these 8 PCIe GPUs: PCIe only"
    assert links.rule_links_active(nvml["gpus"]) == []
    half = dict(down, nvlink=[{"active": 1}] * 4 + [{"active": 0}] + [{"active": 1}] * 7)  # a bridged card with a link down
    (found,) = links.rule_links_active(gather_nvml("a100_sxm4_nvlink", g3=half)["gpus"])
    assert found.message.startswith("GPU 3: NVLink links 4 of 12 are inactive")
