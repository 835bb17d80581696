"""Triage of real-format log excerpts: the root cause, where it happened, the fix and the check that catches it."""
import json
import re
from pathlib import Path

import pytest

from dsv3_preflight.doctor import triage
from dsv3_preflight.doctor.reader import clean

DATA = Path(__file__).resolve().parent / "data" / "doctor"

# file → (headline signature, class, check, node, rank)
CASES = [
    ("cuda_802_fabricmanager.log", "fabricmanager.version_mismatch", "cuda_init", "gpu.cuda_init", "gpu-node-2", None),
    ("duplicate_gpu.log", "nccl.duplicate_gpu", "rank_mapping", "gpu.rank_mapping", "gpu-node-1", 11),
    ("port_in_use.log", "c10d.address_in_use", "rendezvous", "net.port_free", None, None),
    ("rendezvous_timeout.log", "c10d.client_timeout", "rendezvous", "net.port_reach", None, None),
    ("numeric_hostname.log", "c10d.numeric_hostname", "rendezvous", "net.port_reach", None, None),
    ("nic_gloo_no_address.log", "gloo.no_address_for_interface", "nic_selection", "net.nic_route", None, 0),
    ("nic_no_socket_interface.log", "nccl.no_socket_interface", "nic_selection", "net.nic_route", None, None),
    ("nic_loopback_multinode.log", "nccl.loopback_selected", "nic_selection", "net.nic_route", "gpu-node-1", None),
    ("watchdog_timeout.log", "nccl.watchdog_timeout", "collective_timeout", "dist.allreduce", None, 0),
    ("ib_completion.log", "nccl.ib_completion_error", "transport", "dist.allreduce", "kp-ddp-worker-0", None),
    ("shm_no_space.log", "nccl.shm_no_space", "transport", "host.resources", "gpu-node-0", None),
    # host.resources finds a leftover holding GPU memory; lora.deepspeed_config (gather flag, pinning) never sees an OOM
    ("cuda_oom.log", "cuda.out_of_memory", "oom", "host.resources", None, 9),
    ("lora_empty_adapter.log", "lora.empty_tensor_on_load", "lora_save", "lora.deepspeed_config", None, None),
    ("safetensors_header.log", "safetensors.bad_header", "lora_save", "lora.scan", None, None),
    ("peft_targets.log", "peft.target_modules_not_found", "lora_save", "lora.targets", None, None),
]


@pytest.mark.parametrize("name,sig_id,cls,check,node,rank", CASES, ids=[c[0] for c in CASES])
def test_doctor_names_the_root_cause_with_its_fix_and_check(name, sig_id, cls, check, node, rank):
    doc = triage([str(DATA / name)])
    assert doc["verdict"] == "failure"
    top = doc["findings"][0]
    assert (top["id"], top["class"], top["check"]) == (sig_id, cls, check)
    assert (top["node"], top["rank"]) == (node, rank)
    assert top["root_cause"] and not re.search(r"\{\w+\}", top["title"]), "an unfilled placeholder"
    json.dumps(doc)  # plain JSON types


@pytest.mark.parametrize("name", [c[0] for c in CASES] + ["multirank_interleaved.log"])
def test_evidence_points_at_the_real_file_line(name):
    path = DATA / name
    lines = path.read_bytes().split(b"\n")
    for f in triage([str(path)])["findings"]:
        for ev in f["evidence"]:
            assert ev["file"] == str(path)
            shown = ev["text"].strip("…")[:40]
            assert shown and shown in clean(lines[ev["line"] - 1])
            assert not ev["text"].startswith("#"), "a source comment of the data file was read as evidence"


def test_interleaved_ranks_root_cause_is_the_oom_on_rank_13_and_the_rest_are_its_consequences():
    doc = triage([str(DATA / "multirank_interleaved.log")])
    top, rest = doc["findings"][0], doc["findings"][1:]
    assert (top["id"], top["role"], top["rank"], top["node"]) == ("cuda.out_of_memory", "root_cause", 13, "gpu-node-1")
    assert {f["id"] for f in rest} >= {"nccl.watchdog_timeout", "nccl.remote_error", "nccl.connection_closed",
                                      "elastic.child_failed"}
    assert all(f["role"] == "consequence" and f["explained_by"] == "cuda.out_of_memory" for f in rest)
    watchdog = next(f for f in rest if f["id"] == "nccl.watchdog_timeout")
    assert watchdog["title"] == "Collective ALLREDUCE (SeqNum 1580) timed out after 600000 ms"
    assert watchdog["ranks"] == [8, 9] and watchdog["count"] == 2
    assert "root cause: CUDA out of memory" in doc["summary"]


