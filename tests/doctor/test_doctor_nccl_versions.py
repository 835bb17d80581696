"""NCCL changes its wording between releases: the doctor must know the messages of the NCCL a user runs, not only
the ones of the threads in the corpus. Each line below is an NCCL format string (WARN/INFO in the release and file
named) filled in as NCCL prints it; torch shows the last one again after "Last error:". NCCL cannot run on this
machine, so the format strings are the source of truth (read from github.com/NVIDIA/nccl at those tags).

The cases were found by running the doctor over the WARN format strings of socket.cc, bootstrap.cc, init.cc and
topo.cc of 2.18 to 2.30.7 (and, later, of every revision of socket.cc, socket.h, bootstrap.cc, net_socket.cc, init.cc,
net.cc and proxy.cc in NCCL's history): every one here was "cause not recognised" before, among them the two ways
NCCL 2.30 reports two ranks on one GPU, which replaced "Duplicate GPU detected", and 2.24-2.26's retry wording,
which names no peer."""
import pytest

from dsv3_preflight.doctor import triage

P = "gpu-a:4101:4190 [0]"
CASES = [
    # (release: file, the line, class, signature)
    ("2.30.7 src/init.cc", f"{P} init.cc:1057 NCCL WARN Multiple Ranks are using the same GPU/Partition. Set "
     "NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration.", "pci_rank_dup", "nccl.duplicate_gpu"),
    ("2.30.3 src/graph/topo.cc", f"{P} graph/topo.cc:1977 NCCL WARN Multiple ranks detected using the same GPU on this "
     "node. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this configuration.", "pci_rank_dup", "nccl.duplicate_gpu"),
    ("2.30.3 src/graph/topo.cc (INFO)", f"{P} NCCL INFO Detected ranks 27 and 19 sharing GPU with bus 53000 on this node",
     None, "nccl.ranks_share_gpu"),
    ("2.27 src/misc/socket.cc, 2.30 src/os/linux.cc", f"{P} misc/socket.cc:577 NCCL WARN socketStartConnect: connect to "
     "10.1.2.3<45678> returned Connection refused, exceeded error retry count after 35 attempts", "nic_iface",
     "nccl.socket_connect_failed"),
    ("2.24-2.26 src/misc/socket.cc", f"{P} misc/socket.cc:543 NCCL WARN socketPollConnect: connect returned Connection "
     "refused, exceeded error retry count (35)", "nic_iface", "nccl.socket_connect_failed"),
    ("2.24-2.26 src/misc/socket.cc", f"{P} misc/socket.cc:582 NCCL WARN socketPollConnect poll() returned 0, no POLLOUT "
     "events", "nic_iface", "nccl.socket_connect_failed"),
    ("2.30 src/init.cc", f"{P} init.cc:1339 NCCL WARN Detected mixed local Net device counts across ranks (min 4, max 8). "
     "Set NCCL_IGNORE_NET_MISMATCH=1 to continue.", "nccl_transport", "nccl.net_device_count_mismatch"),
    ("2.27 src/misc/socket.cc", f"{P} misc/socket.cc:591 NCCL WARN socketStartConnect: connect to 10.1.2.3<45678> failed : "
     "No route to host", "nic_iface", "nccl.socket_connect_failed"),
    ("2.27 src/misc/socket.cc", f"{P} misc/socket.cc:617 NCCL WARN socketPollConnect to 10.1.2.3<45678> failed with error "
     "Connection refused", "nic_iface", "nccl.socket_connect_failed"),
    ("2.21 src/misc/socket.cc", f"{P} misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.1.2.3<45678> returned "
     "111(Connection refused) errno 115(Operation now in progress)", "nic_iface", "nccl.socket_connect_failed"),
    ("2.18 src/misc/socket.cc", f"{P} misc/socket.cc:516 NCCL WARN socketPollConnect: exceeded retries (20000)", "nic_iface",
     "nccl.socket_connect_failed"),
    ("2.18 src/misc/socket.cc", f"{P} misc/socket.cc:475 NCCL WARN socketStartConnect: exceeded timeouts (20)", "nic_iface",
     "nccl.socket_connect_failed"),
    ("2.27 src/misc/socket.cc (INFO)", f"{P} NCCL INFO socketStartConnect: connect to 10.1.2.3<45678> returned Connection "
     "refused, retrying (1/34) after sleep for 100 msec", "nic_iface", "nccl.connect_retry"),
    ("2.18-2.30 src/bootstrap.cc", f"{P} bootstrap.cc:348 NCCL WARN Bootstrap Root : rank 3 of 16 ranks has already "
     "checked in", "port_rendezvous", "nccl.bootstrap_root_mismatch"),
    ("2.18 src/bootstrap.cc", f"{P} bootstrap.cc:330 NCCL WARN Bootstrap Root : mismatch in rank count from procs 16 : 8",
     "port_rendezvous", "nccl.bootstrap_root_mismatch"),
    ("2.30 src/bootstrap.cc", f"{P} bootstrap.cc:579 NCCL WARN no device found after excluding lo, verify "
     "NCCL_OOB_NET_IFNAME", "nic_iface", "nccl.no_socket_interface"),
]


@pytest.mark.parametrize("where,line,cls,sig", CASES, ids=[c[3] + ":" + c[0] for c in CASES])
def test_a_message_of_this_nccl_release_is_diagnosed(tmp_path, where, line, cls, sig):
    log = tmp_path / "rank0.log"
    log.write_text(line + "\n")
    doc = triage([str(log)])
    assert sig in [f["id"] for f in doc["findings"] + doc["warnings"]], (where, doc["summary"])
    if cls is not None:   # an INFO line alone is a suspect: a cause only in a failed run
        assert (doc["exit_code"], doc["cause_class"], doc["findings"][0]["id"]) == (1, cls, sig), (where, doc["summary"])


