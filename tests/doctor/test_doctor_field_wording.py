"""Wording swept from the libraries' own sources across versions (NCCL 2.4-2.17, torch 1.8-2.13), and what each
changes in a verdict: teardown noise never outranks the failure it follows, a retried store connection in a run that
trained is a warning, NCCL's own shared-memory and verbs errors are its transport's, not the host's, and torch's
glog-style error lines are errors. Lines are built from the format strings the signatures' sources name."""
from __future__ import annotations

from dsv3_preflight.doctor import triage

WATCHDOG = ("[rank1]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=2521, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600412 "
            "milliseconds before timing out.")
PROGRESS = ["{'loss': 1.2345, 'grad_norm': 0.5, 'learning_rate': 2e-05, 'epoch': 0.1}",
            "{'train_runtime': 120.5, 'train_samples_per_second': 10.0, 'train_loss': 1.1, 'epoch': 1.0}"]
RETRIES = ["[W socket.cpp:663] [c10d] The client socket has failed to connect to [node1]:29500 (errno: 111 - Connection refused).",
           "[W1021 10:00:00.123 TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to host node1:29500 - retrying "
           "(try=0, timeout=1800000ms, delay=1496ms): Connection refused"]


def _doc(tmp_path, lines: list[str]) -> dict:
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    return triage([str(log)])


def _ids(doc: dict) -> list[str]:
    return [f["id"] for f in doc["findings"]]


def test_store_connection_retries_before_training_are_a_warning_and_the_cause_when_nothing_follows(tmp_path):
    doc = _doc(tmp_path, RETRIES + PROGRESS)
    assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0)
    assert [w["id"] for w in doc["warnings"]] == ["c10d.client_connect_failed", "c10d.store_connect_retry"]
    doc = _doc(tmp_path, RETRIES)
    assert (doc["exit_code"], doc["cause_class"]) == (1, "port_rendezvous")
    # the terminal wording stays a cause whatever follows
    doc = _doc(tmp_path, ["[E1021 10:30:00.123 TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to host "
                          "node1:29500 - timed out (try=9, timeout=1800000ms): Connection refused"])
    assert (doc["exit_code"], _ids(doc)[0]) == (1, "c10d.store_timeout")


def test_rendezvous_teardown_after_a_collective_timeout_does_not_take_the_headline(tmp_path):
    teardown = [
        "[2024-05-08 08:47:31,877] torch.distributed.elastic.rendezvous.dynamic_rendezvous: [WARNING] The node "
        "'node1_1234_0' has failed to shutdown the rendezvous 'none' due to an error of type RendezvousConnectionError.",
        "torch.distributed.DistStoreError: Timed out waiting on barrier on rank 3, for key prefix: "
        "torchelastic/agent/terminal_state (world_size=2, missing_ranks=[Rank 1], timeout=0:05:00)",
        "[E1021 10:00:00.123456789 TCPStore.cpp:430] [c10d] recvValueWithTimeout failed on SocketImpl(fd=63, "
        "addr=[node2]:47852, remote=[node1]:29500): Connection reset by peer",
        "torch.distributed.DistNetworkError: failed to recv, got 0 bytes",
        "torch.distributed.DistNetworkError: Connection reset by peer",
    ]
    for line in teardown:   # each alone after the timeout: it was port_rendezvous's cause before (tier 1-2)
        doc = _doc(tmp_path, [WATCHDOG, line])
        assert (doc["exit_code"], doc["cause_class"], _ids(doc)[0]) == (1, "nccl_hang", "nccl.watchdog_timeout"), line
    # a live rendezvous the node cannot reach at all is still the cause
    doc = _doc(tmp_path, ["torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the "
                          "C10d store has failed. See inner exception for details."])
    assert doc["cause_class"] == "port_rendezvous"


def test_watchdog_dump_lines_of_every_torch_version_are_a_hang_and_name_the_rank(tmp_path):
    lines = [
        # "from " + " rank 7": two spaces, as torch prints it
        "[rank5]:[E703 17:54:18.884528282 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank 5] Received a "
        "dump signal due to a collective timeout from  rank 7 and we will try our best to dump the debug info. Last "
        "enqueued NCCL work: 56116, last completed NCCL work: 56116.",
        "[rank1]:[E ProcessGroupNCCL.cpp:1540] [PG 1 Rank 1] Timeout at NCCL work: 7, last enqueued NCCL work: 8, last "
        "completed NCCL work: 6.",
        "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] Exception (either an "
        "error or timeout) detected by watchdog at work: 6463, last enqueued NCCL work: 6463, last completed NCCL work: 6462.",
        "[rank3]:[E1021 10:00:00.000000000 ProcessGroupNCCL.cpp:2061] [PG ID 0 PG GUID 0(default_pg) Rank 3]  failure "
        "detected by watchdog at work sequence id: 5 PG status: last enqueued work: 5, last completed work: 4",
        "[rank2]:[F1229 20:37:13.091528310 ProcessGroupNCCL.cpp:1306] [PG ID 0 PG GUID 0(default_pg) Rank 2] Terminating "
        "the process after attempting to dump debug info, due to ProcessGroupNCCL watchdog hang.",
        "RuntimeError: [Rank 0] Caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, TensorShape=[1], "
        "Timeout(ms)=1800000) ran for 1800412 milliseconds before timing out.",
        "[rank1]:[E1002 18:16:40.662691402 ProcessGroupNCCL.cpp:756] [Rank 1] Work WorkNCCL(SeqNum=2521, OpType=ALLREDUCE, "
        "NumelIn=160672064, NumelOut=160672064, Timeout(ms)=600000) timed out in blocking wait.",
    ]
    for i, line in enumerate(lines):
        doc = _doc(tmp_path, [line])
        expected = "nccl.watchdog_timeout" if i >= 5 else "nccl.watchdog_hang"   # the last two name the collective
        assert (doc["exit_code"], doc["cause_class"], _ids(doc)[:1]) == (1, "nccl_hang", [expected]), line
    doc = _doc(tmp_path, lines[:1])
    assert 7 in doc["findings"][0]["ranks"]


