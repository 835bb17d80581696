"""Evidence beyond single lines: NCCL_DEBUG=INFO facts per node (interface, network, versions → drift) and NCCL RAS
reports in text and JSON naming dead, unresponsive and outlier ranks. Line formats are NCCL's own (src/init.cc,
src/bootstrap.cc, src/misc/cudawrap.cc, src/ras/client_support.cc); the RAS mismatch report is a real one."""
import json
from pathlib import Path

from dsv3_preflight.doctor import triage

CORPUS = Path(__file__).resolve().parent / "data" / "doctor" / "corpus"


def _node_log(path: Path, host: str, version: str, driver: int, net: str, plugin: str | None) -> None:
    lines = [f"{host}:4101:4101 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.{len(host)}<0>",
             f"{host}:4101:4101 [0] NCCL INFO cudaDriverVersion {driver}",
             f"{host}:4101:4101 [0] NCCL INFO NCCL version {version}+cuda12.4",
             (f"{host}:4101:4190 [0] NCCL INFO NET/Plugin: Loaded net plugin {plugin} (v8)" if plugin else
              f"{host}:4101:4190 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin."),
             f"{host}:4101:4190 [0] NCCL INFO Using network {net}"]
    path.write_text("\n".join(lines) + "\n")


def test_nccl_info_facts_are_collected_per_node(tmp_path):
    _node_log(tmp_path / "n1.log", "gpu-a", "2.21.5", 12040, "IB", "NCCL RDMA Plugin")
    _node_log(tmp_path / "n2.log", "gpu-b", "2.21.5", 12040, "IB", "NCCL RDMA Plugin")
    doc = triage([str(tmp_path)])
    assert doc["nccl"]["nodes"]["gpu-a"] == {"bootstrap_iface": ["eth0"], "cuda_driver": ["12040"], "nccl_version": ["2.21.5"],
                                             "net_plugin": ["NCCL"], "network": ["IB"]}
    assert doc["verdict"] == "unknown" and doc["findings"] == []   # no drift, no error, no progress: exit 5


def test_different_nccl_versions_across_nodes_are_version_drift(tmp_path):
    _node_log(tmp_path / "n1.log", "gpu-a", "2.21.5", 12040, "IB", "NCCL RDMA Plugin")
    _node_log(tmp_path / "n2.log", "gpu-b", "2.18.1", 12040, "IB", "NCCL RDMA Plugin")
    doc = triage([str(tmp_path)])
    top = doc["findings"][0]
    assert (doc["cause_class"], top["id"], top["check"]) == ("version_drift", "nccl.version_drift", "gpu.versions")
    assert top["detail"]["values"] == {"2.18.1": ["gpu-b"], "2.21.5": ["gpu-a"]}
    assert "2.18.1 on gpu-b" in top["title"] and "2.21.5 on gpu-a" in top["title"]


def test_driver_plugin_and_network_drift(tmp_path):
    _node_log(tmp_path / "n1.log", "gpu-a", "2.21.5", 12040, "IB", "NCCL RDMA Plugin")
    _node_log(tmp_path / "n2.log", "gpu-b", "2.21.5", 12020, "Socket", None)
    ids = {f["id"] for f in triage([str(tmp_path)])["findings"]}
    assert {"cuda.driver_drift", "nccl.plugin_drift", "nccl.network_drift"} <= ids


def test_plugin_present_on_part_of_the_nodes_real_log():
    # https://github.com/NVIDIA/nccl/issues/1634 (dev corpus): one node loads libnccl-net.so, the other does not
    doc = triage([str(CORPUS / "version_drift" / "version_drift_019.log")])
    assert doc["findings"][0]["id"] == "nccl.plugin_drift"
    assert doc["findings"][0]["detail"]["values"] == {"libnccl-net.so": ["HGX-H100-04"], "none (internal)": ["HGX-H100-11"]}


def test_ras_text_mismatch_names_the_outlier_ranks_real_report():
    # https://github.com/NVIDIA/nccl/issues/1911 (dev corpus): two ranks a collective ahead
    doc = triage([str(CORPUS / "nccl_hang" / "nccl_hang_016.log")])
    top = doc["findings"][0]
    assert (top["id"], top["class"], top["ranks"], top["node"]) == ("ras.mismatch", "nccl_hang", [12, 13], "10.137.190.124")
    assert any("have launched up to operation 641" in d for d in top["detail"]["detail"])
    assert doc["ras"]["mismatch"][0]["rank"] == 12


RAS_DEAD = """NCCL version 2.26.2 compiled with CUDA 12.6
CUDA runtime version 12060, driver version 12060

Errors
======

DEAD
  1 job process is considered dead (unreachable via the RAS network)
  Process 4242 on node gpu-node-3 managing GPU 5

#0-0 (fa93daea854b060b) INCOMPLETE
  Missing communicator data from 1 rank
  Rank 29 -- GPU 5 managed by process 4242 on node gpu-node-3

"""


def test_ras_text_dead_process_is_the_first_failure_under_the_watchdog_timeouts(tmp_path):
    (tmp_path / "ras.txt").write_text(RAS_DEAD)
    (tmp_path / "rank0.log").write_text(
        "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600061 "
        "milliseconds before timing out.\n")
    doc = triage([str(tmp_path)])
    assert doc["cause_class"] == "nccl_hang"
    assert doc["findings"][0]["id"] == "ras.dead" and doc["findings"][0]["node"] == "gpu-node-3"
    assert doc["first_failure"]["node"] == "gpu-node-3"
    assert {f["id"]: f["role"] for f in doc["findings"]}["nccl.watchdog_timeout"] == "consequence"
    assert doc["ras"]["missing"][0] == {"rank": 29, "node": "gpu-node-3", "pid": 4242, "gpu": "5"}


def test_ras_json_missing_ranks_and_errors(tmp_path):
    # the JSON writer's fields (NCCL src/ras/client_support.cc: jsonWriteMissingRank, jsonWriteRankData)
    rank = {"rank": 0, "host": "gpu-node-0", "pid": 11, "cuda_dev": 0, "nvml_dev": 0,
            "status": {"init_state": 0, "async_error": 0, "finalize_called": False, "destroy_flag": False, "abort_flag": False},
            "collective_counts": {"Broadcast": 0, "Reduce": 0, "AllGather": 12, "ReduceScatter": 0, "AllReduce": 640}}
    doc = {"nccl_version": "2.27.3", "cuda_runtime_version": 12080, "cuda_driver_version": 12080,
           "timestamp": "2025-06-01 10:00:00", "communicators_count": 1,
           "communicators": [{"hash": "0xfa93", "secondary_hash": "0x1:0x2", "size": 2, "ranks_count": 1,
                              "missing_ranks_count": 1, "ranks": [rank],
                              "missing_ranks": [{"rank": 1, "host": "gpu-node-1", "pid": 12, "cuda_dev": 1, "nvml_dev": 1,
                                                 "status": {"unresponsive": True, "considered_dead": True}}]}]}
    (tmp_path / "ras.json").write_text(json.dumps(doc, indent=2))
    out = triage([str(tmp_path / "ras.json")])
    assert out["findings"][0]["id"] == "ras.dead" and (out["first_failure"]["node"], out["first_failure"]["rank"]) == ("gpu-node-1", 1)


def test_a_json_lines_log_is_still_read_line_by_line(tmp_path):
    # torchelastic events are one JSON object per line (dev corpus healthy_026): not a RAS document
    doc = triage([str(CORPUS / "healthy" / "healthy_026.log")])
    assert doc["verdict"] == "healthy" and doc["ras"] is None
