"""The shapes of the GPU domain's facts, as its probes return them (``probes/nvml.py``: ``nvml`` and ``cuda_init``;
``probes/fabric.py``: ``fabric_manager``; ``probes/health.py``: the health readings added to each GPU).

A fact is plain JSON data: these are :class:`~typing.TypedDict` shapes, so a rule's annotations say which keys it
reads and a type checker holds the probes and the rules to one shape. ``total=False`` where a key may be absent
(a probe that failed early, a replay recorded on an older version). A value NVML could not read is ``None``
(unknown, never healthy); the reason is in the GPU's ``errors``.
"""
from __future__ import annotations

from typing import Any, TypedDict


class GpuFabric(TypedDict, total=False):
    """nvmlDeviceGetGpuFabricInfo(V): Hopper's registration with the NVSwitch fabric (A100 and older: not supported)."""

    supported: bool
    api: str | None
    state: int
    state_name: str
    status: int
    status_name: str
    clique_id: int
    cluster_uuid: str
    health_mask: int
    error: str
    attempts: list[str]


class RemappedRows(TypedDict):
    correctable: int
    uncorrectable: int
    pending: bool
    failure: bool


class GpuProcess(TypedDict):
    pid: int
    used_memory_bytes: int | None


class Pcie(TypedDict):
    """The PCIe link (``gen_max``: GPU and host together; ``gen_device_max``: the GPU's own)."""

    gen_current: int | None
    gen_max: int | None
    gen_device_max: int | None
    width_current: int | None
    width_max: int | None
    replay_counter: int | None


class Mig(TypedDict, total=False):
    supported: bool
    current: int
    pending: int


class NvLinkLink(TypedDict):
    link: int
    active: bool
    replay: int | None
    recovery: int | None
    crc_flit: int | None
    crc_data: int | None


class NvLink(TypedDict):
    supported: bool
    links: list[NvLinkLink]


class ResetStatus(TypedDict):
    """NVML field values: GPU reset required, drain and reset recommended, the recovery action."""

    reset_required: int | float | None
    drain_and_reset: int | float | None
    recovery_action: int | float | None


class Gpu(TypedDict, total=False):
    """One GPU of the ``nvml`` fact (NVML's device index order; None for a GPU the kernel names that NVML does not
    list)."""

    index: int | None
    errors: dict[str, str]
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    memory_total_bytes: int | None
    memory_used_bytes: int | None
    persistence_mode: bool | None
    ecc_enabled: bool | None
    ecc_pending: bool | None
    ecc_uncorrected_volatile: int | None
    ecc_uncorrected_aggregate: int | None
    remapped_rows: RemappedRows | None
    retired_pages_dbe: int | None
    processes: list[GpuProcess]
    fabric: GpuFabric
    # health (probes/health.py)
    retired_pages_sbe: int | None
    retired_pages_pending: bool | None
    pcie: Pcie | None
    performance_state: int | None
    utilization_gpu: int | None
    clocks_event_reasons: int | None
    temperature_c: int | None
    mig: Mig | None
    compute_mode: int | None
    nvlink: NvLink | None
    reset: ResetStatus | None


class NvmlFact(TypedDict, total=False):
    """The fact ``nvml``: the driver as NVML sees it, and every GPU (``available`` False: NVML did not answer)."""

    available: bool
    error: str | None
    error_code: int | None
    driver_version: str | None
    cuda_driver_version: int | None
    cuda_driver_version_str: str | None
    nvml_version: str | None
    gpus: list[Gpu]


class DriverInit(TypedDict, total=False):
    """cuInit(0) and cuDeviceGetCount through ctypes, in a child process (``code``: the CUDA_ERROR number)."""

    library: str
    library_file: str | None
    library_version: str | None
    loaded: bool
    load_error: str | None
    stage: str
    cuInit: int | None
    cuDeviceGetCount: int | None
    device_count: int | None
    timed_out: bool
    timeout_s: float
    ok: bool
    code: int | None
    decoded: dict[str, Any]
    error: str | None


class RuntimeInit(TypedDict, total=False):
    """torch's CUDA runtime in a child process: device_count(), init(), and the error code parsed from its text."""

    installed: bool | None
    skipped: str
    torch_version: str
    cuda_built: str | None
    nccl_version: str | None
    device_count: int
    warnings: list[str]
    timed_out: bool
    timeout_s: float
    ok: bool
    code: int | None
    decoded: dict[str, Any]
    error: str | None


class CudaInitFact(TypedDict, total=False):
    """The fact ``cuda_init``: the driver API and torch's runtime, each initialised in a child under a timeout."""

    driver: DriverInit
    runtime: RuntimeInit
    kernel_module_version: str | None
    env: dict[str, str | None]


class NvSwitch(TypedDict):
    detected: bool
    pci: list[dict[str, Any]]
    dev_nodes: list[str]
    proc_devices: list[str]


class FmService(TypedDict, total=False):
    """nvidia-fabricmanager's state from systemd, or (no systemd) whether its process runs."""

    source: str | None
    active: bool | None
    installed: bool
    state: str
    enabled: str | None
    properties: dict[str, str]
    processes: list[dict[str, Any]]
    systemd_error: list[str]
    process_error: str


class FmLog(TypedDict, total=False):
    source: str | None
    error: str
    tail: list[str]
    findings: list[dict[str, Any]]


class FabricManagerFact(TypedDict, total=False):
    """The fact ``fabric_manager``: NVSwitch presence, the Fabric Manager service, its version and its log."""

    nvswitch: NvSwitch
    nvidia_pci_gpus: list[dict[str, Any]]
    kernel_module_version: str | None
    service: FmService
    log: FmLog
    version: str | None
    version_source: str | None
    version_output: str | None


class XidEvent(TypedDict, total=False):
    """The Xid events of one GPU and one Xid, grouped (``probes/kernel_log.py`` through ``xid.summarize``)."""

    pci: str
    xid: int
    count: int
    first_time: str | None
    last_time: str | None
    names: list[str]
    first: str | None
    last: str | None


class KernelXidFact(TypedDict, total=False):
    """The fact ``kernel_xid``: NVIDIA Xid events in the kernel log since boot (/dev/kmsg, else journalctl -k)."""

    available: bool
    source: str | None
    error: str | None
    records: int
    oldest: str | None
    truncated: bool
    events: list[XidEvent]
    lines: list[str]


class VersionsFact(TypedDict, total=False):
    """The fact ``versions``: what must be identical on every node (driver, FM, CUDA, torch's NCCL, libraries);
    the libraries (torch, deepspeed, transformers, peft, accelerate, ray) are keys of their own, None when absent."""

    driver: str | None
    kernel_module: str | None
    fabric_manager: str | None
    cuda_driver: str | None
    cuda_runtime: str | None
    nccl: str | None
    nccl_source: str | None
    python: str
    torch: str | None
    deepspeed: str | None
    transformers: str | None
    peft: str | None
    accelerate: str | None
    ray: str | None