def test_the_desync_report_names_the_lagging_rank_as_the_cause(tmp_path):
    doc = _doc(tmp_path, [WATCHDOG, "\t - To our best knowledge, ranks [1] are the lagging ranks that caused this "
                                    "timeout. They never joined any collectives"])
    assert (doc["cause_class"], _ids(doc)[0]) == ("nccl_hang", "c10d.desync_report")
    assert "rank(s) 1" in doc["findings"][0]["title"] and "rank(s) 1" in doc["findings"][0]["fix"]


def test_nccl_transport_errors_that_name_host_resources_stay_nccls(tmp_path):
    # ENOMEM from ibv_post_send is a full verbs queue, not host RAM; NCCL's shm_open is its SHM transport's segment
    for line, sid in (
            ("gpu-node07:24817:24901 [3] include/ibvwrap.h:1092 NCCL WARN ibv_post_send() failed with error Cannot "
             "allocate memory", "nccl.ibv_call_failed"),
            ("gpu-node07:24817:24901 [3] include/ibvwrap.h:1097 NCCL WARN ibv_post_send() failed with error Cannot "
             "allocate memory, Bad WR 0x7f3a5c0021c0, First WR 0x7f3a5c0021c0", "nccl.ibv_call_failed"),
            ("gpu-node07:24817:24901 [3] include/shm.h:27 NCCL WARN Call to shm_open failed : No such file or directory",
             "nccl.shm_no_space"),
            ("gpu-node07:24817:24901 [3] include/shm.h:48 NCCL WARN Error while attaching to shared memory segment "
             "nccl-shm-send-b3b4e0c7b3ab57e6-0-1-0 (size 9637888)", "nccl.shm_no_space")):
        doc = _doc(tmp_path, [line])
        assert (doc["cause_class"], _ids(doc)[0]) == ("nccl_transport", sid), line
    # the host's own: a DataLoader's shared memory and a plain allocation failure
    doc = _doc(tmp_path, ["RuntimeError: unable to open shared memory object </torch_1234_567> in read-write mode"])
    assert doc["cause_class"] == "host_resources"
    doc = _doc(tmp_path, ["gpu-node07:24817:24901 [3] include/alloc.h:46 NCCL WARN Failed to malloc 6291456 bytes"])
    assert (doc["cause_class"], _ids(doc)[0]) == ("host_resources", "host.cpu_memory")


def test_nccl_fallback_warnings_are_not_errors(tmp_path):
    lines = ["gpu-node07:24817:24901 [3] misc/cudawrap.cc:90 NCCL WARN Failed to find CUDA library in  (NCCL_CUDA_PATH=)",
             "gpu-node07:24817:24901 [3] init.cc:534 NCCL WARN Cannot initialize CollNet, using ring instead",
             "gpu-node07:24817:24901 [3] graph/xml.cc:562 NCCL WARN No NVML, trying to use CUDA instead"]
    doc = _doc(tmp_path, lines + PROGRESS)
    assert (doc["verdict"], doc["exit_code"], doc["unrecognised"]["count"]) == ("healthy", 0, 0)


def test_torch_glog_error_lines_are_errors_even_when_no_signature_knows_them(tmp_path):
    doc = _doc(tmp_path, ["[rank0]:[E1021 10:00:00.000000000 ProcessGroupNCCL.cpp:1289] [PG 0 Rank 0] Something "
                          "nobody has written a signature for."])
    assert (doc["verdict"], doc["exit_code"], doc["cause_class"]) == ("failure", 1, "unrecognised")
    doc = _doc(tmp_path, ["[W socket.cpp:601] [c10d] Something harmless nobody has written a signature for."])
    assert doc["exit_code"] == 5   # a W line is not an error: neither error nor progress


# torch 1.8-2.13 and torchrun's rendezvous, NCCL's bootstrap, Gloo: one line each, alone in a log
OLD_TORCH_LINES = [
    ("RuntimeError: No route to host", "port_rendezvous", "c10d.client_connect_failed"),
    ("RuntimeError: Stop_waiting response is expected", "port_rendezvous", "c10d.store_error"),
    ("RuntimeError: on node1, port: 29500 already in use", "port_rendezvous", "c10d.address_in_use"),
    ("TimeoutError: timed out waiting for all 8 members to join", "port_rendezvous", "c10d.store_timeout"),
    ("torch.distributed.elastic.rendezvous.api.RendezvousStateError: The rendezvous state is corrupt. See inner "
     "exception for details.", "port_rendezvous", "elastic.rendezvous_state"),
    ("gpu-node07:24817:24901 [3] bootstrap.cc:35 NCCL WARN Invalid NCCL_COMM_ID, please use format: <ipv4>:<port> "
     "or [<ipv6>]:<port> or <hostname>:<port>", "port_rendezvous", "nccl.comm_id_invalid"),
    ("RuntimeError: Cannot resolve node1 to a (local) address", "nic_iface", "gloo.cannot_resolve_local"),
]


def _each_line_alone_is_its_cause(tmp_path, rows) -> None:
    for line, cls, sid in rows:
        doc = _doc(tmp_path, [line])
        assert (doc["exit_code"], doc["cause_class"], _ids(doc)[0]) == (1, cls, sid), line


def test_old_torch_and_elastic_rendezvous_wording(tmp_path):
    _each_line_alone_is_its_cause(tmp_path, OLD_TORCH_LINES)


def test_tensorpipe_falling_back_to_loopback_is_a_suspect_that_explains_a_stop(tmp_path):
    line = ("Jan 16 03:14:24 [W tensorpipe_agent.cpp:63] Failed to look up the IP address for the hostname (EAI_NONAME: "
            "unknown node or service), defaulting to 127.0.0.1")
    doc = _doc(tmp_path, [line])
    assert (doc["exit_code"], doc["cause_class"], doc["stalled"]) == (1, "nic_iface", True)
    doc = _doc(tmp_path, [line] + PROGRESS)
    assert (doc["exit_code"], [w["id"] for w in doc["warnings"]]) == (0, ["tensorpipe.hostname_loopback"])


