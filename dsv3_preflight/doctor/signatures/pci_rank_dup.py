"""``pci_rank_dup``: ranks mapped onto GPUs wrongly (two ranks on one GPU, more ranks than GPUs).

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from .record import Decode, S, Signature
from .shared import RANK_DUP_FIX

SIGNATURES: tuple[Signature, ...] = (
    S(id="nccl.duplicate_gpu", cls="pci_rank_dup", kind="cause", needles=(b"Duplicate GPU detected", b"both on CUDA device", b"using the same GPU"),
      pattern=r"(?:Duplicate GPU detected ?: )?rank (?P<rank_a>\d+) and rank (?P<rank_b>\d+) both on CUDA device (?P<busid>\w+)|Duplicate GPU detected"
      # NCCL 2.30.3-2.30.4 (graph/topo.cc) and 2.30.7 (init.cc) say it without ranks
      r"|Multiple [Rr]anks (?:detected using|are using) the same GPU",
      title="Duplicate GPU[[: rank {rank_a} and rank {rank_b} both on CUDA device {busid}]]",
      root_cause="Two ranks of one node opened the same GPU: LOCAL_RANK is not applied with torch.cuda.set_device, the script "
      "forces one device, CUDA_VISIBLE_DEVICES is narrowed per process, or more ranks are started than GPUs.",
      fix=RANK_DUP_FIX,
      check="gpu.rank_mapping", tier=1,
      example="Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 4f000",
      source="https://github.com/rulixiang/afa/issues/26 (NCCL src/init.cc)",
      decode=(Decode(kind="duplicate_gpu",
                     pattern=r"Duplicate GPU detected\s*:\s*rank (?P<a>\d+) and rank (?P<b>\d+) both on CUDA device (?P<dev>[0-9a-fA-F]+)",
                     cause=lambda m: f"ranks {m['a']} and {m['b']} are both on CUDA device {m['dev']}: two processes share one GPU",
                     remediation=lambda m: "export CUDA_DEVICE_ORDER=PCI_BUS_ID   # on every node, and one local rank per GPU (LOCAL_RANK → cuda:LOCAL_RANK)",
                     actor="job", cause_id="gpu.duplicate_gpu"),)),
    S(id="nccl.ranks_share_gpu", cls="pci_rank_dup", kind="suspect", needles=(b"sharing GPU with bus",),
      pattern=r"Detected ranks (?P<rank_a>\d+) and (?P<rank_b>\d+) sharing GPU with bus (?P<busid>\w+)",
      title="Ranks {rank_a} and {rank_b} share the GPU with bus {busid}",
      root_cause="NCCL 2.30 found two ranks of one node on one GPU (the INFO line before its 'Multiple ranks detected using the "
      "same GPU' error; with NCCL_MULTI_RANK_GPU_ENABLE=1 it is allowed and the run goes on).",
      fix=RANK_DUP_FIX,
      check="gpu.rank_mapping", tier=2,
      example="gpu-a:4101:4190 [0] NCCL INFO Detected ranks 3 and 11 sharing GPU with bus 53000 on this node",
      source="NCCL 2.30.3 src/graph/topo.cc ncclCheckMultiRank (format string)"),
    S(id="cuda.invalid_device_ordinal", cls="pci_rank_dup", kind="cause", needles=(b"invalid device ordinal", b"cudaErrorInvalidDevice",
                                                                                     b"CUDA_ERROR_INVALID_DEVICE", b"device < num_gpus"),
      pattern=r"invalid device ordinal|cudaErrorInvalidDevice\b|CUDA_ERROR_INVALID_DEVICE\b"
      r"|device >= 0 && device < num_gpus INTERNAL ASSERT FAILED",   # torch's CUDAContext.cpp (lazy CUDA init)
      title="CUDA error: invalid device ordinal (a rank asked for a GPU that is not there)",
      root_cause="More ranks per node than visible GPUs (--nproc_per_node larger than the GPU count, or CUDA_VISIBLE_DEVICES "
      "narrower than the launch), so LOCAL_RANK names a GPU that does not exist.",
      fix="nvidia-smi -L; echo \"CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-}\"\n"
      "# launch with --nproc_per_node equal to the GPUs this node shows\n"
      "dsv3-preflight run --only gpu.rank_mapping",
      check="gpu.rank_mapping", tier=1,
      example="RuntimeError: CUDA error: invalid device ordinal",
      source="https://github.com/cfzd/Ultra-Fast-Lane-Detection/issues/193 (cudaGetErrorString(101)); torch "
      "aten/src/ATen/cuda/CUDAContext.cpp (TORCH_INTERNAL_ASSERT(device >= 0 && device < num_gpus, 'device=', ...))"),
    S(id="cuda.devices_busy", cls="pci_rank_dup", kind="cause", needles=(b"busy or unavailable", b"cudaErrorDevicesUnavailable"),
      pattern=r"all CUDA-capable devices are busy or unavailable|CUDA-capable device\(s\) is/are busy or unavailable"
      r"|cudaErrorDevicesUnavailable",   # CUDA 11+ words cudaGetErrorString(46) the second way
      title="CUDA devices busy or unavailable",
      root_cause="The GPU is in exclusive-process mode and already used: two ranks share one GPU, or another job holds it.",
      fix="nvidia-smi --query-gpu=index,compute_mode --format=csv; nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv\n"
      "dsv3-preflight run --only gpu.rank_mapping,gpu.inventory",
      check="gpu.rank_mapping", tier=1,
      example="RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable",
      source="cudaGetErrorString(46)"),
)
