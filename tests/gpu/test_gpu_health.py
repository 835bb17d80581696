"""GPU health in depth (issue 20) across the health checks: the recorded documents and the NVML probe, every health
check green on a healthy recorded node and red with its cause on a faulty one, and the committed scenario. Each
check's own rule tables are in its file: tests/gpu/test_gpu_<check>.py (memory_errors, pcie_link, nvlink, clocks,
modes, reset_pending, xid).

Facts come from real machines only: recorded `nvidia-smi -q` (and `nvlink -s`) outputs converted to NVML replay
documents (tests/data/gpu/health/*.json, each with its provenance) read by the real NVML probe, and recorded
kernel logs (tests/data/gpu/kmsg/*.log) read by the real kernel-log probe. Variants change one value of a
recorded document and gather it through the probe again.
"""
from __future__ import annotations

import json

import pytest
from gpu_health_lab import NODE_CHECKS, fixes_paste, judge
from gpu_lab import HEALTH, KMSG, cpu_profile, gather_nvml, profile

from dsv3_preflight.checks.gpu_modes import modes
from dsv3_preflight.gpu import clocks as clock_rules
from dsv3_preflight.result import Actor, Status

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


# -- green on healthy recorded machines, red with the right cause on faulty ones ------------------------

@pytest.mark.parametrize("check", sorted(NODE_CHECKS) + ["gpu.nvlink"])
def test_the_healthy_h100_node_is_green_on_every_health_check(check):
    r = judge(check, gather_nvml("h100_sxm_healthy"))
    assert r.status is Status.PASS, r.summary


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


# -- the committed scenario ------------------------------------------------------------------------------------

def test_a_committed_gpu_scenario_is_what_the_cli_records_from_its_machine_today(tmp_path):
    """tests/data/scenarios/gpu_*.facts.json are recorded by `run --facts-out` (tests/gpu_lab.py record): a fresh
    recording of one must give the same NVML facts, so the scenarios cannot drift from the probes silently."""
    from conftest import REPO
    from gpu_lab import record_scenario

    committed = json.loads((REPO / "tests/data/scenarios/gpu_a10g_pcie_x8.facts.json").read_text())
    fresh = record_scenario("gpu_a10g_pcie_x8", tmp_path / "fresh.facts.json", tmp_path / "work")
    assert fresh["facts"]["nvml"] == committed["facts"]["nvml"]
    assert fresh["provenance"] == committed["provenance"]