def test_a_pasted_watchdog_traceback_without_its_first_line_is_still_a_hang(tmp_path):
    # particleflow#390 (round 5, development part): only the C++ frames survived the paste; frames are never error
    # lines ("c10::Error::Error" is a function name), the watchdog's own frames and exception header name the hang
    frames = [
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x1554e8b12f86 in /x/torch/lib/libc10.so)",
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
        "std::ratio<1l, 1000l> > >) + 0x1d2 (0x1554e9e0f8f2 in /x/torch/lib/libtorch_cuda.so)",
        "Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1521 (most recent call first):"]
    doc = _doc(tmp_path, frames)
    assert (doc["exit_code"], doc["cause_class"], _ids(doc)) == (1, "nccl_hang", ["nccl.watchdog_hang"])
    doc = _doc(tmp_path, frames[:1])
    assert (doc["exit_code"], doc["error_lines"]) == (5, [])


def test_a_broken_store_call_inside_torchruns_rendezvous_is_a_rendezvous_cause(tmp_path):
    frame = ('  File "/opt/conda/lib/python3.9/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", '
             'line 113, in _call_store')
    doc = _doc(tmp_path, ["Traceback (most recent call last):", frame, "    return getattr(self._store, store_op)(*args, **kwargs)",
                          "RuntimeError: Broken pipe"])
    assert (doc["exit_code"], doc["cause_class"], _ids(doc)[0]) == (1, "port_rendezvous", "elastic.store_call_failed")
    # the same error anywhere else says nothing about the rendezvous
    doc = _doc(tmp_path, ["Traceback (most recent call last):", '  File "/x/train.py", line 3, in main', "RuntimeError: Broken pipe"])
    assert doc["cause_class"] != "port_rendezvous"


# Ray, vLLM, SGLang, Open MPI (ORTE and PRTE), Horovod, MPICH's Hydra and DeepSpeed's launcher: lines built from
# their format strings (the signatures' sources name them); each was "no progress" or "cause not recognised"
LAUNCHER_LINES = [
    ("[2024-05-08 08:47:31,877 C 2211 2211] global_state_accessor.cc:415: This node has an IP address of 172.17.0.3, and Ray "
     "expects this IP address to be either the GCS address or one of the Raylet addresses. Connected to GCS at "
     "10.41.0.2:6379, and found no Raylet with this IP address.", "nic_iface", "ray.node_ip_mismatch"),
    ("(autoscaler +7s) Error: No available node types can fulfill resource request {'node:192.168.50.192': 0.001, "
     "'GPU': 1.0}. Add suitable node types to this cluster to resolve this issue.", "nic_iface", "ray.node_resource_unreachable"),
    # the request's keys in the other order (Ray prints them as the job built the dict)
    ("(EngineCore pid=630) (autoscaler +7s) Error: No available node types can fulfill resource request {'GPU': 1.0, "
     "'node:192.168.50.192': 0.001}.", "nic_iface", "ray.node_resource_unreachable"),
    # UCX (Open MPI's pml ucx) wiring up over docker0's address, and over an address it cannot reach
    ("[1700554343.440877] [node-a:7356 :0]            sock.c:323  UCX  ERROR   connect(fd=48, dest_addr=172.17.0.1:42887) "
     "failed: Connection refused", "nic_iface", "nccl.bridge_peer"),
    ("[1700554343.440877] [node-a:7356 :0]            sock.c:323  UCX  ERROR   connect(fd=48, dest_addr=10.0.0.7:42887) "
     "failed: Connection refused", "nic_iface", "ucx.connect_failed"),
    ("[node-a:07356] pml_ucx.c:424  Error: ucp_ep_create(proc=3) failed: Destination is unreachable", "nic_iface",
     "ucx.connect_failed"),
    # UCX's wire-up finding no transport to the peer among those UCX_TLS / UCX_NET_DEVICES allow (ucp/wireup/select.c)
    ("[1736788625.693157] [cnode001:521140:0]          select.c:630  UCX  ERROR   no active messages transport to <no "
     "debug data>: self/memory - Destination is unreachable", "nic_iface", "ucx.connect_failed"),
    ("RuntimeError: Every node should have a unique IP address. Got 2 nodes with node ids ['a1', 'b2'] and 1 unique IP "
     "addresses {'172.17.0.2'}. Please check your network configuration.", "nic_iface", "vllm.node_ip"),
    ("ERROR 02-09 02:31:11 engine.py:389] Ray does not allocate any GPUs on the driver node. Consider adjusting the Ray "
     "placement group or running the driver on a GPU node.", "nic_iface", "vllm.node_ip"),
    ("ConnectionError: Ray is trying to start at 10.41.0.2:6379, but is already running at 10.41.0.2:6379. Please "
     "specify a different port using the `--port` flag of `ray start` command.", "port_rendezvous", "ray.already_running"),
    ("ConnectionError: Failed to connect to Ray cluster at 10.41.0.2:6379", "port_rendezvous", "ray.gcs_unreachable"),
    ("AssertionError: please provide --dist-init-addr as host:port of head node", "port_rendezvous", "sglang.dist_init_addr"),
    ("[rank1]:[W623 15:37:01.824135523 socket.cpp:485] [c10d] waitForInput: socket SocketImpl(fd=100, "
     "addr=[node-0]:43590, remote=[node-0]:20000) timed out after 1800000ms", "port_rendezvous", "c10d.store_wait_timeout"),
    ("[[39817,1],2][btl_tcp_endpoint.c:793:mca_btl_tcp_endpoint_start_connect] from node1 to: node2 Unable to connect "
     "to the peer 10.0.0.2 on port 1024: No route to host", "nic_iface", "ompi.tcp_connect_failed"),
    ("WARNING: An invalid value was given for btl_tcp_if_include.  This", "nic_iface", "ompi.no_usable_interface"),
    ("No network interfaces were found for out-of-band communications. We require", "nic_iface", "ompi.no_usable_interface"),
    ("An ORTE daemon has unexpectedly failed after launch and before", "nic_iface", "ompi.daemon_failed"),
    ("PRTE was unable to reliably start one or more daemons.", "port_rendezvous", "launcher.ssh_unreachable"),
    ("Open MPI detected a mismatch in versions between two processes.  This", "version_drift", "ompi.version_mismatch"),
    ("Exception: Unable to find a set of common task-to-task communication interfaces: [(0, {'eth0': ['10.0.0.1']}), "
     "(1, {'ens5': ['10.0.0.2']})]", "nic_iface", "horovod.no_common_interface"),
    ("[1,0]<stderr>:[2024-05-08 08:47:31.877 E /tmp/pip-install/horovod/common/gloo/http_store.cc:96] HTTP GET request "
     "failed too many times, aborting. See exception message above.", "port_rendezvous", "horovod.gloo_rendezvous"),
    ("[proxy:0:1@node2] HYDU_sock_connect (utils/sock/sock.c:145): unable to connect from \"node2\" to \"node1\" (No "
     "route to host)", "port_rendezvous", "hydra.proxy_connect"),
    ("subprocess.CalledProcessError: Command '['ssh', 'worker-0', 'hostname', '-I']' returned non-zero exit status 255.",
     "port_rendezvous", "launcher.ssh_unreachable"),
]


