"""The failure classes the doctor names, their titles, and who must act on each (and on the signatures that differ).

A signature's ``cls`` is one of ``CLASSES`` (the corpus's) or ``EXTRA_CLASSES``; its ``actor`` defaults to its class's
(``CLASS_ACTOR``) unless ``ACTOR_OF`` names it.
"""
from __future__ import annotations

from ...result import Actor

CLASSES = ("cuda_fabric", "version_drift", "pci_rank_dup", "port_rendezvous", "nic_iface", "nccl_hang",
           "nccl_transport", "gpu_oom", "host_resources", "lora_empty", "config")
#: the class of a failure our own preflight reported (its gate kept torchrun from starting): not a corpus class, the
#: check that failed says what it is (``CHECK_CLASS`` gives the corpus class where the check guards only one)
GATE_CLASS = "preflight_gate"
#: a GPU or its driver state failed on a node (an Xid that needs a reset or a reboot, a GPU fallen off the bus, an
#: uncorrectable ECC error): not a corpus class (the issue's classes have none for it), a cause of its own all the same
GPU_FAULT_CLASS = "gpu_fault"
#: Ray Train could not start its worker group (a ScalingConfig the cluster cannot place, retried without end) or persist
#: to its storage path (one a worker's node does not see): not a corpus class, a cause of its own all the same
RAY_TRAIN_CLASS = "ray_train"
#: the classes the doctor names beyond the corpus's
EXTRA_CLASSES = (GATE_CLASS, GPU_FAULT_CLASS, RAY_TRAIN_CLASS)
CLASS_TITLES = {
    "cuda_fabric": "CUDA cannot initialise (driver / Fabric Manager / NVSwitch)",
    "version_drift": "versions that do not fit together (driver vs CUDA build, NCCL or torch across nodes)",
    "pci_rank_dup": "ranks mapped onto GPUs wrongly (two ranks on one GPU, more ranks than GPUs)",
    "port_rendezvous": "rendezvous: port held, store unreachable or timing out, name resolution",
    "nic_iface": "the wrong network interface (loopback, docker, a name that does not exist)",
    "nccl_hang": "a collective that never completes (watchdog timeout, desynchronised ranks)",
    "nccl_transport": "NCCL's data transport (InfiniBand/RoCE, /dev/shm, P2P/NVLink)",
    "gpu_oom": "GPU out of memory",
    "host_resources": "host resources (RAM and the OOM killer, disk, shared memory, ulimits)",
    "lora_empty": "LoRA adapters empty, targets not found, or weights files corrupt",
    "config": "DeepSpeed / accelerate / trainer configuration",
    GATE_CLASS: "the preflight found a problem before the run (its gate keeps torchrun from starting)",
    GPU_FAULT_CLASS: "a GPU fault on a node (an Xid needing a reset or reboot, fallen off the bus, uncorrectable ECC)",
    RAY_TRAIN_CLASS: "Ray Train cannot start or persist (a ScalingConfig the cluster cannot place, a storage path a node "
                     "does not see)",
}


#: Who must act on a cause, in the preflight's own terms (:class:`dsv3_preflight.result.Actor`): ``"job"`` (the job's
#: configuration: whoever launches pastes the fix), ``"node"`` (the node's administrator repairs it or drains it from
#: the job), ``"network"`` (the network's administrator opens or fixes a path between the nodes). A class's usual
#: actor; a signature whose fix falls to someone else is listed in ``ACTOR_OF``. None: the log does not say who (a
#: collective that timed out names no culprit). The preflight's checks draw the same lines (gpu.versions: a package
#: on one node is the job's, a driver the node's; a CUDA build newer than the driver is the job's to change).
#: the actors, as dsv3_preflight.result.Actor's values
ACTORS = tuple(a.value for a in Actor)
CLASS_ACTOR: dict[str, str | None] = {
    "cuda_fabric": "node", "version_drift": "job", "pci_rank_dup": "job", "port_rendezvous": "job",
    "nic_iface": "job", "nccl_hang": None, "nccl_transport": "node", "gpu_oom": "job", "host_resources": "node",
    "lora_empty": "job", "config": "job", GATE_CLASS: None, GPU_FAULT_CLASS: "node",
    RAY_TRAIN_CLASS: "job",
}
#: signatures whose actor is not their class's (ids of SIGNATURES and DERIVED; a test holds every key to one)
ACTOR_OF: dict[str, str | None] = {
    # cuda_fabric: a forward-compatibility libcuda and a rank that sees no GPU are the job's environment
    "cuda.error_804": "job", "cuda.no_device_visible": "job",
    # version_drift: what is installed on the node itself (the driver, its libraries, NCCL's network plugin)
    "nvml.driver_library_mismatch": "node", "nccl.cuda_graph_unsupported": "node", "cuda.driver_drift": "node",
    "nccl.plugin_drift": "node",
    # pci_rank_dup: GPUs held by other processes or in an exclusive compute mode are the node's state
    "cuda.devices_busy": "node",
    # port_rendezvous: how the node resolves names (DNS, /etc/hosts) is its administrator's
    "net.name_resolution": "node", "c10d.ipv6_lookup": "node",
    # nccl_hang: a cause that names the code (different collectives, diverging fingerprints) is the job's
    "nccl.mismatched_collective": "job", "c10d.fingerprints_diverge": "job", "fr.desync": "job",
    # nccl_transport: the job's environment picks the transports; the fabric carries the completions
    "nccl.no_transport": "job", "nccl.net_not_found": "job", "nccl.ib_completion_error": "network",
    "nccl.ib_port_event": "network",
    # host_resources: the job's memory use (RAM, workers, offload) is the job's; disks, limits, /dev/shm the node's
    "host.oom_killer": "job", "host.cpu_memory": "job", "host.dataloader_worker_killed": "job", "host.sigkill": "job",
    "ray.memory_monitor_kill": "job",
    # a write the filesystem refuses is the job's, as lora.output_dir judges it: permissions (the user it runs as, the
    # volume it mounts), and a read-only filesystem (point the run at a writable disk; a disk the kernel remounted after
    # errors is also its administrator's to repair, which the root cause and fix say)
    "host.permission_denied": "job", "host.read_only_filesystem": "job",
}

#: ranks of one program that issue different collectives are the program's own logic (naming a check that does not
#: look at them would be a lie); the doctor says so instead of naming one
NO_PREFLIGHT_CHECK = frozenset({"hf.training_arguments_invalid", "launch.unrecognized_arguments", "c10d.fingerprints_diverge",
                                "launch.script_missing",   # `launch` refuses it on every node, before any check runs
                                "torch.weights_only_refused",   # which library loads which checkpoint: no check sees it
                                "hf.flash_attention_unavailable",   # no check imports flash_attn
                                "preflight.no_go"})   # (this one: the preflight ran, and the line does not say which check failed)
