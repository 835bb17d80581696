"""``gpu_fault`` (not a corpus class): a GPU or its driver state failed on a node (an Xid needing a reset or reboot, a GPU fallen off the bus, an uncorrectable ECC error).

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from ...gpu.xid import PCI
from .classes import GPU_FAULT_CLASS
from .record import S, Signature
from .shared import ALLREDUCE_FIX, XID_APPLICATION, XID_FAULTS, XID_LINE, one_of, xid_texts

SIGNATURES: tuple[Signature, ...] = (
    # NVIDIA's Xid catalogue (dsv3_preflight.gpu.xid, the same table the gpu.xid check reads the kernel log with): the
    # Xids that need a GPU reset or a reboot are the node's fault; an application's fault names no class (the program's
    # own error is the cause); those NVIDIA says to ignore (45: the cleanup after any killed process) are no error
    S(id="gpu.xid_fault", cls=GPU_FAULT_CLASS, kind="cause", needles=(b"Xid",),
      pattern=XID_LINE + r"(?:(?P<xid>" + one_of(XID_FAULTS) + r")\b|45\b.*caused by previous Xid (?P<xid2>"
      + one_of(XID_FAULTS) + r")\b)",
      title="GPU fault: Xid {xid}[[ ({meaning})]] on the GPU at PCI {pci}",
      root_cause="The NVIDIA kernel driver logged Xid {xid} for the GPU at {pci}[[: {meaning}]]. NVIDIA's catalogue resolves it "
      "on the node[[ ({action})]], not in the job: until then CUDA on that GPU fails or hangs, and every collective "
      "with it. The ranks' own errors (CUDA errors, NCCL timeouts) are its consequences.",
      fix="nvidia-smi -q -i [[{bus}||\"${GPU_BUS_ID:?PCI bus id of the GPU, from the Xid line}\"]] | grep -i -A2 -E 'Reset Status|Recovery Action|Pending|Remapp'    # on that node\n"
      "journalctl -k -b --no-pager | grep -i -E 'Xid' | tail -20\n"
      "# drain the node from the job (the others can run without it), then reset that GPU; Xid 79 or a refused reset: reboot\n"
      "nvidia-smi -r -i [[{bus}||\"${GPU_BUS_ID}\"]]\n"
      "dsv3-preflight run --only gpu.xid,gpu.memory_errors,gpu.reset_pending    # after the repair: the node is clean again",
      check="gpu.xid", tier=0,
      example="[ 3201.581234] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
      source="NVIDIA Xid catalogue (docs.nvidia.com/deploy/xid-errors); the driver's NVRM lines as the kernel log prints them",
      enrich=xid_texts),
    S(id="gpu.xid_application", cls=None, kind="symptom", needles=(b"Xid",),
      pattern=XID_LINE + r"(?P<xid>" + one_of(XID_APPLICATION) + r")\b",
      title="The GPU stopped a program: Xid {xid}[[ ({meaning})]]",
      root_cause="An application fault on the GPU (an illegal address, a bad instruction): the GPU stays healthy; the failing "
      "rank's own error (an illegal memory access, a CUDA error) and the code behind it are the cause.", fix="", check=None, tier=4,
      example="NVRM: Xid (PCI:0000:18:00): 31, pid=85132, name=python, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS",
      source="NVIDIA Xid catalogue (Xid 13, 31, 43: application faults)", enrich=xid_texts),
    S(id="gpu.lost", cls=GPU_FAULT_CLASS, kind="cause", needles=(b"fallen off the bus", b"GPU is lost", b"GpuIsLost", b"GPU_IS_LOST",
                                                                 b"RmInitAdapter failed", b"Unable to determine the device handle",
                                                                 b"probe routine failed"),
      pattern=r"(?:GPU (?P<bus>" + PCI + r"\.\d): )?GPU has fallen off the bus"
      r"|Unable to determine the device handle for GPU ?(?P<bus2>" + PCI + r"\.\d): "
      r"(?:GPU is lost|Unknown Error)|NVMLError_GpuIsLost|NVML_ERROR_GPU_IS_LOST|\bGPU is lost\b"
      r"|GPU (?P<bus3>" + PCI + r"\.\d): RmInitAdapter failed|RmInitAdapter failed"
      # the driver's message wrapped over three kernel-log lines, and its failure to probe the GPU at the next load
      r"|NVRM: fallen off the bus and is not responding|The NVIDIA probe routine failed for \d+ device",
      title="A GPU is lost to the driver[[ (PCI {bus})]]: fallen off the bus or failed to initialise",
      root_cause="The driver can no longer reach a GPU over PCI Express (Xid 79, 'GPU is lost') or could not initialise it "
      "(RmInitAdapter failed): a fault of the node's hardware, power or firmware, not of the job. Only a reboot "
      "brings the GPU back, and a GPU that falls off again needs its hardware inspected.",
      fix="nvidia-smi -L; journalctl -k -b --no-pager | grep -i -E 'Xid|fallen off|RmInitAdapter' | tail -20    # on that node\n"
      "# drain the node from the job (the others can run without it), then reboot it; again after a reboot: have it repaired\n"
      "dsv3-preflight run --only gpu.inventory,gpu.xid    # after the reboot: every GPU back and no new Xid",
      check="gpu.inventory", tier=0,
      example="Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU",
      source="nvidia-smi's and pynvml's wording (NVML_ERROR_GPU_IS_LOST); the driver's NVRM 'GPU has fallen off the bus' and "
      "'RmInitAdapter failed' lines",
      consequence_of=("gpu.xid_fault",)),   # the driver prints it after its Xid 79 line
    S(id="cuda.ecc_uncorrectable", cls=GPU_FAULT_CLASS, kind="cause", needles=(b"uncorrectable ECC error", b"ECCUncorrectable", b"ECC_UNCORRECTABLE"),
      pattern=r"uncorrectable ECC error encountered|cudaErrorECCUncorrectable|CUDA_ERROR_ECC_UNCORRECTABLE",
      title="Uncorrectable ECC error on a GPU",
      root_cause="A GPU's memory had an error ECC could not correct: the CUDA context that touched it is gone, and the GPU "
      "needs a reset (row remapping happens at the reset) before it can be trusted again.",
      fix="nvidia-smi -q -d ECC,ROW_REMAPPER | grep -i -E 'Volatile|Uncorr|Pending|Failure'    # on that node: which GPU, and what it needs\n"
      "# drain the node from the job, then reset the GPU (nvidia-smi -r -i <bus id>) or reboot the node\n"
      "dsv3-preflight run --only gpu.memory_errors,gpu.xid    # after the repair",
      check="gpu.memory_errors", tier=0,
      example="RuntimeError: CUDA error: uncorrectable ECC error encountered",
      source="CUDA runtime's cudaErrorECCUncorrectable string (cudaGetErrorString)",
      consequence_of=("gpu.xid_fault",)),   # the rank's view of the node's Xid 48 / 94 / 95
    S(id="nccl.ofi_error", cls="nccl_transport", kind="cause", needles=(b"NET/OFI",),
      pattern=r"NET/OFI.{0,80}(?:[Ff]ailed|[Ee]rror|[Uu]nable)",
      title="AWS EFA / libfabric (NET/OFI) error",
      root_cause="The aws-ofi-nccl plugin could not use EFA: missing device in the container, wrong FI_PROVIDER, or a libfabric "
      "version mismatch.",
      fix="fi_info -p efa | head; ls /dev/infiniband\n" + ALLREDUCE_FIX, check="dist.allreduce", tier=1,
      example="ip-10-0-1-5:1234:1290 [0] NCCL WARN NET/OFI Unable to find a protocol that worked.  Failing initialization.",
      source="aws-ofi-nccl src/nccl_ofi_net.c"),
)