def test_launcher_and_cluster_framework_wording(tmp_path):
    _each_line_alone_is_its_cause(tmp_path, LAUNCHER_LINES)


def test_a_peer_that_went_away_is_a_failure_whose_cause_is_elsewhere(tmp_path):
    # these were "no error and no progress" (exit 5): now a failure, cause not recognised unless a cause is present
    for line in ("An MPI communication peer process has unexpectedly disconnected.  This",
                 "ORTE has lost communication with a remote daemon.",
                 "2023-03-03 05:15:30,774\tWARNING worker.py:1866 -- The node with node id: 9426f4 and address: "
                 "10.130.0.113 and node name: 10.130.0.113 has been marked dead because the detector has missed too "
                 "many heartbeats from it."):
        doc = _doc(tmp_path, [line])
        assert (doc["exit_code"], doc["cause_class"], _ids(doc)) == (1, "unrecognised", ["cluster.process_died"]), line
    doc = _doc(tmp_path, ["RuntimeError: Every node should have a unique IP address", "ORTE has lost communication with "
                          "a remote daemon."])
    assert (doc["cause_class"], _ids(doc)[0]) == ("nic_iface", "vllm.node_ip")


def test_vllm_without_an_address_is_a_suspect_not_a_cause_of_a_run_that_served(tmp_path):
    warn = ("/usr/local/lib/python3.10/dist-packages/vllm/utils.py:534: UserWarning: Failed to get the IP address, "
            "using 0.0.0.0 by default.The value can be set by the environment variable VLLM_HOST_IP or HOST_IP.")
    doc = _doc(tmp_path, [warn] + PROGRESS)
    assert (doc["exit_code"], [w["id"] for w in doc["warnings"]]) == (0, ["vllm.ip_fallback"])
    doc = _doc(tmp_path, [warn, "RuntimeError: something nobody knows"])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "nic_iface")


def _init_start(host: str, dev: int, nranks: int, rank: int) -> list[str]:
    p = f"{host}:{4100 + dev}:{4100 + dev} [{dev}] NCCL INFO"
    return [f"{p} Bootstrap : Using eth0:10.0.0.{1 + len(host) % 5}<0>",
            f"{p} comm 0x55d1c4a0 rank {rank} nranks {nranks} cudaDev {dev} nvmlDev {dev} busId {dev + 1}000 commId 0x8a1f - Init START"]


def test_hung_names_the_phase_a_log_without_error_stops_in(tmp_path):
    # without --hung a log that just stops is "no progress" (exit 5): the doctor cannot tell a hang from a cut log
    multi = _init_start("gpu-a", 0, 16, 0) + _init_start("gpu-a", 1, 16, 1)
    assert _doc(tmp_path, multi)["exit_code"] == 5
    log = tmp_path / "run.log"
    log.write_text("\n".join(multi) + "\n")
    doc = triage([str(log)], hung=True)
    assert (doc["exit_code"], doc["cause_class"], doc["stalled"], doc["hung"]) == (1, "nic_iface", True, True)
    assert _ids(doc) == ["hang.nccl_init"] and "16 ranks" in doc["findings"][0]["title"]
    assert doc["summary"].startswith("suspected cause of the hang (doctor --hung)")
    # the same on one node (both ranks' GPUs on one host, world 2): the intra-node transport
    log.write_text("\n".join(_init_start("gpu-a", 0, 2, 0) + _init_start("gpu-a", 1, 2, 1)) + "\n")
    doc = triage([str(log)], hung=True)
    assert (doc["cause_class"], _ids(doc)) == ("nccl_transport", ["hang.nccl_init_one_node"])
    # progress, then nothing: a collective never completed
    log.write_text("\n".join(PROGRESS[:1]) + "\n")
    doc = triage([str(log)], hung=True)
    assert (doc["exit_code"], doc["cause_class"], _ids(doc)) == (1, "nccl_hang", ["hang.after_progress"])
    # nothing that shows a phase: a failure whose cause is not recognised, with what to turn on
    log.write_text("starting\n")
    doc = triage([str(log)], hung=True)
    assert (doc["exit_code"], doc["cause_class"], doc["findings"]) == (1, "unrecognised", [])
    assert "NCCL_DEBUG=INFO" in doc["summary"]


