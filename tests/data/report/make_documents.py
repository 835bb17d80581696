"""Writes the stored result documents the report tests render.

Format: dsv3-preflight result document, schema_version 1 (dsv3_preflight/schema/result.schema.json),
built with the real dsv3_preflight.document.build_document. The node facts and evidence follow the
shapes the probes record (or, for GPU/network/collective/LoRA evidence, the shapes their owners
announced: "mapping" rows, "sweep" rows {bytes, algbw_gbps, busbw_gbps}, "log_tail" lines,
nic_route {interface, source, gateway, mtu}); the values are those of a 3 x 8 H100 cluster.
Run: .venv/bin/python tests/data/report/make_documents.py
"""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from dsv3_preflight.document import build_document
from dsv3_preflight.result import Result

HERE = Path(__file__).resolve().parent
T0 = dt.datetime(2026, 11, 21, 23, 40, 12, tzinfo=dt.timezone.utc)


def profile(nnodes: int, master: str = "10.10.0.11") -> dict:
    values = {"nnodes": nnodes, "nproc_per_node": 8, "node_rank": 0, "world_size": None, "master_addr": master,
              "master_port": 39500, "cuda_visible_devices": None, "gpus_per_node": 8,
              "gpu_models": ["A100", "H100", "H200", "H800", "A800"], "backend": "nccl",
              "model_path": "/nfs/models/DeepSeek-V3", "output_dir": "/nfs/runs/lora-7", "checkpoint_dir": "/nfs/ckpt/lora-7",
              "deepspeed_config": "/nfs/runs/lora-7/ds_zero3.json", "lora_targets": ["q_proj", "kv_a_proj_with_mqa"],
              "lora_rank": 16, "shm_min_gib": 64.0, "probe_timeout": 10.0, "collective_timeout": 60.0,
              "run_timeout": 300.0, "min_busbw_gbps": 150.0}
    sources = {k: "default" for k in values}
    sources.update(nnodes="env NNODES", master_addr="env MASTER_ADDR", model_path="--model-path",
                   deepspeed_config="preflight.toml", lora_targets="preflight.toml", lora_rank="preflight.toml")
    return {"name": "dsv3", "values": values, "sources": sources}


def node(name: str, rank: int, ip: str, *, state: str = "ok", error: str | None = None, nccl_ifname: str = "ens9f0np0") -> dict:
    if state != "ok":
        return {"node": name, "node_rank": rank, "state": state, "error": error, "identity": {}, "facts": {},
                "fact_errors": {}, "fact_timings_s": {}}
    return {
        "node": name, "node_rank": rank, "state": "ok", "error": None,
        "identity": {"hostname": name, "ip": ip},
        "facts": {
            "versions": {"driver": "550.90.07", "kernel_module": "550.90.07", "fabric_manager": "550.90.07",
                         "cuda_driver": "12.4", "cuda_runtime": "12.1", "nccl": "2.20.5", "nccl_source": "nvidia-nccl-cu12",
                         "python": "3.11.9", "torch": "2.3.1+cu121", "deepspeed": "0.14.4", "peft": "0.11.1"},
            "nvml": {"available": True, "driver_version": "550.90.07", "cuda_driver_version_str": "12.4",
                     "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": f"0000:{0x18 + 16 * i:02X}:00.0"}
                              for i in range(8)]},
            "nic_route": {"master_addr": "10.10.0.11", "target": "10.10.0.11", "ifname": "ens9f0np0", "src": ip,
                          "gateway": None, "mtu": 9000, "operstate": "up", "role": "head" if rank == 0 else "worker"},
            "env": {"NCCL_SOCKET_IFNAME": nccl_ifname, "NCCL_IB_HCA": "mlx5_0,mlx5_1", "HF_TOKEN": "hf_live_secret_value",
                    "WANDB_API_KEY": "0123456789abcdef", "MASTER_ADDR": "10.10.0.11", "NCCL_DEBUG": "INFO"},
            "shm": {"path": "/dev/shm", "exists": True, "total_bytes": 540 * 2**30, "free_bytes": 538 * 2**30},
        },
        "fact_errors": {}, "fact_timings_s": {"versions": 0.8, "nvml": 0.12, "nic_route": 0.003},
    }


