"""gpu.versions: the node × version table across nodes, the odd one out marked; and the versions probe."""
from __future__ import annotations

import copy
import json

from gpu_lab import DATA, cpu_profile, profile

from dsv3_preflight.checks.gpu_versions import versions as versions_check
from dsv3_preflight.gpu.probes.fabric import torch_cuda_version
from dsv3_preflight.gpu.probes.fabric import versions as versions_probe
from dsv3_preflight.result import Status


def three_nodes():
    return json.loads((DATA / "versions_three_nodes_mixed_driver.json").read_text())["nodes"]


def test_mixed_driver_across_three_nodes_fails_and_marks_the_odd_node():
    r = versions_check(versions=three_nodes(), profile=profile())
    assert r.status is Status.FAIL
    assert r.summary.startswith("NVIDIA driver differs: gpu-node-2 has 535.104.05, the others 535.129.03")
    assert r.evidence["odd_ones_out"] == {"driver": ["gpu-node-2"], "kernel_module": ["gpu-node-2"], "fabric_manager": ["gpu-node-2"]}
    rows = r.evidence["table"].splitlines()
    assert rows[0].split()[:4] == ["node", "driver", "kernel_module", "fabric_manager"]
    assert "535.104.05*" in rows[3] and "*" not in rows[1] and "*" not in rows[2]
    assert "install NVIDIA driver 535.129.03 (and Fabric Manager 535.129.03) on gpu-node-2" in r.remediation


def test_a_python_package_drift_gives_the_pip_pin():
    nodes = three_nodes()
    nodes["gpu-node-2"] = dict(nodes["gpu-node-0"], transformers="4.53.0")
    r = versions_check(versions=nodes, profile=profile())
    assert r.status is Status.FAIL and "transformers differs: gpu-node-2 has 4.53.0" in r.summary
    assert r.remediation == "pip install transformers==4.52.4   # on gpu-node-2"


def test_a_package_missing_on_one_node_is_a_difference():
    nodes = three_nodes()
    nodes["gpu-node-2"] = dict(nodes["gpu-node-0"], deepspeed=None)
    r = versions_check(versions=nodes, profile=profile())
    assert r.status is Status.FAIL and "deepspeed differs: gpu-node-2 has none, the others 0.15.1" in r.summary


def test_identical_nodes_pass():
    nodes = three_nodes()
    nodes["gpu-node-2"] = copy.deepcopy(nodes["gpu-node-0"])
    r = versions_check(versions=nodes, profile=profile())
    assert r.status is Status.PASS and r.summary.startswith("3 nodes agree: driver 535.129.03, torch 2.4.0+cu121, NCCL 2.20.5")


def test_versions_probe_reads_package_metadata_without_importing_them():
    import sys

    had_torch = "torch" in sys.modules
    facts = versions_probe.gather(nvml={"driver_version": None, "cuda_driver_version_str": None},
                                  fabric_manager={"version": None, "kernel_module_version": None})
    assert facts["torch"] and facts["transformers"] and facts["peft"]
    assert facts["cuda_runtime"] == torch_cuda_version()
    assert ("torch" in sys.modules) == had_torch


def test_single_node_cpu_run_passes_with_nothing_to_compare():
    facts = versions_probe.gather(nvml={}, fabric_manager={})
    r = versions_check(versions={"vm": facts}, profile=cpu_profile())
    assert r.status is Status.PASS and r.summary.startswith("one node (vm): nothing to compare")


def test_cluster_checks_run_through_the_engine_on_three_recorded_nodes():
    from dsv3_preflight.engine import run_cluster_checks
    from dsv3_preflight.registry import load_registry

    registry = load_registry(entry_points=False)
    checks, _ = registry.select(only=["gpu.versions", "gpu.rank_mapping_cluster"])
    nodes = three_nodes()
    gpu_list = [{"index": i, "name": "NVIDIA A100-SXM4-80GB", "uuid": f"GPU-{i}", "pci_bus_id": f"00000000:{b}:00.0"}
                for i, b in enumerate(["07", "0F", "47", "4E", "87", "90", "B7", "BD"])]
    node_facts = {n: {"facts": {"versions": nodes[n], "nvml": {"available": True, "gpus": gpu_list},
                                "env": {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
                                "host": {"hostname": n, "machine_id": f"m-{n}", "boot_id": f"b-{n}"}}}
                  for n in nodes}
    results = {r.name: r for r in run_cluster_checks(checks, profile(), node_facts, {n: i for i, n in enumerate(nodes)})}
    assert results["gpu.versions"].status is Status.FAIL and "gpu-node-2 has 535.104.05" in results["gpu.versions"].summary
    assert results["gpu.rank_mapping_cluster"].status is Status.PASS
    assert results["gpu.rank_mapping_cluster"].summary == "24 ranks on 3 nodes, each on its own GPU"


def test_a_torch_build_drift_pins_the_cuda_build_from_pytorchs_index():
    """torch==2.4.0+cu121 is not on PyPI: `pip install torch==2.4.0+cu121` alone finds no distribution."""
    nodes = three_nodes()
    nodes["gpu-node-2"] = dict(nodes["gpu-node-0"], torch="2.5.1+cu124")
    r = versions_check(versions=nodes, profile=profile())
    assert r.status is Status.FAIL and "torch differs: gpu-node-2 has 2.5.1+cu124" in r.summary
    assert ("pip install torch==2.4.0+cu121 --index-url https://download.pytorch.org/whl/cu121   # on gpu-node-2"
            in r.remediation.splitlines())