def test_hung_blames_suspects_that_explain_a_hang_and_leaves_errors_alone(tmp_path):
    # a bridge listed after a routable first interface is only a warning in a log that stops; the user says it hung
    lines = ["gpu-b:5359:5359 [0] NCCL INFO Bootstrap : Using [0]eth0:10.0.0.2<0> [1]docker0:172.17.0.1<0>",
             "gpu-b:5359:5359 [0] NCCL INFO comm 0x55d1c4a0 rank 1 nranks 2 cudaDev 0 busId 1000 - Init START"]
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n")
    assert triage([str(log)])["exit_code"] == 5
    doc = triage([str(log)], hung=True)
    assert (doc["exit_code"], doc["cause_class"], _ids(doc)) == (1, "nic_iface", ["nccl.bad_interface_listed"])
    # a harmless suspect (torch's IPv6 lookup) is never the hang's cause, nor one the run got past before progress
    ipv6 = ("[W socket.cpp:601] [c10d] The IPv6 network addresses of (localhost, 51595) cannot be retrieved (gai error: "
            "-2 - Name or service not known).")
    log.write_text(ipv6 + "\n")
    doc = triage([str(log)], hung=True)
    assert (doc["exit_code"], doc["cause_class"], doc["findings"]) == (1, "unrecognised", [])
    log.write_text("\n".join([ipv6, lines[0]] + PROGRESS) + "\n")
    doc = triage([str(log)], hung=True)
    assert (doc["cause_class"], _ids(doc)) == ("nccl_hang", ["hang.after_progress"])
    # a log with its error: --hung changes nothing
    log.write_text(WATCHDOG + "\n")
    assert _ids(triage([str(log)], hung=True)) == _ids(triage([str(log)])) == ["nccl.watchdog_timeout"]


def test_doctor_hung_on_the_command_line(tmp_path):
    import subprocess

    from conftest import python_cli

    log = tmp_path / "run.log"
    log.write_text("\n".join(_init_start("gpu-a", 0, 16, 0)) + "\n")
    plain = subprocess.run(python_cli("doctor", str(log)), capture_output=True, text=True, timeout=60)
    hung = subprocess.run(python_cli("doctor", "--hung", str(log)), capture_output=True, text=True, timeout=60)
    assert (plain.returncode, hung.returncode) == (5, 1), hung.stderr
    assert "suspected cause of the hang (doctor --hung): The run hung while NCCL connected its 16 ranks" in hung.stdout


# torch 2.4-2.5 and 2.6+ wording of the warning ProcessGroupNCCL's destructor prints when the interpreter exits
EXIT_WARNINGS = [
    "[rank0]:[W1007 09:55:53.400347903 ProcessGroupNCCL.cpp:1253] Warning: WARNING: process group has NOT been destroyed "
    "before we destruct ProcessGroupNCCL. On normal program exit, the application should call destroy_process_group to "
    "ensure that any pending NCCL operations have finished in this process. (function operator())",
    "[rank0]:[W825 13:09:39.967659278 ProcessGroupNCCL.cpp:1538] Warning: WARNING: destroy_process_group() was not called "
    "before program exit, which can leak resources. For more info, please see "
    "https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())",
]


def test_the_exit_warning_of_a_rank_that_ended_normally_is_healthy_and_after_a_crash_changes_nothing(tmp_path):
    for warning in EXIT_WARNINGS:
        doc = _doc(tmp_path, ["Processed prompts: done", warning, warning.replace("rank0", "rank1")])
        assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0), (warning, doc["summary"])
        # what a rank prints while it exits, after the warning, is teardown noise
        doc = _doc(tmp_path, [warning, "[rank0]:[W1007 09:55:54.1 TCPStore.cpp:106] [c10d] sendBytes failed on "
                              "SocketImpl(fd=57, addr=[node-0]:41442, remote=[node-0]:29500): Broken pipe"])
        assert doc["exit_code"] == 0, (warning, doc["summary"])
        # a rank that crashed prints the same warning after its traceback: still the crash
        doc = _doc(tmp_path, ["[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", warning])
        assert (doc["exit_code"], doc["cause_class"]) == (1, "gpu_oom"), (warning, doc["summary"])


def test_torchs_info_lines_are_not_errors_and_a_store_source_file_is_not_a_store_failure(tmp_path):
    # TORCH_CPP_LOG_LEVEL=INFO: the store client retries while the server starts; the server's loop closes at exit
    doc = _doc(tmp_path, [
        "[I1124 00:14:01.939069143 socket.cpp:931] [c10d - trace] The server socket on [::ffff:127.0.0.1]:41913 is not "
        "yet listening (errno: 111 - Connection refused), will retry.",
        "[I1124 00:14:55.157385140 TCPStoreLibUvBackend.cpp:1354] [c10d] uv_loop_close failed with:-16 errn:EBUSY "
        "desc:resource busy or locked",
        PROGRESS[0]])
    assert (doc["exit_code"], doc["error_lines"], _ids(doc)) == (0, [], []), doc["summary"]
    # the same file name at ERROR severity is still an error line
    doc = _doc(tmp_path, ["[E1124 00:14:55.157385140 TCPStoreLibUvBackend.cpp:1354] [c10d] uv_loop_close failed with:-16"])
    assert doc["exit_code"] == 1 and doc["error_lines"], doc["summary"]


def test_paddles_store_retries_name_a_loopback_master_or_a_master_not_listening(tmp_path):
    retry = ("I0224 13:50:30.278173 1512912 tcp_utils.cc:107] Retry to connect to {}:63917 while the server is not yet "
             "listening.")
    doc = _doc(tmp_path, [retry.format("127.0.1.1")] * 2)
    assert (doc["exit_code"], doc["cause_class"], doc["stalled"]) == (1, "nic_iface", True), doc["summary"]
    assert _ids(doc)[0] == "store.retry_loopback" and "127.0.1.1:63917" in doc["findings"][0]["title"]
    doc = _doc(tmp_path, [retry.format("10.0.0.5")] * 2)
    assert (doc["exit_code"], doc["cause_class"], _ids(doc)[0]) == (1, "port_rendezvous", "store.retry_not_listening")
    # the master started late: the run went on, the retries are a warning
    doc = _doc(tmp_path, [retry.format("10.0.0.5"), *PROGRESS])
    assert (doc["exit_code"], [w["id"] for w in doc["warnings"]]) == (0, ["store.retry_not_listening"]), doc["summary"]