def test_directory_of_node_logs_puts_the_cuda_init_failure_of_node2_before_the_timeouts_of_the_others():
    doc = triage([str(DATA / "nodes")])
    assert [f["node"] for f in doc["files"]] == ["gpu-node-0", "gpu-node-1", "gpu-node-2"]
    top = doc["findings"][0]
    assert (top["id"], top["node"], top["rank"]) == ("cuda.error_802", "gpu-node-2", 16)
    timeout = doc["findings"][1]
    assert timeout["id"] == "nccl.watchdog_timeout" and timeout["nodes"] == ["gpu-node-0", "gpu-node-1"]
    assert timeout["explained_by"] == "cuda.error_802"


def test_fabric_manager_mismatch_explains_error_802_and_names_both_versions():
    doc = triage([str(DATA / "cuda_802_fabricmanager.log")])
    ids = [f["id"] for f in doc["findings"]]
    assert ids == ["fabricmanager.version_mismatch", "fabricmanager.service_failed", "cuda.error_802"]
    assert [f["role"] for f in doc["findings"]] == ["root_cause", "consequence", "consequence"]
    assert doc["findings"][2]["explained_by"] == "fabricmanager.version_mismatch"
    top = doc["findings"][0]
    assert top["title"] == "Fabric Manager 535.183.01 does not match the driver 535.230.02"
    assert "=535.230.02-1" in top["fix"]


def test_duplicate_gpu_names_both_ranks_and_the_bus_id():
    top = triage([str(DATA / "duplicate_gpu.log")])["findings"][0]
    assert top["title"] == "Duplicate GPU: rank 11 and rank 8 both on CUDA device 53000"
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in top["fix"] and top["count"] == 3


def test_numeric_hostname_is_reported_before_the_connect_failures_it_causes():
    doc = triage([str(DATA / "numeric_hostname.log")])
    assert [f["id"] for f in doc["findings"]] == ["c10d.numeric_hostname", "c10d.client_connect_failed"]
    assert doc["findings"][1]["explained_by"] == "c10d.numeric_hostname"
    assert "6841231" in doc["findings"][0]["title"] or "0.104.99.143" in json.dumps(doc["findings"][0]["evidence"])


def test_port_in_use_fix_names_the_port():
    top = triage([str(DATA / "port_in_use.log")])["findings"][0]
    assert top["title"] == "Rendezvous port 39500 already in use" and "sport = :39500" in top["fix"]


def test_healthy_log_is_healthy_and_the_ipv6_lookup_warning_is_only_a_warning():
    doc = triage([str(DATA / "healthy_run.log")])
    assert doc["verdict"] == "healthy" and doc["findings"] == []
    assert [w["id"] for w in doc["warnings"]] == ["c10d.ipv6_lookup"]
    assert {h["id"] for h in doc["healthy_signs"]} >= {"nccl.init_complete", "hf.running_training",
                                                         "deepspeed.zero_offload_ready"}


def test_log_without_errors_or_success_signs_is_unknown_not_guessed():
    doc = triage([str(DATA / "no_known_failure.log")])
    assert doc["verdict"] == "unknown" and doc["findings"] == []
    assert "no sign of a successful start" in doc["summary"]


def test_unrecognised_error_makes_the_verdict_unknown_and_shows_the_line():
    doc = triage([str(DATA / "unrecognised_error.log")])
    assert doc["verdict"] == "unknown" and doc["findings"] == []
    assert doc["unrecognised"]["count"] == 1
    assert "TensorBoardCallback requires tensorboard" in doc["unrecognised"]["first"][0]["text"]
    assert doc["unrecognised"]["first"][0]["line"] == 5


def test_loopback_in_a_healthy_single_node_log_is_a_warning_not_a_failure(tmp_path):
    log = tmp_path / "single.log"
    log.write_text("gpu-node-0:5120:5120 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\n"
                   "gpu-node-0:5120:5301 [0] NCCL INFO comm 0x7ff1ec001060 rank 0 nranks 1 cudaDev 0 busId 7000 - Init COMPLETE\n")
    doc = triage([str(log)])
    assert doc["verdict"] == "healthy"
    assert [w["id"] for w in doc["warnings"]] == ["nccl.loopback_selected"]


def test_secrets_in_evidence_lines_are_masked(tmp_path):
    log = tmp_path / "secret.log"
    log.write_text("HF_TOKEN=hf_abcdefSECRET RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB\n")
    text = triage([str(log)])["findings"][0]["evidence"][0]["text"]
    assert "hf_abcdefSECRET" not in text and "HF_TOKEN=***" in text


def test_unreadable_and_missing_inputs_are_listed_and_the_rest_still_triaged(tmp_path):
    doc = triage([str(tmp_path / "missing.log"), str(DATA / "cuda_oom.log")])
    assert doc["unreadable"] == [{"path": str(tmp_path / "missing.log"), "error": "no such file or directory"}]
    assert doc["findings"][0]["id"] == "cuda.out_of_memory"