def test_two_ranks_on_one_gpu_under_nccl_2_30_as_torch_reports_it(tmp_path):
    # torch's DistBackendError carries NCCL's last error on the lines after "Last error:"; with NCCL_DEBUG=INFO the
    # ranks and the bus are on an INFO line before it
    log = tmp_path / "rank27.log"
    log.write_text(
        "gpu-c:7721:7721 [3] NCCL INFO Detected ranks 19 and 27 sharing GPU with bus 53000 on this node\n"
        "[rank27]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:3356, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.30.7\n"
        "[rank27]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
        "[rank27]: Last error:\n"
        "[rank27]: Multiple Ranks are using the same GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1 to enable this "
        "configuration.\n")
    doc = triage([str(log)])
    assert (doc["exit_code"], doc["cause_class"], doc["findings"][0]["id"]) == (1, "pci_rank_dup", "nccl.duplicate_gpu")
    share = next(f for f in doc["findings"] if f["id"] == "nccl.ranks_share_gpu")
    assert share["title"] == "Ranks 19 and 27 share the GPU with bus 53000" and share["check"] == "gpu.rank_mapping"


def test_ranks_sharing_a_gpu_on_purpose_is_no_failure(tmp_path):
    # NCCL_MULTI_RANK_GPU_ENABLE=1: NCCL says so and goes on; the run's progress makes it healthy, with a warning
    log = tmp_path / "ok.log"
    log.write_text(f"{P} NCCL INFO Detected ranks 0 and 1 sharing GPU with bus 1b000 on this node\n"
                   f"{P} NCCL INFO Multiple ranks on the same GPU detected and allowed. Disabling NVLS.\n"
                   f"{P} NCCL INFO comm 0x55d1c4a0 rank 0 nranks 2 cudaDev 0 busId 1b000 - Init COMPLETE\n")
    doc = triage([str(log)])
    assert (doc["verdict"], doc["exit_code"]) == ("healthy", 0)
    assert [w["id"] for w in doc["warnings"]] == ["nccl.ranks_share_gpu"]


MORE = [
    ("2.30.7 src/ras/ras.cc", f"{P} ras/ras.cc:415 NCCL WARN NCCL version mismatch with remote peer 10.1.2.3<45678> "
     "(local: 2.30.7, remote 2.27.3)", "version_drift", "nccl.version_mismatch"),
    ("2.30.7 src/dev_runtime.cc", f"{P} dev_runtime.cc:1428 NCCL WARN NCCL library is not backwards compatible. This "
     "application was compiled with NCCL version 2.30.7, but is running with NCCL library version 2.27.3.",
     "version_drift", "nccl.library_too_old"),
    ("2.21.5 src/graph/paths.cc", f"{P} graph/paths.cc:325 NCCL WARN P2P is disabled between NVLINK connected GPUs 3 and 2. "
     "This should not be the case given their connectivity, and is probably due to a hardware issue. If you still want "
     "to proceed, you can set NCCL_IGNORE_DISABLED_P2P=1.", "nccl_transport", "nccl.p2p_disabled_nvlink"),
    ("2.21.5 src/include/alloc.h", f"{P} include/alloc.h:186 NCCL WARN Failed to CUDA malloc 33554432 bytes", "gpu_oom",
     "nccl.cuda_alloc_failed"),
]


@pytest.mark.parametrize("where,line,cls,sig", MORE, ids=[c[3] + ":" + c[0] for c in MORE])
def test_versions_transport_and_memory_messages_of_current_nccl(tmp_path, where, line, cls, sig):
    log = tmp_path / "rank0.log"
    log.write_text(line + "\n")
    doc = triage([str(log)])
    assert (doc["exit_code"], doc["cause_class"], doc["findings"][0]["id"]) == (1, cls, sig), (where, doc["summary"])


# Gloo (torch's CPU backend and the one vLLM and DeepSpeed use for CPU groups), github.com/pytorch/gloo at 70dc360:
# its GLOO_ERROR_MSG prefixes "[file:line] "; torch raises it as a RuntimeError
G = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/"
GLOO = [
    ("pair.h:311", f"{G}pair.h:311] Connect timeout [10.0.0.2]:24310", "nic_iface", "gloo.connect_refused"),
    ("pair.cc:523", f"{G}pair.cc:523] Read timeout [10.0.0.2]:24310", "nccl_hang", "gloo.recv_timeout"),
    ("pair.cc:314", f"{G}pair.cc:314] Write timeout [10.0.0.2]:24310", "nccl_hang", "gloo.recv_timeout"),
    ("pair.cc:201", f"{G}pair.cc:201] Socket unexpectedly closed [10.0.0.2]:24310", None, "net.connection_closed"),
]


@pytest.mark.parametrize("where,line,cls,sig", GLOO, ids=[c[3] + ":" + c[0] for c in GLOO])
def test_gloo_transport_messages(tmp_path, where, line, cls, sig):
    log = tmp_path / "rank0.log"
    log.write_text(line + "\n")
    doc = triage([str(log)])
    top = doc["findings"][0]
    assert top["id"] == sig, (where, doc["summary"])
    if cls is None:   # a consequence that names no cause: the failure is "not recognised" unless something else is
        assert (doc["exit_code"], top["role"], doc["cause_recognised"]) == (1, "consequence", False)
    else:
        assert (doc["exit_code"], doc["cause_class"]) == (1, cls)