def test_an_unreadable_roce_gid_is_the_transports_and_killed_after_a_progress_bar_is_sigkill(tmp_path):
    for line in ["gpu-node07:24817:24901 [3] NCCL WARN NET/IB: read failed in ncclIbRoceGetVersionNum: Invalid argument",
                 "W20250825 11:10:33.595331   331 util_rdma.h:547] NET/IB: open failed in ncclIbRoceGetVersionNum: No such "
                 "file or directory",
                 "F20250825 11:10:33.595355   331 util_rdma.h:592] Check failed: ncclIbRoceGetVersionNum(deviceName, "
                 "portNum, gidIndexCandidate, &gidRoceVerNumCandidate)"]:
        doc = _doc(tmp_path, [line])
        assert (doc["cause_class"], _ids(doc)[0]) == ("nccl_transport", "nccl.ib_gid_unreadable"), (line, doc["summary"])
    doc = _doc(tmp_path, ["Loading checkpoint shards:  38%|██████▊           | 3/8 [00:02<00:03,  1.28it/s]Killed"])
    assert (doc["cause_class"], _ids(doc)[0]) == ("host_resources", "host.sigkill"), doc["summary"]


def test_a_stop_from_outside_is_no_cause_and_a_relayed_stop_after_a_crash_is_not_a_stop(tmp_path):
    # torch's launcher on Ctrl-C (the glog form of torch 2.4+, and the logging form of older versions)
    for got in ["W1124 01:26:10.870000 9922 torch/distributed/elastic/agent/server/api.py:753] Received 2 death signal, "
                "shutting down workers",
                "WARNING:torch.distributed.elastic.agent.server.api:Received 15 death signal, shutting down workers"]:
        doc = _doc(tmp_path, [PROGRESS[0], got, "Sending process 9926 closing signal SIGINT", "[rank0]: KeyboardInterrupt"])
        assert (doc["exit_code"], doc["cause_class"], doc["cause_recognised"]) == (1, "interrupted", False), doc["summary"]
        assert doc["first_failure"]["finding"] == "elastic.signal_exception" and doc["first_failure"]["line"] == 2
        assert doc["summary"].startswith("stopped from outside") and "after progress" in doc["summary"]
        assert not doc["nearest_causes"]
    # an unrecognised error before the signal: that error is the first failure, the stop came after it
    doc = _doc(tmp_path, ["[rank1]: RuntimeError: something nobody recognises", "[rank0]: KeyboardInterrupt"])
    assert doc["cause_class"] == "unrecognised" and doc["summary"].startswith("cause not recognised: first error: [rank1]")
    # torchrun stops the others after a rank's own crash too: its closing signals before the crash line are no stop
    doc = _doc(tmp_path, [
        "W1124 01:27:53.787000 13186 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 13239 closing "
        "signal SIGTERM",
        "E1124 01:27:53.825000 13186 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -11) "
        "local_rank: 1 (pid: 13240) of binary: /usr/bin/python"])
    assert doc["cause_class"] == "unrecognised" and doc["first_failure"]["finding"] == "process.native_crash"
    assert doc["summary"].startswith("cause not recognised; the first failure: A rank crashed in native code (signal 11)")


def test_an_unknown_exception_ends_its_traceback_and_is_the_first_error_not_the_header(tmp_path):
    doc = _doc(tmp_path, ["Traceback (most recent call last):",
                          '  File "/usr/local/bin/deepspeed", line 3, in <module>',
                          "    from deepspeed.launcher.runner import main",
                          "ModuleNotFoundError: No module named 'einops'"])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "unrecognised")
    assert doc["summary"].startswith("cause not recognised: first error: ModuleNotFoundError: No module named 'einops'")
    assert [e["line"] for e in doc["error_lines"]] == [4] and doc["unrecognised"]["count"] == 1
    # per rank: each rank's exception ends its own traceback
    doc = _doc(tmp_path, ["[rank1]: Traceback (most recent call last):", "[rank0]: Traceback (most recent call last):",
                          "[rank0]: mylib.errors.ShardLayoutError: shard 3 of 8 has the wrong layout",
                          "[rank1]: mylib.errors.ShardLayoutError: shard 4 of 8 has the wrong layout"])
    assert [e["line"] for e in doc["error_lines"]] == [3, 4] and doc["first_failure"]["rank"] == 0, doc["error_lines"]


def test_a_process_that_sees_no_gpu_cannot_initialise_cuda(tmp_path):
    # a CUDA build with CUDA_VISIBLE_DEVICES="" (a Ray task without num_gpus), a container without GPUs, a login node
    for line in ["[rank0]: ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
                 "RuntimeError: No CUDA GPUs are available",
                 "RuntimeError: CUDA error: no CUDA-capable device is detected"]:
        doc = _doc(tmp_path, [line])
        assert (doc["cause_class"], _ids(doc)[0]) == ("cuda_fabric", "cuda.no_device_visible"), (line, doc["summary"])
        assert doc["findings"][0]["check"] == "gpu.cuda_init"


def test_a_traceback_without_a_rank_prefix_is_ended_by_its_exception_that_names_the_rank(tmp_path):
    # torch 1.x/2.0 with NCCL_BLOCKING_WAIT: the rank is only in the exception's words
    doc = _doc(tmp_path, ["Traceback (most recent call last):",
                          '  File "train.py", line 222, in _setup_train',
                          "    dist.broadcast(self.amp, src=0)",
                          "RuntimeError: [Rank 1] Caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, "
                          "TensorShape=[], Timeout(ms)=10800000) ran for 10800031 milliseconds before timing out."])
    assert (doc["cause_class"], _ids(doc)[0], doc["error_lines"]) == ("nccl_hang", "nccl.watchdog_timeout", []), doc["summary"]
    assert doc["first_failure"]["rank"] == 1


def test_torchtunes_checkpoint_lines_are_progress(tmp_path):
    doc = _doc(tmp_path, ["Model checkpoint of size 4.66 GiB saved to /out/epoch_0/ft-model-00003-of-00030.safetensors",
                          "Adapter checkpoint of size 0.09 GiB saved to /out/epoch_0/adapter_model.pt"])
    assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0), doc["summary"]


