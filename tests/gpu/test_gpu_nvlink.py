"""gpu.nvlink (checks/gpu_nvlink.py): its rules (dsv3_preflight/gpu/links.py) and the check on recorded NVML
health documents and recorded fabric-manager machines."""
from __future__ import annotations

from gpu_health_lab import judge
from gpu_lab import gather_nvml, health_doc, profile

from dsv3_preflight.checks.gpu_nvlink import nvlink
from dsv3_preflight.gpu import links
from dsv3_preflight.gpu.fabric_rules import Cause
from dsv3_preflight.result import Status


def test_a_gpu_without_nvlink_says_not_supported_and_passes_as_pcie_only():
    doc = health_doc("a10g_pcie_x8")["nvml"]
    doc["devices"][0]["nvlink"] = {"nvml_error": 3}
    from dsv3_preflight.gpu.probes.nvml import nvml_facts
    from dsv3_preflight.gpu.probes.replay import NvmlReplay

    facts = nvml_facts(NvmlReplay(doc))
    assert facts["gpus"][0]["nvlink"] == {"supported": False, "links": []}
    r = nvlink(nvml=facts, fabric_manager={}, profile=profile())
    assert r.status is Status.PASS and r.summary.startswith("no NVLink on these 1 GPUs")


def test_the_recorded_a100_nvswitch_links_are_all_up():
    r = judge("gpu.nvlink", gather_nvml("a100_sxm4_nvlink"))
    assert r.status is Status.PASS and r.summary == "96 NVLink links active on 8 GPUs, no data-link errors"


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
