"""On a real GPU machine: the probes agree with `nvidia-smi -q -x`, and CUDA initialises. Skipped without a GPU."""
from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

pytestmark = pytest.mark.gpu


def _nvidia_smi_xml() -> ET.Element:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        pytest.skip("no NVIDIA GPU here: nvidia-smi is not installed")
    proc = subprocess.run([exe, "-q", "-x"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        pytest.skip(f"no usable NVIDIA GPU here: nvidia-smi -q -x exited {proc.returncode}: {proc.stdout.strip()[:200]}")
    return ET.fromstring(proc.stdout)


@pytest.fixture(scope="module")
def smi():
    return _nvidia_smi_xml()


@pytest.fixture(scope="module")
def nvml_fact():
    from dsv3_preflight.gpu.probes.nvml import nvml

    return nvml.gather()


def test_nvml_probe_matches_nvidia_smi(smi, nvml_fact):
    assert nvml_fact["available"], nvml_fact["error"]
    assert nvml_fact["driver_version"] == smi.findtext("driver_version")
    smi_gpus = smi.findall("gpu")
    assert len(nvml_fact["gpus"]) == len(smi_gpus)
    for fact, node in zip(nvml_fact["gpus"], smi_gpus):
        assert fact["pci_bus_id"].lower() == node.get("id").lower()
        assert fact["uuid"] == node.findtext("uuid")
        assert fact["name"] == node.findtext("product_name")
        assert fact["persistence_mode"] == (node.findtext("persistence_mode") == "Enabled")
        total_mib = int(node.findtext("fb_memory_usage/total").split()[0])
        assert abs(fact["memory_total_bytes"] // (1 << 20) - total_mib) <= 1
        fabric_state = node.findtext("fabric/state")
        if fabric_state and fabric_state != "N/A":
            assert fact["fabric"]["state_name"] == fabric_state


def test_cuda_driver_initialises_and_counts_the_same_gpus(nvml_fact, smi):
    from dsv3_preflight.gpu.probes.nvml import driver_api_init

    out = driver_api_init()
    assert out["ok"], out
    assert out["device_count"] == len(nvml_fact["gpus"])


def test_the_checks_pass_or_explain_on_this_gpu_machine(smi, nvml_fact):
    from dsv3_preflight.checks.gpu_fabric_manager import fabric_manager as fm_check
    from dsv3_preflight.gpu.probes.fabric import fabric_manager
    from dsv3_preflight.profile import resolve_profile

    prof = resolve_profile(environ={}).with_values("test", gpus_per_node=len(nvml_fact["gpus"]))
    r = fm_check(fabric_manager=fabric_manager.gather(), nvml=nvml_fact, profile=prof)
    assert r.summary  # recorded in the note: PASS on a healthy box, a precise FAIL otherwise
    print(r.status.value, r.summary)


def test_nvml_health_readings_match_nvidia_smi(smi, nvml_fact):
    """The health fields the probe adds agree with nvidia-smi's XML: PCIe maxima and width, compute and MIG mode."""
    from dsv3_preflight.gpu.modes import COMPUTE_MODES

    for fact, node in zip(nvml_fact["gpus"], smi.findall("gpu")):
        link = node.find("pci/pci_gpu_link_info")
        if link is not None and fact["pcie"]:
            assert fact["pcie"]["width_max"] == int(link.findtext("link_widths/max_link_width").rstrip("x"))
            assert fact["pcie"]["width_current"] == int(link.findtext("link_widths/current_link_width").rstrip("x"))
            assert fact["pcie"]["gen_max"] == int(link.findtext("pcie_gen/max_link_gen"))
        assert COMPUTE_MODES.get(fact["compute_mode"]) == node.findtext("compute_mode")
        current_mig = node.findtext("mig_mode/current_mig")
        if current_mig not in (None, "N/A"):
            assert fact["mig"]["current"] == (current_mig == "Enabled")


def test_the_health_checks_judge_this_gpu_machine(smi, nvml_fact):
    from dsv3_preflight.checks.gpu_clocks import clocks
    from dsv3_preflight.checks.gpu_memory_errors import memory_errors
    from dsv3_preflight.checks.gpu_modes import modes
    from dsv3_preflight.checks.gpu_pcie_link import pcie_link
    from dsv3_preflight.checks.gpu_reset_pending import reset_pending
    from dsv3_preflight.profile import resolve_profile

    prof = resolve_profile(environ={}).with_values("test", gpus_per_node=len(nvml_fact["gpus"]))
    for check in (memory_errors, pcie_link, clocks, modes, reset_pending):
        r = check(nvml=nvml_fact, profile=prof)
        assert r.summary
        print(check.name, r.status.value, r.summary)  # recorded in the note: what a real GPU node says