def test_accelerate_without_a_dataloader_cannot_fill_deepspeeds_micro_batch(tmp_path):
    # accelerate 1.15's wording, produced here (a DeepSpeedPlugin with "auto", prepare(model, optimizer)), and the
    # older one without the comma (accelerate 0.2x, a field log)
    for line in ("ValueError: When using DeepSpeed, `accelerate.prepare()` requires you to pass at least one of training "
                 "or evaluation dataloaders with `batch_size` attribute returning an integer value or alternatively set "
                 "an integer value in `train_micro_batch_size_per_gpu` in the deepspeed config file or assign integer "
                 "value to `AcceleratorState().deepspeed_plugin.deepspeed_config['train_micro_batch_size_per_gpu']`.",
                 "ValueError: When using DeepSpeed `accelerate.prepare()` requires you to pass at least one of training "
                 "or evaluation dataloaders or alternatively set an integer value in `train_micro_batch_size_per_gpu` "
                 "in the deepspeed config file"):
        doc = _doc(tmp_path, ["Traceback (most recent call last):", line])
        assert (doc["cause_class"], _ids(doc)[0]) == ("config", "accelerate.deepspeed_batch_size_unknown"), doc["summary"]
        assert doc["findings"][0]["check"] == "lora.deepspeed_config"


def test_torchs_raw_writer_failing_names_the_errno(tmp_path):
    # torch.save's storage writer (the legacy format, torch 1.0 by default): errno's text ends the line
    doc = _doc(tmp_path, ['    serialized_storages[key]._write_file(f, _should_read_directly(f))',
                          "RuntimeError: write(): fd 29 failed with Input/output error"])
    assert (doc["cause_class"], _ids(doc)[0]) == ("host_resources", "host.checkpoint_write_failed")
    assert doc["findings"][0]["title"] == "A checkpoint write came up short (torch.save): Input/output error"


def _zero_bar() -> str:
    """The line tqdm itself draws before its first step."""
    import io

    from tqdm import tqdm

    out = io.StringIO()
    bar = tqdm(total=16, desc="Processed prompts", file=out, ascii=False)
    bar.refresh()
    text = out.getvalue().split("\r")[-1].strip("\n")
    bar.close()
    assert " 0/16 " in text
    return text


NCCL_UP = "node1:23458:23665 [0] NCCL INFO comm 0x23ba7ea0 rank 0 nranks 2 cudaDev 0 busId 47000 - Init COMPLETE"


def test_a_log_that_ends_on_a_bar_at_zero_after_set_up_only_is_not_healthy(tmp_path):
    bar = _zero_bar()
    doc = _doc(tmp_path, [NCCL_UP, "INFO 11-01 23:16:33 gpu_executor.py:56] # GPU blocks: 185231", bar])
    assert (doc["verdict"], doc["exit_code"], doc["cause_class"]) == ("unknown", 5, "no_progress"), doc["summary"]
    assert doc["summary"].startswith("no error, and no step finished: after set-up only (NCCL communicator "
                                     "initialised) the log ends on a progress bar at 0 (Processed prompts: 0%| | 0/16)")
    # the user says it hung: the phase names the bar
    log = tmp_path / "run.log"
    hung = triage([str(log)], hung=True)
    assert (hung["exit_code"], hung["findings"][0]["id"]) == (1, "hang.after_progress")
    assert "then a progress bar at 0 (Processed prompts: 0%| | 0/16)" in hung["findings"][0]["title"]
    # set-up then a finished step: healthy, whatever bar comes next; a bar at zero in the middle changes nothing
    assert _doc(tmp_path, [NCCL_UP, PROGRESS[0], bar])["exit_code"] == 0
    assert _doc(tmp_path, [NCCL_UP, bar, "Processed prompts: 100%|##########| 16/16 [00:03<00:00, 4.51it/s]"])["exit_code"] == 0
    assert _doc(tmp_path, [NCCL_UP])["exit_code"] == 0   # NCCL connected and the excerpt ends: as before


def test_gloo_pair_errors_of_every_gloo_version(tmp_path):
    # gloo/transport/tcp/pair.cc prints a peer as "[addr]:port"; before 2019 the family check was pair.cc's own
    cases = [
        ("RuntimeError: [/opt/conda/conda-bld/pytorch_1/work/third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection "
         "closed by peer [172.17.0.2]:5922", "nccl.bridge_peer", "172.17.0.2"),
        ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:575] Read error [172.18.0.3]:46321: Connection "
         "reset by peer", "nccl.bridge_peer", "172.18.0.3"),
        ("RuntimeError: [enforce fail at gloo/transport/tcp/pair.cc:122] self_.ss_.ss_family == peer_.ss_.ss_family. "
         "2 vs 10. address family mismatch", "gloo.address_family_mismatch", "2 vs 10"),
        ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:799] connect [127.0.1.1]:38329: Connection "
         "refused", "gloo.loopback_peer", "127.0.1.1"),
    ]
    for line, sig, named in cases:
        doc = _doc(tmp_path, [line])
        assert (doc["exit_code"], doc["cause_class"], _ids(doc)[0]) == (1, "nic_iface", sig), (line, doc["summary"])
        assert named in doc["findings"][0]["title"], doc["findings"][0]["title"]
    # a peer that is simply gone (a routable address) stays a consequence, not a wrong interface
    doc = _doc(tmp_path, ["RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:598] Connection closed by peer "
                          "[10.0.0.2]:5922"])
    assert doc["cause_class"] == "unrecognised" and _ids(doc) == ["net.connection_closed"], doc["summary"]


