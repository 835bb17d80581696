"""Shared by the rank-mapping tests (test_gpu_rank_mapping.py, test_gpu_rank_mapping_cluster.py): GPU lists
and NVML facts in the shape the NVML probe records, a host fact, and the driverless node's fact."""
from __future__ import annotations

A100_BUS = ["07", "0F", "47", "4E", "87", "90", "B7", "BD"]


def gpus(buses=A100_BUS, name="NVIDIA A100-SXM4-80GB"):
    return [{"index": i, "name": name, "uuid": f"GPU-{i:08x}-aaaa-bbbb-cccc-{i:012x}", "pci_bus_id": f"00000000:{b}:00.0",
             "memory_total_bytes": 85899345920} for i, b in enumerate(buses)]


def nvml(gpu_list=None):
    return {"available": True, "driver_version": "535.129.03", "gpus": gpus() if gpu_list is None else gpu_list}


def host(name="gpu-a"):
    return {"hostname": name, "machine_id": f"m-{name}", "boot_id": f"b-{name}"}


NO_NVML = {"available": False, "error": "NVML Shared Library Not Found", "gpus": []}
