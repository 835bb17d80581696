"""Evidence beyond single lines: NCCL_DEBUG=INFO facts per node (interface, network, versions → drift) and NCCL RAS
reports in text and JSON naming dead, unresponsive and outlier ranks. Line formats are NCCL's own (src/init.cc,
src/bootstrap.cc, src/misc/cudawrap.cc, src/ras/client_support.cc); the RAS mismatch report is a real one."""
import json
from pathlib import Path

from dsv3_preflight.doctor import triage

CORPUS = Path(__file__).resolve().parents[1] / "data" / "doctor" / "corpus"


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


# ------------------------------------------------------------------ a log that stops after a suspect (a hang)
# NCCL's init lines (src/bootstrap.cc, src/transport/net_socket.cc, src/init.cc "Init START"/"Init COMPLETE");
# the 172.17.0.2 line is NVIDIA/nccl#367's.
def _init_lines(host: str, dev: int, iface: str, addr: str, nranks: int, rank: int, complete: bool = False) -> list[str]:
    p = f"{host}:{4100 + dev}:{4100 + dev} [{dev}] NCCL INFO"
    lines = [f"{p} Bootstrap : Using {iface}:{addr}<0>", f"{p} NET/Plugin : No plugin found (libnccl-net.so).",
             f"{p} NET/Socket : Using [0]{iface}:{addr}<0>", f"{p} Using network Socket",
             f"{p} comm 0x55d1c4a0 rank {rank} nranks {nranks} cudaDev {dev} nvmlDev {dev} busId {dev + 1}000 "
             f"commId 0x8a1f2b3c4d5e6f70 - Init START"]
    if complete:
        lines.append(f"{p} comm 0x55d1c4a0 rank {rank} nranks {nranks} cudaDev {dev} busId {dev + 1}000 - Init COMPLETE")
    return lines


def test_a_log_that_stops_after_nccl_chose_loopback_on_two_nodes_names_it_as_the_suspected_cause(tmp_path):
    (tmp_path / "node0.log").write_text("\n".join(_init_lines("gpu-a", 0, "lo", "127.0.0.1", 2, 0)) + "\n")
    (tmp_path / "node1.log").write_text("\n".join(_init_lines("gpu-b", 0, "lo", "127.0.0.1", 2, 1)) + "\n")
    doc = triage([str(tmp_path)])
    assert (doc["verdict"], doc["exit_code"], doc["cause_class"], doc["stalled"]) == ("failure", 1, "nic_iface", True)
    assert doc["findings"][0]["id"] == "nccl.bad_interface_selected" and doc["findings"][0]["check"] == "net.nic_route"
    assert doc["summary"].startswith("suspected cause: NCCL selected interface lo (127.0.0.1): the log stops there")


def test_loopback_on_a_job_that_nccl_shows_on_one_node_is_no_cause(tmp_path):
    # one host, two devices, two ranks: loopback is right on one node; the log just has no progress (exit 5)
    lines = _init_lines("gpu-a", 0, "lo", "127.0.0.1", 2, 0) + _init_lines("gpu-a", 1, "lo", "127.0.0.1", 2, 1)
    (tmp_path / "one.log").write_text("\n".join(lines) + "\n")
    doc = triage([str(tmp_path / "one.log")])
    assert (doc["verdict"], doc["exit_code"], doc["cause_class"], doc["stalled"]) == ("unknown", 5, "no_progress", False)
    assert doc["findings"] == [] and doc["warnings"] == []


def test_loopback_on_one_host_of_a_bigger_world_is_still_the_suspect(tmp_path):
    # one host's log, but 16 ranks and this host shows 2 devices: the other ranks are elsewhere
    lines = _init_lines("gpu-a", 0, "lo", "127.0.0.1", 16, 0) + _init_lines("gpu-a", 1, "lo", "127.0.0.1", 16, 1)
    (tmp_path / "one.log").write_text("\n".join(lines) + "\n")
    doc = triage([str(tmp_path / "one.log")])
    assert (doc["exit_code"], doc["cause_class"], doc["stalled"]) == (1, "nic_iface", True)


