"""``gpu_oom``: GPU out of memory.

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from .record import S, Signature

SIGNATURES: tuple[Signature, ...] = (
    S(id="nccl.cuda_alloc_failed", cls="gpu_oom", kind="cause", needles=(b"Failed to CUDA malloc", b"Failed to CUDA calloc"),
      pattern=r"Failed to CUDA (?:malloc|calloc)(?: async)? (?P<bytes>\d+) bytes",
      title="NCCL could not allocate {bytes} bytes of GPU memory",
      root_cause="NCCL's buffers did not fit in what the GPU had left: the model, activations or another process took the "
      "memory before NCCL initialised (or grew its channels).",
      fix="nvidia-smi --query-compute-apps=pid,used_memory --format=csv    # nothing else may hold the GPUs\n"
      "dsv3-preflight run --only gpu.inventory\n"
      "# create the process group (and run one collective) before loading the model, or lower the memory per rank",
      check="gpu.inventory", tier=1,
      example="gpu-a:4101:4190 [0] include/alloc.h:186 NCCL WARN Failed to CUDA calloc 6291456 bytes",
      source="NCCL 2.21.5 src/include/alloc.h:186 (format string)"),
    # Ray's memory monitor (src/ray/raylet/node_manager.cc, worker_killing_policy): when a node's host RAM passes
    # RAY_memory_usage_threshold (0.95) it kills the most recently scheduled worker and raises ray.exceptions.
    # OutOfMemoryError in its caller; the raylet prints a summary per period. Host memory, not the GPU's: ahead of
    # the CUDA rule, whose bare "OutOfMemoryError" would take the line
    S(id="ray.memory_monitor_kill", cls="host_resources", kind="cause", needles=(b"running low on memory", b"killed due to memory pressure"),
      pattern=r"(?:Task was killed|\d+ worker\(s\) were killed) due to the node running low on memory\.?"
      r"(?:\s*Memory on the node \(IP: (?P<ip2>[\w.:]+))?"
      r"|(?P<count>\d+) Workers \(tasks / actors\) killed due to memory pressure \(OOM\).*?at node \(ID: \w+, IP: (?P<ip>[\w.:]+)\)"
      r"|killed due to memory pressure \(OOM\)",
      title="Ray killed workers: host memory ran low[[ on node {ip}]]",
      root_cause="The node's host RAM passed Ray's memory threshold (RAY_memory_usage_threshold, 0.95 by default), and Ray's "
      "memory monitor killed the most recently scheduled worker (its caller gets ray.exceptions.OutOfMemoryError). "
      "CPU-side copies do it: every rank loading the checkpoint at once, CPU offload, dataloader workers, an object "
      "store on the same RAM.",
      fix="ray logs raylet.out -ip [[{ip}||\"${NODE_IP:?address of the node Ray names}\"]] | grep -i -A3 memory    "
      "# who used the memory\n"
      "free -g    # on that node\n"
      "# load checkpoints on one rank, lower CPU offload or dataloader workers, or give the node more memory; raising\n"
      "# RAY_memory_usage_threshold only hands the kill to the kernel's OOM killer\n"
      "dsv3-preflight run --only host.resources",
      check="host.resources", tier=1,
      example="(raylet) [2023-04-09 07:23:59,445 E 395 395] (raylet) node_manager.cc:3049: 10 Workers (tasks / actors) killed "
      "due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: "
      "e5d953ef03e55e26f13973ea1b5a0fd0ecc729cd820bc89e4aa50451, IP: 10.0.62.231) over the last time period. To see "
      "more information about the Workers killed on this node, use `ray logs raylet.out -ip 10.0.62.231`",
      source="https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html (ray doc/source/ray-core/scheduling/"
      "ray-oom-prevention.rst: the raylet's summary and ray.exceptions.OutOfMemoryError's 'Task was killed due to the "
      "node running low on memory')"),
    S(id="cuda.out_of_memory", cls="gpu_oom", kind="cause", needles=(b"out of memory", b"OutOfMemoryError", b"MemoryAllocation", b"OUT_OF_MEMORY",
                                                                   b"CUBLAS_STATUS_ALLOC_FAILED", b"No available memory for the cache blocks",
                                                                   b"maximum number of tokens that can be stored in KV cache"),
      pattern=r"(?:OutOfMemoryError: )?CUDA out of memory\.?(?: Tried to allocate (?P<size>[\d.]+ [KMGT]?i?B))?|(?<!java\.lang\.)OutOfMemoryError|CUDA error: out of memory"
      r"|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|CUBLAS_STATUS_ALLOC_FAILED|HIP out of memory|Cuda failure '?out of memory"
      r"|No available memory for the cache blocks|maximum number of tokens that can be stored in KV cache",
      title="GPU out of memory[[ (tried to allocate {size})]]",
      root_cause="A rank ran out of GPU memory: the micro-batch or sequence length is too large for the GPU, ZeRO buckets or "
      "prefetch are too big, or another process holds GPU memory.",
      fix="nvidia-smi --query-compute-apps=pid,used_memory --format=csv    # nothing else may hold the GPUs\n"
      "dsv3-preflight run --only gpu.inventory\n"
      "# lower per_device_train_batch_size or the max length; enable gradient checkpointing or ZeRO offload",
      check="gpu.inventory", tier=1,
      example="torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 30.00 MiB. GPU 0 has a total capacity of 11.00 GiB of which 0 bytes is free.",
      source="https://github.com/bmaltais/kohya_ss/issues/2217 (torch c10/cuda/CUDACachingAllocator.cpp)"),
)
