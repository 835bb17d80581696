"""GPU faults of a node in the logs: the driver's Xid lines (NVIDIA's catalogue, the table the gpu.xid check reads
the kernel log with), a GPU fallen off the bus, an uncorrectable ECC error; the container runtime losing or never
having the GPUs; Slurm cancelling a step. The kernel logs are the recorded ones of tests/data/gpu/kmsg (real nodes,
each file names its thread): this machine has no GPU, so these are the hardware lines a test may only replay."""
from __future__ import annotations

from pathlib import Path

import pytest

from dsv3_preflight.doctor import triage
from dsv3_preflight.reports.doctor_text import render_text

KMSG = Path(__file__).resolve().parents[1] / "data" / "gpu" / "kmsg"


def _recorded(name: str) -> list[str]:
    """A recorded kernel log's lines, without its provenance header."""
    return [line for line in (KMSG / name).read_text().splitlines() if not line.startswith("#")]


def _doctor(tmp_path, **files: list[str]) -> dict:
    paths = []
    for name, lines in files.items():
        path = tmp_path / f"{name.replace('_', '-')}.log"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))
    return triage(paths)


@pytest.mark.parametrize("name, xid, bus, title", [
    ("ogkm1151_xid79.log", "79", "0000:2b:00.0", "GPU has fallen off the bus"),
    ("xe9680_h100_xid119.log", "119", "0000:9b:00.0", "GSP RPC Timeout"),
    ("gpud_xid13_109.log", "109", "0000:cb:00.0", "Context Switch Timeout Error"),   # Xid 13 before it: the program's
    ("akash_h100_xid_43_31_94.log", "94", "0000:00:08.0", "Contained memory error"),  # 43, 31: the program's
])
def test_an_xid_that_needs_the_node_repaired_is_the_root_cause_with_its_meaning_and_the_gpu(tmp_path, name, xid, bus, title):
    d = _doctor(tmp_path, kmsg=_recorded(name))
    head = d["findings"][0]
    assert (d["exit_code"], d["cause_class"], head["id"]) == (1, "gpu_fault", "gpu.xid_fault"), d["summary"]
    assert head["title"].startswith(f"GPU fault: Xid {xid} ({title}") and head["check"] == "gpu.xid"
    assert head["actor"] == "node" and f"nvidia-smi -r -i {bus}\n" in head["fix"]
    assert all(f["role"] == "consequence" for f in d["findings"][1:])   # the program's own Xids (13, 31, 43)


def test_a_rank_that_died_on_a_gpu_fallen_off_the_bus_is_led_by_the_nodes_kernel_log(tmp_path):
    node1 = ["[rank3]:[E1124 10:02:10.000 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation "
             "timeout: WorkNCCL(SeqNum=512, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
             "600011 milliseconds before timing out."]
    node2 = ["[rank11]: RuntimeError: CUDA error: unspecified launch failure", *_recorded("ogkm1151_xid79.log")]
    d = _doctor(tmp_path, gpu_node_1=node1, gpu_node_2=node2)
    head = d["findings"][0]
    assert (head["id"], head["node"], head["actor"]) == ("gpu.xid_fault", "gpu-node-2", "node"), d["summary"]
    assert "nccl.watchdog_timeout" in {f["id"] for f in d["findings"] if f["role"] == "consequence"}
    text = render_text(d)
    assert "who acts: the node's administrator (repair or drain the node) — on gpu-node-2" in text


def test_a_gpu_fallen_off_the_bus_without_an_xid_and_the_cleanup_xid_that_names_its_cause(tmp_path):
    d = _doctor(tmp_path, kmsg=_recorded("nvsentinel155_fallen_off_bus.log"))   # the driver's message, wrapped
    assert (d["cause_class"], d["findings"][0]["id"]) == ("gpu_fault", "gpu.lost"), d["summary"]
    d = _doctor(tmp_path, kmsg=_recorded("ogkm1150_xid45.log"))   # only Xid 45 "caused by previous Xid 149"
    assert (d["cause_class"], d["findings"][0]["id"]) == ("nccl_transport", "gpu.nvlink_xid"), d["summary"]
    assert d["findings"][0]["title"] == "NVLink error (Xid 149)"