def test_docker_default_bridge_address_is_the_suspect_when_the_log_stops(tmp_path):
    lines = ["c6ad99331184:117277:117277 [0] NCCL INFO Bootstrap : Using [0]eth0:172.17.0.2<0>",
             "c6ad99331184:117277:117277 [0] NCCL INFO NET/Socket : Using [0]eth0:172.17.0.2<0>",
             "NCCL version 2.4.8+cuda10.0"]
    (tmp_path / "c.log").write_text("\n".join(lines) + "\n")
    doc = triage([str(tmp_path / "c.log")])
    assert (doc["exit_code"], doc["cause_class"], doc["findings"][0]["id"]) == (1, "nic_iface", "nccl.container_bridge_address")
    assert "--network=host" in doc["findings"][0]["fix"]


def test_the_same_lines_with_init_complete_are_healthy_with_a_warning(tmp_path):
    (tmp_path / "node0.log").write_text("\n".join(_init_lines("gpu-a", 0, "lo", "127.0.0.1", 2, 0, complete=True)) + "\n")
    (tmp_path / "node1.log").write_text("\n".join(_init_lines("gpu-b", 0, "lo", "127.0.0.1", 2, 1, complete=True)) + "\n")
    doc = triage([str(tmp_path)])
    assert (doc["verdict"], doc["exit_code"], doc["stalled"]) == ("healthy", 0, False)
    assert [w["id"] for w in doc["warnings"]] == ["nccl.bad_interface_selected"]


def test_a_rendezvous_server_left_waiting_is_a_stall_and_an_ipv6_lookup_warning_is_not(tmp_path):
    waiting = ("[W416 15:37:25.363094293 socket.cpp:933] [c10d] The server socket on [::ffff:10.0.0.1]:40613 has timed "
               "out, will retry.")
    ipv6 = ("[W socket.cpp:601] [c10d] The IPv6 network addresses of (localhost, 51595) cannot be retrieved (gai error: "
            "-2 - Name or service not known).")
    (tmp_path / "w.log").write_text(ipv6 + "\n" + waiting + "\n")
    (tmp_path / "v6.log").write_text(ipv6 + "\n")
    doc = triage([str(tmp_path / "w.log")])
    assert (doc["exit_code"], doc["cause_class"], doc["findings"][0]["id"]) == (1, "port_rendezvous", "c10d.server_waiting")
    assert "c10d.ipv6_lookup" not in [f["id"] for f in doc["findings"]]   # not a stall suspect: left out, not a cause
    doc = triage([str(tmp_path / "v6.log")])
    assert (doc["verdict"], doc["exit_code"], doc["stalled"]) == ("unknown", 5, False)


def test_a_bridge_listed_after_a_routable_first_interface_is_a_warning_in_a_log_that_stops(tmp_path):
    # fairseq#2329 (round 4, development part): a two-node run that trained fine printed this; so a log that stops
    # after it is not blamed on docker0 (exit 5), but a failed run names it (a suspect becomes a cause)
    lines = ["gpu-b:5359:5359 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.2<0> [1]docker0:172.17.0.1<0>",
             "gpu-b:5359:5359 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0> [1]docker0:172.17.0.1<0>",
             "gpu-b:5359:5359 [0] NCCL INFO comm 0x55d1c4a0 rank 1 nranks 2 cudaDev 0 busId 1000 - Init START"]
    log = tmp_path / "n.log"
    log.write_text("\n".join(lines) + "\n")
    doc = triage([str(log)])
    assert (doc["exit_code"], doc["stalled"]) == (5, False)
    assert [w["id"] for w in doc["warnings"]] == ["nccl.bad_interface_listed"]
    log.write_text("\n".join(lines + ["gpu-b:5359:5401 [0] misc/socket.cc:538 NCCL WARN Net : Connection closed by "
                                      "remote peer 10.0.0.1<50322>", "RuntimeError: something nobody knows"]) + "\n")
    doc = triage([str(log)])
    assert (doc["exit_code"], doc["cause_class"], doc["findings"][0]["id"]) == (1, "nic_iface", "nccl.bad_interface_listed")


