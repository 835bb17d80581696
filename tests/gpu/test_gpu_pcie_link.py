"""gpu.pcie_link (checks/gpu_pcie_link.py): its rules (dsv3_preflight/gpu/links.py) on recorded NVML health
documents: the width always, the generation with care."""
from __future__ import annotations

from gpu_lab import gather_nvml, profile
from paste_lint import paste_problems

from dsv3_preflight.checks.gpu_pcie_link import pcie_link
from dsv3_preflight.gpu import links
from dsv3_preflight.result import Status


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