def test_xids_nvidia_says_to_ignore_are_no_failure(tmp_path):
    d = _doctor(tmp_path, kmsg=_recorded("stas00_xid63.log"))   # a row marked for remapping: gpu.memory_errors judges it
    assert d["exit_code"] == 5 and not d["findings"], d["summary"]
    d = _doctor(tmp_path, kmsg=["{'loss': 0.42, 'epoch': 1.0}",
                                "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001"])
    assert d["exit_code"] == 0, d["summary"]   # Xid 45 alone: the cleanup of a process that was stopped


@pytest.mark.parametrize("line, cls, sid", [
    ("pynvml.NVMLError_GpuIsLost: GPU is lost", "gpu_fault", "gpu.lost"),
    ("Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU",
     "gpu_fault", "gpu.lost"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "gpu_fault", "cuda.ecc_uncorrectable"),
    ("Failed to initialize NVML: Unknown Error", "cuda_fabric", "container.nvml_lost"),
    ("nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown", "cuda_fabric", "cuda.no_driver"),
    ('docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].',
     "cuda_fabric", "container.no_gpu_runtime"),
])
def test_gpu_and_container_runtime_wordings_name_their_cause_and_the_node(tmp_path, line, cls, sid):
    d = _doctor(tmp_path, run=[line])
    assert (d["cause_class"], d["findings"][0]["id"], d["findings"][0]["actor"]) == (cls, sid, "node"), d["summary"]


def test_an_nccl_error_that_ends_in_ncclS_own_debug_hint_is_an_error_line_not_quiet(tmp_path):
    # "(run with NCCL_DEBUG=INFO for details)" ends NCCL's errors in torch; its INFO is no log level: before, a log
    # whose only failure was such a line said "no error and no progress" (exit 5)
    d = _doctor(tmp_path, run=["RuntimeError: NCCL Error 1: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"])
    assert (d["exit_code"], d["cause_recognised"]) == (1, False), d["summary"]
    d = _doctor(tmp_path, run=["pynvml.NVMLError_NotSupported: Not Supported"])   # pynvml's exception names
    assert (d["exit_code"], d["cause_recognised"]) == (1, False), d["summary"]


def test_slurm_cancelling_the_step_is_a_stop_and_an_error_before_it_still_leads(tmp_path):
    cancel = "slurmstepd: error: *** STEP 1234.0 ON gpu-node-1 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***"
    d = _doctor(tmp_path, run=["{'loss': 0.42, 'epoch': 1.0}", cancel])
    assert d["cause_class"] == "interrupted" and d["exit_code"] == 1, d["summary"]
    d = _doctor(tmp_path, run=["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", cancel])
    assert d["cause_class"] == "gpu_oom", d["summary"]
    node_failure = ("slurmstepd: error: *** STEP 1234.0 ON gpu-node-1 CANCELLED AT 2024-05-01T10:00:00 DUE TO NODE "
                    "FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***")
    d = _doctor(tmp_path, run=[node_failure])   # no stop of the user's: a failure whose cause the log does not give
    assert (d["exit_code"], d["cause_class"]) == (1, "unrecognised"), d["summary"]


def test_an_infiniband_port_that_keeps_going_down_is_the_networks_to_fix(tmp_path):
    # what nccl#905's log was full of; NCCL 2.19+ names the device and port before "Got async event"
    lines = ["gpu-a:1:2 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got async event : port error",
             "gpu-a:1:2 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : mlx5_0:1 Got async event : port error"]
    for line in lines:
        d = _doctor(tmp_path, run=[line])
        head = d["findings"][0]
        assert (head["id"], head["actor"]) == ("nccl.ib_port_event", "network"), (line, d["summary"])
        assert head["title"] == "An InfiniBand/RoCE port changed state during the run (port error)"