def test_a_socket_failure_toward_a_container_bridge_address_is_the_cause_between_nodes_only(tmp_path):
    # xgboost#7982 (round 4, development part): NCCL on two EC2 nodes failed reading from 172.18.0.1, a docker
    # user-defined bridge's gateway; the first error NCCL printed was a proxy line nobody knows
    failing = ["gpu-b:28056:39685 [0] proxy.cc:1040 NCCL WARN [Proxy Service 3] Failed to execute operation Connect "
               "from rank 3, retcode 2",
               "gpu-b:28056:39685 [0] misc/socket.cc:503 NCCL WARN Net : Call to recv from {peer}<34483> failed : Broken pipe"]
    log = tmp_path / "n.log"
    for peer in ("172.18.0.1", "172.17.0.3", "172.30.0.1"):
        log.write_text("\n".join(failing).format(peer=peer) + "\n")
        doc = triage([str(log)])
        assert (doc["exit_code"], doc["cause_class"], doc["findings"][0]["id"]) == (1, "nic_iface", "nccl.bridge_peer"), peer
        assert f"A connection to {peer} failed" in doc["findings"][0]["title"] and "--network=host" in doc["findings"][0]["fix"]
    # AWS's default VPC is 172.31.0.0/16 and a corporate 172.18.5.0/24 is not a bridge gateway: only a closed connection
    for peer in ("172.31.0.137", "172.18.5.20", "10.0.0.2"):
        log.write_text("\n".join(failing).format(peer=peer) + "\n")
        doc = triage([str(log)])
        assert (doc["exit_code"], doc["cause_class"]) == (1, "unrecognised"), peer
        assert "nccl.bridge_peer" not in [f["id"] for f in doc["findings"]]
    # NCCL's own lines show one host with both ranks' GPUs: containers on one host do talk over a bridge
    one_node = _init_lines("gpu-a", 0, "eth0", "172.17.0.2", 2, 0) + _init_lines("gpu-a", 1, "eth0", "172.17.0.2", 2, 1)
    log.write_text("\n".join(one_node + failing).format(peer="172.17.0.3") + "\n")
    doc = triage([str(log)])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "unrecognised")
    assert "nccl.bridge_peer" not in [f["id"] for f in doc["findings"]]


def test_one_gpu_per_process_on_one_host_is_still_a_one_node_job(tmp_path):
    # each process sees its GPU as device 0 (CUDA_VISIBLE_DEVICES per rank): the Init lines' bus ids tell them apart
    lines = []
    for rank, bus in enumerate(("1b000", "1c000")):
        p = f"gpu-a:{4100 + rank}:{4100 + rank} [0] NCCL INFO"
        lines += [f"{p} Bootstrap : Using lo:127.0.0.1<0>",
                  f"{p} comm 0x55d1c4a0 rank {rank} nranks 2 cudaDev 0 nvmlDev {rank} busId {bus} commId 0x8a1f - Init START"]
    (tmp_path / "one.log").write_text("\n".join(lines) + "\n")
    doc = triage([str(tmp_path / "one.log")])
    assert (doc["exit_code"], doc["stalled"], doc["warnings"]) == (5, False, [])
    # the same two processes on one GPU bus (one rank's lines only, of a two-rank job): not shown on one node
    (tmp_path / "one.log").write_text("\n".join(lines[:2]) + "\n")
    doc = triage([str(tmp_path / "one.log")])
    assert (doc["exit_code"], doc["cause_class"], doc["stalled"]) == (1, "nic_iface", True)