def mapping_rows(nodes: list[str], duplicate: bool = False) -> list[dict]:
    rows = []
    for n, name in enumerate(nodes):
        for local in range(8):
            global_rank = n * 8 + local
            if duplicate and n == 1:
                global_rank = local  # gpu-b started with NODE_RANK=0: its ranks collide with gpu-a's
            rows.append({"node": name, "rank": global_rank, "local_rank": local, "cuda_device": local,
                         "pci_bus_id": f"0000:{0x18 + 16 * local:02X}:00.0", "numa": local // 4, "nic": f"mlx5_{local // 2}"})
    return rows


def sweep(peak_algbw: float) -> list[dict]:
    """all_reduce over 24 ranks: bus bandwidth = algorithm bandwidth x 2(n-1)/n = x 1.9167; saturates at peak."""
    rows = []
    for k in range(16, 31, 2):
        alg = round(peak_algbw * (2**k) / (2**k + 2**22), 2)
        rows.append({"bytes": 2**k, "algbw_gbps": alg, "busbw_gbps": round(alg * 46 / 24, 2)})
    return rows


LOG_TAIL = [
    "gpu-a:41234:41234 [0] NCCL INFO Bootstrap : Using ens9f0np0:10.10.0.11<0>",
    "gpu-a:41234:41234 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ens9f0np0:10.10.0.11<0>",
    "gpu-a:41234:41290 [0] NCCL INFO Channel 00/32 :    0   1   2   3   4   5   6   7   8   9  10  11  12  13  14  15",
    "gpu-a:41234:41290 [0] NCCL INFO Connected all rings",
    "gpu-a:41234:41290 [0] NCCL INFO comm 0x55d5c0 rank 0 nranks 16 cudaDev 0 busId 18000 - Init COMPLETE",
]


def write(name: str, doc: dict) -> None:
    doc["finished"] = (T0 + dt.timedelta(seconds=47)).isoformat(timespec="seconds")
    (HERE / name).write_text(json.dumps(doc, indent=1) + "\n")


def main() -> None:
    # green: one healthy node
    ok = [
        Result.passed("launch variables coherent (world size 24, rendezvous 10.10.0.11:39500)",
                      {"variables": {"WORLD_SIZE": 24, "MASTER_ADDR": "10.10.0.11", "MASTER_PORT": 39500}}),
        Result.passed("/dev/shm 540.0 GiB, checkpoint dir writable, port 39500 and GPUs not held",
                      {"shm": {"path": "/dev/shm", "free_bytes": 538 * 2**30}, "port_holders": [], "gpu_holders": []}),
        Result.passed("8 x NVIDIA H100 80GB HBM3, driver 550.90.07, fabric manager 550.90.07 running",
                      {"mapping": mapping_rows(["gpu-a"]), "fabric": {"state": "completed", "status": "success"}}),
        Result.passed("route to 10.10.0.11 leaves by ens9f0np0 (MTU 9000), matching NCCL_SOCKET_IFNAME",
                      {"route": {"interface": "ens9f0np0", "source": "10.10.0.11", "gateway": None, "mtu": 9000}}),
        Result.skipped("collective probe needs --all-nodes --probe"),
    ]
    names = ["env.launch_vars", "host.resources", "gpu.inventory", "net.route", "nccl.allreduce"]
    write("green_single_node.json", build_document(
        mode="node", profile=profile(1), nodes=[node("gpu-a", 0, "10.10.0.11")],
        results=[r.stamped(name=n, node="gpu-a", duration_s=0.05 * (i + 1)) for i, (r, n) in enumerate(zip(ok, names))],
        command=["dsv3-preflight", "run", "--profile", "dsv3"], started=T0))

    # red: one node with a held port, a missing CUDA_DEVICE_ORDER, slow bandwidth and a broken adapter
    red = [
        Result.failed("CUDA_DEVICE_ORDER is unset, not 'PCI_BUS_ID': FASTEST_FIRST order can differ between nodes",
                      {"variables": {"CUDA_DEVICE_ORDER": None, "MASTER_ADDR": "10.10.0.11", "HF_TOKEN": "hf_should_be_masked"}},
                      "export CUDA_DEVICE_ORDER=PCI_BUS_ID"),
        Result.failed("port 39500 is held by pid 4242 (python train.py --deepspeed ds_zero3.json)",
                      {"port_holders": [{"pid": 4242, "user": "alice", "cmdline": "python train.py --deepspeed ds_zero3.json"}]},
                      "kill 4242   # after checking it is a leftover of the previous run"),
        Result.warned("all-reduce bus bandwidth peaks at 52.3 GB/s, below min_busbw_gbps 150",
                      {"sweep": sweep(27.4), "log_tail": LOG_TAIL + ["gpu-a:41234:41290 [0] NCCL INFO NET/Socket : Using ens3:172.17.0.2<0> (fallback)"]},
                      "export NCCL_SOCKET_IFNAME=ens9f0np0\nexport NCCL_IB_HCA=mlx5_0,mlx5_1"),
        Result.failed("adapter_model.safetensors: 2 LoRA tensors target modules absent from the model",
                      {"findings": [{"file": "/nfs/runs/lora-7/adapter_model.safetensors", "tensor": "base_model.model.layers.0.mlp.gate_proj.lora_A.weight",
                                     "problem": "target module gate_proj is not in lora_targets"},
                                    {"file": "/nfs/runs/lora-7/adapter_model.safetensors", "tensor": "base_model.model.layers.0.mlp.gate_proj.lora_B.weight",
                                     "problem": "target module gate_proj is not in lora_targets"}]},
                      "set lora_targets = [\"q_proj\", \"kv_a_proj_with_mqa\", \"gate_proj\"] in preflight.toml"),
        Result.passed("8 x NVIDIA H100 80GB HBM3, driver 550.90.07", {"mapping": mapping_rows(["gpu-a"])}),
    ]
    names = ["env.launch_vars", "host.resources", "nccl.allreduce", "lora.safetensors", "gpu.inventory"]
    write("red_single_node.json", build_document(
        mode="node", profile=profile(1), nodes=[node("gpu-a", 0, "10.10.0.11")],
        results=[r.stamped(name=n, node="gpu-a", duration_s=0.1 * (i + 1)) for i, (r, n) in enumerate(zip(red, names))],
        command=["dsv3-preflight", "run", "--profile", "dsv3", "--hf-token=hf_cli_secret"], started=T0))

    # three nodes: gpu-c dead, gpu-b started with NODE_RANK=0 (duplicate global ranks)
    nodes = [node("gpu-a", 0, "10.10.0.11"), node("gpu-b", 1, "10.10.0.12"),
             node("gpu-c", 2, "10.10.0.13", state="error",
                  error="Ray task on gpu-c died: node 10.10.0.13 stopped sending heartbeats (raylet unreachable after 30 s)")]
    results = []
    for n in ("gpu-a", "gpu-b"):
        results.append(Result.passed("launch variables coherent").stamped(name="env.launch_vars", node=n, duration_s=0.02))
        results.append(Result.passed("8 x NVIDIA H100 80GB HBM3, driver 550.90.07",
                                     {"mapping": mapping_rows([n]), "fabric": {"state": "completed"}}).stamped(name="gpu.inventory", node=n, duration_s=0.3))
        results.append(Result.passed("route to 10.10.0.11 leaves by ens9f0np0 (MTU 9000)",
                                     {"route": {"interface": "ens9f0np0", "source": nodes[0 if n == "gpu-a" else 1]["identity"]["ip"], "gateway": None, "mtu": 9000}}
                                     ).stamped(name="net.route", node=n, duration_s=0.01))
    results.append(Result._engine_error("node gpu-c gave no result: Ray task died (raylet unreachable after 30 s)",
                                        {"node": "gpu-c", "address": "10.10.0.13", "last_heartbeat_s_ago": 31.2},
                                        "ssh gpu-c 'systemctl status raylet; journalctl -u raylet -n 50'   # then: ray start --address=10.10.0.11:6379"
                                        ).stamped(name="cluster.nodes_alive", node="gpu-c", duration_s=30.0))
    results.append(Result.failed("global ranks 0-7 are claimed by both gpu-a and gpu-b (gpu-b has NODE_RANK=0)",
                                 {"mapping": mapping_rows(["gpu-a", "gpu-b"], duplicate=True),
                                  "node_ranks": {"gpu-a": 0, "gpu-b": 0, "gpu-c": None}},
                                 "on gpu-b: export NODE_RANK=1   # and NODE_RANK=2 on gpu-c").stamped(name="cluster.rank_mapping", node="cluster", duration_s=0.01))
    results.append(Result.skipped("collective probe needs every node; gpu-c is down").stamped(name="nccl.allreduce", node="cluster", duration_s=0.0))
    doc = build_document(mode="cluster", profile=profile(3), nodes=nodes, results=results,
                         command=["dsv3-preflight", "run", "--all-nodes", "--probe"], started=T0)
    # doc["doctor"]: the shape of dsv3_preflight.doctor.triage's document
    doc["doctor"] = {"tool": "dsv3-preflight doctor", "verdict": "failure",
                     "summary": "gpu-b joined as node rank 0: the rendezvous waits for ranks 8-23", "findings": [
        {"id": "rendezvous.duplicate_node_rank", "kind": "cause", "role": "root_cause", "count": 8, "nodes": ["gpu-b"],
         "ranks": list(range(8)), "local_rank": 0, "explained_by": None,
         "class": "rendezvous", "title": "Two nodes claim node rank 0", "root_cause": "gpu-b was launched with NODE_RANK=0, so torchrun gives it global ranks 0-7, the same as gpu-a; the rendezvous waits forever for ranks 8-23.",
         "fix": "export NODE_RANK=1   # on gpu-b", "check": "cluster.rank_mapping", "node": "gpu-b", "rank": 0,
         "evidence": [{"file": "/nfs/runs/lora-7/logs/gpu-b.log", "line": 12, "text": "torch.distributed.elastic: [default0]: rank=0 local_rank=0 world_size=24"}]},
        {"id": "collective.timeout", "kind": "symptom", "role": "consequence", "count": 16, "nodes": ["gpu-a", "gpu-b"],
         "ranks": list(range(8)), "local_rank": 3, "explained_by": "rendezvous.duplicate_node_rank", "class": "collective_timeout",
         "title": "Watchdog caught collective operation timeout", "root_cause": "the ranks never formed one group",
         "fix": None, "check": "dist.allreduce", "node": "gpu-a", "rank": 3,
         "evidence": [{"file": "/nfs/runs/lora-7/logs/gpu-a.log", "line": 88, "text": "[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600000 milliseconds"}]},
    ], "warnings": [], "unrecognised": {"count": 1, "first": [{"file": "/nfs/runs/lora-7/logs/gpu-b.log", "line": 40, "text": "ERROR: something new"}]}}
    write("cluster_dead_node_duplicate_rank.json", doc)

    # per-node documents from `pytest checks/` runs (merged by `report A.json B.json`)
    for i, n in enumerate(("gpu-a", "gpu-b")):
        rs = [Result.passed("launch variables coherent").stamped(name="env.launch_vars", node=n, duration_s=0.02),
              Result.passed("8 x NVIDIA H100 80GB HBM3").stamped(name="gpu.inventory", node=n, duration_s=0.3)]
        if n == "gpu-b":
            rs.append(Result.failed("/dev/shm has 8.0 GiB free, below shm_min_gib 64",
                                    {"shm": {"path": "/dev/shm", "free_bytes": 8 * 2**30}},
                                    "docker run --shm-size=256g ...   # or: mount -o remount,size=256G /dev/shm"
                                    ).stamped(name="host.resources", node=n, duration_s=0.01))
        else:
            rs.append(Result.passed("/dev/shm 538.0 GiB free").stamped(name="host.resources", node=n, duration_s=0.01))
        write(f"pytest_{n}.json", build_document(
            mode="pytest", profile=profile(3), nodes=[node(n, i, f"10.10.0.{11 + i}")], results=rs,
            command=["pytest", "checks/", "--preflight-json", f"pytest_{n}.json"],
            started=T0 + dt.timedelta(minutes=i)))


if __name__ == "__main__":
    main()