def test_a_gloo_connect_retry_that_succeeded_is_no_failure(tmp_path):
    # gloo's DebugLogger prints every failed connect; the full mesh connected on a retry and the run trained
    retry = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/debug_logger.cc:9] ERROR failed to connect, "
             "willRetry=1, retry=1, retryLimit=3, rank=1, size=3, local=[10.77.0.11]:32938, "
             "remote=[10.77.0.10]:36740$1, error=SO_ERROR: Connection refused, remote=[10.77.0.10]:36740$1")
    doc = _doc(tmp_path, [retry] + PROGRESS)
    assert (doc["exit_code"], doc["verdict"]) == (0, "healthy"), doc["summary"]
    assert [w["id"] for w in doc["warnings"]] == ["gloo.connect_retry"]
    doc = _doc(tmp_path, [retry])
    assert (doc["exit_code"], _ids(doc)[0]) == (1, "gloo.connect_retry"), doc["summary"]


def test_a_rank_beyond_the_visible_gpus_and_busy_devices_in_cuda_11s_wording(tmp_path):
    # torch's lazy CUDA init asserts LOCAL_RANK < the GPUs it sees (CUDAContext.cpp); CUDA 11+ words error 46 anew
    doc = _doc(tmp_path, ["torch.cuda.DeferredCudaCallError: CUDA call failed lazily at initialization with error: "
                          "device >= 0 && device < num_gpus INTERNAL ASSERT FAILED at \"../aten/src/ATen/cuda/"
                          "CUDAContext.cpp\":50, please report a bug to PyTorch. device=1, num_gpus=1"])
    assert (doc["cause_class"], _ids(doc)[0]) == ("pci_rank_dup", "cuda.invalid_device_ordinal")
    doc = _doc(tmp_path, ["RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable"])
    assert (doc["cause_class"], _ids(doc)[0]) == ("pci_rank_dup", "cuda.devices_busy")


def test_the_store_sought_at_a_loopback_or_bridge_address_is_the_address_not_the_port(tmp_path):
    for line in ("[W socket.cpp:663] [c10d] The client socket has failed to connect to [127.0.1.1]:29500 (errno: 111 - "
                 "Connection refused).",
                 "[E1108 20:04:34.467642512 socket.cpp:957] [c10d] The client socket has timed out after 900s while "
                 "trying to connect to (172.17.0.2, 29500).",
                 "[W1021 10:00:00.123 TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to host "
                 "192.168.122.1:29500 - timed out (try=9, timeout=1800000ms): Connection refused"):
        doc = _doc(tmp_path, [line])
        assert (doc["cause_class"], _ids(doc)[0]) == ("nic_iface", "c10d.store_on_local_address"), line
        assert ":29500" in doc["findings"][0]["title"]
    # a routable address, and 127.0.0.1 (a one-node job's): the port and the store, as before
    for addr in ("10.0.0.5", "127.0.0.1"):
        doc = _doc(tmp_path, [f"[W socket.cpp:663] [c10d] The client socket has failed to connect to [{addr}]:29500 "
                              "(errno: 111 - Connection refused)."])
        assert doc["cause_class"] == "port_rendezvous", addr
    # a retry that the run got past is a warning
    doc = _doc(tmp_path, ["[W socket.cpp:663] [c10d] The client socket has failed to connect to [172.17.0.2]:29500 "
                          "(errno: 111 - Connection refused).", *PROGRESS])
    assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0)


def test_nccls_first_interface_on_a_link_local_address_is_the_suspect_of_a_log_that_stops(tmp_path):
    # GH200's BMC USB network (169.254.3.1 on every node: uccl-project/uccl#1034) and a tunnel's fe80:: (nccl#529)
    for line, addr in (("gh200-1:2211:2211 [0] NCCL INFO Bootstrap : Using [0]usb0:169.254.3.1<0>", "169.254.3.1"),
                       ("yt-1:97:221 [0] NCCL INFO Bootstrap : Using [0]ip6tnl0:fe80::e866:19ff:fe1e:a688%ip6tnl0<0> "
                        "[1]veth0:2a02:6b8:fc1d:3606:0:4457:edef:600a<0>", "fe80::e866:19ff:fe1e:a688%ip6tnl0")):
        doc = _doc(tmp_path, [line])
        assert (doc["exit_code"], doc["cause_class"], doc["stalled"]) == (1, "nic_iface", True), line
        assert _ids(doc)[0] == "nccl.link_local_interface" and addr in doc["findings"][0]["title"]
    # a link-local address after a routable first interface: NCCL uses the first; the log just stops (exit 5)
    doc = _doc(tmp_path, ["n1:1:1 [0] NCCL INFO Bootstrap : Using [0]ens5:172.31.0.137<0> "
                          "[1]veth75fa783:fe80::14ad:64ff:fe64:b31e%veth75fa783<0>"])
    assert "nccl.link_local_interface" not in _ids(doc) and doc["exit_code"] == 5
    # and a run that went on past it is healthy
    doc = _doc(tmp_path, ["gh200-1:2211:2211 [0] NCCL INFO Bootstrap : Using [0]usb0:169.254.3.1<0>", *PROGRESS])
    assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0)


def test_a_multi_node_only_cause_in_a_one_node_job_reads_as_the_rest_of_the_table_reads_it(tmp_path):
    # NCCL's lines show both ranks' GPUs on one host: a container bridge's address is right there, so the store line
    # is the store's timeout (not the address), and never dropped: a failure line is never "no error"
    one_node = ["gpu-a:1:1 [0] NCCL INFO Bootstrap : Using eth0:172.17.0.2<0>",
                "gpu-a:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init START",
                "gpu-a:2:2 [1] NCCL INFO comm 0x2 rank 1 nranks 2 cudaDev 1 busId 2000 - Init START"]
    doc = _doc(tmp_path, [*one_node, "[E1108 20:04:34.467642512 socket.cpp:957] [c10d] The client socket has timed out "
                                     "after 900s while trying to connect to (172.17.0.2, 29500)."])
    assert (doc["exit_code"], doc["cause_class"], _ids(doc)[0]) == (1, "port_rendezvous", "c10d.store_timeout")
    doc = _doc(tmp_path, [*one_node, "gpu-a:1:3 [0] misc/socket.cc:484 NCCL WARN Net : Connect to 172.17.0.3<43210> "
                                     "failed : Connection refused"])
    assert doc["exit_code"] == 1 and "nccl.bridge_peer" not in _ids(doc), doc["summary"]
