"""The signature table: log patterns → failure class, root cause, fix and the preflight check that catches it.

A signature is data. To add one, append a ``Signature(...)`` to ``SIGNATURES`` with a real ``example`` line
(copied from a public log, or built from the library's own format string; ``source`` names it). The tests prove
every example is recognised by its own signature and no earlier one, and that every fix passes ``bash -n``.

Signatures were written from the development part of ``tests/data/doctor/corpus`` and from the libraries'
source text (NCCL, torch, DeepSpeed, PEFT, transformers, safetensors, glibc/kernel messages), never from the
held-out part (``benchmarks/bench_doctor_accuracy.py`` measures them there).

Fields:

- ``cls``: the failure class (``CLASSES``), or None for a pure consequence that names no cause (a process
  exit code, ``ChildFailedError``): a log with only those is a failure whose cause is not recognised.
- ``kind``: ``cause`` (a root cause), ``suspect`` (a cause only when the log also shows a failure, e.g. NCCL on
  ``lo``), ``symptom`` (what ranks print once something else failed: watchdog timeouts, broken pipes),
  ``progress`` (a sign the run was working), ``benign`` (a line that looks alarming and is not: NCCL failing to
  open libibverbs on a machine without InfiniBand), ``context`` (lines that attribute later lines).
- ``tier``: causal depth. The headline root cause is the finding with the lowest tier, and within a tier the
  first in time: 0 the environment (CUDA/driver/fabric, versions), 1 a specific cause, 2 a weak cause (a
  SIGKILL, a suspect), 3 a symptom with a class (collective timeouts), 4 a symptom without one.
- ``needles``: literal byte strings, at least one of which must occur in a line for ``pattern`` to be tried
  (the reader scans big files for needles only).
- ``pattern``: a Python regex searched in the cleaned line. Named groups fill ``{name}`` in ``title``,
  ``root_cause`` and ``fix`` (in ``fix`` the value is shell-quoted). ``[[ ... ]]`` is kept only when every
  ``{name}`` in it was filled; ``[[ ... || else ]]`` gives ``else`` otherwise (a fix that names the port the log
  gave, or asks for it).
- ``fix``: lines to paste into bash (``bash -n`` clean): commands, ``${NAME:?what to put}`` placeholders for
  what only the user knows, prose only in ``#`` comments.
- ``check``: the ``dsv3-preflight`` check that catches this before launch.
- ``consequence_of``: ids of signatures that, when also present, explain this one.
- ``requires``: a context key that must have been seen in the few lines before (a JSON error is a config error
  only inside DeepSpeed's or accelerate's config loading).
- ``transient``: the library retries after printing it (NCCL's "Call to connect returned ..., retrying", torch's
  client-socket warnings): it is a cause only when no progress follows it in the same file.
- ``stall``: for a suspect that explains a run which stops without any error: when a log has no error line and
  no sign of progress, a suspect with ``stall`` is named as the suspected cause of the hang (exit 1) instead of
  "no progress" (exit 5). ``"any"``: always (the rendezvous server waiting for workers); ``"multi_node"``: unless
  NCCL's own lines show a one-node job (loopback or a container bridge is right on one node).
- ``multi_node_only``: a cause that holds only between nodes (a peer on a container bridge): left out where
  NCCL's own lines show a one-node job, like a ``stall="multi_node"`` suspect.
- ``teardown``: a symptom without a class that processes also print while they exit (NCCL's proxy closing, torch's
  heartbeat or store client finding the master gone, CUDA's "driver shutting down"). After a sign that the run
  finished (``ends_run``) it is teardown noise: listed as a warning, not an error, so a finished run stays healthy.
- ``ends_run``: a progress signature that says the run (or this process) finished: ``train_runtime``, "exits
  successfully", nccl-tests' average bus bandwidth.
- ``succeeded``: a run's end (``ends_run``) that says the work succeeded, not only that a process ended: torchrun's
  agent saw every local worker exit 0, the training loop returned (``train_runtime``), wandb saw exit code 0. A
  process that says so survived the errors it printed before (a batch-size finder's caught OOM, a torchrun restart):
  when every error line of every file comes before such a line in its own file, the run is healthy and those lines
  are listed as survived (triage: ``_survived``). nccl-tests' last line is no such sign: a run with wrong results
  prints it too, and torch's exit warning is printed by a rank that crashed as well.
- ``lost_after_start``: a cause about reaching the rendezvous store that, once the run has started (a sign of the
  work in some file, and in the line's own file not after it), only says the store went away: it becomes the derived
  symptom ``store.lost_after_start`` (no class), and the failure of the store's host is looked for elsewhere.
- ``workers_done``: a teardown symptom printed only once this node's workers had all succeeded (torchrun waits at
  its exit barrier only then), or the agent's own message that they did: every teardown symptom of that file is
  noise, wherever it stands in the file (the store's own error lines, the workers' exit-time lines, come before the
  agent's message).
- ``hang_suspect``: a suspect without ``stall`` that still explains a hang the user reports (``doctor --hung``):
  a log that merely stops is not blamed on it (healthy runs print it too), a run the user says hung is. Harmless
  suspects (an IPv6 lookup) have neither and are never a hang's cause.

Table order matters: on one line the first matching signature wins, so specific entries precede general ones.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from re import Pattern

from ..gpu.xid import PCI, XIDS, pci_key
from ..gpu.xid import meaning as xid_meaning
from ..gpu.xid_rules import NVLINK_XIDS
from ..result import Actor

#: the labels a launcher puts before a rank's line, read before a rule about the line's own start: torchrun's
#: "[default3]:" and torch's "[rank3]:", srun --label's "3: ", Open MPI's "[1,3]<stderr>:", in any number
LABELS = r"(?:\s*(?:\d{1,5}: |\[\d+,\d+\]<std(?:out|err)>:|\[[^\]]*\]:))*\s*"

CLASSES = ("cuda_fabric", "version_drift", "pci_rank_dup", "port_rendezvous", "nic_iface", "nccl_hang",
           "nccl_transport", "gpu_oom", "host_resources", "lora_empty", "config")
KINDS = ("cause", "suspect", "symptom", "progress", "benign", "context")
#: the class of a failure our own preflight reported (its gate kept torchrun from starting): not a corpus class, the
#: check that failed says what it is (``CHECK_CLASS`` gives the corpus class where the check guards only one)
GATE_CLASS = "preflight_gate"
#: a GPU or its driver state failed on a node (an Xid that needs a reset or a reboot, a GPU fallen off the bus, an
#: uncorrectable ECC error): not a corpus class (the issue's classes have none for it), a cause of its own all the same
GPU_FAULT_CLASS = "gpu_fault"
#: the classes the doctor names beyond the corpus's
EXTRA_CLASSES = (GATE_CLASS, GPU_FAULT_CLASS)
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


#: NVIDIA's Xid catalogue (the gpu.xid check's table): the Xids that are an NVLink's fault, the node's (a reset or a
#: reboot: NVIDIA's "node" bucket, the contained memory error that stopped the program that touched it, a resource
#: retirement that needs a reset), and an application's
XID_FAULTS = tuple(sorted(x for x, m in XIDS.items() if x not in NVLINK_XIDS
                          and (m.kind == "node" or x in (94, 156))))
XID_APPLICATION = tuple(sorted(x for x, m in XIDS.items() if m.kind == "app"))
#: the start of the driver's Xid line, up to the Xid number (the GPU's address in ``pci``)
_XID_LINE = r"NVRM: Xid \((?:PCI:)?(?P<pci>" + PCI + r")[^)]*\): "


def _one_of(xids) -> str:
    """A regex alternative of Xid numbers."""
    return "|".join(map(str, sorted(xids)))


def xid_texts(groups: dict[str, str]) -> dict[str, str]:
    """An Xid line's meaning and NVIDIA's action from the catalogue, and the GPU's bus id as nvidia-smi takes it."""
    out: dict[str, str] = {}
    if groups.get("xid", "").isdigit():
        m = xid_meaning(int(groups["xid"]))
        out["meaning"] = m.meaning.split(":")[0]
        out["action"] = "NVIDIA: " + m.nvidia_action
    if groups.get("pci"):
        out["bus"] = pci_key(groups["pci"]) + ".0"
    return out


@dataclass(frozen=True)
class Signature:
    id: str
    cls: str | None
    kind: str
    needles: tuple[bytes, ...]
    pattern: str
    title: str
    root_cause: str = ""
    fix: str = ""
    check: str | None = None
    tier: int | None = None
    example: str = ""
    source: str = ""
    consequence_of: tuple[str, ...] = ()
    requires: str | None = None
    transient: bool = False
    stall: str | None = None
    multi_node_only: bool = False
    hang_suspect: bool = False
    teardown: bool = False
    stop: str = ""       # printed because someone stopped the run: "signal" (a process got Ctrl-C or a kill),
                         # "relay" (the launcher passing a stop on: it does so after a rank's own failure too)
    ends_run: bool = False
    succeeded: bool = False   # see the module docstring
    workers_done: bool = False   # see the module docstring
    lost_after_start: bool = False   # see the module docstring
    setup: bool = False   # a progress sign of set-up (NCCL connected), not of the work: see triage's zero-bar rule
    actor: str | None = ""   # who must act (CLASS_ACTOR, ACTOR_OF); "": the table's; None: the log does not say
    #: more values for the texts, computed from the pattern's groups (an Xid's meaning from NVIDIA's catalogue); the
    #: names it fills are DERIVED_NAMES
    enrich: Callable[[dict[str, str]], dict[str, str]] | None = field(default=None, compare=False, repr=False)
    regex: Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"signature {self.id}: unknown kind {self.kind!r}")
        if self.cls is not None and self.cls not in CLASSES and self.cls not in EXTRA_CLASSES:
            raise ValueError(f"signature {self.id}: unknown class {self.cls!r}")
        if self.kind in ("cause", "suspect") and self.cls is None:
            raise ValueError(f"signature {self.id}: a {self.kind} needs a class")
        if not self.needles:
            raise ValueError(f"signature {self.id}: needs at least one needle")
        if self.stall not in (None, "any", "multi_node") or (self.stall and self.kind != "suspect"):
            raise ValueError(f"signature {self.id}: stall is 'any' or 'multi_node', on a suspect only")
        if self.hang_suspect and (self.kind != "suspect" or self.stall):
            raise ValueError(f"signature {self.id}: hang_suspect is for a suspect without stall")
        if (self.teardown or self.stop) and (self.kind != "symptom" or self.cls is not None):
            raise ValueError(f"signature {self.id}: teardown and stop are for a symptom without a class")
        if self.stop not in ("", "signal", "relay"):
            raise ValueError(f"signature {self.id}: stop is '', 'signal' or 'relay'")
        if self.lost_after_start and self.kind != "cause":
            raise ValueError(f"signature {self.id}: lost_after_start is for a cause")
        if self.workers_done and not (self.teardown or self.ends_run):
            raise ValueError(f"signature {self.id}: workers_done is for a teardown symptom or a run's end")
        if (self.ends_run or self.setup) and self.kind != "progress":
            raise ValueError(f"signature {self.id}: ends_run and setup are for a progress signature")
        if self.succeeded and not self.ends_run:
            raise ValueError(f"signature {self.id}: succeeded is for a run's end (ends_run)")
        object.__setattr__(self, "regex", re.compile(self.pattern))
        if self.actor == "":
            named = self.kind in ("cause", "suspect") or (self.kind == "symptom" and self.cls is not None)
            object.__setattr__(self, "actor", ACTOR_OF.get(self.id, CLASS_ACTOR.get(self.cls or "")) if named else None)
        if self.actor not in (None, *ACTORS):
            raise ValueError(f"signature {self.id}: actor is one of {ACTORS} or None")
        if self.tier is None:
            default = {"cause": 1, "suspect": 2, "symptom": 3 if self.cls else 4}.get(self.kind, 9)
            object.__setattr__(self, "tier", default)


S = Signature

# ---------------------------------------------------------------------------------------------- shared fixes
FM_FIX = ("systemctl status nvidia-fabricmanager --no-pager; journalctl -u nvidia-fabricmanager -b --no-pager | tail -20\n"
          "# Fabric Manager must be exactly the driver's version:\n"
          "DRIVER_VERSION=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)\n"
          "apt-get install -y \"nvidia-fabricmanager-${DRIVER_BRANCH:?driver branch, e.g. 535}=${DRIVER_VERSION}-1\"\n"
          "systemctl enable --now nvidia-fabricmanager\n"
          "# if it was restarted while jobs held the GPUs: stop them, then nvidia-smi -r (or reboot the node)")
IFACE_FIX = ("dsv3-preflight run --only net.nic_route    # on each node: prints the exports for the interface toward MASTER_ADDR\n"
             "# by hand: on a worker the 'dev' of: ip route get \"$MASTER_ADDR\"; on the head the interface that holds MASTER_ADDR\n"
             "export NCCL_SOCKET_IFNAME==\"${IFACE:?interface toward MASTER_ADDR, e.g. eth0}\" GLOO_SOCKET_IFNAME=\"$IFACE\""
             "    # =NAME: exactly that interface (NCCL reads a bare name as a prefix)")
#: containers of a multi-node job need the host's network (their bridge addresses do not route between nodes)
HOST_NETWORK_FIX = ("# run the job's containers with the host's network: docker run --network=host ... (Kubernetes: hostNetwork: true)\n"
                    + IFACE_FIX)
#: Open MPI's TCP transport and out-of-band wire-up on the interface toward the other nodes
OMPI_IFACE_FIX = ("export OMPI_MCA_btl_tcp_if_include=${IFACE:?interface toward the other nodes} "
                  "OMPI_MCA_oob_tcp_if_include=${IFACE}    # then rerun mpirun")
HOROVODRUN_FIX = ("horovodrun --network-interface \"${IFACE:?interface toward the other hosts}\" -np \"${NP:?number of processes}\" "
                  "-H \"${HOSTS:?host1:slots,host2:slots}\" python \"${TRAIN_SCRIPT:?the training script}\"")
RAY_IP_FIX = ("# start Ray on every node with the address the other nodes reach it at (its interface toward the head):\n"
              "ray start --address \"${RAY_HEAD:?head address:port}\" --node-ip-address \"${NODE_IP:?address of this node toward the head}\"\n"
              "export VLLM_HOST_IP=\"${NODE_IP}\"    # vLLM: the same address, set on each node\n" + IFACE_FIX)
DRIVER_FIX = ("nvidia-smi | head -4; python -c 'import torch; print(torch.__version__, torch.version.cuda)'\n"
              "# the driver must support the CUDA the program was built with: upgrade the driver, or install a build for the driver's CUDA:\n"
              "pip install torch --index-url \"https://download.pytorch.org/whl/${CUDA_TAG:?CUDA tag the driver supports, e.g. cu121}\"")
VERSIONS_FIX = ("dsv3-preflight run --only gpu.versions    # every version that must agree, node by node\n"
                "# install the same driver, CUDA, NCCL, torch and DeepSpeed everywhere (one container image on all nodes)")
STORE_FIX = ("nc -vz -w 3 \"$MASTER_ADDR\" \"$MASTER_PORT\"    # from every node; the head must be listening\n"
             "dsv3-preflight run --only net.port_reach,cluster.master_node")
# the same, with the host and port the log named when it named them (a host name: how every node resolves it)
STORE_FIX_AT = ("[[getent hosts {host}    # on every node: one address, the head's (not 127.0.1.1, not the node's own)\n"
                "nc -vz -w 3 {host} {port}    # from every node; the head must be listening"
                "||nc -vz -w 3 \"$MASTER_ADDR\" \"$MASTER_PORT\"    # from every node; the head must be listening]]\n"
                "dsv3-preflight run --only net.port_reach,cluster.master_node")
LAUNCH_FIX = ("# start every rank through a launcher (torchrun, deepspeed, accelerate launch): it sets RANK, LOCAL_RANK,\n"
              "# WORLD_SIZE, MASTER_ADDR and MASTER_PORT for each process; plain `python train.py` sets none of them\n"
              "torchrun --nnodes \"${NNODES:?number of nodes}\" --nproc-per-node \"${NPROC_PER_NODE:?GPUs per node}\" "
              "--rdzv-backend c10d --rdzv-endpoint \"${MASTER_ADDR:?address of the head node}:${MASTER_PORT:-29500}\" "
              "\"${TRAIN_SCRIPT:?the training script}\"\n"
              "dsv3-preflight run --only env.launch_vars")
ALLREDUCE_FIX = "dsv3-preflight run --only dist.allreduce    # the data path between all ranks, with a timeout and the cause"
SHM_FIX = ("df -h /dev/shm; ls /dev/shm | head\n"
           "# docker: run with --ipc=host or --shm-size=16g; Kubernetes: mount an emptyDir with medium: Memory at /dev/shm\n"
           "rm -f /dev/shm/nccl-*    # stale segments of dead runs (no job running)")
RANK_DUP_FIX = ("export CUDA_DEVICE_ORDER=PCI_BUS_ID\n"
                "# in the script, before init_process_group: torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n"
                "dsv3-preflight run --only gpu.rank_mapping,gpu.rank_mapping_cluster")
#: interface names other nodes cannot reach (loopback, docker, libvirt, veth, CNI and flannel bridges)
#: a path that looks local (absolute, ./, ../, ~): a Hub repo id never starts so
LOCAL_PATH = r"(?:/|\.{1,2}/|~/?)[^'\s]*"
#: a Gloo rank bound to an address no other node reaches: the connects that then fail are its consequences
GLOO_BOUND_UNREACHABLE = ("gloo.hostname_loopback", "gloo.cannot_resolve_local", "gloo.no_address_for_interface")
#: and a connect to a peer's loopback address is what the mesh then fails on
GLOO_MESH_CAUSES = GLOO_BOUND_UNREACHABLE + ("gloo.loopback_peer", "gloo.connect_retry")
UNREACHABLE_IFACE = r"lo|docker\d*|virbr\d*|veth\w*|cni\d*|flannel[\w.]*|br-\w+"
DS_CONFIG_FIX = "dsv3-preflight run --only lora.deepspeed_config    # reads the DeepSpeed config the run uses"

#: causes no preflight check can catch: the training script's own argument validation runs only when it starts, and
#: ranks of one program that issue different collectives are the program's own logic (naming a check that does not
#: look at them would be a lie); the doctor says so instead of naming one
NO_PREFLIGHT_CHECK = frozenset({"hf.training_arguments_invalid", "launch.unrecognized_arguments", "c10d.fingerprints_diverge",
                                "launch.script_missing",   # `launch` refuses it on every node, before any check runs
                                "torch.weights_only_refused",   # which library loads which checkpoint: no check sees it
                                "hf.flash_attention_unavailable",   # no check imports flash_attn
                                "preflight.no_go"})   # (this one: the preflight ran, and the line does not say which check failed)

SIGNATURES: tuple[Signature, ...] = (
    # ======================================================================== benign lines that look like errors
    S("nccl.no_libibverbs", None, "benign", (b"Failed to open libibverbs",), r"Failed to open libibverbs",
      "NCCL: no libibverbs (no InfiniBand on this machine; NCCL uses sockets)",
      example="v100-gpu-1:14926:14926 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
      source="https://github.com/NVIDIA/nccl-tests/issues/82"),
    S("nccl.no_path_for_pattern", None, "benign", (b"Could not find a path for pattern",),
      r"Could not find a path for pattern \d+, falling back",
      "NCCL graph search fell back to a simpler order (performance, not an error)",
      example="Meowth:8756:8772 [1] graph/search.cc:890 NCCL WARN Could not find a path for pattern 4, falling back to simple order",
      source="https://github.com/NVIDIA/nccl-tests/issues/131"),
    S("nccl.plugin_not_found", None, "benign", (b"NET/Plugin",),
      r"NET/Plugin ?: ?(?:Plugin load \(libnccl-net\.so\) returned|No plugin found|Could not find: libnccl-net|Failed to find ncclNetPlugin)",
      "NCCL found no network plugin and uses its own transports (normal without one installed)",
      example="node1:97:97 [0] NCCL WARN NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory",
      source="NCCL src/plugin/net.cc (older versions print it at WARN)"),
    # torch's socket.cpp tries every address of a listen or connect in turn (IPv6 [::] first, then IPv4) and warns
    # for each whose socket() fails: errno 97 on a host with IPv6 disabled, after which IPv4 is used. Only the final
    # "has failed to listen on any local network address" / "failed to connect to any network address" fails
    S("c10d.ipv6_socket_unsupported", None, "benign", (b"socket cannot be initialized",),
      r"The (?:server|client) socket cannot be initialized (?:on|to connect to) \S+ \(errno: 97 - Address family not "
      r"supported by protocol\)",
      "torch could not open an IPv6 socket (IPv6 is disabled here) and used IPv4",
      example="[W1226 15:35:11.626067741 socket.cpp:752] [c10d] The client socket cannot be initialized to connect to "
              "[sws-8h100grid-05.mpi-sws.org]:8000 (errno: 97 - Address family not supported by protocol).",
      source="https://github.com/sgl-project/sglang/issues/2561 (torch/csrc/distributed/c10d/socket.cpp: tryListen / "
             "tryConnect's recordError 'cannot be initialized' after ::socket() fails; EAFNOSUPPORT)"),
    # DeepSpeed's op builder accepts a CUDA toolkit whose minor version differs from torch's (same major), or any with
    # DS_SKIP_CUDA_CHECK=1, and says so; only "unable to compile cuda/cpp extensions without a matching cuda version"
    # stops it (deepspeed.torch_mismatch)
    S("deepspeed.cuda_minor_mismatch_accepted", None, "benign", (b"this combination",),
      r"does not match the version torch was compiled with \S+? ?(?:but since the APIs are compatible, accepting this "
      r"combination|.*Allowing this combination)",
      "DeepSpeed accepted a CUDA toolkit of another minor version than torch's (same major)",
      example="Installed CUDA version 12.1 does not match the version torch was compiled with 12.4 but since the APIs are "
              "compatible, accepting this combination",
      source="deepspeed/ops/op_builder/builder.py (assert_no_cuda_mismatch: cuda_minor_mismatch_ok, DS_SKIP_CUDA_CHECK)"),
    # other tools' errors that their tool goes on after: pytorch/cpuinfo probing ARM's SVE or a container's missing
    # /sys/devices/system/cpu lists (torch imports it), wandb's system monitor missing a GPU metric NVML does not
    # support, the dynamic loader skipping an LD_PRELOAD library it cannot open ("ignored")
    S("tools.error_they_go_on_after", None, "benign", (b"Error in cpuinfo", b"Failed to sample metric", b"cannot be preloaded"),
      r"Error in cpuinfo: (?:prctl\(PR_SVE_GET_VL\) failed|failed to parse (?:the list of (?:possible|present) "
      r"processors|both lists of possible and present processors))|wandb: ERROR Failed to sample metric"
      r"|ERROR: ld\.so: object '[^']*' from LD_PRELOAD cannot be preloaded \([^)]*\): ignored",
      "a tool reported an error it goes on after (cpuinfo, wandb's system monitor, the loader's LD_PRELOAD)",
      example="Error in cpuinfo: prctl(PR_SVE_GET_VL) failed",
      source="pytorch/cpuinfo (src/arm/linux, src/linux/processors.c: logged, initialisation goes on); wandb "
             "sdk/internal/system/assets (termerror 'Failed to sample metric: ...', repeat=False); glibc elf/rtld.c "
             "('cannot be preloaded ...: ignored.')"),
    # NCCL goes on after each of these (CollNet falls back to the network; CUDA replaces NVML; ncclCudaLibraryInit's
    # result is ignored in init.cc): NCCL 2.6-2.17 printed them at WARN
    S("nccl.fallback_warn", None, "benign", (b"Cannot initialize CollNet", b"CollNet currently only supports",
                                             b"No NVML, trying to use CUDA", b"Failed to find CUDA library"),
      r"Cannot initialize CollNet, using \S+ instead|CollNet currently only supports up to \d+ GPUs per node"
      r"|No NVML, trying to use CUDA instead|Failed to find CUDA library",
      "NCCL fell back to another path (CollNet, NVML or libcuda missing): not an error",
      example="gpu-node07:24817:24901 [3] misc/cudawrap.cc:90 NCCL WARN Failed to find CUDA library in  (NCCL_CUDA_PATH=)",
      source="NCCL 2.6-2.17 src/init.cc, src/graph/xml.cc, src/misc/cudawrap.cc (format strings)"),
    S("text.not_an_error", None, "benign", (b"This is not an error", b"This is not an error"),
      r"This is not an error", "a library says the line is not an error",
      example="UserWarning: Grad strides do not match bucket view strides. This may indicate grad was not created "
              "according to the gradient layout contract, or that the param's strides changed since DDP was "
              "constructed.  This is not an error, but may impair performance.",
      source="torch/csrc/distributed/c10d/reducer.cpp"),
    S("text.null_error", None, "benign", (b'"raw_error": null', b"'raw_error': None", b"exitcode: 0", b"exit code: 0",
                                           b"return code = 0", b"Out of bounds values : 0"),
      r"\"raw_error\": null|'raw_error': None|exit ?code:? 0\b|return code = 0\b|Out of bounds values : 0 OK",
      "an exit status or error field that says success",
      example='{"name": "torchelastic.worker.status.SUCCEEDED", "source": "WORKER", "raw_error": null}',
      source="torch/distributed/elastic/events (torchelastic worker status events)"),

    # ======================================================================== cuda_fabric: CUDA init, FM, NVSwitch
    S("fabricmanager.version_mismatch", "cuda_fabric", "cause", (b"fabric manager NVIDIA GPU driver interface version",),
      r"fabric manager NVIDIA GPU driver interface version (?P<fm>\S+) do(?:n['’]t|esn['’]t) match with driver version (?P<driver>\d+(?:\.\d+)+)",
      "Fabric Manager {fm} does not match the driver {driver}",
      "nv-fabricmanager refuses to start when its version differs from the kernel driver's; without it the NVSwitch "
      "fabric is never configured and CUDA fails with error 802 (system not yet initialized).",
      FM_FIX, "gpu.fabric_manager", 0,
      "nv-fabricmanager[3228]: fabric manager NVIDIA GPU driver interface version 530.30.02 don't match with driver "
      "version 530.41.03. Please update with matching NVIDIA driver package.",
      "https://github.com/NVIDIA/gpu-operator/issues/544"),
    S("fabricmanager.service_failed", "cuda_fabric", "cause", (b"fabricmanager", b"fabric manager", b"Fabric Manager", b"FabricManager"),
      r"nvidia-fabricmanager(?:\.service)?: (?:Main|Control) process exited|Failed to start (?:NVIDIA )?[Ff]abric ?[Mm]anager"
      r"|(?:[Ff]abric ?[Mm]anager|fabricmanager)\S*.{0,80}?(?:failed|error|not running|inactive|timed out)",
      "nvidia-fabricmanager is not running",
      "The Fabric Manager service failed or is stopped, so the NVSwitch fabric is not configured and CUDA init fails "
      "with error 802 on every GPU of the node.", FM_FIX, "gpu.fabric_manager", 0,
      "Nov 05 13:55:26 node1 systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited, status=1/FAILURE",
      "systemd unit failure format; https://github.com/akash-network/website/pull/632",
      consequence_of=("fabricmanager.version_mismatch",)),
    S("cuda.error_802", "cuda_fabric", "cause",
      (b"system not yet initialized", b"SystemNotReady", b"SYSTEM_NOT_READY", b"returned 802", b"error 802", b"Error 802", b"(802)"),
      r"system not yet initialized|cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY|returned 802\b|[Ee]rror 802\b|\(802\)",
      "CUDA error 802: system not yet initialized",
      "On NVSwitch systems (HGX A100/H100) CUDA cannot initialise until nv-fabricmanager has configured the fabric: "
      "the service is missing, stopped, or its version differs from the driver's.", FM_FIX, "gpu.cuda_init", 0,
      "CUDA error at bandwidthTest.cu:256 code=802(cudaErrorSystemNotReady) \"cudaSetDevice(currentDevice)\"",
      "https://github.com/pytorch/pytorch/issues/35710",
      consequence_of=("fabricmanager.version_mismatch", "fabricmanager.service_failed")),
    S("cuda.error_803", "cuda_fabric", "cause", (b"unsupported display driver / cuda driver combination", b"SystemDriverMismatch",
                                               b"SYSTEM_DRIVER_MISMATCH", b"803 vs"),
      r"unsupported display driver / cuda driver combination|cudaErrorSystemDriverMismatch|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH|\(803 vs\.? 0\)",
      "CUDA error 803: the CUDA user-space driver does not match the kernel driver",
      "libcuda.so (often a cuda-compat copy inside the container, or a driver upgraded without a reboot) is a "
      "different version from the loaded kernel module.",
      "cat /proc/driver/nvidia/version; ldconfig -p | grep libcuda.so\n"
      "# use the host's libcuda (nvidia-container-toolkit), drop a cuda-compat directory from LD_LIBRARY_PATH, or reboot after a driver upgrade",
      "gpu.cuda_init", 0,
      "Error: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() "
      "that might have already set an error? Error 803: system has unsupported display driver / cuda driver combination",
      "https://github.com/pytorch/pytorch/issues (torch c10/cuda/CUDAFunctions.cpp with cudaGetErrorString(803))"),
    S("cuda.error_804", "cuda_fabric", "cause", (b"forward compatibility was attempted", b"CompatNotSupportedOnDevice",
                                               b"COMPAT_NOT_SUPPORTED_ON_DEVICE"),
      r"forward compatibility was attempted on non supported HW|cudaErrorCompatNotSupportedOnDevice|CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
      "CUDA error 804: forward compatibility was attempted on non supported HW",
      "The container's CUDA forward-compatibility libraries (cuda-compat) need a driver branch or a data-center "
      "GPU this host does not have.",
      "nvidia-smi | head -4\n"
      "# upgrade the host driver to the container's CUDA branch, or remove /usr/local/cuda/compat from LD_LIBRARY_PATH:\n"
      "export LD_LIBRARY_PATH=$(printf %s \"$LD_LIBRARY_PATH\" | tr : '\\n' | grep -v cuda/compat | paste -sd:)",
      "gpu.cuda_init", 0,
      "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
      "NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW",
      "https://github.com/gpustack/gpustack/issues/1254"),
    S("nccl.nvls_failure", "cuda_fabric", "cause", (b"nvls.cc", b"NVLS", b"NVLink SHARP", b"Multicast", b"IMEX"),
      r"nvls\.cc:\d+ NCCL WARN Cuda failure|NVLink SHARP \(NVLS\)|cuMulticast\w* failed|Multicast memory.*(?:fail|error)"
      r"|IMEX.{0,60}(?:fail|error|not found|missing)",
      "NVLink SHARP (NVLS) multicast setup failed",
      "NCCL's NVLS needs the NVSwitch fabric configured by nv-fabricmanager (and IMEX channels on multi-node NVLink); "
      "Fabric Manager is not running, or was restarted while processes held the GPUs.",
      FM_FIX + "\nexport NCCL_NVLS_ENABLE=0    # to run meanwhile without NVLS", "gpu.fabric_manager", 0,
      "node23:12098:12141 [2] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'",
      "https://github.com/NVIDIA/nccl/issues/1488 (NCCL src/transport/nvls.cc)"),
    S("cuda.no_driver", "cuda_fabric", "cause", (b"Found no NVIDIA driver", b"NVIDIA driver is not loaded", b"driver initialization failed",
                                               b"nvml error: driver not loaded",
                                               b"NVIDIA-SMI has failed because it couldn't communicate", b"failed: Driver Not Loaded"),
      r"Found no NVIDIA driver on your system|CUDA driver initialization failed|NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
      r"|nvmlInit\w*\(\) failed: Driver Not Loaded"  # NCCL <= 2.17 misc/nvmlwrap.cc
      r"|nvml error: driver not loaded",  # libnvidia-container's hook starting a container on a node without the driver
      "No usable NVIDIA driver",
      "The kernel driver is not loaded (or not visible in the container): CUDA cannot initialise.",
      "nvidia-smi; lsmod | grep nvidia; dmesg | grep -i nvrm | tail\n"
      "# in a container: run with the NVIDIA runtime (--gpus all / nvidia-container-toolkit)",
      "gpu.cuda_init", 0,
      "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
      "torch/cuda/__init__.py (_check_driver)"),
    S("cuda.no_device_visible", "cuda_fabric", "cause", (b"No CUDA GPUs are available", b"no GPUs found",
                                                        b"no CUDA-capable device is detected", b"cudaErrorNoDevice",
                                                        b"CUDA_ERROR_NO_DEVICE"),
      r"No CUDA GPUs are available|ProcessGroupNCCL is only supported with GPUs, no GPUs found"
      r"|no CUDA-capable device is detected|cudaErrorNoDevice|CUDA_ERROR_NO_DEVICE",
      "This process sees no GPU",
      "CUDA found no device in this process: CUDA_VISIBLE_DEVICES is empty or names GPUs the node does not have (Ray "
      "sets it to what a task requested: a task or actor without num_gpus gets none), the container was started "
      "without GPUs (no /dev/nvidia* inside), or the job landed on a node without GPUs (a login node).",
      "echo \"CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}\"; nvidia-smi -L; ls /dev/nvidia*    # where the rank runs\n"
      "# Ray: request the GPUs (@ray.remote(num_gpus=1), ScalingConfig(use_gpu=True)); containers: --gpus all "
      "(Kubernetes: nvidia.com/gpu limits)\n"
      "dsv3-preflight run --only gpu.cuda_init    # on each node, in the job's environment",
      "gpu.cuda_init", 0,
      "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
      "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (TORCH_CHECK at::cuda::getNumGPUs() != 0); torch/cuda "
      "_lazy_init ('No CUDA GPUs are available'); cudaGetErrorString(100)"),

    # ======================================================================== version_drift
    S("nccl.version_mismatch", "version_drift", "cause", (b"Mismatched NCCL version", b"NCCL version mismatch"),
      r"Mismatched NCCL version detected ?: rank (?P<rank_a>\d+) version (?P<va>\d+) rank (?P<rank_b>\d+) version (?P<vb>\d+)"
      r"|NCCL version mismatch with remote peer (?P<peer>\S+) \(local: (?P<va2>[^;,]+)[;,] remote:? (?P<vb2>[^)]+)\)",
      "NCCL versions differ between ranks[[ ({va} vs {vb})]]",
      "Ranks loaded different NCCL libraries (a different torch/NCCL/container on some nodes); NCCL refuses to "
      "build the communicator.", VERSIONS_FIX, "gpu.versions", 0,
      "node1:1234:1290 [0] init.cc:1043 NCCL WARN Mismatched NCCL version detected : rank 8 version 22105 rank 0 version 21903",
      "NCCL src/init.cc (initTransportsRank) and src/ras/ras.cc format strings"),
    S("nccl.library_too_old", "version_drift", "cause", (b"This application was compiled with NCCL version",
                                                         b"compiled with too old version of NCCL"),
      r"(?:NCCL library is too old|NCCL library is not backwards compatible|The application was compiled with too old "
      r"version of NCCL)\. (?:This application|It) was compiled with NCCL version (?P<va>\S+?),? but is running with NCCL "
      r"(?:library )?version (?P<vb>[\d.]+)",
      "The program was built for NCCL {va} but loads NCCL {vb}",
      "The NCCL library found at run time (LD_LIBRARY_PATH, a pip nvidia-nccl wheel, the system's libnccl) is not the "
      "one the program (torch) was built against, and NCCL refuses the mismatch.",
      "python -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'    # the NCCL torch loads\n"
      "pip list 2>/dev/null | grep -i nccl; ldconfig -p | grep libnccl; echo \"$LD_LIBRARY_PATH\"\n" + VERSIONS_FIX,
      "gpu.versions", 0,
      "gpu-a:4101:4101 [0] dev_runtime.cc:1428 NCCL WARN NCCL library is too old. This application was compiled with NCCL "
      "version 2.30.7, but is running with NCCL library version 2.27.3.",
      "NCCL 2.30.7 src/dev_runtime.cc:1428 (format string)"),
    S("nccl.cuda_graph_unsupported", "version_drift", "cause", (b"minimum version (R465)", b"for CUDA graph feature"),
      r"installed CUDA driver is older than the minimum version \(R465\)|NCCL does not support this CUDA version for CUDA graph feature",
      "NCCL's CUDA-graph support needs a newer driver or CUDA build",
      "The program captures NCCL calls in a CUDA graph, which NCCL supports only with driver R465+ (CUDA 11.3) and an "
      "NCCL built with CUDA 11.3+: the driver or the CUDA build is older.",
      VERSIONS_FIX, "gpu.versions", 0,
      "gpu-node07:24817:24901 [3] misc/strongstream.cc:27 NCCL WARN The installed CUDA driver is older than the minimum "
      "version (R465) required for NCCL's CUDA Graphs support",
      "NCCL 2.9-2.14 src/misc/strongstream.cc, src/enqueue.cc (format strings)"),
    S("ompi.version_mismatch", "version_drift", "cause", (b"detected a mismatch in versions between two processes",),
      r"Open MPI detected a mismatch in versions between two processes",
      "Open MPI differs between nodes",
      "mpirun on one node met a daemon or process of another Open MPI version: the nodes' PATH or installs differ.",
      "mpirun --version; ssh \"${NODE:?another node}\" 'which orted; mpirun --version'    # the same everywhere\n"
      + VERSIONS_FIX, "gpu.versions", 0,
      "Open MPI detected a mismatch in versions between two processes.  This",
      "Open MPI orte/mca/oob/tcp/help-oob-tcp.txt [version mismatch] (v4.1.8)"),
    S("torch.driver_too_old", "version_drift", "cause", (b"driver on your system is too old",),
      r"NVIDIA driver on your system is too old(?: \(found version (?P<found>\d+)\))?",
      "The NVIDIA driver is too old for this build[[ (the driver supports CUDA {found})]]",
      "The installed torch (or container) was built for a newer CUDA than the host driver supports.",
      DRIVER_FIX, "gpu.cuda_init", 0,
      "RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver "
      "by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx",
      "https://github.com/lllyasviel/Fooocus/issues/1313 (torch/cuda/__init__.py)"),
    # the training's Python lacks a library of the stack, or has one another library of it cannot import from (the
    # versions do not go together): the environment torchrun runs is not the one that was set up (or checked)
    S("python.stack_module_missing", "version_drift", "cause", (b"No module named",),
      r"(?:ModuleNotFoundError|ImportError): No module named '(?P<module>(?:torch|deepspeed|transformers|peft|accelerate"
      r"|safetensors)(?:\.[\w.]+)?)'",
      "The Python that ran this has no {module}",
      "The interpreter torchrun (or the job's command) started lacks a library of the training stack: another "
      "environment than the one set up and checked (a conda env or venv not activated on this node, a torchrun of "
      "another Python first on PATH, a container image without it), or an install that failed on this node.",
      "dsv3-preflight run --only env.torchrun_python --torchrun \"${TORCHRUN:?the torchrun command of the job}\"    # the "
      "Python it runs, against the one checked\n" + VERSIONS_FIX, "env.torchrun_python", 0,
      "ModuleNotFoundError: No module named 'torch'",
      "CPython's import system (ModuleNotFoundError); produced here by `from torch.distributed.run import main` in a "
      "Python without torch (tests/test_torchrun_python.py's system Python)"),
    S("python.stack_import_mismatch", "version_drift", "cause", (b"cannot import name",),
      r"ImportError: cannot import name '(?P<name>\w+)' from '(?P<module>(?:torch|deepspeed|transformers|peft|accelerate"
      r"|safetensors)(?:\.[\w.]+)?)'",
      "{module} has no {name}: the stack's libraries are of versions that do not go together",
      "One library of the training stack imports a name another one does not have in the installed version (peft "
      "newer or older than the transformers it was released with, a DeepSpeed built for another torch): the "
      "environment was assembled from versions never tested together, or differs from the one checked.",
      "python -m pip check    # with the Python torchrun runs: the requirements its packages do not meet\n"
      "dsv3-preflight run --only env.torchrun_python --torchrun \"${TORCHRUN:?the torchrun command of the job}\"\n"
      + VERSIONS_FIX, "env.torchrun_python", 0,
      "ImportError: cannot import name 'EncoderDecoderCache' from 'transformers' (/opt/conda/lib/python3.10/"
      "site-packages/transformers/__init__.py)",
      "CPython's import system (ImportError 'cannot import name X from Y (path)', produced here); the example's name "
      "is one peft/peft_model.py imports from transformers"),
    S("torch.cpu_build", "version_drift", "cause", (b"Torch not compiled with CUDA enabled", b"_cuda_", b"NCCL built in",
                                                   b"NCCL support is not compiled"),
      r"Torch not compiled with CUDA enabled|module 'torch\._C' has no attribute '_cuda_\w+'"
      r"|Distributed package doesn't have NCCL built in|NCCL support is not compiled",
      "The installed torch is a CPU-only build",
      "pip installed torch's CPU wheel (the default on some indexes, or a dependency pulled it in over the CUDA "
      "build): it has no CUDA and no NCCL, so the GPUs and the nccl backend are unusable.",
      "python -c 'import torch; print(torch.__version__, torch.version.cuda)'    # None: a CPU build\n"
      "pip install --force-reinstall \"torch==${TORCH_VERSION:?the torch version the other nodes run}\" "
      "--index-url \"https://download.pytorch.org/whl/${CUDA_TAG:?CUDA tag the driver supports, e.g. cu124}\"\n"
      "dsv3-preflight run --only gpu.cuda_init",
      "gpu.cuda_init", 0,
      "AssertionError: Torch not compiled with CUDA enabled",
      "torch/cuda/__init__.py (_lazy_init); torch/distributed/distributed_c10d.py; produced here by torch 2.13.0+cpu "
      "under torchrun with the nccl backend"),
    S("cuda.insufficient_driver", "version_drift", "cause", (b"driver version is insufficient", b"InsufficientDriver",
                                                            b"INSUFFICIENT_DRIVER"),
      r"CUDA driver version is insufficient for CUDA runtime version|cudaErrorInsufficientDriver|CUDA_ERROR_INSUFFICIENT_DRIVER",
      "CUDA driver version is insufficient for the CUDA runtime",
      "The program's CUDA runtime is newer than the host driver supports (CUDA error 35).",
      DRIVER_FIX, "gpu.cuda_init", 0,
      "ERROR: cudaGetDeviceCount CUDA driver version is insufficient for CUDA runtime version",
      "https://github.com/uzh-rpg/rpg_open_remode/issues/9 (cudaGetErrorString(35))"),
    S("container.no_gpu_runtime", "cuda_fabric", "cause", (b"could not select device driver",),
      r"could not select device driver \"[^\"]*\" with capabilities: \[\[gpu\]\]",
      "The container runtime on this node cannot give containers GPUs (no NVIDIA container toolkit)",
      "Docker was asked for GPUs (--gpus) and has no device driver for them: the NVIDIA container toolkit is not "
      "installed on the node, or Docker was not restarted after it was.",
      "nvidia-ctk --version; docker info --format '{{json .Runtimes}}'    # on that node: the toolkit and Docker's runtimes\n"
      "# install nvidia-container-toolkit, then: nvidia-ctk runtime configure --runtime=docker && systemctl restart docker\n"
      "dsv3-preflight run --only gpu.cuda_init    # inside the job's container, on that node",
      "gpu.cuda_init", 0,
      "docker: Error response from daemon: could not select device driver \"\" with capabilities: [[gpu]].",
      "Docker's daemon (daemon/devices.go: 'could not select device driver %q with capabilities: %v'); NVIDIA "
      "container toolkit install guide"),
    S("container.nvml_lost", "cuda_fabric", "cause", (b"Failed to initialize NVML: Unknown Error",),
      r"Failed to initialize NVML: Unknown Error",
      "NVML cannot reach the GPUs from inside the container (Failed to initialize NVML: Unknown Error)",
      "A running container lost its GPUs: with systemd managing the container's cgroups, a reload of systemd's units "
      "(systemctl daemon-reload, often a package upgrade's) drops the GPU device rules, and recent runc needs "
      "/dev/char symlinks to restore them (NVIDIA/nvidia-docker#1730). The host still sees the GPUs; the container "
      "must be recreated.",
      "nvidia-smi -L    # on the host: the GPUs are there\n"
      "# recreate the job's containers (a restart of the pod or container gives the GPUs back); so it does not recur:\n"
      "nvidia-ctk system create-dev-char-symlinks --create-all    # or run Docker with native.cgroupdriver=cgroupfs\n"
      "dsv3-preflight run --only gpu.cuda_init    # inside the job's container, on that node",
      "gpu.cuda_init", 0,
      "Failed to initialize NVML: Unknown Error",
      "NVML's wording; NVIDIA/nvidia-docker#1730 (containers losing access to GPUs after a systemd reload)"),
    S("container.cuda_requirement", "version_drift", "cause", (b"unsatisfied condition: cuda",),
      r"requirement error: unsatisfied condition: (?P<cond>cuda\s*[<>=]+\s*[\d.]+)",
      "The container needs {cond}, more than the host's driver supports",
      "The NVIDIA container hook compares the image's CUDA requirement (NVIDIA_REQUIRE_CUDA, set by the CUDA base "
      "image) with the host driver and refuses to start the container: the image was built for a newer CUDA than "
      "the node's driver supports.",
      "nvidia-smi | head -4    # the driver's CUDA version on this node\n"
      "docker inspect --format '{{range .Config.Env}}{{println .}}{{end}}' \"${IMAGE:?the image}\" | grep NVIDIA_REQUIRE_CUDA\n"
      "# upgrade the node's driver, or use an image built for the driver's CUDA (an earlier tag)\n"
      "dsv3-preflight run --only gpu.versions",
      "gpu.versions", 0,
      "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update your driver to a newer "
      "version, or use an earlier cuda container: unknown.",
      "https://github.com/vllm-project/vllm/issues/5635 (NVIDIA/libnvidia-container src/cli/common.c, "
      "'unsatisfied condition: %s, please update your driver to a newer version, or use an earlier cuda container')"),
    S("cuda.unsupported_ptx", "version_drift", "cause", (b"unsupported toolchain", b"UnsupportedPtxVersion", b"UNSUPPORTED_PTX_VERSION"),
      r"PTX was compiled with an unsupported toolchain|cudaErrorUnsupportedPtxVersion|CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
      "PTX compiled by a newer CUDA than the driver supports",
      "Kernels were built with a CUDA toolkit newer than the host driver (CUDA error 222).",
      DRIVER_FIX, "gpu.cuda_init", 0,
      "CUDA Runtime error cudaEventCreate(&begin_) # the provided PTX was compiled with an unsupported toolchain., code = cudaErrorUnsupportedPtxVersion [ 222 ]",
      "https://github.com/NVIDIA-AI-IOT/Lidar_AI_Solution/issues/289"),
    S("cuda.no_kernel_image", "version_drift", "cause", (b"no kernel image is available", b"NoKernelImageForDevice",
                                                        b"is not compatible with the current PyTorch installation"),
      r"no kernel image is available for execution on the device|cudaErrorNoKernelImageForDevice"
      r"|with CUDA capability (?P<sm>sm_\d+) is not compatible with the current PyTorch installation",
      "This build has no kernels for the GPU's architecture[[ {sm}]]",
      "torch or an extension was compiled for other GPU architectures (TORCH_CUDA_ARCH_LIST) or an older CUDA "
      "that does not know this GPU.",
      "python -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_arch_list())'\n"
      "# install a build that includes this GPU's sm_XX, or rebuild the extension with TORCH_CUDA_ARCH_LIST set for it",
      "gpu.versions", 0,
      "RuntimeError: CUDA error: no kernel image is available for execution on the device",
      "torch c10 CUDA error text (cudaGetErrorString(209)); torch/cuda/__init__.py capability warning"),
    S("nvml.driver_library_mismatch", "version_drift", "cause", (b"Driver/library version mismatch", b"LIB_RM_VERSION_MISMATCH"),
      r"Driver/library version mismatch|NVML_ERROR_LIB_RM_VERSION_MISMATCH",
      "NVML: the loaded kernel driver and the user-space driver libraries differ",
      "The driver was upgraded without reloading the kernel module (or the container carries other driver "
      "libraries than the host).",
      "cat /proc/driver/nvidia/version; nvidia-smi\n# reboot the node (or unload and reload the nvidia modules) after a driver upgrade",
      "gpu.versions", 0,
      "Failed to initialize NVML: Driver/library version mismatch",
      "NVML nvmlErrorString(NVML_ERROR_LIB_RM_VERSION_MISMATCH)"),
    S("deepspeed.torch_mismatch", "version_drift", "cause", (b"DeepSpeed ops were compiled", b"does not match the version torch was compiled with",
                                                            b"mismatches the version that was used to compile PyTorch",
                                                            b"compiled with different CUDA major versions"),
      r"DeepSpeed ops were compiled and installed with a different version|Installed CUDA version (?P<have>\S+) does not match the version torch was compiled with (?P<want>\S+?),?"
      r"|The detected CUDA version \((?P<have2>[^)]+)\) mismatches the version that was used to compile\s+PyTorch \((?P<want2>[^)]+)\)"
      r"|compiled with different CUDA major versions",
      "A compiled extension does not match the installed torch / CUDA",
      "DeepSpeed ops (or another extension) were built against another torch or CUDA than the one running.",
      "python -c 'import torch; print(torch.__version__, torch.version.cuda)'; ds_report | head -30\n"
      "pip install --force-reinstall --no-cache-dir deepspeed    # rebuild against the installed torch",
      "gpu.versions", 0,
      "RuntimeError: PyTorch version mismatch! DeepSpeed ops were compiled and installed with a different version than what is being used at runtime.",
      "https://github.com/S95Sedan/Deepspeed-Windows/issues/4 (deepspeed/ops/op_builder/builder.py)"),
    S("python.undefined_symbol", "version_drift", "cause", (b"undefined symbol",),
      r"(?P<lib>[\w.+-]+\.so(?:\.\d+)*): undefined symbol: (?P<sym>\S+)|undefined symbol: (?P<sym2>nccl\w+|cuda\w+|_ZN\S+)",
      "A compiled library does not match what it is loaded with[[ (undefined symbol {sym})]]",
      "A binary extension or libnccl/libcudart was built against a different version of torch, NCCL or CUDA "
      "than the one installed.", VERSIONS_FIX, "gpu.versions", 0,
      "ImportError: /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister",
      "glibc dynamic loader message; torch + system NCCL mismatch"),

    # ======================================================================== pci_rank_dup
    S("nccl.duplicate_gpu", "pci_rank_dup", "cause", (b"Duplicate GPU detected", b"both on CUDA device", b"using the same GPU"),
      r"(?:Duplicate GPU detected ?: )?rank (?P<rank_a>\d+) and rank (?P<rank_b>\d+) both on CUDA device (?P<busid>\w+)|Duplicate GPU detected"
      # NCCL 2.30.3-2.30.4 (graph/topo.cc) and 2.30.7 (init.cc) say it without ranks
      r"|Multiple [Rr]anks (?:detected using|are using) the same GPU",
      "Duplicate GPU[[: rank {rank_a} and rank {rank_b} both on CUDA device {busid}]]",
      "Two ranks of one node opened the same GPU: LOCAL_RANK is not applied with torch.cuda.set_device, the script "
      "forces one device, CUDA_VISIBLE_DEVICES is narrowed per process, or more ranks are started than GPUs.",
      RANK_DUP_FIX,
      "gpu.rank_mapping", 1,
      "Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 4f000",
      "https://github.com/rulixiang/afa/issues/26 (NCCL src/init.cc)"),
    S("nccl.ranks_share_gpu", "pci_rank_dup", "suspect", (b"sharing GPU with bus",),
      r"Detected ranks (?P<rank_a>\d+) and (?P<rank_b>\d+) sharing GPU with bus (?P<busid>\w+)",
      "Ranks {rank_a} and {rank_b} share the GPU with bus {busid}",
      "NCCL 2.30 found two ranks of one node on one GPU (the INFO line before its 'Multiple ranks detected using the "
      "same GPU' error; with NCCL_MULTI_RANK_GPU_ENABLE=1 it is allowed and the run goes on).",
      RANK_DUP_FIX,
      "gpu.rank_mapping", 2,
      "gpu-a:4101:4190 [0] NCCL INFO Detected ranks 3 and 11 sharing GPU with bus 53000 on this node",
      "NCCL 2.30.3 src/graph/topo.cc ncclCheckMultiRank (format string)"),
    S("cuda.invalid_device_ordinal", "pci_rank_dup", "cause", (b"invalid device ordinal", b"cudaErrorInvalidDevice",
                                                                 b"CUDA_ERROR_INVALID_DEVICE", b"device < num_gpus"),
      r"invalid device ordinal|cudaErrorInvalidDevice\b|CUDA_ERROR_INVALID_DEVICE\b"
      r"|device >= 0 && device < num_gpus INTERNAL ASSERT FAILED",   # torch's CUDAContext.cpp (lazy CUDA init)
      "CUDA error: invalid device ordinal (a rank asked for a GPU that is not there)",
      "More ranks per node than visible GPUs (--nproc_per_node larger than the GPU count, or CUDA_VISIBLE_DEVICES "
      "narrower than the launch), so LOCAL_RANK names a GPU that does not exist.",
      "nvidia-smi -L; echo \"CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-}\"\n"
      "# launch with --nproc_per_node equal to the GPUs this node shows\n"
      "dsv3-preflight run --only gpu.rank_mapping",
      "gpu.rank_mapping", 1,
      "RuntimeError: CUDA error: invalid device ordinal",
      "https://github.com/cfzd/Ultra-Fast-Lane-Detection/issues/193 (cudaGetErrorString(101)); torch "
      "aten/src/ATen/cuda/CUDAContext.cpp (TORCH_INTERNAL_ASSERT(device >= 0 && device < num_gpus, 'device=', ...))"),
    S("cuda.devices_busy", "pci_rank_dup", "cause", (b"busy or unavailable", b"cudaErrorDevicesUnavailable"),
      r"all CUDA-capable devices are busy or unavailable|CUDA-capable device\(s\) is/are busy or unavailable"
      r"|cudaErrorDevicesUnavailable",   # CUDA 11+ words cudaGetErrorString(46) the second way
      "CUDA devices busy or unavailable",
      "The GPU is in exclusive-process mode and already used: two ranks share one GPU, or another job holds it.",
      "nvidia-smi --query-gpu=index,compute_mode --format=csv; nvidia-smi --query-compute-apps=pid,gpu_uuid --format=csv\n"
      "dsv3-preflight run --only gpu.rank_mapping,gpu.inventory",
      "gpu.rank_mapping", 1,
      "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable",
      "cudaGetErrorString(46)"),

    # ======================================================================== port_rendezvous
    S("c10d.address_in_use", "port_rendezvous", "cause", (b"Address already in use", b"EADDRINUSE", b"errno: 98", b"already in use"),
      r"(?:bind to|listen on) \S*?:(?P<port>\d+) \(errno: 98 - Address already in use\)"
      r"|port: (?P<port2>\d+), useIpv6: \w+, code: -98, name: EADDRINUSE|Address already in use|EADDRINUSE"
      r"|on \S+, port: (?P<port3>\d+) already in use",  # torch/distributed/elastic/utils/distributed.py
      "Rendezvous port[[ {port}]] already in use",
      "The port[[ {port}]] on the master is still held, usually by a leftover torchrun/python of an earlier run or another "
      "job using the same MASTER_PORT on this machine.",
      "ss -ltnp \"sport = :[[{port}||${MASTER_PORT:?the port in the error}]]\"    # who holds it\n"
      "# stop that leftover process, or launch with another MASTER_PORT\n"
      "dsv3-preflight run --only net.port_free",
      "net.port_free", 1,
      "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
      "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
      "https://github.com/meta-pytorch/torchtune/issues/392 (torch/csrc/distributed/c10d/socket.cpp)"),
    S("c10d.numeric_hostname", "port_rendezvous", "cause", (b"network address of (", b"network addresses of (", b"::ffff:0."),
      r"network address(?:es)? of \((?P<host>\d+), (?P<port>\d+)\)|connect to \[::ffff:(?P<addr>0\.\d+\.\d+\.\d+)\]:(?P<port2>\d+)",
      "Hostname '{host}' is only digits and is read as an IP address",
      "getaddrinfo/inet_aton parse an all-digit hostname as a 32-bit IPv4 number (6841231 → 0.104.99.143), so "
      "ranks connect to a nonsense address instead of the master.",
      "export MASTER_ADDR=$(getent ahostsv4 \"${MASTER_HOST:?the master host name}\" | awk 'NR==1{print $1}')    # use its IP",
      "env.launch_vars", 1,
      "[E socket.cpp:753] [c10d] The client socket has failed to connect to any network address of (6841231, 47389).",
      "https://github.com/hpcaitech/Open-Sora/issues/667"),
    S("c10d.ipv6_lookup", "port_rendezvous", "suspect", (b"IPv6 network addresses of",),
      r"The IPv6 network addresses of \((?P<host>[^,]+), (?P<port>\d+)\) cannot be retrieved \(gai error: -(?:2|5|9) ",
      "IPv6 lookup of {host} failed",
      "{host} has no IPv6 address (harmless by itself: torch then tries IPv4; it matters when the connection then "
      "fails). getaddrinfo answers -2 (EAI_NONAME), -5 (EAI_NODATA) or -9 (EAI_ADDRFAMILY) for a family a host lacks.",
      "getent hosts {host}    # on every node", "env.launch_vars", 2,
      "[W socket.cpp:601] [c10d] The IPv6 network addresses of (localhost, 51595) cannot be retrieved (gai error: -2 - Name or service not known).",
      "https://github.com/antgroup/animate-x/issues/15 (torch/csrc/distributed/c10d/socket.cpp; glibc netdb.h EAI_* codes)"),
    S("nccl.bootstrap_root_mismatch", "port_rendezvous", "cause", (b"Bootstrap Root",),
      r"Bootstrap Root ?: (?:rank (?P<rank_x>\d+) of (?P<n>\d+) ranks has already checked in"
      r"|mismatch in (?:rank count|info) from procs(?:,? nranks)? ?(?P<a>\d+) ?(?::|vs) ?(?P<b>\d+))",
      "NCCL's bootstrap root got ranks that do not belong to one job[[ (rank {rank_x} of {n} checked in twice)]]"
      "[[ ({a} vs {b} ranks)]]",
      "The processes that reached one NCCL bootstrap root disagree on the number of ranks, or one rank checked in "
      "twice: two jobs share a MASTER_PORT or NCCL_COMM_ID, a process of a crashed run is still there, or the nodes "
      "were launched with different --nnodes / --nproc-per-node.",
      "dsv3-preflight run --all-nodes --only cluster.env_consistency,net.port_free    # one world size everywhere; nobody else on the port\n"
      "ss -ltnp | grep \":${MASTER_PORT:?the rendezvous port}\"    # on the head: a process of another run?\n"
      "# start every node with the same --nnodes and --nproc-per-node; give each concurrent job its own MASTER_PORT",
      "cluster.env_consistency", 1,
      "gpu-a:4101:4190 [0] bootstrap.cc:348 NCCL WARN Bootstrap Root : rank 3 of 16 ranks has already checked in",
      "NCCL src/bootstrap.cc (format strings, 2.18-2.30)"),
    S("net.name_resolution", "port_rendezvous", "cause", (b"name resolution", b"Name or service not known", b"nodename nor servname",
                                                         b"Could not resolve hostname", b"gai error", b"getaddrinfo", b"Unknown host",
                                                         b"No address associated with hostname", b"host not found",
                                                         b"Name does not resolve", b"Servname not supported"),
      r"(?:gai error: -?\d+ - )?(?:Temporary failure in name resolution|Name or service not known|nodename nor servname provided"
      r"|No address associated with hostname|Name does not resolve|Servname not supported|Non-recoverable failure in name resolution)"
      r"|Could not resolve hostname (?P<host>\S+?):|getaddrinfo(?: failed|\(\) failed|: )|Unknown host|host not found"
      r"|network addresses of \((?P<host2>[^,]+), \d+\) cannot be retrieved \(gai error",
      "Host name does not resolve",
      "A host name used for the rendezvous (MASTER_ADDR, a node in the hostfile, this machine's own name) does not "
      "resolve on this node: missing /etc/hosts or DNS entry.",
      "getent hosts \"$MASTER_ADDR\"; getent hosts \"$(hostname)\"    # on every node\n"
      "# add the name to /etc/hosts on all nodes, or set MASTER_ADDR to the master's IP\n"
      "dsv3-preflight run --only env.launch_vars",
      "env.launch_vars", 1,
      "[W socket.cpp:601] [c10d] The IPv6 network addresses of (user, 53821) cannot be retrieved (gai error: -3 - Temporary failure in name resolution).",
      "https://github.com/nyu-systems/Grendel-GS/issues/9 (glibc gai_strerror; torch 1.x TCPStore 'host not found')"),
    S("c10d.desync_report_failed", None, "symptom", (b"TORCH_NCCL_DESYNC_DEBUG report", b"NCCL_DESYNC_DEBUG report"),
      r"Failed to re?t?rieve (?:TORCH_)?NCCL_DESYNC_DEBUG report",
      "torch could not collect its desync report",
      "While handling a collective timeout, the desync debugger could not read the other ranks' state from the store "
      "(it went away with them): the timeout is the failure.", ALLREDUCE_FIX, "dist.allreduce", 4,
      "[rank0]:[E1021 10:00:00.000000000 ProcessGroupNCCL.cpp:2241] Rank 0 Failed to retrieve TORCH_NCCL_DESYNC_DEBUG report.  "
      "Please file an issue. Error: Socket Timeout",
      "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (DesyncDebugger::run)"),
    # the store's client trying an address that only its own host reaches: the head's host name on Debian's 127.0.1.1
    # line (torchrun's c10d rendezvous hands the head's host name to the workers as MASTER_ADDR), or a container's
    # bridge address given as MASTER_ADDR. Whatever the port, a rank on another node cannot get there
    S("c10d.store_on_local_address", "nic_iface", "cause", (b"client socket has", b"failed to connect/validate"),
      r"(?:client socket has timed out after \S+ while trying to connect to \(|client socket has failed to connect to \[?"
      r"|TCP client failed to connect/validate to host \[?)"
      r"(?:(?P<loop>127\.0\.1\.1)|(?P<bridge>172\.(?:1[7-9]|2\d|30)\.0\.\d{1,3}|192\.168\.122\.\d{1,3}))\]?[:,] ?(?P<port>\d+)",
      "The rendezvous store is sought at [[{loop}]][[{bridge}]]:{port}, an address only its own host reaches",
      "[[{loop} is a loopback address: Debian and Ubuntu map the host name to it in /etc/hosts, so a head whose "
      "address was handed out by its host name (torchrun's c10d rendezvous gives the workers the head's host name as "
      "MASTER_ADDR; a launcher that resolves its own name) is, on every other node, that node itself.]]"
      "[[{bridge} lies in a container bridge's network (Docker's 172.17-172.30.0.x, libvirt's 192.168.122.x): every "
      "host has its own, so MASTER_ADDR set to the head container's bridge address leads the other nodes to no one, "
      "or to their own bridge.]] Whatever the port, a rank on another node cannot reach the store there.",
      "getent hosts \"$(hostname)\"    # on the head: a 127.x answer is the cause; map the name to its routable address\n"
      "# or name the head by the address the other nodes reach it at: torchrun --rdzv-endpoint IP:PORT (--master-addr IP)\n"
      + HOST_NETWORK_FIX, "net.nic_route", 1,
      "[E521 15:43:02.707733876 socket.cpp:1023] [c10d] The client socket has timed out after 600000ms while trying to "
      "connect to (172.17.0.2, 29500).",
      "torch/csrc/distributed/c10d/socket.cpp and TCPStore.cpp (the client's connect lines); Debian's /etc/hosts "
      "'127.0.1.1 <hostname>'; Docker's address pools https://docs.docker.com/engine/network/",
      transient=True, multi_node_only=True),
    # torch 2.4+ TCPStore client: a connect attempt that it retries (workers often start before the master listens);
    # the terminal form ends "- timed out" and is c10d.store_timeout
    S("c10d.store_connect_retry", "port_rendezvous", "cause", (b"failed to connect/validate",),
      r"TCP client failed to connect/validate to host (?P<host>\S+?):(?P<port>\d+) - retrying",
      "The rendezvous store {host}:{port} did not answer yet (torch retries)",
      "This node tried to reach the rendezvous store (MASTER_ADDR:MASTER_PORT) and retries: harmless while the master "
      "starts; the cause of the failure when nothing follows (the master never started, the address or port is "
      "wrong, or a firewall drops the packets).", STORE_FIX_AT, "net.port_reach", 1,
      "[W1021 10:00:00.123 TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to host node1:29500 - retrying "
      "(try=0, timeout=1800000ms, delay=1496ms): Connection refused",
      "torch/csrc/distributed/c10d/TCPStore.cpp (TCPClient::connect, torch 2.4+)", transient=True,
      # the retries of the attempt whose timeout is the failure (both name the same store)
      consequence_of=("c10d.store_on_local_address", "c10d.numeric_hostname", "c10d.address_in_use", "net.name_resolution", "c10d.store_timeout",
                      "elastic.rendezvous_timeout", "elastic.c10d_store_not_hosted")),
    # torchrun's dynamic (c10d, etcd) rendezvous: the store answered (an unreachable one raises
    # RendezvousConnectionError) but the rendezvous did not complete before join_timeout. Produced here: a three-node
    # job whose third node was given another --rdzv-id, and one whose third node started 40 s late (join_timeout=25)
    S("elastic.rendezvous_timeout", "port_rendezvous", "cause", (b"RendezvousTimeoutError",),
      r"RendezvousTimeoutError",
      "torchrun's rendezvous did not complete: not every node joined in time",
      "The rendezvous store answered, but fewer nodes than --nnodes (its minimum) joined before join_timeout (600 s "
      "unless --rdzv-conf sets it): a node did not start, or started too late, or its torchrun was given another "
      "--rdzv-id, --rdzv-endpoint or --nnodes than the others.",
      "# on every node: the same --rdzv-id, --rdzv-endpoint and --nnodes, and every node started within join_timeout\n"
      "ps -eo lstart,args | grep -E '[t]orchrun|[t]orch[.]distributed[.]run'\n"
      "dsv3-preflight run --only cluster.node_count", "cluster.node_count", 1,
      "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
      "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py (_RendezvousJoinOp: raise RendezvousTimeoutError)"),
    # torchrun's agents exchange their node's info through the store (agent/server/api.py _assign_worker_ranks, torch
    # 2.3+): each writes torchelastic/role_info/<node rank>, node rank 0 reads them all and writes
    # torchelastic/assigned_ranks/<node rank>, which each agent waits for. A wait on these keys that times out: the
    # store answered, a node rank never wrote. Produced here (netns lab): three nodes, two given --node-rank 1
    S("elastic.ranks_not_assigned", "port_rendezvous", "cause", (b"torchelastic/role_info/", b"torchelastic/assigned_ranks/"),
      r"wait timeout after (?P<ms>\d+)ms, keys: \S*torchelastic/(?P<kind>role_info|assigned_ranks)/(?P<rank>\d+)",
      "torchrun's rendezvous: the store answered, but not every node rank joined",
      "The rendezvous store was reached (no network problem): torchrun's agents write their node's info under its "
      "--node-rank, and node rank 0 hands out the global ranks once every node rank from 0 to NNODES-1 has written. "
      "One never did: a node did not start (or started with another --nnodes, --master-addr or --master-port), or "
      "two nodes were given the same --node-rank, so one rank is claimed twice and another by no one.",
      "ps -eo args | grep -E '[t]orchrun|[t]orch[.]distributed[.]run'    # on each node: its --node-rank and --nnodes\n"
      "# every node a distinct --node-rank from 0 to NNODES-1 (0 on the node at --master-addr), all the same --nnodes\n"
      "dsv3-preflight run --all-nodes --only cluster.node_rank,cluster.node_count", "cluster.node_rank", 1,
      "torch.distributed.DistStoreError: wait timeout after 15000ms, keys: /none/torchelastic/assigned_ranks/1",
      "torch/distributed/elastic/agent/server/api.py (SimpleElasticAgent._assign_worker_ranks: store.multi_get of "
      "role_info/<i>, store.get of assigned_ranks/<node rank>); produced here by torch 2.13 torchrun on three "
      "network-namespace nodes, two with --node-rank 1 (tests/test_doctor_netns.py)",
      consequence_of=("elastic.duplicate_node_rank",)),
    S("c10d.store_timeout", "port_rendezvous", "cause", (b"client socket has timed out", b"failed to connect/validate",
                                                        b"connect() timed out", b"Socket Timeout", b"waiting for clients",
                                                        b"store based barrier", b"wait timeout after",
                                                        b"waiting for workers", b"clients joined", b"workers joined", b"Wait timeout",
                                                        b"members to join"),
      r"client socket has timed out after (?P<after>\S+) while trying to connect to \(?(?P<host>[^,\s)]+)(?:, |:)(?P<port>\d+)"
      r"|TCP client failed to connect/validate to host (?P<host2>\S+?):(?P<port2>\d+)|connect\(\) timed out"
      r"|Socket Timeout|Timed out after \d+ seconds waiting for (?:clients|workers)|Timed out initializing process group in store based barrier"
      r"|\d+/\d+ (?:clients|workers) joined|wait timeout after \d+ms, keys:|(?:DistStoreError|RuntimeError): Wait timeout\b"
      r"|timed out waiting for all (?P<members>\d+) members to join",  # elastic/utils/distributed.py
      "Rendezvous store[[ {host}:{port}]] not reached in time",
      "This node could not reach the rendezvous store (MASTER_ADDR:MASTER_PORT) or not all ranks joined in time: "
      "the master is not started, the address or port is wrong, a firewall drops the packets, or a node never launched. "
      "A host name must resolve to the head's address on every node: torchrun's c10d rendezvous gives the workers "
      "the head's host name as their MASTER_ADDR, and a name on 127.0.1.1 (Debian's /etc/hosts line) is each node "
      "itself.",
      STORE_FIX_AT, "net.port_reach", 1,
      "[E108 20:04:34.467642512 socket.cpp:957] [c10d] The client socket has timed out after 900s while trying to connect to (33.145.124.128, 29500).",
      "https://github.com/pytorch/pytorch/issues/105782 (torch/csrc/distributed/c10d/socket.cpp; TCPStore.cpp "
      "'Timed out after {} seconds waiting for clients. {}/{} clients joined.')",
      consequence_of=("c10d.store_on_local_address", "c10d.numeric_hostname", "c10d.address_in_use", "net.name_resolution", "c10d.bind_failed",
                      "c10d.env_var_missing", "elastic.c10d_store_not_hosted")),
    S("c10d.client_connect_failed", "port_rendezvous", "cause", (b"client socket has failed to connect",
                                                                b"client socket cannot be initialized",
                                                                b"RuntimeError: No route to host", b"RuntimeError: Network is unreachable"),
      r"client socket has failed to connect to (?P<target>\S+?)\.? \((?:errno|system error): (?P<errno>-?\d+) - (?P<err>[^)]*)\)"
      r"|client socket has failed to connect to any network address|client socket cannot be initialized to connect to (?P<target2>\S+)"
      r"|^\s*RuntimeError: (?P<err3>No route to host|Network is unreachable)\s*$",  # torch <= 1.9 torch/lib/c10d/Utils.cpp
      "Cannot connect to the rendezvous store[[ {target}]][[ ({err})]]",
      "The store address refused or dropped the connection: wrong MASTER_ADDR/PORT, the master is not listening yet, "
      "or a firewall.", STORE_FIX, "net.port_reach", 1,
      "[W socket.cpp:697] [c10d] The client socket has failed to connect to 10.0.0.5:29500 (errno: 111 - Connection refused).",
      "torch/csrc/distributed/c10d/socket.cpp (Linux '(errno: N - strerror)', Windows '(system error: N - message)')",
      # torch 2.4+ prints these per-address lines under its TCPStore client's own line for the same attempt, which
      # names the host and port as configured (torch 2.13's per-address addresses can be garbage: "[::]:25987" for
      # 10.77.0.99:29531, seen in the network-namespace lab)
      consequence_of=("c10d.store_on_local_address", "c10d.numeric_hostname", "c10d.address_in_use", "net.name_resolution", "c10d.store_connect_retry",
                      "c10d.store_timeout"), transient=True),
    S("store.retry_not_listening", "port_rendezvous", "suspect", (b"while the server is not yet listening",),
      r"Retry to connect to (?!127\.)(?P<target>\S+?):(?P<port>\d+) while the server is not yet listening",  # 127.x: below
      "A rank keeps retrying the master's store at {target}:{port}: nothing listens there yet",
      "The rank connects to the master's store and is refused: the master has not started (or failed before it "
      "listened), MASTER_ADDR/port name another host or port, or a firewall rejects the port. A run that goes on "
      "after such retries only waited for the master to start.", STORE_FIX, "net.port_reach", 2,
      "I0224 13:50:33.278455 1512912 tcp_utils.cc:107] Retry to connect to 10.0.0.5:63917 while the server is not yet listening.",
      "Paddle paddle/phi/core/distributed/store/tcp_utils.cc", stall="any", transient=True),
    S("c10d.server_waiting", "port_rendezvous", "suspect", (b"server socket on",),
      r"server socket on (?P<addr>\S+) has timed out, will retry",
      "The rendezvous server waited for clients that did not connect",
      "Workers are not reaching the master's store (wrong MASTER_ADDR on the workers, a firewall, or they never started).",
      STORE_FIX, "net.port_reach", 2,
      "[W416 15:37:25.363094293 socket.cpp:933] [c10d] The server socket on [::ffff:36.xxx.xxx.13]:40613 has timed out, will retry.",
      "torch/csrc/distributed/c10d/socket.cpp", stall="any"),
    # torchrun's agent waits at the exit barrier only after its worker group SUCCEEDED (elastic/agent/server/api.py
    # _invoke_run); it logs the barrier's failure and exits 0. Produced here: a three-node Gloo job in network
    # namespaces whose node 0 (the store's host) exited first (tests/test_doctor_netns.py)
    S("elastic.exit_barrier_failed", None, "symptom", (b"Error waiting on exit barrier", b"torchelastic/agent/terminal_state"),
      r"Error waiting on exit barrier|waiting on barrier.*torchelastic/agent/terminal_state",
      "torchrun's agent could not pass the exit barrier after its workers succeeded",
      "This node's workers had all finished successfully; its agent then waited for the other nodes at the exit barrier "
      "in the rendezvous store, and the store was gone: the node hosting it (node rank 0) had already exited. Noise "
      "of a finished run unless another node's log shows a failure.", "", None, 4,
      "E1124 05:49:31.128000 12736 .venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/api.py:1008] "
      "Error waiting on exit barrier. Elapsed: 0.011486291885375977 seconds",
      "torch/distributed/elastic/agent/server/api.py (_exit_barrier, called when the worker group SUCCEEDED)",
      teardown=True, workers_done=True),
    S("elastic.rendezvous_teardown", None, "symptom", (b"has failed to shutdown the rendezvous", b"keep-alive heartbeat to the rendezvous",
                                                       b"RendezvousGracefulExitError"),
      r"has failed to (?:shutdown the rendezvous|send a keep-alive heartbeat to the rendezvous)"
      r"|RendezvousGracefulExitError",
      "torchrun's agents could not close the rendezvous together",
      "After its workers ended, an agent could not reach the rendezvous store to shut down or pass the exit barrier: "
      "the node hosting the store (node rank 0) had already stopped, or another node's workers failed or hang. The "
      "first failure is elsewhere.", "", None, 4,
      "[2024-05-08 08:47:31,877] torch.distributed.elastic.rendezvous.dynamic_rendezvous: [WARNING] The node "
      "'node1_1234_0' has failed to shutdown the rendezvous 'none' due to an error of type RendezvousConnectionError.",
      "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py (shutdown, _keep_alive)", teardown=True),
    S("elastic.rendezvous_state", "port_rendezvous", "cause", (b"RendezvousStateError", b"state object is corrupt"),
      r"RendezvousStateError|The (?:rendezvous )?state (?:object )?is corrupt",
      "torchrun's rendezvous state is corrupt",
      "The state under the rendezvous key cannot be decoded: another job (or another torch version) uses the same "
      "--rdzv-endpoint and --rdzv-id.",
      "# give each job its own rendezvous: a unique --rdzv-id (and port) per job\n"
      "torchrun --rdzv-id \"${JOB_ID:?a unique id for this job}\" --rdzv-endpoint \"${MASTER_ADDR:?head address}:${MASTER_PORT:-29500}\" \"${TRAIN_SCRIPT:?the training script and its arguments}\"\n"
      "dsv3-preflight run --only net.port_free", "net.port_free", 2,
      "torch.distributed.elastic.rendezvous.api.RendezvousStateError: The rendezvous state is corrupt. See inner exception for details.",
      "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py, c10d_rendezvous_backend.py"),
    S("elastic.endpoint_invalid", "port_rendezvous", "cause", (b"of the rendezvous endpoint",),
      r"The (?P<what>hostname|port number) of the rendezvous endpoint '(?P<endpoint>.*)'(?: must be|\s*$)",
      "The rendezvous endpoint {endpoint} is not a host and port",
      "torchrun parses --rdzv-endpoint (or --master-addr and --master-port) as HOST[:PORT], a host name or an IPv4 or "
      "IPv6 address, then a port number; its {what} is neither: a stray quote, a space, a scheme (tcp://) or a second "
      "colon in the value.",
      "printf '%s\\n' \"$MASTER_ADDR:$MASTER_PORT\"    # must print HOST:PORT, nothing else (no quotes, no tcp://)\n"
      "dsv3-preflight run --only env.launch_vars",
      "env.launch_vars", 1,
      "ValueError: The hostname of the rendezvous endpoint '127.0.0.1':10764' ",
      "https://github.com/learnables/learn2learn/issues/263 (torch/distributed/elastic/rendezvous/utils.py, "
      "parse_rendezvous_endpoint)"),
    S("elastic.rendezvous_connection", "port_rendezvous", "cause", (b"RendezvousConnectionError",),
      r"RendezvousConnectionError",
      "torchrun could not connect to the C10d rendezvous store",
      "The rendezvous endpoint (--rdzv-endpoint / MASTER_ADDR:MASTER_PORT) is unreachable from this node.",
      STORE_FIX, "net.port_reach", 1,
      "torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.",
      "https://github.com/pytorch/pytorch/issues/107021",
      consequence_of=("c10d.store_on_local_address", "c10d.store_timeout", "c10d.client_connect_failed", "c10d.numeric_hostname", "c10d.address_in_use",
                      "net.name_resolution", "elastic.c10d_store_not_hosted"), lost_after_start=True),
    S("elastic.store_call_failed", "port_rendezvous", "cause", (b"Broken pipe", b"Connection reset by peer", b"Connection refused"),
      r"^" + LABELS + r"(?:RuntimeError|torch\.distributed\.DistNetworkError|DistNetworkError): (?P<err>Broken pipe|Connection reset by peer|Connection refused)\s*$",
      "torchrun's rendezvous store connection failed ({err})",
      "The C10d rendezvous backend lost or could not open its connection to the store on the rendezvous endpoint: the "
      "port is not open between the nodes (a firewall, a cloud security group, a cluster that exposes few ports), or "
      "the node hosting the store stopped.", STORE_FIX, "net.port_reach", 2,
      "RuntimeError: Broken pipe",
      "https://github.com/meta-pytorch/torchx/issues/540 (torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py)",
      requires="rdzv_store", lost_after_start=True),
    S("elastic.rendezvous_closed", "port_rendezvous", "symptom", (b"RendezvousClosedError",),
      r"RendezvousClosedError",
      "torchrun's rendezvous was already closed",
      "This agent tried to join a rendezvous the other nodes had closed: they stopped (a failure, or max_restarts "
      "used up) or finished before it arrived. The other nodes' logs hold the first failure.",
      "dsv3-preflight run --only cluster.node_count    # every node up and launched together", "cluster.node_count", 3,
      "torch.distributed.elastic.rendezvous.api.RendezvousClosedError",
      "torch/distributed/elastic/rendezvous/dynamic_rendezvous.py (raise RendezvousClosedError)"),
    S("torch.heartbeat_store_gone", None, "symptom", (b'"should dump" flag on TCPStore',),
      r'Failed to check the "should dump" flag on TCPStore',
      "torch's heartbeat monitor lost the rendezvous store",
      "ProcessGroupNCCL's heartbeat thread polls the TCPStore hosted by rank 0; the store went away. After a finished run "
      "rank 0 simply exited first (teardown noise: end the script with dist.destroy_process_group()); otherwise the "
      "master's process failed or was killed, and its own log holds the first failure.",
      STORE_FIX, "net.port_reach", 4,
      "[rank5]:[W509 02:29:39.508328002 ProcessGroupNCCL.cpp:1771] [PG ID 0 PG GUID 0 Rank 5] Failed to check the "
      "\"should dump\" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: Broken pipe",
      "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (HeartbeatMonitor::runLoop, torch 2.3+)", teardown=True),
    S("c10d.store_closed", None, "symptom", (b"Connection was likely closed", b"got 0 bytes", b"recvValue", b"sendBytes failed",
                                             b"DistNetworkError: Connection reset", b"DistNetworkError: Broken pipe"),
      r"got 0 bytes\. Connection was likely closed|Connection was likely closed|[Ff]ailed to recv, got 0 bytes"
      r"|(?:recvValue(?:WithTimeout)?|sendBytes|recvBytes) failed on SocketImpl.*(?:Connection reset by peer|Broken pipe)"
      r"|DistNetworkError: (?:Connection reset by peer|Broken pipe)",
      "The rendezvous store closed the connection",
      "The process hosting the TCPStore (rank 0 / the master) went away: a consequence of its own failure.",
      STORE_FIX, "net.port_reach", 4,
      "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?",
      "torch/csrc/distributed/c10d/TCPStore.cpp", teardown=True),
    S("c10d.bind_not_local", "port_rendezvous", "cause", (b"Cannot assign requested address", b"errno: 99"),
      r"(?:bind to|listen on) (?P<addr>\S+?) \(errno: 99 - Cannot assign requested address\)|Cannot assign requested address",
      "The rendezvous address[[ {addr}]] is not an address of this host",
      "The process that hosts the store (node rank 0) was given a MASTER_ADDR that belongs to another machine or "
      "interface, so it cannot listen there: node ranks or MASTER_ADDR are wrong.",
      "ip -br addr | grep -wF \"$MASTER_ADDR\"    # on the node that should be the master\n"
      "dsv3-preflight run --only cluster.master_node,env.launch_vars",
      "cluster.master_node", 1,
      "[W socket.cpp:436] [c10d] The server socket has failed to bind to 10.0.0.1:29500 (errno: 99 - Cannot assign requested address).",
      "torch/csrc/distributed/c10d/socket.cpp (strerror(EADDRNOTAVAIL))"),
    S("c10d.bind_failed", "port_rendezvous", "cause", (b"server socket has failed to bind", b"server socket has failed to listen"),
      r"server socket has failed to bind to (?P<addr>\S+?) \((?:errno|system error): (?P<errno>\d+) - (?P<err>[^)]*)\)"
      r"|server socket has failed to (?:listen on any local network address|listen on (?P<addr2>\S+)|bind\b)",
      "The rendezvous store cannot listen[[ on {addr}]][[ ({err})]]",
      "The process that hosts the store (node rank 0) could not open MASTER_PORT: the port is held by another process, "
      "below 1024 (only root may bind it: errno 13, Permission denied), or the address is not one of this host's.",
      "ss -ltnp \"sport = :${MASTER_PORT:?the port in the error}\"    # who holds it, if anyone\n"
      "# use a free port above 1024 on the head: export MASTER_PORT=29500 (or --master_port / --rdzv-endpoint host:port)\n"
      "dsv3-preflight run --only net.port_free",
      "net.port_free", 1,
      "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
      "The server socket has failed to bind to [::]:80 (errno: 13 - Permission denied).",
      "torch/csrc/distributed/c10d/socket.cpp (SocketListenOp format strings; strerror(EACCES))",
      consequence_of=("c10d.address_in_use", "c10d.bind_not_local")),
    S("c10d.env_var_missing", "port_rendezvous", "cause", (b"rendezvous: ", b"requires the LOCAL_RANK environment"),
      r"(?:env|tcp|file)://\s*rendezvous: (?:environment variable (?P<var>\w+) expected, but not set|(?P<var2>[A-Z_]+) not set"
      r"|(?P<var3>port number|rank parameter|world size parameter|path) missing)"
      r"|DeepSpeed requires the (?P<var4>LOCAL_RANK) environment variable",
      "The rendezvous variables are not set[[ ({var} missing)]]",
      "init_process_group('env://') reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (and DeepSpeed LOCAL_RANK) "
      "from the environment, which a launcher sets for each process; this process was started without one (plain "
      "python) or the launcher's variables were lost.",
      LAUNCH_FIX, "env.launch_vars", 1,
      "ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable MASTER_ADDR expected, but not set",
      "torch/distributed/rendezvous.py (_env_error, _error); deepspeed/runtime/engine.py (LOCAL_RANK assertion)"),
    # a collective or dist.get_rank() before init_process_group: the script was started without the launcher its
    # framework expects (plain python), or its own init was skipped. A rank whose init failed prints its own error
    # first; this line is then its consequence (tier 2: any cause of tier 1 leads)
    S("c10d.not_initialized", "config", "cause", (b"process group has not been initialized",),
      r"Default process group has not been initialized, please make sure to call init_process_group",
      "A collective was called before init_process_group",
      "torch.distributed was used (a collective, get_rank, a DeepSpeed/accelerate step) in a process whose default "
      "process group was never created: the script was started with plain python instead of its launcher, or the "
      "code that calls init_process_group (deepspeed.init_distributed, Accelerator()) did not run first.",
      LAUNCH_FIX, "env.launch_vars", 2,
      "ValueError: Default process group has not been initialized, please make sure to call init_process_group.",
      "torch/distributed/distributed_c10d.py (_get_default_group)"),
    S("c10d.store_error", "port_rendezvous", "cause", (b"DistStoreError", b"DistNetworkError", b"TCPStore", b"Stop_waiting response"),
      # not the source file of a C++ log line ("[I... TCPStoreLibUvBackend.cpp:1354] [c10d] uv_loop_close failed": the
      # store's server closing its event loop at exit, logged at INFO while it retries)
      r"DistStoreError|DistNetworkError|TCPStore(?!\w*\.(?:cpp|hpp|h):\d)\S*.{0,60}(?:failed|timed out|Timeout)"
      r"|Stop_waiting response is expected",
      "The rendezvous store (TCPStore) failed",
      "torch's rendezvous store could not be reached or did not answer in time (wrong MASTER_ADDR/PORT, the master "
      "not running, a firewall, or not all ranks joining).", STORE_FIX, "net.port_reach", 2,
      "torch.distributed.DistStoreError: Stop_waiting response is expected",
      "torch/csrc/distributed/c10d/TCPStore.cpp (DistStoreError, DistNetworkError)", lost_after_start=True),
    S("nccl.comm_id_invalid", "port_rendezvous", "cause", (b"Invalid NCCL_COMM_ID", b"No valid <IPv4_or_hostname>"),
      r"Invalid NCCL_COMM_ID|No valid <IPv4_or_hostname>:<port> pair found",
      "NCCL_COMM_ID is not a valid address:port",
      "NCCL_COMM_ID makes NCCL bootstrap through that address instead of the framework's store; NCCL cannot parse it.",
      "echo \"NCCL_COMM_ID=${NCCL_COMM_ID-}\"    # <ipv4>:<port>, [<ipv6>]:<port> or <hostname>:<port>\n"
      "unset NCCL_COMM_ID    # torch and DeepSpeed pass NCCL its id themselves\n"
      "dsv3-preflight run --only cluster.env_consistency", "cluster.env_consistency", 1,
      "gpu-node07:24817:24901 [3] bootstrap.cc:35 NCCL WARN Invalid NCCL_COMM_ID, please use format: <ipv4>:<port> or "
      "[<ipv6>]:<port> or <hostname>:<port>",
      "NCCL src/bootstrap.cc, src/misc/socket.cc (format strings, 2.4-2.30)"),
    S("launcher.ssh_unreachable", "port_rendezvous", "cause", (b"ssh: connect to host", b"ORTE was unable to reliably start",
                                                              b"Permission denied (publickey", b"not reachable via ssh",
                                                              b"ssh exited with exit code 255", b"Host key verification failed",
                                                              b"returned non-zero exit status 255", b"PRTE was unable to reliably start",
                                                              b"could not connect to some hosts via ssh", b"ssh not successful for host"),
      r"ssh: connect to host (?P<host>\S+) port \d+: (?P<err>.+)|(?:ORTE|PRTE) was unable to reliably start one or more daemons"
      r"|could not connect to some hosts via ssh|ssh not successful for host (?P<host5>[^\s:]+)"  # horovod runner/launch.py
      r"|Permission denied \(publickey|host=(?P<host2>\S+) was not reachable via ssh|(?P<host3>[\w.-]+): ssh exited with exit code 255"
      r"|Host key verification failed|Command '\[?'?ssh [^']*?(?P<host4>[\w.-]+) hostname[^']*'?\]?' returned non-zero exit status 255"
      # deepspeed/launcher/runner.py passes a list: Command '['ssh', 'worker-0', 'hostname', '-I']'
      r"|Command '\['ssh',(?: '-\S+',)*? '(?P<host6>[\w.@-]+)', 'hostname', '-I'\]' returned non-zero exit status 255",
      "The launcher cannot reach a node[[ ({host})]]",
      "mpirun/pdsh/deepspeed reach the other nodes over ssh: the host is unreachable, sshd is not listening (or on "
      "another port), or keys are not set up.",
      "ssh -o BatchMode=yes \"${NODE:?a node of the hostfile}\" true    # from the launching node, to every node\n"
      "dsv3-preflight run --only cluster.node_count",
      "cluster.node_count", 1,
      "ssh: connect to host worker-2 port 22: Connection refused",
      "OpenSSH client message; Open MPI orte/mca/plm help text; deepspeed/launcher/runner.py (ssh check); pdsh"),
    S("horovod.gloo_rendezvous", "port_rendezvous", "cause", (b"HTTP GET request failed too many times", b"HTTP PUT request failed too many times"),
      r"HTTP (?:GET|PUT) request failed too many times",
      "Horovod's Gloo rendezvous server did not answer",
      "Horovod's Gloo ranks rendezvous through an HTTP store that horovodrun serves on the launching host; a worker "
      "could not reach it (a firewall, the launching host's address as seen from the workers, a wrong interface).",
      HOROVODRUN_FIX + "\n"
      "dsv3-preflight run --only net.port_reach", "net.port_reach", 1,
      "[1,0]<stderr>:[2024-05-08 08:47:31.877 E /tmp/pip-install/horovod/common/gloo/http_store.cc:96] HTTP GET request "
      "failed too many times, aborting. See exception message above.",
      "horovod horovod/common/gloo/http_store.cc (2626dc87)"),
    S("hydra.proxy_connect", "port_rendezvous", "cause", (b"HYDU_sock_connect", b"check for firewalls"),
      r"HYDU_sock_connect \([^)]*\): unable to (?:connect from \"?(?P<src>[^\"\s]+)\"? to \"?(?P<dst>[^\"\s]+)\"?(?: \((?P<err>[^)]+)\))?"
      r"|get host address(?: for (?P<dst2>\S+))?)|unable to connect to server (?P<dst3>\S+) at port (?P<port>\d+) \(check for firewalls!\)",
      "MPICH/Intel MPI's proxy cannot reach mpiexec[[ at {dst}]][[ ({err})]]",
      "Hydra's proxies connect back to mpiexec's control port on the launching host: the name does not resolve there, "
      "the route goes elsewhere, or a firewall blocks the port.",
      "getent hosts \"${LAUNCH_HOST:?the host mpiexec runs on}\"    # on every node\n"
      "dsv3-preflight run --only net.port_reach,net.nic_route", "net.port_reach", 1,
      "[proxy:0:1@node2] HYDU_sock_connect (utils/sock/sock.c:145): unable to connect from \"node2\" to \"node1\" (No route to host)",
      "MPICH src/pm/hydra utils/sock/sock.c (messages quoted in pmodels/mpich#3777, mpich#4599)"),
    S("deepspeed.master_addr_undetected", "port_rendezvous", "cause", (b"Unable to detect suitable master address",),
      r"Unable to detect suitable master address via .hostname -I.",
      "The DeepSpeed launcher could not find a master address",
      "Without --master_addr the launcher asks the first host of the hostfile for `hostname -I`, which failed or gave "
      "nothing usable.",
      "# pass the head's address on the training network explicitly\n"
      "deepspeed --master_addr \"${MASTER_ADDR:?address of the head node}\" --master_port \"${MASTER_PORT:-29500}\" "
      "--hostfile \"${HOSTFILE:?the hostfile}\" \"${TRAIN_SCRIPT:?the training script}\"\n"
      "dsv3-preflight run --only cluster.master_node",
      "cluster.master_node", 1,
      "RuntimeError: Unable to detect suitable master address via `hostname -I`, please manually specify one via --master_addr",
      "deepspeed/launcher/runner.py"),
    # TensorPipe's RPC agents met at the rendezvous already: a refused or unreachable peer is the address it published
    # (before the generic ECONNREFUSED rule below, which is about the rendezvous endpoint)
    S("tensorpipe.peer_unreachable", "nic_iface", "cause", (b"encountered error when sending outgoing request",),
      r"RPC agent for (?P<me>\S+) encountered error when sending outgoing request #\d+ to (?P<peer>\S+): "
      r"(?P<err>ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|EADDRNOTAVAIL|ETIMEDOUT)",
      "TensorPipe could not reach RPC peer {peer} ({err})",
      "The RPC agents met at the rendezvous store, then each one connects to the address its peer published: the "
      "address its host name resolves to, or TP_SOCKET_IFNAME's. A refused or unreachable connection there means "
      "{peer} published an address the others cannot reach: a host name resolving to 127.0.1.1, a docker, bridge or "
      "second interface.",
      "getent hosts \"$(hostname)\"    # on every node: its address toward the others, not 127.0.1.1\n"
      "export TP_SOCKET_IFNAME=${IFACE:?interface toward MASTER_ADDR, e.g. eth0}    # TensorPipe's, with Gloo's and NCCL's:\n"
      + IFACE_FIX, "net.nic_route", 1,
      "[W tensorpipe_agent.cpp:641] RPC agent for Test0 encountered error when sending outgoing request #0 to Test1: "
      "ECONNREFUSED: connection refused",
      "https://github.com/pytorch/tensorpipe/issues/201 (torch/csrc/distributed/rpc/tensorpipe_agent.cpp; "
      "TP_SOCKET_IFNAME: kSocketIfnameEnvVar there)"),
    S("net.connection_refused", "port_rendezvous", "cause", (b"Errno 111", b"ECONNREFUSED"),
      r"(?:ConnectionRefusedError: )?\[Errno 111\] Connection refused|ECONNREFUSED",
      "A connection was refused: nothing listens at that address and port",
      "A client reached the host but no process listens on the port: the rendezvous endpoint (the store, etcd, the "
      "Ray head) is not started yet or has exited, or MASTER_ADDR/MASTER_PORT (the endpoint) is wrong.",
      STORE_FIX, "net.port_reach", 2,
      "ConnectionRefusedError: [Errno 111] Connection refused",
      "CPython socket errors (strerror(ECONNREFUSED)); torch elastic's etcd backend through urllib3",
      consequence_of=("c10d.address_in_use", "c10d.bind_failed", "c10d.bind_not_local", "c10d.env_var_missing",
                      "net.name_resolution", "c10d.numeric_hostname", "c10d.store_timeout", "c10d.client_connect_failed",
                      "elastic.rendezvous_connection", "launcher.ssh_unreachable", "ray.gcs_unreachable")),
    S("ray.gcs_unreachable", "port_rendezvous", "cause", (b"GCS", b"Could not find any running Ray instance",
                                                         b"Failed to connect to Ray cluster at"),
      r"(?:Failed|Unable) to connect to GCS|GCS (?:server|client).{0,40}(?:timed out|unavailable|failed)|Timed out while waiting for GCS"
      r"|Could not find any running Ray instance|Failed to connect to Ray cluster at (?P<addr>\S+)",
      "Ray workers cannot reach the head (GCS)",
      "The Ray head is not started, or its address/port (6379 by default) is not reachable from this node.",
      "ray status --address \"${RAY_HEAD:?head address:port}\"    # from the failing node\n"
      "dsv3-preflight run --only net.port_reach,cluster.master_node",
      "net.port_reach", 1,
      "Failed to connect to GCS at address 10.0.0.1:6379 within 5 seconds.",
      "ray python/ray/_private/gcs_utils.py; python/ray/_private/services.py (no running instance found)"),

    S("ray.already_running", "port_rendezvous", "cause", (b"but is already running at", b"Found multiple active Ray instances"),
      r"Ray is trying to start at (?P<addr>\S+), but is already running at|Found multiple active Ray instances",
      "Another Ray instance already runs on this node",
      "A Ray head (GCS) of an earlier or another run still runs here: `ray start --head` cannot take its port, and "
      "`address=\"auto\"` cannot tell which cluster to join.",
      "ps -eo pid,lstart,args | grep -E '[g]cs_server|[r]aylet'    # the Ray processes of this node, with their start time\n"
      "# stop the stale one by its PID (ray stop would stop every Ray on this host), or give this cluster its own --port\n"
      "kill \"${STALE_GCS_PID:?pid of the stale gcs_server}\"\n"
      "dsv3-preflight run --only net.port_free", "net.port_free", 1,
      "ConnectionError: Ray is trying to start at 10.41.0.2:6379, but is already running at 10.41.0.2:6379. Please "
      "specify a different port using the `--port` flag of `ray start` command.",
      "ray python/ray/scripts/scripts.py; python/ray/_private/services.py (2.60)"),
    S("ray.no_local_raylet", "port_rendezvous", "cause", (b"node_ip_address.json",),
      r"Can't find a `?node_ip_address\.json`? file",
      "No Ray node runs on this host",
      "The driver was started on a host where no raylet of the cluster runs (RAY_ADDRESS set on a login node or in "
      "another container than the one `ray start` ran in).",
      "ray status    # on this host: it must list this node\n"
      "ray start --address \"${RAY_HEAD:?head address:port}\"    # join this host to the cluster, or run the driver on a node of it\n"
      "dsv3-preflight run --only cluster.node_count", "cluster.node_count", 1,
      "ValueError: Can't find a `node_ip_address.json` file from /tmp/ray/session_2024-05-08_08-47-31_877_1/. for 60 "
      "seconds. A ray instance hasn't started. Did you do `ray start` or `ray.init` on this host?",
      "ray python/ray/_private/node.py (Ray 2.x before 2.60; quoted in public notes)"),
    S("sglang.dist_init_addr", "port_rendezvous", "cause", (b"please provide --dist-init-addr",),
      r"please provide --dist-init-addr as host:port of head node",
      "SGLang needs --dist-init-addr host:port of the head",
      "A multi-node SGLang server was started without the head's rendezvous address and port.",
      "# on every node, the same head address and port:\n"
      "python -m sglang.launch_server --dist-init-addr \"${MASTER_ADDR:?head address}:${MASTER_PORT:-20000}\" "
      "--nnodes \"${NNODES:?number of nodes}\" --node-rank \"${NODE_RANK:?rank of this node}\" \"$@\"",
      "env.launch_vars", 1,
      "AssertionError: please provide --dist-init-addr as host:port of head node",
      "sglang python/sglang/srt/server_args.py (PortArgs.init_new)"),
    S("c10d.store_wait_timeout", "port_rendezvous", "cause", (b"waitForInput",),
      r"waitForInput: (?:socket SocketImpl\(.*?remote=(?P<remote>\S+?)\) timed out after (?P<ms>\d+)ms"
      r"|poll for socket SocketImpl\(.*?\) returned 0, likely a timeout)",
      "A rendezvous store request got no answer[[ from {remote}]][[ in {ms} ms]]",
      "This rank's connection to the rendezvous store (TCPStore) is open but the store never answered: the store's "
      "host stopped or stalls, or the name resolves to another address (IPv6/IPv4) than the one it serves on.",
      STORE_FIX, "net.port_reach", 2,
      "[rank1]:[W623 15:37:01.824135523 socket.cpp:485] [c10d] waitForInput: socket SocketImpl(fd=100, "
      "addr=[node-0.company.net]:43590, remote=[node-0.company.net]:20000) timed out after 1800000ms",
      "https://github.com/sgl-project/sglang/issues/7478 (torch/csrc/distributed/c10d/socket.cpp)",
      # the store's host waiting on the ranks that could not reach it (the network-namespace lab, c10d rendezvous)
      consequence_of=("c10d.store_timeout", "c10d.store_connect_retry", "c10d.client_connect_failed",
                      "elastic.ranks_not_assigned", "elastic.duplicate_node_rank")),
    # ======================================================================== nic_iface
    S("tensorpipe.listen_failed", "nic_iface", "cause", (b"transport/uv/listener.cc",),
      r"In (?P<fn>\w+) at \S*tensorpipe/transport/uv/listener\.cc:\d+ \"(?P<cond>[^\"]*)\"",
      "TensorPipe could not listen on this node's address ({cond})",
      "TensorPipe's uv transport listens on the address this node's host name resolves to (or on TP_SOCKET_IFNAME's). "
      "It fails there on an address it cannot bind: an IPv6 link-local address (fe80::...) without its interface, or "
      "an address that is not this host's (a stale /etc/hosts entry).",
      "getent ahosts \"$(hostname)\"    # what TensorPipe binds: an address of this host toward the others, not fe80::...\n"
      "export TP_SOCKET_IFNAME=${IFACE:?interface toward MASTER_ADDR, e.g. eth0}    # TensorPipe's, with Gloo's and NCCL's:\n"
      + IFACE_FIX, "net.nic_route", 1,
      'what():  In initFromLoop at /pytorch/third_party/tensorpipe/tensorpipe/transport/uv/listener.cc:126 "rv < 0: '
      'invalid argument"',
      "https://github.com/pytorch/tensorpipe/issues/224 (tensorpipe/transport/uv/listener.cc, TP_THROW_UV_IF)"),
    S("ray.node_ip_mismatch", "nic_iface", "cause", (b"Ray expects this IP address", b"none of these match this node's IP"),
      r"This node has an IP address of (?P<addr>[\w.:-]+), and Ray expects this IP address to be either the GCS address or one of the Raylet addresses"
      r"|none of these match this node's IP (?P<addr2>[\w.:-]+)",
      "Ray knows this node under another address than {addr}",
      "The driver or worker on this node found no raylet registered with its address {addr}: the node joined the "
      "cluster with another interface's address (a container's bridge address, a second NIC), so Ray cannot route "
      "to it.", RAY_IP_FIX, "net.nic_route", 1,
      "[2024-05-08 08:47:31,877 C 2211 2211] global_state_accessor.cc:415: This node has an IP address of 172.17.0.3, "
      "and Ray expects this IP address to be either the GCS address or one of the Raylet addresses. Connected to GCS "
      "at 10.41.0.2:6379, and found no Raylet with this IP address. You might need to provide --node-ip-address to "
      "specify the IP address that the head should use when sending to this node.",
      "ray src/ray/gcs/gcs_client/global_state_accessor.cc (Ray 2.60 strings; older wording ray#35022)"),
    # GetValidLocalIp finds the node's address by connecting toward a public DNS server and, when that fails, by
    # probing the non-virtual interfaces; with neither it falls back to loopback: an air-gapped node, or one whose
    # only route is through an interface Ray excludes (docker, br-, veth, virbr, tun)
    S("ray.local_ip_loopback", "nic_iface", "cause", (b"not possible to go distributed",),
      r"Failed to find other valid local IP\. Using (?P<addr>\S+?),? not possible to go distributed",
      "Ray found no address for this node but {addr}",
      "Ray could not tell which of this node's addresses the other nodes reach (it asks the route toward a public DNS "
      "server, then probes the Ethernet and Wi-Fi interfaces) and uses loopback: no other node can reach this one. "
      "On a node without internet access, or whose only route is a bridge or tunnel interface, give Ray the address.",
      RAY_IP_FIX, "net.nic_route", 1,
      "network_util.cc:62] Failed to find other valid local IP. Using 127.0.0.1, not possible to go distributed!",
      "https://github.com/ray-project/ray/issues/10574 (ray src/ray/common/network_util.cc, GetValidLocalIp)"),
    S("ray.no_local_raylet_address", "nic_iface", "suspect", (b"but we cannot find a local Raylet",
                                                             b"can not find the matched Raylet address"),
      r"This node has an IP address of (?P<addr>[\w.:*-]+), (?:but we cannot find a local Raylet with the same address"
      r"|while we can not find the matched Raylet address)",
      "Ray found no local raylet with this node's address {addr}",
      "The process connected to the cluster with an address no raylet of this node registered under (a container, "
      "a second interface): Ray falls back to another raylet, and work scheduled here may not reach this node.",
      RAY_IP_FIX, "net.nic_route", 2,
      "[2023-05-10 22:52:47,666 I 108 108] global_state_accessor.cc:356: This node has an IP address of 10.244.0.56, "
      "but we cannot find a local Raylet with the same address. This can happen when you connect to the Ray cluster "
      "with a different IP address or when connecting to a container.",
      "https://github.com/vllm-project/vllm/issues/6689 (ray src/ray/gcs/gcs_client/global_state_accessor.cc)",
      hang_suspect=True),
    S("ray.node_resource_unreachable", "nic_iface", "cause", (b"fulfill resource request",),
      # the request's keys come in any order ({'GPU': 1.0, 'node:ADDR': 0.001} too); the address as printed, whatever
      # it is (an IP, a host name, a reporter's "<IP>")
      r"No available node types can fulfill resource request \{[^}]*?['\"]node:(?P<addr>[^'\"]+)['\"]",
      "No Ray node has the address {addr} that the job asks for",
      "The job pins work to the Ray node with address {addr} (vLLM pins its first worker to its own detected IP), but "
      "no node of the cluster registered under that address: the process picked another interface's address than "
      "the one Ray uses (VLLM_HOST_IP, a second NIC, a container bridge).", RAY_IP_FIX, "net.nic_route", 1,
      "(autoscaler +7s) Error: No available node types can fulfill resource request {'node:192.168.50.192': 0.001, "
      "'GPU': 1.0}. Add suitable node types to this cluster to resolve this issue.",
      "https://github.com/vllm-project/vllm/issues/7815 (Ray autoscaler event)"),
    S("ray.node_demand_pending", "nic_iface", "suspect", (b"pending placement groups",),
      # `ray status`'s Demands section (python/ray/autoscaler/_private/util.py): "{'node:ADDR': 0.001, 'GPU': 1.0} * 1
      # (PACK): 1+ pending placement groups"
      r"\{[^}]*?['\"]node:(?P<addr>[^'\"]+)['\"]: 0\.001[^}]*\} \* \d+.*pending placement groups",
      "A placement group pinned to the Ray node with address {addr} is pending",
      "The job pins work to the Ray node registered under {addr} (vLLM pins its first worker to its own detected "
      "address) and the placement group waits for it: no node of the cluster registered under that address, so the "
      "job waits for ever. The process picked another interface's address or name than the one Ray uses "
      "(VLLM_HOST_IP, a second NIC, a host name where Ray has an IP).", RAY_IP_FIX, "net.nic_route", 2,
      " {'node:ec2-10-0-0-12.us-west-2.compute.amazonaws.com': 0.001, 'GPU': 1.0} * 1, {'GPU': 1.0} * 15 (PACK): "
      "1+ pending placement groups",
      "ray python/ray/autoscaler/_private/util.py (ray status, Demands); corpus development excerpt vllm#12670",
      stall="any"),
    S("vllm.node_ip", "nic_iface", "cause", (b"Every node should have a unique IP address", b"does not allocate any GPUs on the driver node",
                                            b"Can not get local ip from NIC"),
      r"Every node should have a unique IP address\. Got (?P<nodes>\d+) nodes with node ids .*? and (?P<ips>\d+) unique IP addresses (?P<addrs>.*?)\. Please"
      r"|Every node should have a unique IP address|Ray does not allocate any GPUs on the driver node"
      r"|Can not get local ip from NIC",
      "The nodes' addresses do not tell them apart[[ ({nodes} nodes, {ips} unique addresses {addrs})]]",
      "vLLM (or SGLang) detects each node's own address to map its workers onto Ray's nodes; the detected addresses "
      "are the same on several nodes (a container bridge's 172.17.0.x, VLLM_HOST_IP copied to every node) or not the "
      "ones Ray registered, or the interface named for it has no address.", RAY_IP_FIX, "net.nic_route", 1,
      "RuntimeError: Every node should have a unique IP address. Got 2 nodes with node ids ['a1', 'b2'] and 1 unique "
      "IP addresses {'172.17.0.2'}. Please check your network configuration. If you set `VLLM_HOST_IP` environment "
      "variable, make sure it is unique for each node.",
      "vllm vllm/executor/ray_distributed_executor.py, vllm/v1/executor/ray_executor.py; sglang utils.py (get_local_ip_auto)"),
    S("vllm.ip_fallback", "nic_iface", "suspect", (b"Failed to get the IP address, using 0.0.0.0",
                                                  b"Waiting for creating a placement group of specs"),
      r"Failed to get the IP address, using 0\.0\.0\.0 by default"
      r"|Waiting for creating a placement group of specs for \d+ seconds\..*?same as VLLM_HOST_IP",
      "vLLM could not tell this node's address (VLLM_HOST_IP)",
      "vLLM detects the node's address by routing toward a public address; without a default route it uses 0.0.0.0, "
      "and a placement group pinned to a node address waits forever when that address is not the one Ray uses.",
      RAY_IP_FIX, "net.nic_route", 2,
      "/usr/local/lib/python3.10/dist-packages/vllm/utils.py:534: UserWarning: Failed to get the IP address, using "
      "0.0.0.0 by default.The value can be set by the environment variable VLLM_HOST_IP or HOST_IP.",
      "vllm vllm/utils.py (get_ip), vllm/executor/ray_utils.py (_wait_until_pg_ready)", hang_suspect=True),
    S("nccl.no_socket_interface", "nic_iface", "cause", (b"no socket interface found", b"No usable listening interface",
                                                         b"NET/Socket : no interface found", b"no device found matching",
                                                         b"no device found after excluding"),
      r"no socket interface found|No usable listening interface found|NET/Socket ?: no interface found|no device found (?:matching|after excluding)",
      "NCCL found no usable socket interface",
      "NCCL_SOCKET_IFNAME names an interface that does not exist on this node or container (or has no address of "
      "NCCL_SOCKET_FAMILY), so NCCL cannot bootstrap.",
      IFACE_FIX, "net.nic_route", 1,
      "Bootstrap : no socket interface found",
      "https://github.com/EasonXiao-888/MambaTree/issues/14 (NCCL src/bootstrap.cc)"),
    S("gloo.no_address_for_interface", "nic_iface", "cause", (b"Unable to find address for",),
      r"Unable to find address for:? (?P<iface>\S+)",
      "Gloo cannot find an address for {iface}",
      "GLOO_SOCKET_IFNAME (or the host name Gloo resolves) is not an interface of this node with an address; Gloo "
      "takes one concrete interface name, not NCCL's '^lo,docker' list syntax.",
      IFACE_FIX, "net.nic_route", 1,
      "RuntimeError: Unable to find address for: eth0",
      "https://github.com/spark-arena/sparkrun/issues/275 (gloo/transport/tcp/device.cc)"),
    S("gloo.address_family_mismatch", "nic_iface", "cause", (b"ss1.ss_family == ss2.ss_family", b"address family mismatch"),
      # gloo since 2019 (transport/tcp/device.cc); before it, pair.cc's "self_.ss_.ss_family == peer_.ss_.ss_family.
      # 2 vs 10. address family mismatch"
      r"ss1\.ss_family == ss2\.ss_family\.? (?P<mine>\d+) vs (?P<peer>\d+)"
      r"|(?:ss_family == \S*ss_family\.? (?P<mine2>\d+) vs (?P<peer2>\d+)\.? )?address family mismatch",
      "Gloo ranks published addresses of different families (IPv4 and IPv6[[: {mine} vs {peer}]])",
      "Each rank's Gloo device takes the address of GLOO_SOCKET_IFNAME or of its host name, and Gloo connects only "
      "ranks whose addresses share a family (2 is IPv4, 10 is IPv6): on some node the interface or the host name "
      "gave an IPv6 address (an AAAA record, an interface with only IPv6, ::1 for a host name in /etc/hosts) while "
      "the others gave IPv4.",
      "getent ahosts \"$(hostname)\"    # on every node: the first address Gloo would take without GLOO_SOCKET_IFNAME\n"
      + IFACE_FIX, "net.nic_route", 1,
      "RuntimeError: [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/device.cc:285] "
      "ss1.ss_family == ss2.ss_family. 2 vs 10",
      "gloo/transport/tcp/device.cc (the pair's address families must match); produced here by two Gloo ranks whose "
      "devices were created for 127.0.0.1 and ::1; the field report: https://github.com/pytorch/pytorch/issues/135355"),
    S("nccl.no_interface_same_subnet", "nic_iface", "cause", (b"No interface found in the same subnet",),
      r"No interface found in the same subnet as remote address ?(?P<addr>\S*)",
      "NCCL found no interface in the same subnet as the bootstrap address[[ {addr}]]",
      "No local interface shares a subnet with the bootstrap address: the nodes are on different networks or the "
      "wrong interface is up.", IFACE_FIX, "net.nic_route", 1,
      "misc/socket.cc:361 NCCL WARN Net : No interface found in the same subnet as remote address 10.136.80.18<43431>",
      "https://github.com/NVIDIA/nccl/issues/474"),
    # a Gloo connect to a loopback address of a peer (gloo's pair.cc before 2024: "connect [127.0.1.1]:25472: ...";
    # since then "timed out connecting: ..., remote=[127.0.1.1]:N" and the DebugLogger's "remote=[...]" lines)
    S("gloo.loopback_peer", "nic_iface", "cause", (b"remote=[127.", b"connect [127."),
      r"timed out connecting: (?:SO_ERROR: )?(?P<err>[^,\n]+), remote=\[(?P<addr>127\.\d+\.\d+\.\d+)\]"
      r"|(?:remote=|connect )\[(?P<addr2>127\.\d+\.\d+\.\d+)\]:\d+\S*(?:(?:, error=|: )(?:SO_ERROR: )?(?P<err2>[A-Z][^,\n]*))?",
      "A Gloo peer published the loopback address {addr}[[ ({err})]]",
      "Each Gloo rank publishes the address of GLOO_SOCKET_IFNAME or, without it, of its host name; here a rank "
      "published {addr}, so the ranks of other nodes connect to their own loopback, where nothing listens. The host "
      "name resolves to a loopback address on that node (Debian and Ubuntu write '127.0.1.1 <hostname>' into "
      "/etc/hosts; a container may map it to 127.0.0.1), or GLOO_SOCKET_IFNAME is lo. (In a one-node job loopback "
      "is right, and a refused connect there means the peer's process is gone.)",
      "getent hosts \"$(hostname)\"    # on every node: a 127.x answer is the cause\n"
      "# map the host name to the node's routable address in /etc/hosts, or bind Gloo and NCCL to the interface:\n"
      + IFACE_FIX, "net.nic_route", 1,
      "[E1124 05:42:28.898042854 ProcessGroupGloo.cpp:67] Gloo connectFullMesh failed with [/__w/pytorch/pytorch/"
      "third_party/gloo/gloo/transport/tcp/pair.cc:152] timed out connecting: SO_ERROR: Connection refused, "
      "remote=[127.0.1.1]:49542$1",
      "gloo/transport/tcp/pair.cc and debug_logger.cc; produced here by torch 2.13 Gloo ranks in three network "
      "namespaces whose hosts files map the host name to 127.0.1.1 (tests/test_doctor_netns.py); the field report: "
      "https://github.com/pytorch/examples/issues/812", consequence_of=GLOO_BOUND_UNREACHABLE),
    S("gloo.connect_full_mesh", "nic_iface", "cause", (b"connectFullMesh failed",),
      r"Gloo connectFullMesh failed(?: with)?(?P<detail>.*)",
      "Gloo could not connect the full mesh of ranks",
      "Gloo bound to an address the other nodes cannot reach (the host name resolving to 127.0.1.1, or a "
      "docker/bridge interface), so its pairwise connections fail.", IFACE_FIX, "net.nic_route", 1,
      "[rank10]:[E130 18:11:34.707542570 ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
      "https://github.com/sgl-project/sglang/issues/3226", consequence_of=GLOO_MESH_CAUSES),
    S("gloo.connect_refused", "nic_iface", "cause", (b"pair.cc", b"pair.h", b"Connect timeout ["),
      r"pair\.(?:cc|h):\d+\]\s*(?:connect \[(?P<addr>[^\]]+)\]:\d+: (?P<err>[^.\n]+)"
      r"|timed out connecting: (?P<err2>[^,\n]+?)(?:, remote=\[(?P<addr3>[^\]]+)\]\S*)?$"
      r"|(?P<err3>Connect timeout) \[(?P<addr2>[^\]]+)\])",  # gloo transport/tcp/pair.h
      "Gloo cannot connect to a peer[[ at {addr}]][[ ({err})]]",
      "Gloo connects to the address each rank published, and that address is not reachable from here: the host name resolves "
      "to a loopback or container address, or the wrong interface was chosen.", IFACE_FIX, "net.nic_route", 1,
      "RuntimeError: [/opt/conda/conda-bld/pytorch_1623448255797/work/third_party/gloo/gloo/transport/tcp/pair.cc:799] "
      "connect [192.168.0.222]:2226: Connection refused",
      "gloo/transport/tcp/pair.cc ('connect [addr]:port: strerror', torch 1.x); a line of a public project report "
      "(torch 1.9, conda build)",
      consequence_of=GLOO_BOUND_UNREACHABLE),
    # gloo's DebugLogger (torch 2.6+): one line per failed connect of the full mesh, willRetry=1 while it retries
    S("gloo.connect_retry", "nic_iface", "cause", (b"failed to connect, willRetry=",),
      r"failed to connect, willRetry=\d, retry=\d+, retryLimit=\d+, rank=(?P<rank>\d+), size=\d+, local=\S+, "
      r"remote=\[(?P<addr>[^\]]+)\]\S*, error=(?:SO_ERROR: )?(?P<err>[^,\n]+)",
      "A Gloo rank cannot connect to a peer at {addr} ({err})",
      "Each Gloo rank connects to the address every other rank published in the store; {addr} does not answer from "
      "here. A peer published an address other nodes cannot reach (loopback when its host name does not resolve, "
      "a docker or bridge interface chosen by GLOO_SOCKET_IFNAME), its process is gone, or a firewall blocks the port.",
      IFACE_FIX + "\n# the interfaces are right and the peer still runs: a firewall rejects Gloo's ports (chosen at random) "
      "between the nodes\niptables -S INPUT; nft list ruleset | head -40    # on the node that holds the address named",
      "net.nic_route", 1,
      "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/debug_logger.cc:9] ERROR failed to connect, willRetry=0, "
      "retry=4, retryLimit=3, rank=1, size=3, local=[10.77.0.11]:41642, remote=[10.77.0.10]:36740$1, error=SO_ERROR: "
      "Connection refused, remote=[10.77.0.10]:36740$1",
      "gloo/transport/tcp/debug_logger.cc; produced here by torch 2.13 Gloo ranks in three network namespaces, the "
      "head's rejecting every new connection but the store's (tests/test_doctor_netns.py)", transient=True,
      consequence_of=GLOO_BOUND_UNREACHABLE + ("gloo.loopback_peer",)),
    S("store.retry_loopback", "nic_iface", "suspect", (b"Retry to connect to 127.",),
      r"Retry to connect to (?P<addr>127\.\d+\.\d+\.\d+):(?P<port>\d+) while the server is not yet listening",
      "A rank keeps retrying the master's store at {addr}:{port}, a loopback address",
      "The master address the launcher handed out is a loopback address: on the master its host name resolves to "
      "127.0.1.1 (Debian's /etc/hosts line) or the master was given as localhost. The master's own ranks connect to "
      "themselves; a rank on another node retries its own loopback, where nothing listens, until it times out.",
      "getent hosts \"$(hostname)\"    # on the master: a 127.x answer is the cause\n"
      "# pass the master's routable address to the launcher (paddle.distributed.launch --master IP:PORT or --ips; "
      "torchrun --master-addr IP),\n# or map the host name to that address in /etc/hosts on every node\n" + IFACE_FIX,
      "net.nic_route", 2,
      "I0224 13:50:30.278173 1512912 tcp_utils.cc:107] Retry to connect to 127.0.1.1:63917 while the server is not yet listening.",
      "Paddle paddle/phi/core/distributed/store/tcp_utils.cc (VLOG 'Retry to connect to host:port while the server is "
      "not yet listening.')", stall="multi_node"),
    S("gloo.hostname_loopback", "nic_iface", "suspect", (b"Using the loopback address as fallback",
                                                         b"Unable to resolve hostname to a (local) address"),
      r"Unable to resolve hostname to a \(local\) address\. Using the loopback(?: address as fallback)?",
      "Gloo fell back to the loopback address",
      "The host name does not resolve to a routable local address, so Gloo listens on loopback: other nodes cannot "
      "connect.", IFACE_FIX, "net.nic_route", 2,
      "(RayWorkerWrapper pid=1978, ip=10.41.0.8) [rank9]:[W ProcessGroupGloo.cpp:721] **Warning: Unable to resolve hostname "
      "to a (local) address. Using the loopback address as fallback. Manually set the network interface to bind to with** "
      "GLOO_SOCKET_IFNAME. (function operator())",
      "https://github.com/vllm-project/vllm/issues/7074 (torch ProcessGroupGloo.cpp)", stall="multi_node"),
    # a socket failure whose peer is an address Docker gives its bridges: a rank published its container's bridge
    # address. Docker's default bridge is 172.17.0.0/16 and its user-defined networks take 172.18-172.31.0.0/16 in
    # turn; 172.31 is left out (AWS's default VPC, where 172.31.0.x are real hosts)
    S("tensorpipe.hostname_loopback", "nic_iface", "suspect", (b"Failed to look up the IP address for the hostname",),
      r"Failed to look up the IP address for the hostname \([^)]*\), defaulting to (?P<addr>127\.\S+)",
      "torch RPC (TensorPipe) fell back to {addr}",
      "This host's name does not resolve, so the TensorPipe RPC agent advertises the loopback address: other nodes "
      "cannot connect to it.",
      "export TP_SOCKET_IFNAME=${IFACE:?interface toward MASTER_ADDR, e.g. eth0}    # TensorPipe's interface\n" + IFACE_FIX,
      "net.nic_route", 2,
      "Jan 16 03:14:24 [W tensorpipe_agent.cpp:63] Failed to look up the IP address for the hostname (EAI_NONAME: "
      "unknown node or service), defaulting to 127.0.0.1",
      "https://github.com/pytorch/pytorch/issues/50700 (torch/csrc/distributed/rpc/tensorpipe_agent.cpp)", stall="multi_node"),
    S("gloo.cannot_resolve_local", "nic_iface", "cause", (b"to a (local) address",),
      r"Cannot resolve (?P<host>\S+) to a \(local\) address",
      "Gloo cannot resolve {host} to an address of this host",
      "The host name Gloo was given for its device does not resolve to an address of this machine.",
      IFACE_FIX, "net.nic_route", 1,
      "RuntimeError: Cannot resolve node1 to a (local) address",
      "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp (createDeviceForHostname)"),
    S("nccl.ib_oob_interface", "nic_iface", "suspect", (b"; OOB lo", b"; OOB docker", b"; OOB virbr", b"; OOB veth", b"; OOB br-",
                                                        b"; OOB cni", b"; OOB flannel"),
      r"NET/IB ?: Using.*; OOB (?P<iface>" + UNREACHABLE_IFACE + r"):(?P<addr>\S+?)<",
      "NCCL's InfiniBand transport exchanges its connection data over {iface} ({addr})",
      "NET/IB sets up queue pairs through a socket on the out-of-band interface (NCCL_SOCKET_IFNAME's choice); on "
      "{iface} other nodes cannot reach it, so inter-node connections hang or fail.",
      IFACE_FIX, "net.nic_route", 2,
      "gpu-node07:24817:24901 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB docker0:172.17.0.1<0>",
      "NCCL src/transport/net_ib.cc (\"NET/IB : Using%s ; OOB %s:%s\")", stall="multi_node"),
    S("nccl.bridge_peer", "nic_iface", "cause", (b"172.1", b"172.2", b"172.30."),   # NCCL, Gloo, MPI, UCX (dest_addr=)
      r"(?:(?:Call to (?:recv from|send to|connect to)|[Cc]onnect(?:ion)? to|Connection closed by (?:remote )?peer|connect\(\) to"
      r"|(?:Read|Write) (?:error|timeout)|Socket (?:unexpectedly )?closed) \[?"   # Gloo's pair.cc: "... [172.17.0.2]:5922"
      r"|dest_addr=)(?P<addr>172\.(?:1[7-9]|2\d|30)\.0\.\d{1,3})(?:[<:\]\s,)]|\.?$)",
      "A connection to {addr} failed, an address of a container bridge",
      "{addr} lies in the networks Docker gives its bridges (172.17.0.0/16 for the default bridge, 172.18-172.30 for "
      "user-defined ones): every host has its own such network, so a rank published its container's bridge address "
      "and ranks on other nodes reach no one, or the wrong host, there. The containers of a multi-node job need the "
      "host's network (docker run --network=host, hostNetwork: true in Kubernetes), and NCCL/Gloo the interface "
      "toward MASTER_ADDR.",
      HOST_NETWORK_FIX, "net.nic_route", 1,
      "ip-172-31-12-104:28056:39685 [0] misc/socket.cc:503 NCCL WARN Net : Call to recv from 172.18.0.1<34483> failed : Broken pipe",
      "https://github.com/dmlc/xgboost/issues/7982 (NCCL src/misc/socket.cc); Docker's address pools: "
      "https://docs.docker.com/engine/network/ (default-address-pools 172.17-172.31, then 192.168)", multi_node_only=True),
    S("ucx.connect_failed", "nic_iface", "cause", (b"UCX  ERROR", b"UCX ERROR", b"ucp_ep_create", b"Failed to resolve UCX endpoint"),
      r"UCX\s+ERROR\s+connect\(fd=\d+, dest_addr=(?P<addr>[\w.:%\[\]-]+?):\d+\) failed: (?P<err>[^.\n]+)"
      r"|ucp_ep_create\(proc=\d+\) failed: (?P<err2>Destination is unreachable|[^.\n]+)"
      r"|Failed to resolve UCX endpoint for rank (?P<rank>\d+)"
      # ucp/wireup/select.c "no %s transport to %s: %s": no transport UCX_TLS / UCX_NET_DEVICES allow reaches the peer
      r"|no active messages transport to [^:]*: (?P<err3>.+)",
      "UCX could not connect to a peer[[ at {addr}]][[ ({err})]]",
      "Open MPI's UCX layer connects the ranks over the addresses each one published. A refused connection or an "
      "unreachable destination means a rank published an interface the others cannot reach (docker0's 172.17.0.1, a "
      "bridge, a second NIC on another network), or a firewall blocks the ports UCX picked. \"No active messages "
      "transport\" means none of the transports UCX_TLS and UCX_NET_DEVICES leave (shared memory alone between two "
      "hosts, a device not on the peer's network) reaches the peer.",
      "export UCX_NET_DEVICES=\"${IFACE:?interface toward the other nodes, e.g. eth0 or mlx5_0:1}\"    # mpirun -x UCX_NET_DEVICES ...\n"
      + OMPI_IFACE_FIX + "\n" + IFACE_FIX, "net.nic_route", 1,
      "[1700554343.440877] [node-a:7356 :0]            sock.c:323  UCX  ERROR   connect(fd=48, dest_addr=10.0.0.7:42887) "
      "failed: Connection refused",
      "openucx/ucx src/ucs/sys/sock.c (ucs_socket_connect), src/ucp/wireup/select.c ('no active messages transport "
      "to <no debug data>: self/memory - Destination is unreachable'), Open MPI ompi/mca/pml/ucx/pml_ucx.c "
      "(ucp_ep_create failed)"),
    S("nccl.socket_connect_failed", "nic_iface", "cause", (b"Connect to ", b"Call to connect", b"connect() to ", b"socketStartConnect",
                                                          b"connect to ", b"PollConnect"),
      r"(?:socketStartConnect|socketPollConnect|socketFinalizeConnect)?:? ?Connect to (?P<peer>\S+) failed ?: (?P<err>.+)"
      # NCCL 2.21 socketPollConnect; 2.23-2.30 misc/socket.cc and os/linux.cc (lowercase; retries exhausted)
      r"|socketPollConnect: Connect to (?P<peer4>\S+) returned \d+\((?P<err4>[^)]+)\)"
      r"|connect to (?P<peer5>[^\s<]+<\d+>) (?:failed ?: (?P<err5>.+)|returned (?P<err6>[^,\n]+), exceeded error retry count)"
      r"|(?:socket|ncclOsSocket)PollConnect to (?P<peer6>[^\s<]+<\d+>) failed with error (?P<err7>.+)"
      r"|socket(?:Start|Poll)Connect: exceeded (?:retries|timeouts) \(\d+\)"
      # 2.24-2.26 misc/socket.cc: the peer is not named; poll() failing or timing out on a connect in progress
      r"|socket(?:Start|Poll)Connect: connect returned (?P<err8>[^,\n]+), exceeded error retry count"
      r"|socketPollConnect poll\(\) (?:failed with error (?P<err9>.+)|returned 0, no POLLOUT events)"
      r"|Call to connect timeout ?:? ?(?P<err2>[A-Z][^,\n]+)"
      r"|mca_btl_tcp_endpoint\w*\] connect\(\) to (?P<peer2>\S+) failed: (?P<err3>.+)",
      "A connection to a peer failed[[ ({err})]][[: {peer}]]",
      "NCCL (or Open MPI's TCP transport) tried to reach a peer at an address that does not answer from here: the "
      "peer published an address on an interface other nodes cannot reach (docker0, a bridge, loopback), or a "
      "firewall blocks the ports.", IFACE_FIX, "net.nic_route", 1,
      "jnlh102072:8969:8969 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.37.12.78<46417> failed : Software caused connection abort",
      "https://blog.gitcode.com/c78323ca6ecbd73b92ec3459c9ac1ed1.html (NCCL src/misc/socket.cc)"),
    S("nccl.connect_retry", "nic_iface", "cause", (b"Call to connect returned", b", retrying ("),
      r"Call to connect returned (?P<err>[A-Z][^,\n]+), retrying"
      r"|[Cc]onnect to (?P<peer>[^\s<]+<\d+>) returned (?P<err2>[^,\n]+), retrying \(",  # NCCL 2.23+
      "NCCL keeps retrying a connection[[ ({err})]]",
      "NCCL could not reach a peer's address and retries: the peer published an address on an interface other "
      "nodes cannot reach (docker0, a bridge, loopback), the peer is not up yet, or a firewall blocks the ports.",
      IFACE_FIX, "net.nic_route", 1,
      "worker:101542:101934 [0] NCCL INFO Call to connect returned Connection timed out, retrying",
      "https://github.com/Oneflow-Inc/oneflow/issues/3586 (NCCL src/misc/socket.cc)", transient=True),
    S("ompi.unexpected_identifier", "nic_iface", "cause", (b"received unexpected process identifier", b"cannot find a corresponding process"),
      r"received unexpected process identifier|but cannot find a corresponding process",  # [server accept cannot find guid]
      "Open MPI's TCP transport connected to the wrong process",
      "Open MPI used an interface whose addresses are the same on several nodes (docker0's 172.17.0.1, a bridge), "
      "so connections reach the wrong peer.",
      OMPI_IFACE_FIX + "\ndsv3-preflight run --only net.nic_route",
      "net.nic_route", 1,
      "[u10-154-66-206][[39817,1],2][btl_tcp_endpoint.c:638:mca_btl_tcp_endpoint_recv_connect_ack] received unexpected process identifier [[39817,1],3]",
      "https://github.com/horovod/horovod/issues/310 (Open MPI btl_tcp_endpoint.c)"),
    S("nccl.socket_family", "nic_iface", "cause", (b"Address family not supported", b"is neither AF_INET"),
      r"Socket creation failed ?: Address family not supported|is neither AF_INET\(\d+\) nor AF_INET6",
      "NCCL cannot create a socket of the chosen address family",
      "The interface or NCCL_SOCKET_FAMILY selects an address family (IPv6/IPv4) this node or container does not "
      "support, or the interface has no address.", IFACE_FIX + "\nexport NCCL_SOCKET_FAMILY=AF_INET",
      "net.nic_route", 1,
      "include/socket.h:344 WARN Socket creation failed : Address family not supported by protocol",
      "https://github.com/NVIDIA/nccl/issues/210"),
    S("gloo.no_interface_for_address", "nic_iface", "cause", (b"Unable to find interface for",),
      r"Unable to find interface for:? \[?(?P<addr>[^\]\s]+)",
      "Gloo finds no interface holding {addr}",
      "Gloo was told to bind an address (GLOO_SOCKET_IFADDR, or what the host name resolves to) that no interface "
      "of this node holds.", IFACE_FIX, "net.nic_route", 1,
      "RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/http://device.cc:208] ifa != nullptr. "
      "Unable to find interface for: [10.16.32.68]",
      "https://github.com/PeizeSun/SparseR-CNN/issues/28 (gloo/transport/tcp/device.cc)"),
    S("ompi.no_usable_interface", "nic_iface", "cause", (b"An invalid value was given for btl_tcp_if_", b"An invalid value was given for oob_tcp_if_",
                                                        b"None of the TCP networks specified to be included", b"resulted in no networks being available",
                                                        b"No network interfaces were found for out-of-band"),
      r"An invalid value was given for (?P<param>(?:btl|oob)_tcp_if_\w+)|None of the TCP networks specified to be included"
      r"|resulted in no networks being available|No network interfaces were found for out-of-band communications",
      "Open MPI has no usable interface for its TCP traffic[[ ({param} is wrong)]]",
      "The interfaces given to Open MPI (btl_tcp_if_include/exclude, oob_tcp_if_include/exclude) name no interface or "
      "subnet of this host, or exclude every one, so its out-of-band wire-up or its TCP transport has no interface.",
      "ip -br addr    # the interface names and subnets on this host\n" +
      OMPI_IFACE_FIX + "\ndsv3-preflight run --only net.nic_route", "net.nic_route", 1,
      "WARNING: An invalid value was given for btl_tcp_if_include.  This",
      "Open MPI opal/mca/btl/tcp/help-mpi-btl-tcp.txt, orte/mca/oob/tcp/help-oob-tcp.txt, orte/mca/oob/base/help-oob-base.txt (v4.1.8)"),
    S("ompi.daemon_failed", "nic_iface", "cause", (b"daemon has unexpectedly failed after launch",),
      r"(?:ORTE|PRTE) daemon has unexpectedly failed after launch and before",
      "An Open MPI daemon failed before it could connect back to mpirun",
      "A remote orted/prted started but never connected back: most often the nodes share no routable interface (a "
      "bridge or a second network chosen), a firewall, or the daemon could not start there.",
      OMPI_IFACE_FIX + "\ndsv3-preflight run --only net.nic_route,cluster.node_count", "net.nic_route", 2,
      "An ORTE daemon has unexpectedly failed after launch and before",
      "Open MPI orte/mca/errmgr/base/help-errmgr-base.txt [failed-daemon]; openpmix/prrte (PRTE wording)"),
    S("ompi.tcp_connect_failed", "nic_iface", "cause", (b"failed to TCP connect to a peer", b"Match incoming connection from",
                                                       b"Unable to connect to the peer", b"inbound MPI TCP connection request",
                                                       b"unable to complete a TCP connection", b"unable to establish a communication connection"),
      r"Open MPI failed to TCP connect to a peer MPI process"
      r"|Match incoming connection from \S+ (?P<addr>\S+) with locally known IP (?P<local>\S+) failed"
      r"|Unable to connect to the peer (?P<addr2>\S+) on port \d+: (?P<err>.+)"          # btl_tcp_endpoint.c (4.x, 5.x)
      r"|detected an inbound MPI TCP connection request from a peer"                     # help-mpi-btl-tcp.txt [dropped inbound]
      r"|A process or daemon was unable to complete a TCP connection"                   # orte oob_tcp_connection.c
      r"|(?:ORTE|PRTE) is unable to establish a communication connection to the",       # help-errmgr-base.txt [no-connect]
      "Open MPI's TCP transport cannot connect its peers[[ ({addr} does not match {local})]]",
      "Open MPI's TCP transport (used by mpirun and Horovod) picked interfaces whose addresses the other node cannot "
      "reach or does not expect (docker0's 172.17.0.1, virbr0's 192.168.122.1, a second network).",
      OMPI_IFACE_FIX + "\ndsv3-preflight run --only net.nic_route",
      "net.nic_route", 1,
      "WARNING: Open MPI failed to TCP connect to a peer MPI process.  This",
      "https://github.com/open-mpi/ompi/issues/6377 (Open MPI help-mpi-btl-tcp.txt)"),
    S("horovod.no_common_interface", "nic_iface", "cause", (b"Launching horovod task function was not successful",
                                                           b"routable network interface", b"'Linux.'.format(service_name",
                                                           b"common task-to-task communication interfaces", b"was unable to connect to",
                                                           b"No available network interface found matching", b"IPv4 address of the common interface"),
      r"Launching horovod task function was not successful|routable network interface with the same name"
      r"|'Linux\.'\.format\(service_name|Unable to find a set of common task-to-task communication interfaces"
      r"|Horovod(?:run)? was unable to connect to \S+ on any of the following addresses"
      r"|No available network interface found matching user provided interface|Cannot find an IPv4 address of the common interface",
      "horovodrun could not reach its tasks over a common network interface",
      "horovodrun's driver and task services talk over the interfaces all hosts share by name; with none routable "
      "in common (docker0, different names per host), the tasks never connect.",
      "ip -br addr    # on every host: one routable interface with the same name everywhere\n" +
      HOROVODRUN_FIX + "\n"
      "dsv3-preflight run --only net.nic_route    # on each host: the interface toward the head",
      "net.nic_route", 2,
      "Launching horovod task function was not successful:",
      "https://github.com/horovod/horovod/issues/2421 (horovod/runner/common/util/network.py)"),
    S("nccl.bootstrap_error", "nic_iface", "cause", (b"bootstrap.cc:", b"bootstrap.cu:"),
      r"bootstrap\.c[cu]:\d+ -> (?P<code>[236])\b",
      "NCCL's bootstrap failed (error {code})",
      "NCCL's bootstrap (the socket ring that exchanges every rank's address before any GPU traffic) failed: it runs "
      "over the NCCL_SOCKET_IFNAME interface, and fails when that interface is not the one toward the other nodes "
      "or cannot reach them.", IFACE_FIX, "net.nic_route", 2,
      "71d46aa8dab5:5241:5262 [2] NCCL INFO bootstrap.cc:100 -> 2",
      "https://github.com/NVIDIA/nccl/issues/331 (NCCL src/bootstrap.cc error propagation)"),
    S("nccl.system_error", "nic_iface", "cause", (b"unhandled system error", b"ncclSystemError"),
      r"unhandled system error|ncclSystemError",
      "NCCL reported a system error (a system call failed)",
      "ncclSystemError is a failed system call; without a more specific line it is most often a socket to a peer "
      "over the wrong or an unreachable interface (docker0, loopback, a bridge) or a firewall, less often /dev/shm. "
      "NCCL_DEBUG=INFO prints the call that failed.",
      IFACE_FIX + "\nexport NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET    # rerun: the WARN line names the call that failed",
      "net.nic_route", 2,
      "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:518, unhandled system error, NCCL version 2.4.8",
      "https://github.com/deepinsight/insightface/issues/1444 (NCCL ncclSystemError; torch ProcessGroupNCCL.cpp)"),
    S("nccl.bad_interface_selected", "nic_iface", "suspect", (b"Using lo", b"]lo:", b"Using docker", b"]docker", b"virbr", b"veth",
                                                             b"Using interface lo:", b"]cni", b"flannel", b"Using br-", b"]br-"),
      r"(?:Bootstrap|NET/Socket|NET) ?: Using (?:interface )?(?:\[\d+\])?(?P<iface>" + UNREACHABLE_IFACE + r"):(?P<addr>\S+?)<",
      "NCCL selected interface {iface} ({addr})",
      "NCCL uses {iface}, which other nodes cannot reach (loopback, docker or bridge interfaces hold the same "
      "addresses on every node): multi-node init hangs or times out.", IFACE_FIX, "net.nic_route", 2,
      "paigcr-b-gpu-1012:4152:4206 [0] NCCL INFO NET : Using interface lo:127.0.0.1<0>",
      "https://github.com/horovod/horovod/issues/584", stall="multi_node"),
    S("nccl.container_bridge_address", "nic_iface", "suspect", (b"172.17.", b"192.168.122."),
      r"(?:Bootstrap|NET/Socket) ?: Using (?:interface )?(?:\[\d+\])?(?P<iface>[A-Za-z][\w.-]*):"
      r"(?P<addr>172\.17\.\d+\.\d+|192\.168\.122\.\d+)<",
      "NCCL selected {iface} with {addr}, an address of a host's own bridge network",
      "{addr} lies in 172.17.0.0/16, the network Docker gives containers on its default bridge, or 192.168.122.0/24, "
      "libvirt's default network (virbr0): each host has its own "
      "such network, so ranks on other nodes cannot reach this address and a multi-node init hangs or times out. "
      "The containers of a multi-node job need the host's network (docker run --network=host, hostNetwork: true in "
      "Kubernetes) or an overlay whose addresses route between the nodes.",
      HOST_NETWORK_FIX, "net.nic_route", 2,
      "c6ad99331184:117277:117277 [0] NCCL INFO Bootstrap : Using [0]eth0:172.17.0.2<0>",
      "https://github.com/NVIDIA/nccl/issues/367 (Docker's default bridge network is 172.17.0.0/16)", stall="multi_node"),
    # NCCL's first (or only) interface holds a link-local address only: fe80::/10 or 169.254.0.0/16 are not routed
    # between hosts, and appliance interfaces carry the same one on every node (the BMC's USB network of GH200 and
    # DGX nodes, 169.254.3.1). A later interface with one is no such sign: NCCL uses its first
    S("nccl.link_local_interface", "nic_iface", "suspect", (b"fe80:", b"169.254."),
      r"(?:Bootstrap|NET/Socket) ?: Using (?:\[0\])?(?P<iface>[A-Za-z][\w.-]*):"
      r"(?P<addr>fe80:[0-9a-fA-F:]*(?:%[\w.-]+)?|169\.254\.\d{1,3}\.\d{1,3})<",
      "NCCL's first interface {iface} has only a link-local address ({addr})",
      "{addr} is link-local (IPv6 fe80::/10, IPv4 169.254.0.0/16): such addresses are not routed between hosts, and "
      "an appliance interface carries the same one on every node (the BMC's USB network on GH200 and DGX nodes is "
      "169.254.3.1 everywhere). NCCL listens and publishes its bootstrap address on {iface}, so ranks on other nodes "
      "cannot reach it: a multi-node init hangs or its connections are refused.",
      IFACE_FIX + "\nexport NCCL_SOCKET_FAMILY=AF_INET    # when the interface has IPv4 too but NCCL took its IPv6 address",
      "net.nic_route", 2,
      "gh200-1:2211:2211 [0] NCCL INFO Bootstrap : Using [0]usb0:169.254.3.1<0>",
      "https://github.com/uccl-project/uccl/pull/1034 (NCCL bootstrap on GH200's 169.254.3.1 link-local NIC: "
      "'Connection refused' across two nodes); https://github.com/NVIDIA/nccl/issues/529 (ip6tnl0:fe80::... first)",
      stall="multi_node"),
    # Open MPI's (PRRTE's, ORTE's) out-of-band wire-up lists every address it may use: one of a host's own bridge
    # network among them is tried too, but runs that list it also work, so it only explains a hang the user reports
    S("ompi.oob_bridge_address", "nic_iface", "suspect", (b"to our list of V4 connections",),
      r"oob:tcp:init adding (?P<addr>172\.17\.\d+\.\d+|192\.168\.122\.\d+) to our list of V4 connections",
      "Open MPI's out-of-band wire-up also uses {addr}, an address of a host's own bridge network",
      "{addr} lies in Docker's default bridge (172.17.0.0/16) or libvirt's default network (192.168.122.0/24, "
      "virbr0): every host has its own, so daemons that connect to it reach no one, or the wrong host, and the job's "
      "start can hang. Exclude the bridge, or include only the interface toward the other nodes.",
      "dsv3-preflight run --only net.nic_route    # on each node: its interface toward the other nodes\n"
      "export PRTE_MCA_oob_tcp_if_include=${IFACE:?interface toward the other nodes}    # Open MPI 5 (PRRTE)\n"
      + OMPI_IFACE_FIX, "net.nic_route", 2,
      "[ucc-h5:200668] [prte-ucc-h5-200668@0,0] oob:tcp:init adding 192.168.122.195 to our list of V4 connections",
      "https://github.com/open-mpi/ompi/issues/13155 (prrte src/mca/oob/tcp/oob_tcp_component.c; Open MPI 4's ORTE "
      "orte/mca/oob/tcp)", hang_suspect=True),
    # a suspect interface listed after a routable first one: NCCL's socket transport may use it too, but runs like this
    # also work (round 4's development part has one), so it never explains a log that just stops
    S("nccl.bad_interface_listed", "nic_iface", "suspect", (b"]lo:", b"]docker", b"virbr", b"veth", b"]cni", b"flannel", b"]br-"),
      r"(?:Bootstrap|NET/Socket) ?: Using .*\[\d+\](?P<iface>" + UNREACHABLE_IFACE + r"):(?P<addr>\S+?)<",
      "NCCL also lists interface {iface} ({addr})",
      "Besides its first interface NCCL lists {iface}, which other nodes cannot reach (loopback, docker or bridge "
      "interfaces hold the same addresses on every node); connections NCCL makes over it fail or hang. In a failed "
      "run that is a likely cause: restrict NCCL to the interface toward MASTER_ADDR.", IFACE_FIX, "net.nic_route", 2,
      "ip-172-31-0-137:14605:14673 [0] NCCL INFO NET/Socket : Using [0]ens5:172.31.0.137<0> "
      "[1]veth75fa783:fe80::14ad:64ff:fe64:b31e%veth75fa783<0>",
      "https://github.com/pytorch/pytorch/issues/68893", hang_suspect=True),

    # ======================================================================== nccl_transport
    # NCCL 2.16+ sends its socket's type after the magic (include/socket.h: 3 = the socket transport, 4 = IB's
    # out-of-band socket): a peer of type 4 at a listener of type 3 (or the reverse) runs the other network
    S("nccl.socket_type_mismatch", "nccl_transport", "cause", (b"socketFinalizeAccept",),
      r"socketFinalizeAccept(?: from \S+?)?: wrong type (?P<got>[34]) != (?P<want>[34])\b",   # 2.27+: "from <peer>"
      "Ranks chose different NCCL networks (a peer's connection of type {got} at a listener of type {want}; "
      "3 = sockets, 4 = InfiniBand)",
      "NCCL's connection handshake carries the transport: type 3 is the TCP socket transport, type 4 InfiniBand/"
      "RoCE's. This rank and the peer that connected chose different networks: the IB device, its driver "
      "(rdma-core, libibverbs) or a net plugin is missing on some nodes, or NCCL_IB_DISABLE / NCCL_NET / "
      "NCCL_IB_HCA differ between them.",
      "ibv_devinfo | head; echo \"NCCL_IB_DISABLE=${NCCL_IB_DISABLE-} NCCL_NET=${NCCL_NET-} NCCL_IB_HCA=${NCCL_IB_HCA-}\"    # on each node: the same everywhere\n"
      + ALLREDUCE_FIX, "dist.allreduce", 1,
      "user:16899:16961 [0] misc/socket.cc:441 NCCL WARN socketFinalizeAccept: wrong type 4 != 3",
      "https://github.com/NVIDIA/nccl-tests/issues/188 (NCCL 2.16+ src/misc/socket.cc socketFinalizeAccept, 2.27+ "
      "'socketFinalizeAccept from 10.1.0.2<43017>: wrong type 4 != 3'; "
      "src/include/socket.h ncclSocketType)"),
    S("nccl.shm_no_space", "nccl_transport", "cause", (b"/dev/shm/nccl", b"posix_fallocate failed", b"shared memory segment",
                                                      b"shmutils", b"nccl-shm", b"Call to shm_open failed"),
      r"failed to extend (?P<path>/dev/shm/\S+) to (?P<size>\d+) bytes|Error while (?:creating|attaching to) shared memory segment (?P<path2>\S+)"
      r"|posix_fallocate failed ?: No space left on device|shmutils\.cc:\d+ NCCL WARN"
      r"|(?:include/)?shm\.h:\d+ NCCL WARN Call to shm_open failed",  # NCCL <= 2.11 include/shm.h
      "NCCL could not allocate shared memory in /dev/shm",
      "/dev/shm is too small for NCCL's intra-node buffers (docker's default is 64 MB) or full of stale segments, or "
      "ranks NCCL sees on one host do not share /dev/shm (containers without --ipc=host).",
      SHM_FIX, "host.resources", 1,
      "ubuntu:9621:9691 [6] misc/shmutils.cc:71 NCCL WARN Error: failed to extend /dev/shm/nccl-fjwOOB to 5967876 bytes",
      "https://github.com/NVIDIA/nccl-tests/issues/166 (NCCL src/misc/shmutils.cc)"),
    S("nccl.ib_gid_unreadable", "nccl_transport", "cause", (b"ncclIbRoceGetVersionNum",),
      r"NET/IB ?: (?:read|open) failed in ncclIbRoceGetVersionNum: (?P<err>.+?)\s*$"
      r"|Check failed: ncclIbRoceGetVersionNum",
      "The RoCE version of an RDMA GID could not be read[[ ({err})]]",
      "NCCL's IB transport (and libraries built on its code) reads the RoCE version of each GID index from "
      "/sys/class/infiniband/HCA/ports/PORT/gid_attrs/types/INDEX to pick one. The read failed: in a container the "
      "host's GID indexes are often not mapped into the container's sysfs (EINVAL), or the index holds no GID. "
      "Newer NCCL skips such an index; older NCCL and code copied from it abort.",
      "grep -H . /sys/class/infiniband/*/ports/*/gid_attrs/types/* 2>&1 | head -40    # each GID index and its RoCE version\n"
      "export NCCL_IB_GID_INDEX=${GID_INDEX:?a GID index that reads RoCE v2 on every node, e.g. 3}\n" + ALLREDUCE_FIX,
      "dist.allreduce", 1,
      "W20250825 11:10:33.595331   331 util_rdma.h:547] NET/IB: read failed in ncclIbRoceGetVersionNum: Invalid argument",
      "NCCL src/transport/net_ib.cc (WARN 'NET/IB: read failed in ncclIbRoceGetVersionNum: %s'); UCCL util_rdma.h"),
    S("nccl.ib_completion_error", "nccl_transport", "cause", (b"Got completion from peer", b"Got completion with error",
                                                             b"IBV_WC_", b"retry counter exceeded", b"Retry count exceeded"),
      r"NET/IB ?: Got completion (?:from peer (?P<peer>\S+) )?with (?:error |status=)(?P<status>\d+)"
      r"|IBV_WC_\w+_ERR|[Tt]ransport retry counter exceeded|Retry count exceeded",
      "InfiniBand/RoCE completion error[[ (status {status})]][[ from peer {peer}]]",
      "An RDMA work request failed (12 = transport retry counter exceeded: the link or peer became unreachable; "
      "4 = local protection error; 5 = flushed after an earlier error): a flapping link, a wrong NCCL_IB_HCA or "
      "GID index, rail/cross-NIC wiring NCCL does not expect, or the peer process dying.",
      "ibstat; ibv_devinfo | grep -E 'state|link_layer'    # on both nodes\n"
      "# set NCCL_IB_HCA / NCCL_IB_GID_INDEX (RoCE), try NCCL_CROSS_NIC=0; NCCL_IB_DISABLE=1 confirms by falling back to sockets\n"
      + ALLREDUCE_FIX, "dist.allreduce", 1,
      "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> "
      "with status=12 opcode=0 len=0 vendor err 129 (Recv)",
      "https://github.com/NVIDIA/nccl/issues/1405 (NCCL src/transport/net_ib.cc)"),
    # the fabric's own events, as NCCL's async thread reports them (ibv_get_async_event): a port that goes down, again and
    # again, is a flapping link; the subnet manager reassigning LIDs is the fabric's too. The network's administrator acts
    S("nccl.ib_port_event", "nccl_transport", "cause", (b"Got async event",),
      r"(?:NET/IB ?: (?:\S+:\d+ )?|\bIB )Got async event ?: (?P<event>port error|LID change|SM change|client reregistration)",
      "An InfiniBand/RoCE port changed state during the run ({event})",
      "NCCL's RDMA device reported '{event}': the link of that port went down (a 'port error' again and again is a "
      "flapping link: a cable, a transceiver or a switch port) or the subnet manager changed the fabric under the job. "
      "Transfers over it fail or stall; the collectives' errors and timeouts follow from it.",
      "ibstat | grep -E 'CA |State|Physical state|Rate'    # on the node that reports it: each port Active / LinkUp at its rate\n"
      "ibqueryerrors    # the fabric's error counters (symbol errors, link downed), from a node with the IB tools\n"
      "# a port that keeps going down: have its cable, transceiver and switch port checked; drain the node meanwhile\n"
      + ALLREDUCE_FIX,
      "dist.allreduce", 1,
      "gpu-a:1:2 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got async event : port error",
      "NCCL src/transport/net_ib.cc (ncclIbAsyncThreadMain: 'NET/IB : Got async event : %s'; net_ib forks of later "
      "releases name the device and port first, 'NET/IB : %s:%d Got async event : %s'; NCCL 2.3's 'IB Got async event'); "
      "https://github.com/NVIDIA/nccl/issues/905 (the maintainer: a log full of port errors is a flapping link)"),
    S("nccl.ibv_call_failed", "nccl_transport", "cause", (b"Call to ibv_", b"ibv_modify_qp", b"ibv_create_qp", b"ibv_reg_mr",
                                                         b"ibv_open_device", b"Got async event", b"ibv_post_"),
      r"Call to (?P<call>ibv_\w+) failed|(?P<call2>ibv_(?:modify_qp|create_qp|reg_mr|reg_dmabuf_mr|open_device|create_cq)) failed"
      r"|NET/IB ?: Got async event ?: (?P<event>.+)"
      # the verbs queue is full (ENOMEM here is not host RAM); polling the completion queue failed
      r"|(?P<call3>ibv_post_(?:send|recv))\(\) failed|Call to (?P<call4>ibv_poll_cq)\(\) returned",
      "InfiniBand/RoCE setup failed[[ ({call})]]",
      "The RDMA device refused a queue-pair or memory-registration call: port down, wrong GID index (RoCE), "
      "rail-only wiring with NCCL crossing NICs, or the memlock ulimit too low for ibv_reg_mr.",
      "ibstat; ibv_devinfo | grep -E 'state|link_layer'; ulimit -l    # memlock must be unlimited\n"
      "# set NCCL_IB_HCA / NCCL_IB_GID_INDEX for RoCE, try NCCL_CROSS_NIC=0\n" + ALLREDUCE_FIX,
      "dist.allreduce", 1,
      "machine1:196207:196244 [0] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument",
      "https://github.com/NVIDIA/nccl/issues/622 (NCCL src/misc/ibvwrap.cc)"),
    S("nccl.p2p_failure", "nccl_transport", "cause", (b"peer access is not supported", b"CUDA IPC", b"cudaIpc", b"failed to peer with device",
                                                     b"PeerAccessUnsupported", b"P2P/IPC"),
      r"peer access is not supported between these two devices|failed to (?:open|get) CUDA IPC handle|cudaIpc\w+ failed"
      r"|failed to peer with device|cudaErrorPeerAccessUnsupported|P2P/IPC.*(?:fail|error)",
      "GPU peer-to-peer (P2P/IPC) access failed",
      "NCCL tried direct GPU-to-GPU access that this topology or virtualisation does not allow (PCIe ACS, IOMMU, "
      "VMs, consumer GPUs).",
      "nvidia-smi topo -m\nexport NCCL_P2P_DISABLE=1    # confirms it: NCCL falls back to shared memory\n" + ALLREDUCE_FIX,
      "dist.allreduce", 1,
      "z-pc:909608:910337 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer access is not supported between these two devices",
      "https://github.com/ray-project/ray_lightning/issues/24 (NCCL src/transport/p2p.cc)"),
    S("nccl.no_transport", "nccl_transport", "cause", (b"No transport found",),
      r"No transport found(?: for rank (?P<rank_a>\d+)\[\w+\] -> rank (?P<rank_b>\d+))?",
      "NCCL found no transport between two ranks[[ ({rank_a} -> {rank_b})]]",
      "None of P2P, shared memory and the network accepted this pair of ranks: usually two ranks on one node with "
      "NCCL_P2P_DISABLE and NCCL_SHM_DISABLE set while the network transport is not allowed within the node.",
      "env | grep -E '^NCCL_(P2P|SHM|NET)_DISABLE|^NCCL_NET_DISABLE_INTRA'    # unset what disables every path\n" + ALLREDUCE_FIX,
      "dist.allreduce", 1,
      "gpu-node07:24817:24901 [3] transport.cc:38 NCCL WARN No transport found for rank 3[1a000] -> rank 11[1a000]",
      "NCCL src/transport.cc (selectTransport, format strings 2.4-2.30)"),
    S("nccl.net_not_found", "nccl_transport", "cause", (b"Error: network ",),
      r"Error: network (?P<net>\S+) not found",
      "NCCL_NET names network {net}, which this node does not have",
      "NCCL_NET selects a network transport (IB, Socket or a plugin's) that is not loaded on this node: the plugin or "
      "the InfiniBand libraries are missing here.",
      "echo \"NCCL_NET=${NCCL_NET-}\"; ls /usr/lib/x86_64-linux-gnu/libibverbs.so* 2>/dev/null\n"
      "unset NCCL_NET    # let NCCL choose, or install the plugin on every node\n" + VERSIONS_FIX, "gpu.versions", 1,
      "gpu-node07:24817:24901 [3] net.cc:285 NCCL WARN Error: network IB not found.",
      "NCCL src/net.cc (format string 2.10-2.30)"),
    S("nccl.net_device_count_mismatch", "nccl_transport", "cause", (b"Detected mixed local Net device counts",),
      r"Detected mixed local Net device counts across ranks \(min (?P<min>\d+), max (?P<max>\d+)\)",
      "The ranks see different numbers of network devices ({min} to {max})",
      "NCCL 2.30 compares how many network devices (InfiniBand/RoCE ports) each rank found and stops when they differ: "
      "on some node a port is down, a driver did not load, or NCCL_IB_HCA selects differently. NCCL's INFO lines "
      "'Rank N has M local Net devices' name the ranks short of devices.",
      "ibstat | grep -E 'CA |State|Rate'    # on every node: each port Active at the same rate\n"
      "echo \"NCCL_IB_HCA=${NCCL_IB_HCA-}\"    # the same on every node\n" + ALLREDUCE_FIX, "dist.allreduce", 1,
      "gpu-a:4101:4190 [0] init.cc:1339 NCCL WARN Detected mixed local Net device counts across ranks (min 4, max 8). "
      "Set NCCL_IGNORE_NET_MISMATCH=1 to continue.",
      "NCCL src/init.cc (2.30: WARN and ncclSystemError unless NCCL_IGNORE_NET_MISMATCH)"),
    S("nccl.p2p_disabled_nvlink", "nccl_transport", "cause", (b"P2P is disabled between NVLINK connected GPUs",),
      r"P2P is disabled between NVLINK connected GPUs (?P<gpu_a>\d+) and (?P<gpu_b>\d+)",
      "P2P is off between NVLink-connected GPUs {gpu_a} and {gpu_b}",
      "The GPUs are NVLink-connected but the driver reports no peer-to-peer access between them: on NVSwitch systems "
      "(HGX/DGX) Fabric Manager not running or not matching the driver, otherwise NVLink links that are down, or "
      "a hardware fault. NCCL refuses to go on rather than run slowly over PCIe.",
      "nvidia-smi nvlink -s; nvidia-smi topo -p2p r\n"
      "systemctl status nvidia-fabricmanager --no-pager    # NVSwitch systems: it must run, at the driver's version\n"
      "dsv3-preflight run --only gpu.fabric_manager,gpu.nvlink",
      "gpu.nvlink", 1,
      "gpu-a:4101:4190 [0] graph/paths.cc:325 NCCL WARN P2P is disabled between NVLINK connected GPUs 1 and 0. This "
      "should not be the case given their connectivity, and is probably due to a hardware issue. If you still want to "
      "proceed, you can set NCCL_IGNORE_DISABLED_P2P=1.",
      "NCCL 2.21.5 src/graph/paths.cc:325 (format string)"),
    S("nccl.ib_warning", "nccl_transport", "cause", (b"NCCL WARN NET/IB", b"NCCL WARN NET/IBext"),
      r"NCCL WARN NET/IB\w* ?: (?P<what>.+)",
      "NCCL InfiniBand/RoCE warning: {what}",
      "NCCL's InfiniBand transport reported a problem with the RDMA device, link or peer.",
      "ibstat; ibv_devinfo | grep -E 'state|link_layer'    # on the nodes named\n" + ALLREDUCE_FIX,
      "dist.allreduce", 2,
      "node1:1234:1290 [0] transport/net_ib.cc:1101 NCCL WARN NET/IB : req 3/1 tag 7 peer 10.0.0.2<4242> collective mismatch error, local size 4096 remote size 2048",
      "NCCL src/transport/net_ib.cc (every WARN there starts with 'NET/IB :')",
      transient=True),   # before the run's progress (one HCA of several unusable, an async port event): NCCL went on
    S("gpu.nvlink_xid", "nccl_transport", "cause", (b"Xid", b"NVLink"),
      r"NVRM: Xid \([^)]*\): (?P<xid>" + _one_of(NVLINK_XIDS) + r")\b|NVLink.{0,40}(?:error|fatal|failed|down)"
      # Xid 45, the cleanup of a process, names the Xid that caused it when that came first ("caused by previous Xid 149")
      r"|caused by previous Xid (?P<xid2>" + _one_of(NVLINK_XIDS) + r")\b",
      "NVLink error[[ (Xid {xid})]]",
      "An NVLink link reported errors: collectives over it fail or hang.",
      "nvidia-smi nvlink --status; nvidia-smi -q | grep -i -A3 nvlink\n# drain the node and reset the GPU (nvidia-smi -r) or have the link inspected",
      "gpu.nvlink", 1,
      "NVRM: Xid (PCI:0000:07:00): 74, pid=2345, NVLink: fatal error detected on link 3",
      "NVIDIA Xid catalogue (Xid 74 NVLink error)"),
    # ======================================================================== gpu_fault (not a corpus class)
    # NVIDIA's Xid catalogue (dsv3_preflight.gpu.xid, the same table the gpu.xid check reads the kernel log with): the
    # Xids that need a GPU reset or a reboot are the node's fault; an application's fault names no class (the program's
    # own error is the cause); those NVIDIA says to ignore (45: the cleanup after any killed process) are no error
    S("gpu.xid_fault", GPU_FAULT_CLASS, "cause", (b"Xid",),
      _XID_LINE + r"(?:(?P<xid>" + _one_of(XID_FAULTS) + r")\b|45\b.*caused by previous Xid (?P<xid2>"
      + _one_of(XID_FAULTS) + r")\b)",
      "GPU fault: Xid {xid}[[ ({meaning})]] on the GPU at PCI {pci}",
      "The NVIDIA kernel driver logged Xid {xid} for the GPU at {pci}[[: {meaning}]]. NVIDIA's catalogue resolves it "
      "on the node[[ ({action})]], not in the job: until then CUDA on that GPU fails or hangs, and every collective "
      "with it. The ranks' own errors (CUDA errors, NCCL timeouts) are its consequences.",
      "nvidia-smi -q -i [[{bus}||\"${GPU_BUS_ID:?PCI bus id of the GPU, from the Xid line}\"]] | grep -i -A2 -E 'Reset Status|Recovery Action|Pending|Remapp'    # on that node\n"
      "journalctl -k -b --no-pager | grep -i -E 'Xid' | tail -20\n"
      "# drain the node from the job (the others can run without it), then reset that GPU; Xid 79 or a refused reset: reboot\n"
      "nvidia-smi -r -i [[{bus}||\"${GPU_BUS_ID}\"]]\n"
      "dsv3-preflight run --only gpu.xid,gpu.memory_errors,gpu.reset_pending    # after the repair: the node is clean again",
      "gpu.xid", 0,
      "[ 3201.581234] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
      "NVIDIA Xid catalogue (docs.nvidia.com/deploy/xid-errors); the driver's NVRM lines as the kernel log prints them",
      enrich=xid_texts),
    S("gpu.xid_application", None, "symptom", (b"Xid",),
      _XID_LINE + r"(?P<xid>" + _one_of(XID_APPLICATION) + r")\b",
      "The GPU stopped a program: Xid {xid}[[ ({meaning})]]",
      "An application fault on the GPU (an illegal address, a bad instruction): the GPU stays healthy; the failing "
      "rank's own error (an illegal memory access, a CUDA error) and the code behind it are the cause.", "", None, 4,
      "NVRM: Xid (PCI:0000:18:00): 31, pid=85132, name=python, Ch 00000008, intr 00000000. MMU Fault: ENGINE GRAPHICS",
      "NVIDIA Xid catalogue (Xid 13, 31, 43: application faults)", enrich=xid_texts),
    S("gpu.lost", GPU_FAULT_CLASS, "cause", (b"fallen off the bus", b"GPU is lost", b"GpuIsLost", b"GPU_IS_LOST",
                                             b"RmInitAdapter failed", b"Unable to determine the device handle",
                                             b"probe routine failed"),
      r"(?:GPU (?P<bus>" + PCI + r"\.\d): )?GPU has fallen off the bus"
      r"|Unable to determine the device handle for GPU ?(?P<bus2>" + PCI + r"\.\d): "
      r"(?:GPU is lost|Unknown Error)|NVMLError_GpuIsLost|NVML_ERROR_GPU_IS_LOST|\bGPU is lost\b"
      r"|GPU (?P<bus3>" + PCI + r"\.\d): RmInitAdapter failed|RmInitAdapter failed"
      # the driver's message wrapped over three kernel-log lines, and its failure to probe the GPU at the next load
      r"|NVRM: fallen off the bus and is not responding|The NVIDIA probe routine failed for \d+ device",
      "A GPU is lost to the driver[[ (PCI {bus})]]: fallen off the bus or failed to initialise",
      "The driver can no longer reach a GPU over PCI Express (Xid 79, 'GPU is lost') or could not initialise it "
      "(RmInitAdapter failed): a fault of the node's hardware, power or firmware, not of the job. Only a reboot "
      "brings the GPU back, and a GPU that falls off again needs its hardware inspected.",
      "nvidia-smi -L; journalctl -k -b --no-pager | grep -i -E 'Xid|fallen off|RmInitAdapter' | tail -20    # on that node\n"
      "# drain the node from the job (the others can run without it), then reboot it; again after a reboot: have it repaired\n"
      "dsv3-preflight run --only gpu.inventory,gpu.xid    # after the reboot: every GPU back and no new Xid",
      "gpu.inventory", 0,
      "Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  Reboot the system to recover this GPU",
      "nvidia-smi's and pynvml's wording (NVML_ERROR_GPU_IS_LOST); the driver's NVRM 'GPU has fallen off the bus' and "
      "'RmInitAdapter failed' lines",
      consequence_of=("gpu.xid_fault",)),   # the driver prints it after its Xid 79 line
    S("cuda.ecc_uncorrectable", GPU_FAULT_CLASS, "cause", (b"uncorrectable ECC error", b"ECCUncorrectable", b"ECC_UNCORRECTABLE"),
      r"uncorrectable ECC error encountered|cudaErrorECCUncorrectable|CUDA_ERROR_ECC_UNCORRECTABLE",
      "Uncorrectable ECC error on a GPU",
      "A GPU's memory had an error ECC could not correct: the CUDA context that touched it is gone, and the GPU "
      "needs a reset (row remapping happens at the reset) before it can be trusted again.",
      "nvidia-smi -q -d ECC,ROW_REMAPPER | grep -i -E 'Volatile|Uncorr|Pending|Failure'    # on that node: which GPU, and what it needs\n"
      "# drain the node from the job, then reset the GPU (nvidia-smi -r -i <bus id>) or reboot the node\n"
      "dsv3-preflight run --only gpu.memory_errors,gpu.xid    # after the repair",
      "gpu.memory_errors", 0,
      "RuntimeError: CUDA error: uncorrectable ECC error encountered",
      "CUDA runtime's cudaErrorECCUncorrectable string (cudaGetErrorString)",
      consequence_of=("gpu.xid_fault",)),   # the rank's view of the node's Xid 48 / 94 / 95
    S("nccl.ofi_error", "nccl_transport", "cause", (b"NET/OFI",),
      r"NET/OFI.{0,80}(?:[Ff]ailed|[Ee]rror|[Uu]nable)",
      "AWS EFA / libfabric (NET/OFI) error",
      "The aws-ofi-nccl plugin could not use EFA: missing device in the container, wrong FI_PROVIDER, or a libfabric "
      "version mismatch.",
      "fi_info -p efa | head; ls /dev/infiniband\n" + ALLREDUCE_FIX, "dist.allreduce", 1,
      "ip-10-0-1-5:1234:1290 [0] NCCL WARN NET/OFI Unable to find a protocol that worked.  Failing initialization.",
      "aws-ofi-nccl src/nccl_ofi_net.c"),

    # ======================================================================== gpu_oom
    S("nccl.cuda_alloc_failed", "gpu_oom", "cause", (b"Failed to CUDA malloc", b"Failed to CUDA calloc"),
      r"Failed to CUDA (?:malloc|calloc)(?: async)? (?P<bytes>\d+) bytes",
      "NCCL could not allocate {bytes} bytes of GPU memory",
      "NCCL's buffers did not fit in what the GPU had left: the model, activations or another process took the "
      "memory before NCCL initialised (or grew its channels).",
      "nvidia-smi --query-compute-apps=pid,used_memory --format=csv    # nothing else may hold the GPUs\n"
      "dsv3-preflight run --only gpu.inventory\n"
      "# create the process group (and run one collective) before loading the model, or lower the memory per rank",
      "gpu.inventory", 1,
      "gpu-a:4101:4190 [0] include/alloc.h:186 NCCL WARN Failed to CUDA calloc 6291456 bytes",
      "NCCL 2.21.5 src/include/alloc.h:186 (format string)"),
    # Ray's memory monitor (src/ray/raylet/node_manager.cc, worker_killing_policy): when a node's host RAM passes
    # RAY_memory_usage_threshold (0.95) it kills the most recently scheduled worker and raises ray.exceptions.
    # OutOfMemoryError in its caller; the raylet prints a summary per period. Host memory, not the GPU's: ahead of
    # the CUDA rule, whose bare "OutOfMemoryError" would take the line
    S("ray.memory_monitor_kill", "host_resources", "cause", (b"running low on memory", b"killed due to memory pressure"),
      r"(?:Task was killed|\d+ worker\(s\) were killed) due to the node running low on memory\.?"
      r"(?:\s*Memory on the node \(IP: (?P<ip2>[\w.:]+))?"
      r"|(?P<count>\d+) Workers \(tasks / actors\) killed due to memory pressure \(OOM\).*?at node \(ID: \w+, IP: (?P<ip>[\w.:]+)\)"
      r"|killed due to memory pressure \(OOM\)",
      "Ray killed workers: host memory ran low[[ on node {ip}]]",
      "The node's host RAM passed Ray's memory threshold (RAY_memory_usage_threshold, 0.95 by default), and Ray's "
      "memory monitor killed the most recently scheduled worker (its caller gets ray.exceptions.OutOfMemoryError). "
      "CPU-side copies do it: every rank loading the checkpoint at once, CPU offload, dataloader workers, an object "
      "store on the same RAM.",
      "ray logs raylet.out -ip [[{ip}||\"${NODE_IP:?address of the node Ray names}\"]] | grep -i -A3 memory    "
      "# who used the memory\n"
      "free -g    # on that node\n"
      "# load checkpoints on one rank, lower CPU offload or dataloader workers, or give the node more memory; raising\n"
      "# RAY_memory_usage_threshold only hands the kill to the kernel's OOM killer\n"
      "dsv3-preflight run --only host.resources",
      "host.resources", 1,
      "(raylet) [2023-04-09 07:23:59,445 E 395 395] (raylet) node_manager.cc:3049: 10 Workers (tasks / actors) killed "
      "due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: "
      "e5d953ef03e55e26f13973ea1b5a0fd0ecc729cd820bc89e4aa50451, IP: 10.0.62.231) over the last time period. To see "
      "more information about the Workers killed on this node, use `ray logs raylet.out -ip 10.0.62.231`",
      "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html (ray doc/source/ray-core/scheduling/"
      "ray-oom-prevention.rst: the raylet's summary and ray.exceptions.OutOfMemoryError's 'Task was killed due to the "
      "node running low on memory')"),
    S("cuda.out_of_memory", "gpu_oom", "cause", (b"out of memory", b"OutOfMemoryError", b"MemoryAllocation", b"OUT_OF_MEMORY",
                                               b"CUBLAS_STATUS_ALLOC_FAILED", b"No available memory for the cache blocks",
                                               b"maximum number of tokens that can be stored in KV cache"),
      r"(?:OutOfMemoryError: )?CUDA out of memory\.?(?: Tried to allocate (?P<size>[\d.]+ [KMGT]?i?B))?|(?<!java\.lang\.)OutOfMemoryError|CUDA error: out of memory"
      r"|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|CUBLAS_STATUS_ALLOC_FAILED|HIP out of memory|Cuda failure '?out of memory"
      r"|No available memory for the cache blocks|maximum number of tokens that can be stored in KV cache",
      "GPU out of memory[[ (tried to allocate {size})]]",
      "A rank ran out of GPU memory: the micro-batch or sequence length is too large for the GPU, ZeRO buckets or "
      "prefetch are too big, or another process holds GPU memory.",
      "nvidia-smi --query-compute-apps=pid,used_memory --format=csv    # nothing else may hold the GPUs\n"
      "dsv3-preflight run --only gpu.inventory\n"
      "# lower per_device_train_batch_size or the max length; enable gradient checkpointing or ZeRO offload",
      "gpu.inventory", 1,
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 30.00 MiB. GPU 0 has a total capacity of 11.00 GiB of which 0 bytes is free.",
      "https://github.com/bmaltais/kohya_ss/issues/2217 (torch c10/cuda/CUDACachingAllocator.cpp)"),

    # ======================================================================== host_resources
    S("host.oom_killer", "host_resources", "cause", (b"Out of memory: Kill", b"oom-kill", b"oom_kill", b"invoked oom-killer",
                                                    b"Memory cgroup out of memory", b"OOMKilled", b"oom_reaper"),
      r"Out of memory: Kill(?:ed)? process (?P<pid>\d+) \((?P<comm>[^)]*)\)|oom[-_]kill(?::| event)|invoked oom-killer|Memory cgroup out of memory"
      r"|OOMKilled|oom_kill event|oom_reaper: reaped process",
      "The kernel OOM killer killed a process[[ ({comm})]]",
      "Host RAM (or the container's memory limit) ran out and the kernel killed a rank: CPU offload, pinned memory, "
      "dataloader workers or checkpoint loading on every rank at once.",
      "dmesg -T | grep -i -E 'out of memory|killed process'; free -g\n"
      "# lower dataloader workers, CPU offload or pin_memory; load checkpoints on one rank; raise the container memory limit\n"
      "dsv3-preflight run --only host.resources",
      "host.resources", 1,
      "[2059991.491542] Out of memory: Killed process 25315 (python3) total-vm:53312244kB, anon-rss:31451456kB",
      "https://github.com/pcyin/tranX/issues/41 (kernel mm/oom_kill.c)"),
    S("host.shared_memory", "host_resources", "cause", (b"shared memory", b"(shm)", b"shm_open"),
      r"insufficient shared memory \(shm\)|out of shared memory|unable to (?:open|write to) shared memory|shared memory limit"
      r"|unable to write to file </torch_|shm_open.*(?:fail|error)"
      # torch 2.x: "RuntimeError: unable to allocate shared memory(shm) for file </torch_11690_1647861759_0>: No space left
      # on device (28)" (a worker's batch onto a full /dev/shm; produced here on a 1 MiB /dev/shm): before disk_full,
      # whose words the line also holds
      r"|unable to allocate shared memory\(shm\) for file",
      "Shared memory (/dev/shm) exhausted by dataloader workers",
      "DataLoader workers pass batches through /dev/shm; it is too small (docker's 64 MB default) or full.",
      SHM_FIX.split("\nrm -f")[0] + "\n# or set num_workers=0 to confirm", "host.resources", 1,
      "RuntimeError: DataLoader worker (pid 56811) is killed by signal: Bus error. It is possible that dataloader's workers are out of shared memory. Please try to raise your shared memory limit.",
      "https://github.com/NVIDIA/Megatron-LM/issues/878 (torch/utils/data/_utils/signal_handling.py)"),
    S("host.disk_full", "host_resources", "cause", (b"No space left on device", b"ENOSPC", b"StorageFull", b"Disk quota exceeded",
                                                   b"EDQUOT", b"[Errno 28]", b"[Errno 122]"),
      r"No space left on device|ENOSPC|StorageFull|Disk quota exceeded|EDQUOT|\[Errno 28\]|\[Errno 122\]",
      "Disk full (No space left on device)",
      "The filesystem being written (checkpoint/output dir, cache, /tmp) is full or over quota.",
      "df -h \"${OUTPUT_DIR:?output dir of the run}\" /tmp \"${HF_HOME:-$HOME/.cache/huggingface}\"\n"
      "dsv3-preflight run --only host.resources,lora.output_dir",
      "host.resources", 1,
      "safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: \"No space left on device\" })",
      "https://github.com/hiyouga/LlamaFactory/issues/5155 (strerror(ENOSPC))"),
    # a file the run must write that the filesystem refuses: read-only (EROFS) or not the run's to write (EACCES). The
    # three writers a run saves with say it each in their own words; produced here by torch.save, safetensors' save_file
    # and os.makedirs onto a tmpfs mounted read-only, and as an unprivileged user into root's directory:
    # "RuntimeError: [enforce fail at inline_container.cc:747] . open file failed with strerror: Read-only file system",
    # "SafetensorError: Error while serializing: I/O error: Permission denied (os error 13) at path \"/out/.tmpX\"",
    # "OSError: [Errno 30] Read-only file system: '/out/checkpoint-50'" (PermissionError, [Errno 13], likewise)
    S("host.read_only_filesystem", "host_resources", "cause", (b"Read-only file system", b"EROFS"),
      # torch's "open file failed with strerror: Read-only file system" is the plain alternative
      r"\[Errno 30\] Read-only file system: '(?P<path>[^']+)'"
      r"|Read-only file system \(os error 30\)(?: at path \"(?P<path2>[^\"]+)\")?|Read-only file system|\bEROFS\b",
      "A write was refused: the filesystem is read-only[[: {path}]]",
      "The run writes (a checkpoint, the adapter, its output dir) onto a filesystem mounted read-only: a container "
      "volume mounted :ro, a read-only export of a shared filesystem, or a disk the kernel remounted read-only after "
      "I/O errors (then dmesg says so, and the node's administrator must repair it or drain the node).",
      "awk '$4 ~ /(^|,)ro(,|$)/ {print $2, $3, $4}' /proc/mounts    # this node's read-only mounts: is the output dir "
      "under one?\n"
      "dmesg -T | grep -i -E 'remount|read-only|I/O error' | tail -n 20    # a disk the kernel remounted after errors: "
      "its administrator repairs it\n"
      "mkdir -p \"${OUTPUT_DIR:?a writable directory on a node-local disk}\"    # then pass it to the trainer as "
      "--output_dir\n"
      "dsv3-preflight run --only lora.output_dir --output-dir \"$OUTPUT_DIR\"    # the output dir must be writable "
      "before launch",
      "lora.output_dir", 1,
      "OSError: [Errno 30] Read-only file system: '/out/checkpoint-50'",
      "strerror(EROFS) as Python (OSError), torch (caffe2/serialize/inline_container.cc, PyTorchStreamWriter) and "
      "safetensors (io::Error) print it; produced here on a tmpfs mounted read-only"),
    S("host.permission_denied", "host_resources", "cause", (b"[Errno 13] Permission denied: ",
                                                           b"open file failed with strerror: Permission denied",
                                                           b"Permission denied (os error 13)"),
      r"\[Errno 13\] Permission denied: '(?P<path>[^']+)'|open file failed with strerror: Permission denied"
      r"|Permission denied \(os error 13\)(?: at path \"(?P<path2>[^\"]+)\")?",
      "A file could not be opened: permission denied[[: {path}]]",
      "The run's user may not write (or read) that file or its directory: the output dir or the model dir belongs to "
      "another user (a container running as another uid than the volume's owner, a shared filesystem squashing root to "
      "nobody), or its mode leaves no write bit for the run.",
      "id    # the user the run writes as, in the container or job that runs it\n"
      "ls -ld -- [[{path}||\"${OUTPUT_DIR:?output dir of the run}\"]] \"$(dirname -- [[{path}||\"$OUTPUT_DIR\"]])\"    "
      "# owner and mode, of it and of its directory\n"
      "dsv3-preflight run --only lora.output_dir    # the output dir must be writable before launch",
      "lora.output_dir", 1,
      "PermissionError: [Errno 13] Permission denied: '/out/checkpoint-50'",
      "strerror(EACCES) as Python (PermissionError), torch (inline_container.cc) and safetensors (io::Error) print it; "
      "produced here as an unprivileged user saving into root's directory"),
    S("host.too_many_open_files", "host_resources", "cause", (b"Too many open files", b"EMFILE", b"[Errno 24]", b"get errno 2"),
      r"Too many open files|EMFILE|\[Errno 24\]|socketTryAccept: get errno 2[34] ",  # NCCL 2.16-2.17
      "Too many open files (ulimit -n)",
      "The process hit its open-file limit (dataloader workers sharing tensors by file descriptor, many sockets).",
      "ulimit -n    # raise it: ulimit -n 1048576 (or LimitNOFILE= in the service / container)\n"
      "# or in the script: torch.multiprocessing.set_sharing_strategy('file_system')",
      "host.resources", 1,
      "RuntimeError: Too many open files. Communication with the workers is no longer possible. Please increase the limit using `ulimit -n` in the shell",
      "https://github.com/SCIInstitute/ShapeWorks/issues/1556 (torch/utils/data/dataloader.py)"),
    S("host.cpu_memory", "host_resources", "cause", (b"can't allocate memory", b"bad_alloc", b"MemoryError", b"Cannot allocate memory",
                                                    b"cannot allocate memory", b"[Errno 12]", b"malloc", b"for an array with shape"),
      r"DefaultCPUAllocator: can't allocate memory|std::bad_alloc|(?<!\w)MemoryError\b|[Cc]annot allocate memory|\[Errno 12\]"
      r"|Unable to allocate [\d.]+ ?[KMGTPE]?i?B for an array with shape"   # numpy's _ArrayMemoryError
      r"|Failed to malloc \d+ bytes|malloc\(size=\d+\) returned null|malloc of \d+ bytes failed",  # NCCL include/alloc.h
      "Host memory allocation failed",
      "A rank could not allocate host RAM: CPU offload, checkpoint loading on every rank, or too many dataloader workers.",
      "free -g; dmesg -T | grep -i -E 'out of memory|killed process' | tail\n"
      "# reduce CPU offload or workers, load checkpoints on one rank, or raise the container memory limit\n"
      "dsv3-preflight run --only host.resources",
      "host.resources", 1,
      "RuntimeError: [enforce fail at alloc_cpu.cpp:83] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate 2147483648 bytes.",
      "torch c10/core/impl/alloc_cpu.cpp; numpy/_core/_exceptions.py (_ArrayMemoryError)"),
    S("host.ulimit", "host_resources", "cause", (b"RLIMIT_MEMLOCK", b"memlock", b"can't start new thread", b"Resource temporarily unavailable",
                                                b"pthread_create", b"Thread creation failed", b"RLIMIT_NPROC"),
      # libgomp (torch's OpenMP threads, at the first parallel op) under a low thread/pids limit: "libgomp: Thread
      # creation failed: Resource temporarily unavailable", produced here with RLIMIT_NPROC 4; OpenBLAS's
      # "blas_thread_init: pthread_create failed for thread 1 of 8" and "RLIMIT_NPROC 4 current, 4 max"
      r"RLIMIT_MEMLOCK|memlock.{0,40}(?:limit|too low|ulimit)|can't start new thread|pthread_create\S* failed|fork.{0,20}Resource temporarily unavailable"
      r"|Thread creation failed: Resource temporarily unavailable|RLIMIT_NPROC \d+ current",
      "A per-process limit was hit (locked memory, threads or processes)",
      "ulimit -l (pinned memory for RDMA) or the thread/process limit (ulimit -u, the container's pids limit) is too low.",
      "ulimit -a    # memlock should be unlimited for RDMA; raise nproc/pids limits\n"
      "dsv3-preflight run --only host.resources",
      "host.resources", 1,
      "RuntimeError: can't start new thread",
      "CPython _thread.start_new_thread error; NCCL/libibverbs memlock warnings"),
    S("host.dataloader_worker_killed", "host_resources", "cause", (b"is killed by signal: Killed",),
      r"DataLoader worker \(pid (?P<pid>\d+)\) is killed by signal: Killed",
      "A DataLoader worker was killed with SIGKILL (pid {pid})",
      "Something sent SIGKILL to a DataLoader worker process, most often the kernel OOM killer: every worker holds "
      "its own copy of what the dataset object references, so num_workers × ranks per node multiplies host RAM. "
      "Check dmesg on that node.",
      "dmesg -T | grep -i -E 'out of memory|killed process'; free -g    # on the node of that rank\n"
      "# lower dataloader_num_workers (or the dataset's in-memory size), then:\n"
      "dsv3-preflight run --only host.resources",
      "host.resources", 2,
      "RuntimeError: DataLoader worker (pid 18877) is killed by signal: Killed. ",
      "torch/utils/data/_utils/signal_handling.py (_error_if_any_worker_fails); produced here by a worker killed "
      "with SIGKILL", consequence_of=("host.oom_killer", "host.cpu_memory")),
    # torch.save's zip writer when a write comes up short (a full or over-quota filesystem); produced here by saving
    # onto a 1 MiB tmpfs: "basic_ios::clear: iostream error", then "[enforce fail at inline_container.cc:672] .
    # unexpected pos 704 vs 598"; older torch: "PytorchStreamWriter failed writing file data/0: file write failed"
    S("host.checkpoint_write_failed", "host_resources", "cause", (b"PytorchStreamWriter failed writing", b"unexpected pos ",
                                                                 b"basic_ios::clear: iostream error", b"write(): fd "),
      r"PytorchStreamWriter failed writing file (?P<file>\S+): file write failed"
      r"|inline_container\.cc:\d+\] \. unexpected pos (?P<pos>\d+) vs (?P<want>\d+)"
      r"|basic_ios::clear: iostream error"
      r"|write\(\): fd \d+ failed with (?P<why>[A-Za-z][A-Za-z /-]*[a-z])",
      "A checkpoint write came up short (torch.save)[[: {why}]]",
      "torch.save's writer could not write every byte: the filesystem it saves to is full or over quota (the "
      "output dir, a shared volume, /tmp), a network filesystem dropped the write, or the disk returned an I/O error "
      "(dmesg on that node names the device).",
      "df -h \"${OUTPUT_DIR:?output dir of the run}\"    # and the quota: quota -s, or the volume's own limit\n"
      "dsv3-preflight run --only host.resources,lora.output_dir",
      "host.resources", 1,
      "RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598",
      "torch caffe2/serialize/inline_container.cc (PyTorchStreamWriter::writeRecord, valid); produced here on a full "
      "tmpfs", consequence_of=("host.disk_full",)),
    # numpy's file writer (np.save, ndarray.tofile: tokenized datasets, data caches, saved arrays) on a full or
    # over-quota filesystem; none of its three messages names the errno. Produced here with numpy 2.4 on a 1 MiB tmpfs:
    # "OSError: 524288 requested and 131056 written" (fwrite came up short), "OSError: Not enough free space to write
    # 40000000 bytes after offset 128" (numpy asked for the space first, fallocate said ENOSPC; before numpy 2.3
    # without the offset), "OSError: problem writing element 131584 to file" (a non-contiguous array, element by element)
    S("host.array_write_failed", "host_resources", "cause", (b"requested and ", b"Not enough free space to write",
                                                            b"problem writing element "),
      r"(?:OSError|IOError): (?:(?P<want>\d+) requested and (?P<got>\d+) written"
      r"|Not enough free space to write (?P<nbytes>\d+) bytes|problem writing element \d+ to file)",
      "A file write came up short (numpy)[[: {got} of {want} bytes written]][[: no room for {nbytes} bytes]]",
      "numpy's file writer (np.save, ndarray.tofile: a tokenized dataset, a data cache, saved arrays) could not write "
      "every byte: the filesystem it writes to is full or over quota (the output dir, the dataset cache, /tmp), or the "
      "disk returned an I/O error (dmesg on that node names the device). \"Not enough free space\" is numpy's own "
      "check of the space before it writes.",
      "df -h \"${OUTPUT_DIR:?output dir of the run}\" /tmp \"${HF_HOME:-$HOME/.cache/huggingface}\"    # and the "
      "quota: quota -s\n"
      "dsv3-preflight run --only host.resources,lora.output_dir",
      "host.resources", 1,
      "OSError: Not enough free space to write 40000000 bytes after offset 128",
      "numpy _core/src/multiarray/convert.c (PyArray_ToFile, npy_fallocate); produced here on a full tmpfs; "
      "https://github.com/instructlab/instructlab/issues/3298", consequence_of=("host.disk_full",)),
    S("host.sigkill", "host_resources", "cause", (b"exitcode: -9", b"exitcode  : -9", b"exit code -9", b"return code = -9", b"Signal 9 (SIGKILL)",
                                                 b"SIGKILL: 9", b"killed by signal 9", b"Killed", b"signal: killed", b"code -9",
                                                 b"code 137", b"code: 137", b"status 137", b"Code: 137", b"exitcode: 137"),
      r"exit ?code\s*:?\s*-9\)?(?: local_rank: (?P<local_rank>\d+))?|return code = -9\b|Signal 9 \(SIGKILL\)|<Signals\.SIGKILL: 9>"
      r"|killed by signal 9|signal: killed|^\W*" + LABELS + r"\W*Killed\W*$|line \d+: +\d+ Killed\b|task \d+: Killed|code -9\b"
      r"|\d(?:it/s|s/it)\]\s*Killed\s*$"   # the shell's "Killed" after a progress bar's last redraw, on its line
      r"|^\[\d+\]\+?\s+Killed\b|(?:exit(?:ed)? (?:status|with code)|[Ee]xit [Cc]ode|exitcode)\s*:?\s*137\b",
      "A rank was killed with SIGKILL (exit -9)",
      "Something sent SIGKILL to a rank, most often the kernel OOM killer (host RAM exhausted); check dmesg on that "
      "node. A scheduler enforcing a memory limit does the same.",
      "dmesg -T | grep -i -E 'out of memory|killed process'; free -g    # on the node of that rank\n"
      "dsv3-preflight run --only host.resources",
      "host.resources", 2,
      "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 333202) of binary: /home/akemid/llama/venv/bin/python3",
      "https://github.com/meta-llama/llama/issues/706 (torch elastic api.py)",
      consequence_of=("host.oom_killer", "host.cpu_memory")),
    S("host.sigbus", "host_resources", "cause", (b"exitcode: -7", b"exitcode  : -7", b"Bus error", b"SIGBUS"),
      r"exit ?code\s*:?\s*-7\b|Bus error|SIGBUS",
      "A rank died of SIGBUS (Bus error)",
      "SIGBUS in training almost always means a memory-mapped file or /dev/shm segment ran out of backing space "
      "(/dev/shm full, a file truncated under mmap).", SHM_FIX.split("\nrm -f")[0], "host.resources", 2,
      "bash: line 1:  4242 Bus error               (core dumped) python train.py",
      "bash job-status message for SIGBUS",
      consequence_of=("host.shared_memory", "nccl.shm_no_space")),

    # ======================================================================== lora_empty
    S("lora.empty_tensor_on_load", "lora_empty", "cause", (b"torch.Size([0]) from checkpoint",),
      r"size mismatch for (?P<param>\S+): copying a param with shape torch\.Size\(\[0\]\) from checkpoint",
      "Saved weights are empty (shape [0])[[, e.g. {param}]]",
      "The adapter (or model) was saved under ZeRO-3 without gathering the partitioned parameters, so each rank "
      "wrote the empty placeholders of shape [0].",
      "# in the DeepSpeed config: \"zero_optimization\": {\"stage3_gather_16bit_weights_on_model_save\": true}\n"
      "# save with trainer.save_model() on all ranks, or gather with deepspeed.zero.GatheredParameters first\n" + DS_CONFIG_FIX,
      "lora.deepspeed_config", 1,
      "\tsize mismatch for base_model.model.model.layers.0.mlp.gate_proj.lora_B.default.weight: copying a param with "
      "shape torch.Size([0]) from checkpoint, the shape in current model is torch.Size([11008, 8]).",
      "https://github.com/huggingface/peft/issues/2500"),
    S("peft.adapter_base_mismatch", "lora_empty", "cause", (b"from checkpoint, the shape in current model is",),
      r"size mismatch for (?P<param>\S*lora_\S+?): copying a param with shape torch\.Size\(\[(?P<saved>[\d, ]+)\]\) "
      r"from checkpoint, the shape in current model is torch\.Size\(\[(?P<model>[\d, ]+)\]\)",
      "The adapter does not fit this base model ({param}: saved [{saved}], the model has [{model}])",
      "The LoRA adapter was trained on another base model (another size or architecture: its A/B matrices take the "
      "layer widths of the model it was trained on; a different first number of lora_A is a different rank r), so its "
      "tensors do not fit this model's layers. The adapter's "
      "adapter_config.json names the model it was trained on (base_model_name_or_path).",
      "grep -E '\"base_model_name_or_path\"|\"r\"' \"${ADAPTER_DIR:?the adapter directory}/adapter_config.json\"    # the model it was trained on\n"
      "# load the adapter onto the base model it was trained on, or train one for this model; before a run:\n"
      "dsv3-preflight run --only lora.adapter_base --model-path \"${MODEL_DIR:?the base model directory}\" "
      "--output-dir \"${ADAPTER_DIR:?the adapter directory}\"    # compares every saved A/B matrix with the model's widths",
      "lora.adapter_base", 1,
      "\tsize mismatch for base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight: copying a param with "
      "shape torch.Size([4, 64]) from checkpoint, the shape in current model is torch.Size([4, 32]).",
      "torch nn.Module.load_state_dict's message; produced here by peft's PeftModel.from_pretrained with an adapter "
      "trained on a model of hidden size 64 loaded onto one of hidden size 32"),
    S("deepspeed.not_gathered_on_save", "lora_empty", "cause", (b"stage3_gather_16bit_weights_on_model_save",),
      r"(?:Did not save the model|not saving).{0,80}stage3_gather_16bit_weights_on_model_save(?:` is| is|=)\s*False",
      "DeepSpeed did not save the 16-bit weights (stage3_gather_16bit_weights_on_model_save is false)",
      "Under ZeRO-3 the weights are partitioned; without gathering on save the adapter files are empty or missing.",
      "# in the DeepSpeed config: \"zero_optimization\": {\"stage3_gather_16bit_weights_on_model_save\": true}\n" + DS_CONFIG_FIX,
      "lora.deepspeed_config", 1,
      "Did not save the model /out/pytorch_model.bin because `stage3_gather_16bit_weights_on_model_save` is False",
      "deepspeed/runtime/engine.py (save_16bit_model)"),
    S("peft.target_modules_not_found", "lora_empty", "cause", (b"not found in the base model", b"specify `target_modules`",
                                                              b"is not supported. Currently, only"),
      r"Target modules? (?P<mods>.+?) not found in the base model|Please specify `target_modules` in `peft_config`"
      r"|Target module (?P<mod>.+?) is not supported\. Currently, only",
      "LoRA target modules[[ {mods}]] not found in the base model",
      "lora_target names modules this model does not have (DeepSeek-V3 attention has q_a_proj, q_b_proj, "
      "kv_a_proj_with_mqa, kv_b_proj, o_proj; there is no q_proj/k_proj/v_proj), or the list is empty.",
      "dsv3-preflight run --only lora.targets    # lists the model's Linear modules that match\n"
      "# then pass only those names: --lora_target \"${LORA_TARGETS:?comma-separated module names}\"",
      "lora.targets", 1,
      "ValueError: Target modules {'q_proj', 'v_proj'} not found in the base model. Please check the target modules and try again.",
      "https://github.com/linhduongtuan/BLOOM-LORA/issues/15 (peft/tuners/tuners_utils.py)"),
    S("peft.nothing_trainable", "lora_empty", "cause", (b"trainable params: 0 ", b"trainable params: 0|"),
      r"trainable params: 0 \|\|",
      "LoRA made no parameter trainable",
      "get_peft_model found no module to adapt (or the adapter was frozen): training changes nothing and saves an empty adapter.",
      "dsv3-preflight run --only lora.targets", "lora.targets", 1,
      "trainable params: 0 || all params: 6738415616 || trainable%: 0.0",
      "peft/peft_model.py (print_trainable_parameters)"),
    S("peft.missing_adapter_keys", "lora_empty", "cause", (b"missing adapter keys",),
      r"Found missing adapter keys while loading the checkpoint",
      "The loaded adapter lacks weights the model expects",
      "The adapter file is empty or partial (saved under ZeRO-3 without gathering, or with other target modules).",
      "dsv3-preflight run --only lora.output_dir,lora.deepspeed_config", "lora.output_dir", 1,
      "UserWarning: Found missing adapter keys while loading the checkpoint: ['base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight']",
      "peft/peft_model.py (load_adapter)"),
    S("safetensors.bad_file", "lora_empty", "cause", (b"Error while deserializing header", b"failed reading zip archive",
                                                     b"failed finding central directory", b"invalid load key", b"MetadataIncompleteBuffer",
                                                     b"HeaderTooLarge", b"InvalidHeader", b"The file might be corrupted"),
      r"Error while deserializing header: (?P<err>\w+)|PytorchStreamReader failed reading zip archive: (?P<err2>.+)"
      r"|failed finding central directory|invalid load key, (?P<key>\S+)|MetadataIncompleteBuffer|HeaderTooLarge|InvalidHeader\w*"
      # torch.load of a legacy (non-zip) checkpoint cut inside a tensor's bytes (torch/csrc/serialization.cpp)
      r"|(?P<err3>unexpected EOF, expected \d+ more bytes)\. The file might be corrupted",
      "Weights file unreadable[[ ({err})]]",
      "The .safetensors/.bin file is truncated, empty, or not a weights file at all[[ ({err})]]: a save interrupted "
      "by a crash or a full disk, or a Git LFS pointer instead of the weights.",
      "ls -l \"${ADAPTER_DIR:?the adapter or checkpoint dir}\"    # a few hundred bytes means an LFS pointer or an empty save\n"
      "dsv3-preflight run --only lora.output_dir    # checks the saved adapters' headers",
      "lora.output_dir", 1,
      "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
      "https://github.com/Comfy-Org/ComfyUI/issues/7510 (safetensors src/lib.rs)"),

    # torch.load of an empty or cut checkpoint that is no zip archive (an interrupted save, a zero-byte file): the
    # unpickler runs out of input. Bare, "EOFError" is any program's, so only under torch.load's own frames.
    # Produced here: torch 2.13's weights-only unpickler raises a bare "EOFError", the full pickle "EOFError: Ran out of
    # input"; a cut pickle "_pickle.UnpicklingError: pickle data was truncated"
    S("torch.checkpoint_truncated", "lora_empty", "cause", (b"EOFError", b"pickle data was truncated"),
      r"^" + LABELS + r"(?:EOFError(?:: Ran out of input)?|(?:_pickle\.)?UnpicklingError: pickle data was truncated)\s*$",
      "Weights file unreadable (empty or truncated: torch.load ran out of input)",
      "torch.load found less than a whole checkpoint: the file is empty or was cut short (a save interrupted by a crash, "
      "a full disk or a kill; a copy that stopped), so a resume or an evaluation cannot read it.",
      "ls -l \"${CHECKPOINT_DIR:?the checkpoint dir being loaded}\"    # a zero or short size: that save did not finish\n"
      "dsv3-preflight run --only lora.output_dir,host.resources    # the saved adapters' headers, and room to save",
      "lora.output_dir", 1, "EOFError: Ran out of input",
      "torch/serialization.py (_legacy_load: pickle_module.load) and torch/_weights_only_unpickler.py (load: raise "
      "EOFError); produced here by torch.load of an empty file", requires="torch_load"),
    S("peft.adapter_config_missing", "lora_empty", "cause", (b"Can't find 'adapter_config.json'",),
      r"Can't find 'adapter_config\.json' at '(?P<path>[^']+)'",
      "No adapter at {path} (adapter_config.json missing)",
      "The directory the adapter is loaded from holds no saved adapter: the training run never saved one there "
      "(it failed or stopped before its save, or under ZeRO-3 rank 0 did not write the files), output_dir points "
      "elsewhere, or on a multi-node job the adapter was saved on another node.",
      "ls -la -- {path}    # adapter_config.json and adapter_model.safetensors must be there\n"
      "dsv3-preflight run --only lora.output_dir,lora.deepspeed_config    # the run's output dir and its ZeRO-3 save settings",
      "lora.output_dir", 1,
      "ValueError: Can't find 'adapter_config.json' at '/out/checkpoint-100'",
      "peft/config.py (PeftConfigMixin.from_pretrained, _get_peft_type)"),

    # ======================================================================== config
    S("nccl.graph_file_device_missing", "config", "cause", (b"XML Import Channel",),
      r"XML Import Channel ?: dev (?P<dev>\d+) not found",
      "NCCL's graph file names device {dev}, which this machine does not have",
      "NCCL_GRAPH_FILE (with NCCL_TOPO_FILE, often set by a cloud image for one machine size, in the environment or "
      "/etc/nccl.conf) describes channels over more GPUs or NICs than this machine has: NCCL cannot import it and "
      "its init fails.",
      "env | grep -E '^NCCL_(GRAPH|TOPO)_FILE='; grep -s -E 'NCCL_(GRAPH|TOPO)_FILE' /etc/nccl.conf ~/.nccl.conf\n"
      "unset NCCL_GRAPH_FILE    # or point it at the file for this machine's GPUs and NICs\n" + ALLREDUCE_FIX,
      "dist.allreduce", 1,
      "::16674:17023 [0] graph/search.cc:703 NCCL WARN XML Import Channel : dev 1 not found.",
      "https://github.com/Azure/azhpc-images/issues/327 (NCCL src/graph/search.cc, 'XML Import Channel : dev %d not "
      "found.')"),
    # transformers/huggingface_hub take a local path that is not a directory with the files for a Hub repo id
    # (transformers/utils/hub.py, configuration_utils.py, tokenization_utils_base.py, modeling_utils.py;
    # huggingface_hub/utils/_validators.py): only paths that look local, a Hub id that fails is another story
    # peft looks for adapter_model.safetensors / .bin in the adapter directory; when neither is there it takes the
    # path for a Hub repo id, and the error is the same as for a model path that does not exist
    S("peft.adapter_weights_missing", "lora_empty", "cause", (b"Repo id must be in the form", b"Incorrect path_or_model_id",
                                                             b"is not a local folder", b"does not appear to have a file named"),
      r"Repo id must be in the form 'repo_name' or 'namespace/repo_name': '(?P<path>" + LOCAL_PATH + r")'"
      r"|Incorrect path_or_model_id: '(?P<path2>" + LOCAL_PATH + r")'"
      r"|(?<![^\s'\"(])(?P<path3>" + LOCAL_PATH + r") is not a local folder and is not a valid model identifier"
      r"|(?<![^\s'\"(])(?P<path4>" + LOCAL_PATH + r") does not appear to have a file named",
      "The adapter directory {path} holds no adapter weights (adapter_model.safetensors or .bin)",
      "peft read the adapter's config but found no adapter_model.safetensors or adapter_model.bin beside it, so it took "
      "the directory for a Hugging Face Hub repo id: the save wrote only the config (interrupted, a full disk, a "
      "ZeRO-3 save that never gathered the weights) or the weights were not copied with it.",
      "ls -la -- {path}    # adapter_config.json without adapter_model.safetensors / adapter_model.bin\n"
      "dsv3-preflight lora scan {path}    # judges every adapter there the way peft loads it\n"
      "dsv3-preflight run --only lora.output_dir,lora.deepspeed_config",
      "lora.output_dir", 1,
      "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
      "'/out/checkpoint-100'. Use `repo_type` argument if needed.",
      "peft/utils/save_and_load.py (load_peft_weights); produced here: PeftModel.from_pretrained on a directory "
      "holding only adapter_config.json", requires="peft_weights"),
    # transformers reading a model's config.json that is no JSON (a download cut short, a Git LFS pointer, a hand edit
    # such as the model_type change Kimi-K2 needs): configuration_utils.py's own words after the JSONDecodeError.
    # Produced here by AutoConfig.from_pretrained on a config.json cut mid-object
    S("hf.config_not_json", "config", "cause", (b"is not a valid JSON file",),
      r"It looks like the config file at '(?P<path>[^'{}]+)' is not a valid JSON file",   # not the raise in the source
      "The model's config file is not valid JSON: {path}",
      "transformers could not parse the model's config.json: the download was cut short, the file is a Git LFS pointer "
      "instead of the file, or an edit broke it. Every rank that builds the model fails the same way.",
      "python -m json.tool {path} >/dev/null    # names the line and column where it breaks\n"
      "head -c 300 {path}    # 'version https://git-lfs' is a pointer: git lfs pull in the model repo\n"
      "dsv3-preflight run --only lora.targets --model-path \"$(dirname -- {path})\" --lora-targets "
      "\"${LORA_TARGETS:?the lora_target of the run, e.g. q_a_proj,kv_b_proj}\"    # reads config.json as the run will",
      "lora.targets", 1,
      "OSError: It looks like the config file at '/models/DeepSeek-V3/config.json' is not a valid JSON file.",
      "transformers configuration_utils.py (PretrainedConfig._get_config_dict); produced here with a cut config.json"),
    S("hf.local_path_missing", "config", "cause", (b"Repo id must be in the form", b"Incorrect path_or_model_id",
                                                   b"is the correct path to a directory", b"is not a local folder",
                                                   b"does not appear to have a file named", b"Error no file named",
                                                   b"Should have a `model_type` key"),
      r"Repo id must be in the form 'repo_name' or 'namespace/repo_name': '(?P<path>" + LOCAL_PATH + r")'"
      r"|Incorrect path_or_model_id: '(?P<path2>" + LOCAL_PATH + r")'"
      r"|make sure '(?P<path3>" + LOCAL_PATH + r")' is the correct path to a directory containing (?:a (?P<file>[\w.-]+\.\w+) file|all relevant files)"
      r"|(?<![^\s'\"(])(?P<path4>" + LOCAL_PATH + r") is not a local folder and is not a valid model identifier"
      r"|(?<![^\s'\"(])(?P<path5>" + LOCAL_PATH + r") does not appear to have a file named (?P<file2>[\w./-]+?)\.?(?= Checkout|$)"
      r"|Error no file named (?P<file3>.+?), found in directory (?P<path6>" + LOCAL_PATH + r"?)\.?$"
      r"|Unrecognized model in (?P<path7>" + LOCAL_PATH + r"?)\. Should have a `model_type` key",
      "Local path {path} does not hold the files to load[[ ({file} missing)]]",
      "The job loads the model, its tokenizer or an adapter from a local path, but on this node that directory does not exist "
      "or lacks the file the library needs, so transformers took the path for a Hugging Face Hub repo id and failed. "
      "A multi-node job needs the directory at the same path on every node (shared storage, or the same copy), and "
      "a relative path resolves from the directory each node's launcher starts in.",
      "ls -la -- {path}    # on every node: the directory must exist with config.json, the tokenizer files and the weights\n"
      "dsv3-preflight run --all-nodes --only lora.targets --model-path {path} --lora-targets \"${LORA_TARGETS:?comma-separated module names}\"",
      "lora.targets", 1,
      "OSError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': './Model_TH/Bloom_6B4_zh/'. Use `repo_type` argument if needed.",
      "https://github.com/X-jun-0130/LLM-Pretrain-FineTune/issues/4; transformers/utils/hub.py (cached_files), "
      "huggingface_hub/utils/_validators.py (validate_repo_id)",
      # peft chains its own error to the Hub's: the adapter directory is the more precise cause
      consequence_of=("peft.adapter_config_missing",)),
    S("deepspeed.batch_mismatch", "config", "cause", (b"Check batch related parameters", b"train_batch_size is not equal to"),
      r"Check batch related parameters|train_batch_size is not equal to micro_batch_per_gpu",
      "DeepSpeed batch sizes do not add up",
      "train_batch_size must equal micro_batch_per_gpu × gradient_accumulation_steps × world_size; the config was "
      "written for another number of GPUs (or the world size is not what the config assumes).",
      "# set train_batch_size and train_micro_batch_size_per_gpu to \"auto\" with the HF Trainer, or recompute them for this world size\n"
      + DS_CONFIG_FIX, "lora.deepspeed_config", 1,
      "[rank0]: AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size 8 != 2 * 1 * 1",
      "https://github.com/deepspeedai/DeepSpeed/issues/6914 (deepspeed/runtime/config.py)"),
    S("deepspeed.config_check", "config", "cause", (b"has to be greater than 0", b"needs to be provided", b"DeepSpeedConfig: ",
                                                   b"cannot be simultaneously enabled", b"bfloat16 mode is only enabled",
                                                   b"Duplicate keys in DeepSpeed config", b"untested ZeRO Optimizer",
                                                   b"'max_grad_norm' is not supported", b"must be divisible by micro-batch",
                                                   b"_master_weights_and_grads is only supported", b"Partial offloading only supported",
                                                   b"Invalid communication_data_type", b"fp16 is not enabled but",
                                                   b"requires dynamic loss scaling", b"ZeRO inference only makes sense",
                                                   b"invalid tag_validation", b"loss_scale must be",
                                                   b"is not a supported DeepSpeed Optimizer", b"not supported with Stage 3"),
      r"(?P<what>(?:Train batch size|Micro batch size per gpu|Gradient accumulation steps): -?\w+ has to be greater than 0"
      r"|Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"
      r"|DeepSpeedConfig: (?:\w+ is not defined|Maximum supported ZeRO stage is \d+)"
      r"|bfloat16 and fp16 modes cannot be simultaneously enabled|bfloat16 mode is only enabled for Zero"
      r"|Duplicate keys in DeepSpeed config|You are using an untested ZeRO Optimizer"
      r"|'max_grad_norm' is not supported as an optimizer parameter|Train batch size must be divisible by micro-batch data parallelism"
      r"|\w+_master_weights_and_grads is only supported with ZeRO|Partial offloading only supported for ZeRO Stage 3"
      r"|Invalid communication_data_type|(?:The )?fp16 is not enabled but (?:one or several model parameters have dtype of fp16|dtype on parameters not fp16)"
      r"|DeepSpeed \w+ optimizer requires dynamic loss scaling|ZeRO inference only makes sense with ZeRO Stage 3"
      r"|Checkpoint config contains invalid tag_validation|fp16\.\w+ must be [^.\n]+|\S+ is not a supported DeepSpeed Optimizer"
      r"|MoE not supported with Stage 3|Native DeepSpeed MoE is not supported with ZeRO Stage 3)",
      "DeepSpeed refused a value of its config: {what}",
      "DeepSpeed's own consistency checks (deepspeed/runtime/config.py and engine.py) refused the JSON: a batch size "
      "that is 0 or missing, fp16 and bf16 both on, an option this ZeRO stage or this version does not support, an "
      "untested optimizer under ZeRO, or fp16 off while the model's weights are fp16.",
      "# correct the value DeepSpeed names above in the DeepSpeed JSON (\"auto\" lets the HF Trainer fill batch sizes and precision)\n"
      + DS_CONFIG_FIX, "lora.deepspeed_config", 1,
      "AssertionError: bfloat16 and fp16 modes cannot be simultaneously enabled",
      "deepspeed/runtime/config.py (_batch_assertion, _do_error_check, DeepSpeedConfig.__init__); deepspeed/runtime/engine.py"),
    S("hf.deepspeed_mismatch", "config", "cause", (b"DeepSpeed config values that mismatch",),
      r"Please correct the following DeepSpeed config values that mismatch",
      "DeepSpeed config values contradict the TrainingArguments",
      "The DeepSpeed JSON hard-codes values (batch size, gradient accumulation, learning rate, fp16/bf16) that differ "
      "from the trainer's arguments (or accelerate's), sometimes only in type (\"8\" as a string against 8).",
      "# set the conflicting DeepSpeed values to \"auto\" (a number, not a string, where a number is meant)\n" + DS_CONFIG_FIX,
      "lora.deepspeed_config", 1,
      "ValueError: Please correct the following DeepSpeed config values that mismatch TrainingArguments values:",
      "https://github.com/CarperAI/trlx/issues/376 (transformers/integrations/deepspeed.py; accelerate/utils/dataclasses.py "
      "'... that mismatch kwargs')"),
    S("deepspeed.config_validation", "config", "cause", (b"validation error", b"extra fields not permitted", b"Extra inputs are not permitted",
                                                        b"DeepSpeedConfig", b"ZeRORuntimeException", b"DeepSpeedConfigError"),
      r"validation errors? for (?P<model>DeepSpeed\w*|\w*Zero\w*Config|\w*Config)\b|extra fields not permitted|Extra inputs are not permitted"
      r"|DeepSpeedConfig: (?!vocabulary size|In FP16 mode|In FP32 mode|this format of ZeRO optimization setup is deprecated)"
      r"|DeepSpeedConfigError|ZeRORuntimeException",
      "DeepSpeed rejected the config[[ ({model})]]",
      "The DeepSpeed JSON has keys this DeepSpeed version does not know (written for another version) or a "
      "combination it refuses (ZeRO-Offload with a client optimizer, ZeRO without fp16 on old versions).",
      "python -c 'import deepspeed; print(deepspeed.__version__)'\n"
      "# remove or rename the keys named above for this version; for ZeRO-Offload use DeepSpeedCPUAdam or set zero_force_ds_cpu_optimizer false\n"
      + DS_CONFIG_FIX, "lora.deepspeed_config", 1,
      "ValidationError: 3 validation errors for DeepSpeedZeroConfig",
      "https://github.com/deepspeedai/DeepSpeed/issues/3827 (deepspeed/runtime/config_utils.py; the 'DeepSpeedConfig: ' "
      "lines DeepSpeed logs as warnings in config.py and zero/config.py are not errors)"),
    S("hf.zero3_device_map", "config", "cause", (b"not compatible with `low_cpu_mem_usage", b"not compatible with passing a `device_map`"),
      r"Zero-3 is not compatible with (?:`low_cpu_mem_usage=True` or with )?passing a `device_map`",
      "ZeRO-3 combined with device_map / low_cpu_mem_usage",
      "Under ZeRO-3 the model must be created by DeepSpeed's zero.Init, not placed with a device_map.",
      "# drop device_map / low_cpu_mem_usage from from_pretrained when training with ZeRO-3\n" + DS_CONFIG_FIX,
      "lora.deepspeed_config", 1,
      "ValueError: DeepSpeed Zero-3 is not compatible with `low_cpu_mem_usage=True` or with passing a `device_map`.",
      "transformers/modeling_utils.py; transformers/integrations/accelerate.py (5.x wording)"),
    S("hf.precision_unsupported", "config", "cause", (b"doesn't support bf16", b"--tf32 requires Ampere", b"can only be used on CUDA",
                                                      b"is not supported on your device"),
      r"Your setup doesn't support bf16/gpu|--tf32 requires Ampere or a newer GPU arch"
      r"|FP16 Mixed precision training with AMP or APEX \(`--fp16`\) and FP16 half precision evaluation \(`--fp16_full_eval`\) can only be used on CUDA"
      r"|Type (?P<dtype>fp16|bf16) is not supported on your device",
      "The precision asked for is not supported on this GPU[[ ({dtype})]]",
      "bf16 and tf32 need an Ampere or newer GPU (compute capability 8.0: A100, H100; not V100, T4 or RTX 20xx) and "
      "CUDA 11 or later; fp16 needs a CUDA device. The trainer (or DeepSpeed) refuses the precision on this hardware.",
      "nvidia-smi --query-gpu=name,compute_cap --format=csv    # bf16 and tf32 need compute capability 8.0 or newer\n"
      "# on older GPUs train with --fp16 (and fp16 in the DeepSpeed JSON) instead of --bf16, and drop --tf32\n"
      "dsv3-preflight run --only gpu.inventory",
      "gpu.inventory", 1,
      "ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, using Ampere GPU with cuda>=11.0",
      "transformers/training_args.py (__post_init__); deepspeed/runtime/engine.py ('Type bf16 is not supported on your device.')"),
    S("hf.training_arguments_invalid", "config", "cause", (b"--load_best_model_at_end requires", b"At most one of fp16 and bf16",
                                                          b"requires non-zero --", b"requires either non-zero --", b"_steps must be an integer",
                                                          b"requires an eval strategy", b"Expected value warmup_steps",
                                                          b"--dataloader_prefetch_factor can only be set", b"as 'steps' requires a positive"),
      r"--load_best_model_at_end requires the (?:save and eval strategy to match|saving steps to be a (?:round )?multiple)"
      r"|At most one of fp16 and bf16 can be True|(?:evaluation|logging) strategy \S+ requires (?:either )?non-zero --\w+"
      r"|--(?:logging|eval|save)_steps must be an integer|lr_scheduler_type \w+ requires an eval strategy"
      r"|Expected value warmup_steps >= 0|--dataloader_prefetch_factor can only be set|Setting `strategy` as 'steps' requires a positive value",
      "The trainer's arguments contradict each other",
      "transformers' TrainingArguments refuses the combination at start-up, before any GPU work: --load_best_model_at_end "
      "needs the same --eval_strategy and --save_strategy (and --save_steps a multiple of --eval_steps), only one of "
      "--fp16/--bf16, a step strategy needs its steps.",
      "# make the arguments named above agree (same eval and save strategy, save_steps a multiple of eval_steps, one of fp16/bf16)\n"
      "grep -n -E -e '--(eval|save|logging)_(strategy|steps)|--(fp16|bf16)' \"${LAUNCH_SCRIPT:?the script or YAML that starts training}\"",
      None, 1,
      "ValueError: --load_best_model_at_end requires the save and eval strategy to match, but found",
      "transformers/training_args.py (TrainingArguments.__post_init__)"),
    S("accelerate.deepspeed_batch_size_unknown", "config", "cause",
      (b"requires you to pass at least one of training or evaluation dataloaders",),
      r"When using DeepSpeed,? `accelerate\.prepare\(\)` requires you to pass at least one of training or evaluation "
      r"dataloaders",
      "accelerate cannot fill DeepSpeed's micro-batch size: prepare() got no dataloader and the config's "
      "train_micro_batch_size_per_gpu is not a number",
      "Under DeepSpeed, accelerate's prepare() takes train_micro_batch_size_per_gpu from a dataloader passed to it in "
      "the same call; the script prepared the model and optimizer without one, and the DeepSpeed config (or the "
      "accelerate config's deepspeed section) leaves the value \"auto\" or unset.",
      "grep -n 'train_micro_batch_size_per_gpu' \"${DS_CONFIG:?path of the DeepSpeed JSON}\"    # must be a number here\n"
      "# set it to the per-GPU batch size, or pass the train dataloader in the same accelerator.prepare(...) call\n"
      + DS_CONFIG_FIX,
      "lora.deepspeed_config", 1,
      "ValueError: When using DeepSpeed, `accelerate.prepare()` requires you to pass at least one of training or "
      "evaluation dataloaders with `batch_size` attribute returning an integer value or alternatively set an integer "
      "value in `train_micro_batch_size_per_gpu` in the deepspeed config file",
      "accelerate/accelerator.py (_prepare_deepspeed); produced here with accelerate 1.15.0 and DeepSpeed 0.19.8 on "
      "the CPU accelerator (a DeepSpeedPlugin with \"auto\", prepare(model, optimizer))"),
    S("launcher.deepspeed_plugin_conflict", "config", "cause", (b"following accelerate config variables will be ignored",
                                                               b"Please specify the ZeRO optimization config", b"when using DeepSpeed",
                                                               b"has `None` as batch size",
                                                               b"in the config file and in the code at the same time",
                                                               b"without specifying an optimizer", b"without specifying a scheduler",
                                                               b"customize device placements with DeepSpeed", b"`--mixed_precision` arg cannot be set",
                                                               b"in the DeepSpeed config", b"DeepSpeed does not support clipping",
                                                               b"DeepSpeed currently only supports", b"is not supported in DeepSpeed",
                                                               b"To use DeepSpeed you must pass", b"optimizer is supported with DeepSpeed"),
      r"When using `deepspeed_config_file`, the following accelerate config variables will be ignored"
      r"|Please specify the ZeRO optimization config in the DeepSpeed config"
      r"|You can't use same `Accelerator\(\)` instance with multiple models when using DeepSpeed"
      r"|has `None` as batch size\. Please set an integer value in `train_micro_batch_size_per_gpu`"
      r"|You cannot (?:specify an? (?:optimizer|scheduler) in the config file and in the code at the same time|create a `Dummy(?:Optim|Scheduler)` without specifying)"
      r"|You can't customize device placements with DeepSpeed|`--mixed_precision` arg cannot be set to"
      r"|Do not set `gradient_accumulation_steps` in the DeepSpeed config|DeepSpeed does not support clipping gradients by value"
      r"|DeepSpeed currently only supports single optimizer|Currently only one optimizer is supported with DeepSpeed"
      r"|is not supported in DeepSpeed\. `precision` must be one of|To use DeepSpeed you must pass in a DeepSpeed config",
      "accelerate / Lightning refused this DeepSpeed setup",
      "The integration that drives DeepSpeed (accelerate's DeepSpeedPlugin, Lightning's DeepSpeedStrategy) found the "
      "DeepSpeed JSON contradicting the launch arguments or the code: a value set in both places, an optimizer or "
      "scheduler defined twice, or a precision it cannot hand to DeepSpeed.",
      "# keep each setting in one place: the DeepSpeed JSON (\"auto\" where the trainer decides) or the accelerate config / trainer arguments\n"
      + DS_CONFIG_FIX, "lora.deepspeed_config", 1,
      "ValueError: When using `deepspeed_config_file`, the following accelerate config variables will be ignored: "
      "['gradient_accumulation_steps', 'zero_stage'].",
      "accelerate/utils/dataclasses.py (DeepSpeedPlugin); accelerate/accelerator.py; lightning/pytorch/strategies/deepspeed.py"),
    S("deepspeed.auto_unresolved", "config", "cause", (b": 'auto'", b"without `auto`", b"fill out the following `auto` entries"),
      r"(?:could not convert string to float|invalid literal for int\(\) with base 10): 'auto'"
      r"|`(?P<key>[\w.]+)` not found in kwargs\. Please specify `[\w.]+` without `auto`"
      r"|not possible to automatically fill out the following `auto` entries",
      "A DeepSpeed value is still \"auto\"[[ ({key})]]",
      "\"auto\" in a DeepSpeed JSON is filled in only by the HF Trainer (or accelerate) from their arguments; here "
      "DeepSpeed received the string itself: the JSON is used by a loop that calls deepspeed.initialize directly, by "
      "zero.Init before the Trainer filled it, or for a key nothing fills.",
      "grep -n '\"auto\"' \"${DS_CONFIG:?path of the DeepSpeed JSON}\"    # every value still auto\n"
      "# replace them with numbers when DeepSpeed is not driven by the HF Trainer / accelerate\n" + DS_CONFIG_FIX,
      "lora.deepspeed_config", 1,
      "ValueError: could not convert string to float: 'auto'",
      "deepspeed/runtime/config.py reading numbers; accelerate/utils/dataclasses.py (fill_match); "
      "transformers/integrations/deepspeed.py (hidden_size auto entries)"),
    S("deepspeed.auto_compared", "config", "cause", (b"not supported between instances of",),
      r"not supported between instances of '(?:str' and '(?:int|float)|(?:int|float)' and 'str)'",
      "A DeepSpeed value is still \"auto\" (a string compared with a number)",
      "Inside DeepSpeed a config value is compared with a number but is a string: an HF-style \"auto\" that nothing "
      "filled in (a loop calling deepspeed.initialize directly, or zero.Init before the Trainer), or a number written "
      "in quotes.",
      "grep -n -E '\"auto\"|: \"[0-9.e-]+\"' \"${DS_CONFIG:?path of the DeepSpeed JSON}\"    # values that are strings\n"
      "# write numbers without quotes, and replace auto unless the HF Trainer / accelerate drives DeepSpeed\n" + DS_CONFIG_FIX,
      "lora.deepspeed_config", 1,
      "TypeError: '>' not supported between instances of 'str' and 'float'",
      "deepspeed/runtime/engine.py (gradient_clipping() > 0.0 and friends on an unresolved \"auto\")",
      requires="ds_any"),
    S("config.ds_config_path", "config", "cause", (b"Expected a string path to an existing deepspeed config",
                                                  b"path to a DeepSpeed config but the path does not exist", b"No such file or directory"),
      r"Expected a string path to an existing deepspeed config, or a dictionary,? or a (?:base64 encoded string|valid base64)\.?"
      r"(?: Received: ?(?P<path>\S+))?|path to a DeepSpeed config but the path does not exist: (?P<path2>\S+)"
      r"|No such file or directory: '(?P<path3>[^']*(?:ds_config|deepspeed|zero\d?)[^']*\.json)'",
      "The DeepSpeed config file does not exist[[ ({path})]]",
      "The path given with --deepspeed (or in the accelerate config) does not name an existing file from the "
      "process's working directory (a relative path started elsewhere, a typo, a file not shipped to every node), so "
      "the library tried to read it as JSON or base64 and failed.",
      "ls -l -- \"${DS_CONFIG:?the DeepSpeed JSON path as passed}\"    # from the directory the launcher starts in, on every node\n"
      "# pass an absolute path that exists on all nodes\n" + DS_CONFIG_FIX,
      "lora.deepspeed_config", 1,
      "ValueError: Expected a string path to an existing deepspeed config, or a dictionary, or a base64 encoded string. Received: ds_config.json",
      "accelerate/utils/deepspeed.py (HfDeepSpeedConfig); deepspeed/runtime/config.py; lightning/pytorch/strategies/deepspeed.py"),
    S("config.ds_json_unreadable", "config", "cause", (b"JSONDecodeError", b"Expecting value", b"Expecting property name",
                                                      b"binascii.Error", b"Incorrect padding", b"UnicodeDecodeError",
                                                      b"HjsonDecodeError"),
      r"(?:Hjson|JSON)DecodeError|Expecting (?:value|property name)|binascii\.Error|Incorrect padding|UnicodeDecodeError",
      "The DeepSpeed/accelerate config file cannot be read",
      "The config file is not valid JSON (a typo, a trailing comma, an empty file), or the path given does not exist "
      "from the working directory, so the library read the string as base64 and failed.",
      "ls -l -- \"${DS_CONFIG:?path of the DeepSpeed JSON}\" && python -m json.tool \"${DS_CONFIG}\" > /dev/null    # shows the first syntax error\n"
      + DS_CONFIG_FIX, "lora.deepspeed_config", 1,
      "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
      "https://github.com/bowang-lab/BioReason/issues/10 (within accelerate/utils/deepspeed.py; its base64 fallback)",
      consequence_of=("config.ds_config_path",), requires="ds_config"),
    S("config.exception_in_config_code", "config", "cause", (b"Error", b"Exception"),
      r"(?:^|[\s:\]])(?<!raise )(?:[\w.]+\.)?(?P<exc>AssertionError|ValueError|KeyError|TypeError|ValidationError|RuntimeError|Exception)(?::|\s*$)",
      "Configuration rejected while DeepSpeed/transformers read it ({exc})",
      "The exception was raised inside DeepSpeed's or the trainer's configuration code: the DeepSpeed JSON or the "
      "arguments that feed it are invalid for this version or contradict each other.",
      DS_CONFIG_FIX, "lora.deepspeed_config", 1,
      "ValueError: Invalid dtype for torch autocast: fp8",
      "deepspeed/runtime/config.py (get_torch_autocast_dtype) format string",
      consequence_of=("deepspeed.batch_mismatch", "deepspeed.config_check", "hf.deepspeed_mismatch", "deepspeed.config_validation",
                      "hf.zero3_device_map", "hf.precision_unsupported", "hf.training_arguments_invalid",
                      "launcher.deepspeed_plugin_conflict", "deepspeed.auto_unresolved", "deepspeed.auto_compared",
                      "config.ds_config_path", "config.ds_json_unreadable"),
      requires="ds_config"),
    # torch 2.6 made torch.load(weights_only=True) the default; a checkpoint holding other Python objects (numpy arrays
    # in the Trainer's RNG state, DeepSpeed's loss scaler) is refused where the loading code predates it (a resume
    # under LLaMA-Factory, ms-swift, trl: transformers#40500). torch's message (serialization.py _get_wo_message):
    # "Weights only load failed. This file can still be loaded, ..." and, on its own line, "WeightsUnpickler error:
    # Unsupported global: GLOBAL numpy._core.multiarray._reconstruct was not an allowed global by default". The first
    # line is matched only without that second part, so the finding names the global. Produced here: torch 2.13 loading
    # a file holding numpy's RNG state
    S("torch.weights_only_refused", "version_drift", "cause", (b"Weights only load failed", b"Unsupported global: GLOBAL "),
      r"WeightsUnpickler error: Unsupported global: GLOBAL (?P<glob>[\w.]+) was not an allowed global"
      r"|Weights only load failed\.(?! This file can still be loaded)",
      "torch.load refused a checkpoint under weights_only (torch 2.6+'s default)[[: {glob} is not allowed]]",
      "Since torch 2.6, torch.load unpickles only tensors and an allowlist of types unless told otherwise. This "
      "checkpoint holds another Python object (numpy arrays in the Trainer's RNG state, DeepSpeed's loss scaler, a "
      "class of the script's), and the code loading it (a Trainer resume, DeepSpeed's load_checkpoint, the script) "
      "predates that default or does not allow it: the installed torch is newer than the code that loads the checkpoint.",
      "python -m pip list 2>/dev/null | grep -i -E '^(torch|transformers|deepspeed|accelerate|peft) '    # upgrade the "
      "library whose torch.load the traceback shows, or pin torch below 2.6 with it\n"
      "export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1    # or, for checkpoints your own runs wrote only: load them in full, as "
      "before torch 2.6",
      None, 1,
      "\tWeightsUnpickler error: Unsupported global: GLOBAL numpy._core.multiarray._reconstruct was not an allowed global "
      "by default. Please use `torch.serialization.add_safe_globals([numpy._core.multiarray._reconstruct])`",
      "torch/serialization.py (_get_wo_message, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD); "
      "https://github.com/huggingface/transformers/issues/40500; produced here by torch.load of numpy's RNG state"),
    # attn_implementation="flash_attention_2" (LLaMA-Factory's flash_attn: fa2) where flash_attn is missing, too old or
    # there is no CUDA device: transformers' modeling_utils.py says why after one fixed prefix (4.36+; 5.x: "the package
    # for FlashAttention2 doesn't seem to be installed", produced here on a CPU machine without flash_attn). A flash_attn
    # built for another torch fails earlier, on its own import: python.undefined_symbol
    S("hf.flash_attention_unavailable", "version_drift", "cause", (b"FlashAttention2 has been toggled on",),
      r"FlashAttention2 has been toggled on, but it cannot be used due to the following error: (?P<why>[^.]+)",
      "Flash Attention 2 was asked for and cannot be used: {why}",
      "The run sets attn_implementation=flash_attention_2 (LLaMA-Factory: flash_attn: fa2), and this environment "
      "cannot give it: the flash_attn package is not installed or too old for this transformers, or the process sees "
      "no CUDA device. Every rank stops while the model is built.",
      "python -c 'import flash_attn; print(flash_attn.__version__)'    # in the training environment, on every node\n"
      "python -m pip list 2>/dev/null | grep -i -E '^(torch|transformers|flash.attn) '    # flash_attn built for this "
      "torch and CUDA\n"
      "# or train without it: attn_implementation=sdpa (LLaMA-Factory: flash_attn: sdpa)",
      None, 1,
      "ImportError: FlashAttention2 has been toggled on, but it cannot be used due to the following error: the package "
      "flash_attn seems to be not installed. Please refer to the documentation of "
      "https://huggingface.co/docs/transformers/perf_infer_gpu_one#flashattention-2 to install Flash Attention 2.",
      "transformers modeling_utils.py (_check_and_adjust_attn_implementation, _flash_attn_2_can_dispatch); produced "
      "here by from_config(attn_implementation='flash_attention_2') without flash_attn"),
    # torchrun (or a launcher) started Python on a script path this node does not have: each rank exits with code 2 at
    # once, and torchrun's summary says only that. CPython's own line (Modules/main.c, pymain_run_file); produced here
    # by torchrun --nproc-per-node 1 on a missing script
    S("launch.script_missing", "config", "cause", (b"can't open file",),
      r"can't open file '(?P<path>[^']+)': \[Errno 2\] No such file or directory",
      "The training script is not there: {path}",
      "Python was started on a script this node does not have at that path: a relative path launched from another "
      "directory, a checkout or shared filesystem missing on this node, or a typo. Every rank on this node exits with "
      "code 2 at once; the other nodes then lose their peers.",
      "ls -l -- {path}    # on the node that printed it: the script must be at the same path on every node\n"
      "# dsv3-preflight launch refuses a training script that is not there, on each node (--all-nodes), before torchrun "
      "starts",
      None, 1,
      "/usr/bin/python3: can't open file '/workspace/train.py': [Errno 2] No such file or directory",
      "CPython Modules/main.c (pymain_run_file: \"%ls: can't open file %R: [Errno %d] %s\"); produced here by torchrun "
      "on a missing script"),
    S("launch.unrecognized_arguments", "config", "cause", (b"unrecognized arguments", b"are not used by the HfArgumentParser"),
      r"error: unrecognized arguments: (?P<args>.+)|Some specified arguments are not used by the HfArgumentParser: (?P<args2>.+)",
      "The script does not accept the arguments it was launched with[[ ({args})]]",
      "The launch command passes flags the script (or this version of it) does not define, e.g. torchrun's "
      "--local-rank to a script that expects --local_rank.",
      "# remove or rename the flags named above, or upgrade the script; torchrun sets LOCAL_RANK in the environment",
      None, 1,
      "train.py: error: unrecognized arguments: --local-rank=0",
      "argparse; transformers/hf_argparser.py"),

    # ======================================================================== nccl_hang
    S("nccl.mismatched_collective", "nccl_hang", "cause", (b"Mismatched collective", b"mismatch between collectives", b"message truncated",
                                                          b"Message truncated", b"waiting for remainder of ranks",
                                                          b"collective mismatch around rank", b"op.preamble.length"),
      r"Mismatched collective detected.*?rank (?P<rank_a>\d+)|Detected mismatch between collectives on ranks"
      r"|[Mm]essage truncated ?: receiv\w* (?P<got>\d+) bytes instead of (?P<want>\d+)"
      r"|submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks"
      r"|may be caused by a collective mismatch around rank (?P<rank_a2>\d+)"  # NCCL 2.4-2.6 init.cc
      r"|op\.preamble\.length <= op\.nbytes",  # gloo tcp/pair.cc: a peer sent more than this rank posted
      "Ranks called different collectives (desynchronised)",
      "Ranks issued collectives in a different order or with different sizes (a rank skipped a step, a "
      "data-dependent branch, uneven batches), so the collective can never complete.",
      "export TORCH_DISTRIBUTED_DEBUG=DETAIL NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL    # names the first mismatching call\n"
      "# make every rank run the same collectives (same number of batches, no rank-dependent branches)",
      "dist.allreduce", 1,
      "init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective calls at and around rank 39.",
      "https://github.com/NVIDIA/nccl/issues/296 (NCCL src/enqueue.cc)"),
    S("c10d.desync_report", "nccl_hang", "cause", (b"are the lagging ranks", b"joined but didn't finish collective",
                                                  b"but didn't join collective"),
      r"ranks \[(?P<ranks>[\d, ]+)\] are the lagging ranks that caused this timeout"
      r"|\[(?P<ranks2>[\d, ]+)\] joined but didn't finish collective #(?P<seq>\d+)"
      r"|\[(?P<ranks3>[\d, ]+)\] finished collective #(?P<seq2>\d+), but didn't join collective",
      "torch's desync report names rank(s) {ranks} as the ones the others waited for",
      "TORCH_NCCL_DESYNC_DEBUG compared the ranks' progress: rank(s) {ranks} never reached the collective the others "
      "timed out in. Their own logs hold the cause (a crash, a hang in data loading or I/O, a rank-dependent branch).",
      "# read the log of rank(s) {ranks} first: their last lines before the timeout\n" + ALLREDUCE_FIX,
      "dist.allreduce", 2,
      "\t - To our best knowledge, ranks [1] are the lagging ranks that caused this timeout. They never joined any collectives",
      "torch/csrc/distributed/c10d/TraceUtils.h (analyzeMissingRanks, analyzeLaggingRanks)"),
    S("c10d.monitored_barrier", "nccl_hang", "symptom", (b"failed to pass monitoredBarrier",),
      r"Ranks? (?P<ranks>[\d, ]+?) failed to pass monitoredBarrier",
      "Rank(s) {ranks} never reached the barrier",
      "monitored_barrier names the ranks that did not arrive: they crashed or are stuck (their own logs hold the cause).",
      ALLREDUCE_FIX, "dist.allreduce", 3,
      "RuntimeError: Rank 3 failed to pass monitoredBarrier in 1800000 ms",
      "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp (monitoredBarrier)"),
    S("c10d.monitored_barrier_coordinator", "nccl_hang", "symptom", (b"successfully reached monitoredBarrier",),
      r"Rank (?P<rank_a>\d+) successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0",
      "monitored_barrier: rank 0, the coordinator, failed",
      "This rank reached the barrier but rank 0, which checks the others, failed or went away: rank 0's log holds the "
      "cause.", ALLREDUCE_FIX, "dist.allreduce", 3,
      "RuntimeError: Rank 1 successfully reached monitoredBarrier, but received errors while waiting for send/recv from "
      "rank 0. Please check rank 0 logs for faulty rank.",
      "torch/csrc/distributed/c10d/ProcessGroupGloo.cpp (monitoredBarrier)"),
    S("pyspy.waiting_in_collective", "nccl_hang", "suspect", (b"torch/cuda/__init__.py:", b"torch/distributed/"),
      # a py-spy frame: "    synchronize (torch/cuda/__init__.py:954)", innermost first under the thread's header
      r"^" + LABELS + r"(?P<func>synchronize|wait|barrier|monitored_barrier|all_reduce\w*|all_gather\w*|reduce_scatter\w*|broadcast\w*"
      r"|all_to_all\w*|gather|scatter|reduce|recv|send|irecv|isend|batch_isend_irecv) "
      r"\((?:\S*/)?torch/(?:cuda/__init__|distributed/[\w/]+)\.py:\d+\)",
      "A rank waits in torch's {func} (py-spy dump)",
      "py-spy shows the rank inside torch's {func}: it waits for the GPU or for peers that never joined that "
      "collective (a rank stuck elsewhere or dead, ranks out of step, a blocked link).",
      "# dump every rank on every node and compare: the rank that is not in the same call is the one to look at\n"
      "for pid in $(pgrep -f \"${SCRIPT:?your training script}\"); do py-spy dump --pid \"$pid\"; done\n"
      "# then run again with the collectives traced: the flight recorder names the rank that never entered\n"
      "export TORCH_DISTRIBUTED_DEBUG=DETAIL TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1\n"
      + ALLREDUCE_FIX, "dist.allreduce", 2,
      "    synchronize (torch/cuda/__init__.py:954)",
      "py-spy dump's frame format; corpus development excerpt xDiT#363", requires="pyspy", stall="any"),
    S("nccl.watchdog_timeout", "nccl_hang", "symptom", (b"aught collective operation timeout", b"timed out in blocking wait"),
      r"(?:Watchdog c|C)aught collective operation timeout: WorkNCCL\((?:SeqNum=(?P<seq>\d+), )?OpType=(?P<op>\w+)"
      r"(?:.*?Timeout\(ms\)=(?P<timeout>\d+))?"
      # NCCL_BLOCKING_WAIT: work.wait() reports the same timeout (torch 1.13-2.x, three wordings)
      r"|Work WorkNCCL\((?:SeqNum=(?P<seq2>\d+), )?OpType=(?P<op2>\w+).*?timed out in blocking wait",
      "Collective {op} timed out[[ (SeqNum {seq})]]",
      "Some rank never entered {op}[[ #{seq}]]: it crashed or is stuck elsewhere (see the first error on another rank), "
      "ranks are desynchronised, or NCCL's data connections between nodes are blocked.",
      "# find the rank that did not reach that collective (the first error above); then verify the data path:\n" + ALLREDUCE_FIX,
      "dist.allreduce", 3,
      "[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective operation timeout: "
      "WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.",
      "https://github.com/XPixelGroup/BasicSR/issues/737 (torch ProcessGroupNCCL.cpp)"),
    S("nccl.watchdog_hang", "nccl_hang", "symptom", (b"Some NCCL operations have failed or timed out", b"Heartbeat monitor timed out",
                                                    b"watchdog got stuck", b"collective timeout from", b"watchdog thread terminated",
                                                    b"global timeout from another rank", b"attempting to dump debug info",
                                                    b"detected by watchdog at work", b"Timeout at NCCL work",
                                                    b"To avoid data inconsistency", b"dump signal from another rank",
                                                    b"Exception raised from ncclCommWatchdog", b"Exception raised from watchdogHandler",
                                                    b"WorkNCCL::checkTimeout"),
      r"Some NCCL operations have failed or timed out|Heartbeat monitor timed out|watchdog got stuck for \d+ seconds"
      # torch prints "from " + " rank 7": two spaces (ProcessGroupNCCL.cpp getNCCLWatchdogTimeoutErrorMsg)
      r"|collective timeout from\s+rank (?P<rank_a>\d+)|collective timeout from this local rank"
      r"|global timeout from another rank|watchdog thread terminated with exception"
      r"|Terminating the process after attempting to dump debug info|(?:timeout\)|failure) detected by watchdog at work"
      r"|Timeout at NCCL work: \d+|To avoid data inconsistency, we are taking the entire process down"
      r"|Observed flight recorder dump signal from another rank"
      # the C++ traceback torch prints under a watchdog timeout (its first line may be lost in a pasted log)
      r"|Exception raised from (?:ncclCommWatchdog|watchdogHandler) at \S*ProcessGroupNCCL|WorkNCCL::checkTimeout\(",
      "NCCL watchdog: collectives failed or timed out",
      "A collective did not complete in time on this rank; the watchdog takes the process down.",
      ALLREDUCE_FIX, "dist.allreduce", 3,
      "[rank6]:[E ProcessGroupNCCL.cpp:537] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
      "https://github.com/deepspeedai/DeepSpeed/issues/4781 (torch ProcessGroupNCCL.cpp)"),
    S("gloo.recv_timeout", "nccl_hang", "symptom", (b"Timed out waiting", b"Read timeout [", b"Write timeout [",
                                                   b"Application timeout caused pair closure"),
      r"Timed out waiting (?P<ms>\d+)ms for (?:recv|send) operation to complete"
      r"|(?:Read|Write) timeout \[(?P<peer>[^\]]+)\]"  # gloo transport/tcp/pair.cc, buffer.cc
      r"|Application timeout caused pair closure",  # gloo tcp/unbound_buffer.cc: the other pairs of a timed-out context
      "Gloo send/recv timed out",
      "A peer never sent its part of a collective: it crashed or is stuck (or ranks are desynchronised).",
      ALLREDUCE_FIX, "dist.allreduce", 3,
      "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete",
      "gloo/transport/tcp/unbound_buffer.cc"),

    # ======================================================================== consequences without a class
    S("nccl.remote_error", None, "symptom", (b"ncclRemoteError", b"remote process exited or there was a network error"),
      r"ncclRemoteError|remote process exited or there was a network error",
      "NCCL remote error: a peer exited or the network failed",
      "A peer rank exited (see its own first error) or the inter-node network dropped the connection.",
      ALLREDUCE_FIX, "dist.allreduce", 4,
      "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
      "https://github.com/NVIDIA/nccl/issues/2076"),
    S("net.connection_closed", None, "symptom", (b"Connection closed by", b"Connection reset by peer", b"Broken pipe", b"Call to recv from",
                                               b"Connection closed by peer", b"Call to send to", b"Socket unexpectedly closed",
                                               b"Socket closed [", b"Call to recv failed"),
      r"Connection closed by (?:remote )?peer ?(?P<peer>\S*?)\.?(?:\s|$)|Connection reset by peer|Broken pipe"
      r"|Call to (?:recv from|send to) (?P<peer2>\S+) failed|Socket (?:unexpectedly )?closed (?P<peer3>\[[^\]]+\]:\d+)"
      r"|Call to recv failed",  # NCCL <= 2.9 include/socket.h
      "A connection to a peer was closed[[ ({peer})]]",
      "The peer's process went away (crash, OOM kill) or the connection was reset by the network.",
      ALLREDUCE_FIX, "dist.allreduce", 4,
      "a100-st-p4d24xlarge-22:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.200.84.247<58355> failed : Broken pipe",
      "https://github.com/NVIDIA/nccl/issues/795"),
    S("cuda.driver_shutting_down", None, "symptom", (b"driver shutting down",),
      r"driver shutting down",
      "CUDA was already shutting down in this process",
      "The process was exiting (its CUDA context being destroyed) while NCCL or torch still used the GPU. After a "
      "finished run that is teardown noise (destroy the process group before exiting); otherwise the process was "
      "leaving because of an earlier error, which is the cause.", "", None, 4,
      "user:16899:16961 [32735] include/alloc.h:250 NCCL WARN Cuda failure 'driver shutting down'",
      "https://github.com/NVIDIA/nccl-tests/issues/188 (CUDA error string of cudaErrorCudartUnloading)", teardown=True),
    S("nccl.proxy_teardown", None, "symptom", (b"Failed to execute operation Close", b"[Service thread] Accept failed",
                                               b"Could not receive type from localRank"),
      r"\[Proxy Service \d+\] Failed to execute operation Close|\[Service thread\] Accept failed"
      r"|\[Service thread\] Could not receive type from localRank (?P<local_rank>\d+)",
      "NCCL's proxy service lost a local rank while closing[[ (local rank {local_rank})]]",
      "A process of this node closed or left its NCCL communicator (it exited, or aborted after an error) while the "
      "proxy thread still served it. After a finished run that is teardown noise (destroy the process group before "
      "exiting); otherwise the error that made the process leave is the cause.",
      ALLREDUCE_FIX, "dist.allreduce", 4,
      "0bc8f5b83646:2374:2994 [0] proxy.cc:1521 NCCL WARN [Proxy Service 0] Failed to execute operation Close from rank 0, retcode 3",
      "https://github.com/deepseek-ai/DeepEP/issues/41 (NCCL src/proxy.cc)", teardown=True),
    S("nccl.proxy_peer_gone", None, "symptom", (b"Proxy Call to rank", b"Saw abortFlag", b"Attempt to use communicator before"),
      r"Proxy Call to rank (?P<rank_a>\d+) failed"
      r"|Saw abortFlag while waiting for proxyThread|Attempt to use communicator before the previous operation returned ncclSuccess",
      "NCCL's proxy lost a local rank[[ (rank {rank_a})]]",
      "The process of a local rank, or its communicator, went away after an earlier error: that error is the cause.",
      ALLREDUCE_FIX, "dist.allreduce", 4,
      "gpu-node07:24817:24901 [3] proxy.cc:808 NCCL WARN Proxy Call to rank 3 failed (Setup)",
      "NCCL src/proxy.cc, src/init.cc (format strings 2.12-2.17)"),
    S("python.keyboard_interrupt", None, "symptom", (b"KeyboardInterrupt",),
      r"^\W*" + LABELS + r"KeyboardInterrupt\b",
      "A process was interrupted (KeyboardInterrupt: Ctrl-C or SIGINT)",
      "Someone (or a scheduler) sent SIGINT: the run was stopped, it did not fail by itself. If it was stopped because "
      "it hung, `dsv3-preflight doctor --hung` names the phase it hung in.", "", None, 4,
      "[rank1]: KeyboardInterrupt",
      "CPython's SIGINT handler; produced here by Ctrl-C on a torchrun job", stop="signal"),
    S("slurm.step_cancelled", None, "symptom", (b" CANCELLED AT ",),
      r"\*\*\* (?:STEP|JOB) (?P<step>\S+) ON (?P<where>\S+) CANCELLED AT \S+ (?:DUE TO (?P<why>TIME LIMIT|PREEMPTION) )?\*\*\*",
      "Slurm cancelled job step {step} on {where}[[ (due to {why})]]",
      "Slurm stopped the step (its time limit, a preemption, or scancel): every task got SIGTERM, then SIGKILL. "
      "Nothing in the run failed by then unless an error comes before this line.", "", None, 4,
      "slurmstepd: error: *** STEP 1234.0 ON gpu-node-1 CANCELLED AT 2024-05-01T10:00:00 DUE TO TIME LIMIT ***",
      "Slurm's slurmstepd (src/slurmd/slurmstepd/req.c: '*** %s ON %s CANCELLED AT %s DUE TO TIME LIMIT ***')",
      stop="signal"),
    S("elastic.signal_exception", None, "symptom", (b"SignalException", b"got signal: ", b"death signal"),
      r"SignalException: Process (?P<pid>\d+) got signal: (?P<sig>\d+)|Process (?P<pid2>\d+) got signal: (?P<sig2>\d+)"
      r"|(?:\b(?P<pid3>\d+) \S*api\.py:\d+\] )?Received (?P<sig3>\d+) death signal",
      "The launcher[[ (pid {pid})]] received signal {sig}",
      "torchrun itself was sent a signal (15: SIGTERM from a scheduler's time limit or preemption, a user's kill; "
      "2: Ctrl-C) and stopped its workers.", "", None, 4,
      "torch.distributed.elastic.multiprocessing.api.SignalException: Process 1234 got signal: 15",
      "torch/distributed/elastic/multiprocessing/api.py (_terminate_process_handler)", stop="signal"),
    S("cluster.process_died", None, "symptom", (b"Some Ray subprocesses exited unexpectedly", b"has been marked dead because the detector",
                                                b"scheduler is dead", b"This might cause deadlock in distributed execution",
                                                b"peer process has unexpectedly disconnected", b"has lost communication with a remote daemon",
                                                b"exiting improperly", b"Horovod has been shut down"),
      r"Some Ray subprocesses exited unexpectedly|has been marked dead because the detector has missed too many heartbeats"
      r"|Rank \d+ scheduler is dead|Error executing method (?P<method>\S+?)\.? This might cause deadlock in distributed execution"
      r"|An MPI communication peer process has unexpectedly disconnected|(?:ORTE|PRTE) has lost communication with a remote daemon"
      r"|(?:mpirun|prterun) has exited due to process rank \d+ with PID \d+ on|exiting improperly"
      r"|Horovod has been shut down\. This was caused by an exception on one of the ranks",
      "A Ray/vLLM/SGLang process of the job died[[ (in {method})]]",
      "A raylet, a node or a worker process went away; what it printed before (or its own log: raylet.err, the "
      "worker's traceback) holds the cause.", "", None, 4,
      "2023-03-03 05:15:30,774\tWARNING worker.py:1866 -- The node with node id: 9426f4 and address: 10.130.0.113 and "
      "node name: 10.130.0.113 has been marked dead because the detector has missed too many heartbeats from it.",
      "ray src/ray/gcs/gcs_server/gcs_node_manager.cc, python/ray/scripts/scripts.py; vllm worker_base.py; sglang engine"),
    S("elastic.closing_signal", None, "symptom", (b"closing signal SIGTERM", b"Killing subprocess", b"closing signal SIGINT"),
      r"Sending process (?P<pid>\d+) closing signal SIG\w+|Killing subprocess (?P<pid2>\d+)",
      "The launcher stopped the other ranks",
      "torchrun/deepspeed stop every rank once one failed: a consequence of the first failure.",
      "", None, 4,
      "WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 3710366 closing signal SIGTERM",
      "https://github.com/codefuse-ai/MFTCoder/issues/31 (torch/distributed/elastic/multiprocessing/api.py)", stop="relay"),
    S("process.native_crash", None, "symptom", (b"exitcode: -11", b"exitcode: -6", b"exitcode: -4", b"exitcode: -8",
                                               b"exitcode  : -", b"received by PID", b"Fatal Python error: ", b"(core dumped)",
                                               b"exit code 139", b"exit code 134", b"exitcode: 139", b"exitcode: 134"),
      r"failed \(exitcode: -(?P<sig>11|6|4|8)\) local_rank: (?P<local_rank>\d+)"
      r"|exitcode\s*: -(?P<sig2>11|6|4|8) \(pid: \d+\)|Signal (?P<sig3>11|6|4|8) \(SIG\w+\) received by PID"
      r"|Fatal Python error: (?P<what>Segmentation fault|Aborted|Floating point exception|Illegal instruction)"
      r"|\d+ (?P<what2>Segmentation fault|Aborted|Floating point exception|Illegal instruction)\s+\(core dumped\)"
      r"|(?:exit code|exitcode:) (?P<code>139|134)\b",
      "A rank crashed in native code[[ (signal {sig})]][[: {what}]][[ (exit code {code})]]",
      "The process died of a fatal signal (11 SIGSEGV, 6 SIGABRT, 4 SIGILL, 8 SIGFPE; exit code 139 or 134 from a "
      "shell): a crash in native code, not a Python error. Usual culprits: a compiled extension (flash-attn, apex, "
      "DeepSpeed ops, bitsandbytes) built against another torch or CUDA, a CUDA/NCCL library fault, a C++ abort. Rerun "
      "that rank with PYTHONFAULTHANDLER=1 to get every thread's stack at the crash; a core dump names the library.",
      "", None, 3,
      "E1124 01:27:53.825000 13186 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -11) "
      "local_rank: 1 (pid: 13240) of binary: /work/main/.venv/bin/python",
      "torch/distributed/elastic/multiprocessing/api.py and errors/__init__.py (exitcode, 'Signal 11 (SIGSEGV) "
      "received by PID'); CPython faulthandler; bash job status; produced here by a rank that SIGSEGVs itself"),
    # our own launcher (launch/ray_launch.py) closing a run: the node whose torchrun failed first, the others stopped
    S("launch.cluster_changed", "port_rendezvous", "cause", (b"Ray cluster changed after the preflight",),
      r"^dsv3-preflight launch: NO-GO: the Ray cluster changed after the preflight \(ranks then (?P<then>\{[^}]*\}), "
      r"now (?P<now>\{[^}]*\})\)",
      "The Ray cluster changed between the preflight and the launch (node ranks then {then}, now {now})",
      "`launch --all-nodes` starts torchrun only on the nodes the preflight judged, with the ranks it gave them; a "
      "node joined or left Ray (a restart, a node lost, a late `ray start`) between the two, so nothing was started. "
      "A node that comes and goes is the node to look at.",
      "ray status    # the nodes alive now; then on a node that left: ray start --address \"${RAY_HEAD:?head address}\"\n"
      "dsv3-preflight run --all-nodes --only cluster.node_count    # the cluster the preflight sees now",
      "cluster.node_count", 1,
      "dsv3-preflight launch: NO-GO: the Ray cluster changed after the preflight (ranks then {'a1f3': 0, '9c2e': 1}, "
      "now {'a1f3': 0}); torchrun not started",
      "launch/ray_launch.py (cluster_changed_line)"),
    S("launch.node_failed_first", None, "symptom", (b"failed first (",),
      r"^dsv3-preflight launch: \[node (?P<node_rank>\d+) (?P<host>[^\]\s]+)\] failed first \((?P<why>[^)]*)\)",
      "dsv3-preflight launch: node {host} failed first ({why})",
      "The launcher saw this node's torchrun fail first and stopped the other nodes; the node's own lines before it "
      "hold the cause (its log: reports/launch-*-node{node_rank}-{host}.log).", "", None, 4,
      "dsv3-preflight launch: [node 1 gpu-node-1] failed first (torchrun exited with 1); stopped the others: "
      "[node 0 gpu-node-0]; exit 11",
      "launch/ray_launch.py (the launch's closing line)"),
    S("elastic.worker_failed", None, "symptom", (b"failed (exitcode:", b"exits with return code", b"exited with exit code",
                                               b"non-zero exit code", b"non-zero status", b"Exited with exit code",
                                               b"non-zero exit status"),
      r"failed \(exitcode: (?P<exitcode>-?\d+)\) local_rank: (?P<local_rank>\d+)|exits with return code = (?P<exitcode2>-?\d+)"
      r"|[Ee]xited with exit code (?P<exitcode3>-?\d+)|non-zero (?:exit code|status)"
      r"|returned non-zero exit status (?P<exitcode4>-?\d+)",  # torch.distributed.launch <= 1.8 (CalledProcessError)
      "A rank exited[[ with code {exitcode}]]",
      "The launcher saw a rank exit; that rank's own error above is the cause.", "", None, 4,
      "[2024-05-08 08:47:31,877] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) local_rank: 2 (pid: 5939) of binary: /usr/bin/python",
      "https://github.com/xiuqhou/Salience-DETR/issues/4"),
    S("process.aborted", None, "symptom", (b"terminate called after throwing", b"what():"),
      r"terminate called after throwing an instance of|^\s*what\(\):\s",
      "A process aborted on an uncaught C++ exception",
      "The C++ runtime aborts the process with the exception printed on the 'what():' line; the exception itself is "
      "the failure.", "", None, 4,
      "terminate called after throwing an instance of 'c10::DistBackendError'",
      "https://github.com/NVIDIA/Megatron-LM/issues/935 (libstdc++ verbose terminate handler)"),
    S("nccl.comm_aborted", None, "symptom", (b"communicator was aborted",),
      r"NCCL communicator was aborted(?: on rank (?P<rank_a>\d+))?",  # torch <= 1.9: no rank
      "NCCL communicator aborted[[ on rank {rank_a}]]",
      "The communicator was torn down after an earlier error or timeout (the reason follows on the same line in "
      "torch 1.x; otherwise see the first error).", ALLREDUCE_FIX, "dist.allreduce", 4,
      "RuntimeError: NCCL communicator was aborted on rank 3.",
      "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp"),
    S("elastic.child_failed", None, "symptom", (b"ChildFailedError", b" FAILED"),
      r"ChildFailedError|^\s*[\w./-]+ FAILED\s*$",   # and the banner of its summary: '<entrypoint> FAILED'
      "torchrun: a child process failed (ChildFailedError)",
      "torchrun's summary of a failed worker; its 'Root Cause (first observed failure)' block names the rank.",
      "", None, 4,
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
      "https://github.com/meta-llama/llama/issues/706"),

    # ======================================================================== context
    S("elastic.summary_field", None, "context", (b"  host      : ", b"  rank      : ", b"  exitcode  : ", b"  time      : "),
      r"^" + LABELS + r"(?P<field>host|rank|exitcode|time)\s+: (?P<value>\S+)(?: \(local_rank: (?P<local_rank>\d+)\))?",
      "torchrun failure summary field", example="  rank      : 0 (local_rank: 0)",
      source="torch/distributed/elastic/multiprocessing/errors/__init__.py"),
    S("context.ds_config_frame", None, "context", (b"deepspeed/runtime/config.py", b"accelerate/utils/deepspeed.py",
                                                   b"integrations/deepspeed.py", b"transformers/deepspeed.py", b"HfDeepSpeedConfig",
                                                   b"deepspeed/runtime/zero/config.py", b"deepspeed/runtime/config_utils.py"),
      r"(?P<ds_any>(?P<ds_config>deepspeed/runtime/(?:zero/)?config(?:_utils)?\.py|accelerate/utils/deepspeed\.py|integrations/deepspeed\.py"
      r"|transformers/deepspeed\.py|HfDeepSpeedConfig))",
      "a frame inside DeepSpeed/accelerate config loading",
      example='  File "/root/mambaforge/envs/BioReason/lib/python3.12/site-packages/accelerate/utils/deepspeed.py", line 148, in __init__',
      source="https://github.com/bowang-lab/BioReason/issues/10"),
    S("context.torch_load_frame", None, "context", (b"torch/serialization.py", b"_weights_only_unpickler.py"),
      r"(?P<torch_load>torch/serialization\.py\", line \d+, in \w*load|torch/_weights_only_unpickler\.py)",
      "a frame of torch.load reading a checkpoint",
      example='  File "/usr/lib/python3/site-packages/torch/serialization.py", line 1888, in _legacy_load',
      source="torch/serialization.py (traceback frame format of CPython)"),
    S("context.peft_weights_frame", None, "context", (b"in load_peft_weights",),
      r"(?P<peft_weights>, in load_peft_weights)",
      "a frame of peft loading an adapter's weights",
      example='  File "/usr/lib/python3/site-packages/peft/utils/save_and_load.py", line 731, in load_peft_weights',
      source="peft/utils/save_and_load.py (traceback frame format of CPython)"),
    S("context.pyspy_thread", None, "context", (b"(active): ", b"(idle): ", b"(active+gil): "),   # no quote: JSON escapes it
      r"^" + LABELS + r"(?P<pyspy>Thread (?:0x[0-9A-Fa-f]+|\d+) \((?:active|idle)[^)]*\): \")",
      "a thread's header in a py-spy dump (its frames follow, innermost first)",
      example='Thread 71079 (active): "MainThread"',
      source="py-spy dump's output format (src/dump.rs)"),
    S("context.rdzv_store_frame", None, "context", (b"c10d_rendezvous_backend.py",),
      r"(?P<rdzv_store>c10d_rendezvous_backend\.py[\\\"]*, line \d+, in _call_store)",
      "a frame of torchrun's C10d rendezvous backend calling its store",
      example='  File "/opt/conda/lib/python3.9/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", line 113, in _call_store',
      source="torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py (traceback frame format of CPython)"),
    S("context.ds_engine_frame", None, "context", (b"deepspeed/runtime/", b"deepspeed/__init__.py"),
      r"(?P<ds_any>deepspeed/(?:runtime/[\w/]+\.py|__init__\.py))",
      "a frame inside DeepSpeed's engine (where an unresolved config value is used)",
      example='  File "/opt/conda/lib/python3.8/site-packages/deepspeed/runtime/engine.py", line 1257, in _take_model_step',
      source="deepspeed/runtime/engine.py (traceback frame format of CPython)"),

    # ======================================================================== progress (the run was working)
    # torchrun's agent once every local worker exited 0 (elastic/agent/server/api.py _invoke_run, _exit_barrier): the
    # workers' exit-time lines printed before it are teardown noise of that node (workers_done)
    S("elastic.workers_succeeded", None, "progress", (b"worker group successfully finished", b"Local worker group finished (",
                                                       b"Done waiting for other agents"),
      r"\[[\w-]+\] worker group successfully finished|Local worker group finished \((?:WorkerState\.)?SUCCEEDED\)"
      r"|Done waiting for other agents",
      "torchrun: this node's workers all exited 0", ends_run=True, succeeded=True, workers_done=True,
      example="INFO:torch.distributed.elastic.agent.server.api:[default] worker group successfully finished. Waiting "
              "300 seconds for other agents to finish.",
      source="torch/distributed/elastic/agent/server/api.py (_invoke_run on WorkerState.SUCCEEDED, _exit_barrier)"),
    # nccl-tests' last line: the test ran to its end, but a run with wrong results ("Out of bounds values : 24 FAILED")
    # prints it too, so it is no sign that the work succeeded
    S("nccltests.finished", None, "progress", (b"Avg bus bandwidth",), r"Avg bus bandwidth\s*:\s*[\d.]+",
      "nccl-tests ran to its end", ends_run=True,
      example="# Avg bus bandwidth    : 95.7821",
      source="nccl-tests src/common.cu (printed after every size, whatever the '#wrong' columns say)"),
    S("train.completed", None, "progress", (b"exits successfully", b"raining finished", b"raining complete", b"Finished training",
                                          b"train_runtime", b"Trainer.fit` stopped", b"Reached max steps",
                                          b"train metrics", b"after training is done"),
      # DeepSpeed's launcher names the process ("Process 1555224 exits successfully."); bare, the words are prose too
      # (a changelog's "now prints more information and exits successfully")
      r"Process \d+ exits successfully|[Tt]raining (?:finished|completed?)\b(?! iteration)|Finished training|train_runtime"
      r"|Trainer\.fit` stopped"
      r"|Reached max steps|\*{3,} train metrics \*{3,}|\[after training is done\]",
      "the run finished", ends_run=True, succeeded=True,
      example="work-1: [2023-08-06 05:27:07,537] [INFO] [launch.py:347:main] Process 1555224 exits successfully.",
      source="https://github.com/hiyouga/LlamaFactory/issues/381 (deepspeed/launcher/launch.py); transformers Trainer "
             "(train_runtime, '***** train metrics *****'); Lightning ('`Trainer.fit` stopped'); "
             "Megatron-LM training.py ('[after training is done]')"),
    # printed by ProcessGroupNCCL's destructor when the interpreter exits normally (torch 2.4+): the process reached
    # its end; a rank that crashed also prints it, after its traceback (an error line, so never healthy)
    S("torch.exit_without_destroy", None, "progress", (b"destroy_process_group() was not called before program exit",
                                                      b"process group has NOT been destroyed"),
      r"destroy_process_group\(\) was not called before program exit|process group has NOT been destroyed before we destruct",
      "a rank exited normally (torch's exit warning: destroy_process_group() was not called)", ends_run=True,
      example="[rank0]:[W825 13:09:39.967659278 ProcessGroupNCCL.cpp:1538] Warning: WARNING: destroy_process_group() was "
              "not called before program exit, which can leak resources. For more info, please see "
              "https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())",
      source="https://github.com/pytorch/examples/pull/1387; torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp "
             "(~ProcessGroupNCCL; torch 2.4-2.5 wording 'process group has NOT been destroyed before we destruct "
             "ProcessGroupNCCL')"),
    # wandb.finish() (at a script's exit) reports the exit code: "(success)" for 0, "(failed N)" otherwise (an error
    # line); wandb <= 0.10 printed "Program ended successfully."
    S("train.wandb_finished", None, "progress", (b"W&B process to finish", b"Program ended successfully"),
      r"Waiting for W&B process to finish\.\.\. \(success\)|wandb: Program ended successfully",
      "the script exited with code 0 (wandb's exit status)", ends_run=True, succeeded=True,
      example="wandb: Waiting for W&B process to finish... (success).",
      source="wandb sdk/wandb_run.py (_display_exit_status: '(success)' when the exit code is 0, else '(failed N)')"),
    # ncclCommDestroy's last line; an abort ends "- Abort COMPLETE" instead (src/init.cc)
    S("nccl.destroy_complete", None, "progress", (b"Destroy COMPLETE",), r" - Destroy COMPLETE",
      "NCCL communicator destroyed in order (destroy_process_group: the rank finished)", ends_run=True,
      example="gpu-a:4242:4242 [0] NCCL INFO comm 0x55d1e0a0 rank 0 nranks 16 cudaDev 0 busId 18000 - Destroy COMPLETE",
      source="NCCL src/init.cc (commDestroy/commReclaim: '%s COMPLETE', Destroy or Abort)"),
    # a multi-node inference server that came up: its engine (and NCCL across the nodes) initialised. SGLang prints its
    # line after a warm-up request succeeded; uvicorn's after the app's start-up (vLLM's OpenAI server) finished
    S("serve.ready", None, "progress", (b"fired up and ready to roll", b"Application startup complete"),
      r"The server is fired up and ready to roll!|INFO:\s+Application startup complete\.",
      "the inference server came up and serves",
      example="[2025-01-08 10:12:41] The server is fired up and ready to roll!",
      source="SGLang srt/entrypoints/http_server.py (_wait_and_warmup, after the warm-up request); uvicorn "
             "lifespan/on.py ('Application startup complete.'), vLLM's OpenAI-compatible server"),
    # vLLM's engine came up: its KV-cache profiling ran the model (a forward over every tensor-parallel rank, their
    # all-reduces included) and the cache was allocated; CUDA graphs were captured. Set-up, before any request
    S("vllm.engine_ready", None, "progress", (b"blocks: ", b"GPU KV cache size:", b"init engine (profile", b"Graph capturing finished"),
      r"# (?:GPU|cuda|CUDA|NPU|XPU|HPU) blocks: \d+, # CPU blocks: \d+|GPU KV cache size: [\d,]+ tokens"
      r"|init engine \(profile, create kv cache, warmup model\) took [\d.]+ seconds|Graph capturing finished in [\d.]+ secs",
      "vLLM's engine came up (the model ran across its ranks, the KV cache was allocated)",
      example="INFO 10-17 09:12:44 distributed_gpu_executor.py:57] # GPU blocks: 27668, # CPU blocks: 4681",
      source="vLLM 0.6 executor/gpu_executor.py and distributed_gpu_executor.py ('# GPU blocks: %d, # CPU blocks: %d'), "
             "worker/model_runner.py ('Graph capturing finished in %.0f secs.'); vLLM v1 kv_cache_utils.py ('GPU KV cache "
             "size: %s tokens') and engine/core.py ('init engine (profile, create kv cache, warmup model) took %.2f seconds')",
      setup=True),
    # DDP logs it at the forward after the first backward (torch/nn/parallel/distributed.py, logger.info): a first
    # step, its gradient all-reduce included, finished
    S("ddp.buckets_rebuilt", None, "progress", (b"Reducer buckets have been rebuilt",),
      r"Reducer buckets have been rebuilt in this iteration",
      "DDP finished its first step (its gradient buckets were rebuilt)",
      example="2023-05-16 21:24:13,031 INFO Reducer buckets have been rebuilt in this iteration.",
      source="torch/nn/parallel/distributed.py (DistributedDataParallel._pre_forward, logger.info after the first "
             "iteration's backward); mmcv's MMDistributedDataParallel prints the same line"),
    # DeepSpeed's engine every steps_per_print optimizer steps (runtime/engine.py _report_progress, rank 0)
    S("deepspeed.step_report", None, "progress", (b", skipped=",),
      r"\bstep=\d+, skipped=\d+, lr=",
      "DeepSpeed reported optimizer steps",
      example="[2024-01-05 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, lr=[0.0001], "
              "mom=[(0.9, 0.999)]",
      source="deepspeed/runtime/engine.py (DeepSpeedEngine._report_progress: log_dist('step={step}, "
             "skipped={self.skipped_steps}, lr={lr}, mom={mom}', ranks=[0]))"),
    S("train.metric", None, "progress", (b"acc", b"Acc"),
      r"\b(?:best|val|valid|eval|train|test)?_?[Aa]cc(?:uracy)?(?:@\d+)?['\"]?\s*[:=]\s*-?\d",
      "an accuracy metric reported",
      example="best_acc: 83.42524509803921",
      source="https://github.com/kubeflow/pytorch-operator/issues/353 (a PyTorchJob's MNIST run); transformers "
             "eval_accuracy; Lightning val_acc"),
    S("nccl.init_complete", None, "progress", (b"Init COMPLETE",), r"Init COMPLETE", "NCCL communicator initialised",
      example="simple-layoutlm:97:176 [0] NCCL INFO comm 0x7ff1ec001060 rank 0 nranks 2 cudaDev 0 busId 100000 - Init COMPLETE",
      source="https://github.com/huggingface/transformers/issues/11658 (NCCL src/init.cc)", setup=True),
    # printed once ncclTransportP2pSetup has connected every ring (tree) channel to its peers: NCCL 2.9-2.21 during
    # init, just before "Init COMPLETE"; 2.22+ (NCCL_RUNTIME_CONNECT=1, the default) at the first collective, so then
    # the connections of a real collective were made. A log cut before "Init COMPLETE" can end on it
    S("nccl.connected_all", None, "progress", (b"Connected all rings", b"Connected all trees"),
      r"NCCL INFO Connected all (?:rings|trees)\b", "NCCL connected its channels to the peers",
      example="dsw-27183-759b57b4d6-kz2vc:261724:362 [0] NCCL INFO Connected all trees",
      source="https://github.com/google-research/distilling-step-by-step/issues/3 (NCCL src/init.cc 2.9-2.21, "
             "src/transport/generic.cc 2.22+: after ncclTransportP2pSetup/ncclTransportRingConnect succeed)", setup=True),
    S("nccltests.result_row", None, "progress", (b"float", b"half", b"bfloat16", b"double", b"int32", b"int8"),
      r"(?:^|[:\s])\d+\s+\d+\s+(?:float|half|bfloat16|double|u?int8|u?int32|u?int64)\s+(?:sum|prod|max|min|avg|none|mulsum|\d+)\s+-?\d+\s+[\d.]+"
      r"|(?:^|[:\s])\d+\s+\d+\s+(?:float|half|bfloat16|double|u?int8|u?int32|u?int64)\s+(?:sum|prod|max|min|avg|none|\d+)\s+[\d.]+\s+[\d.]+",
      "nccl-tests result rows",
      example="   127926280      31981570     float     sum      -1   2560.7   49.96   95.75      0   2556.2   50.05   95.92      0",
      source="nccl-tests src/common.cu"),
    S("train.loss", None, "progress", (b"loss", b"Loss"),
      r"['\"]?\b\w*[Ll]oss\w*['\"]?\s*[:=]\s*\(?-?\d|[Ll]oss\s+-?\d+\.\d+|\bloss\b.{0,3}-?\d+\.\d+",
      "training loss reported",
      example="{'loss': 0.0499, 'grad_norm': 1.1254302714475641, 'learning_rate': 3.591337215792852e-05, 'epoch': 1.25}",
      source="transformers Trainer log"),
    S("train.progress_bar", None, "progress", (b"it/s]", b"s/it]", b"it/s,", b"s/it,"),
      r"\b[1-9]\d*/\d+ \[\d+:\d\d",
      "progress bar advancing",
      example="Training Epoch: 1:   1%|███▉      | 1/79 [00:11<14:38, 11.26s/it]",
      source="https://github.com/meta-llama/llama-cookbook/pull/691 (tqdm format)"),
    S("train.finished", None, "progress", (b"SUCCEEDED", b"Saving model checkpoint", b"save model", b"Running training", b"initialize [end]", b"SUCCESS", b"RunningAvgSamplesPerSec",
                                         b"samples/s", b"tokens/s", b"global_step", b"epoch: [", b"checkpoint of size",
                                         b"mg/sec", b"mages/sec", b"finished iteration"),
      # a state as a log prints it ('"state": "SUCCEEDED"', 'status.SUCCEEDED', "Status for job 'x': SUCCEEDED"), not a
      # sentence about one ("The job reports SUCCEEDED." in a runbook is no run that succeeded)
      r"(?<![a-z] )SUCCEEDED|Saving model checkpoint|save model|Running training|DeepSpeedZeRoOffload initialize \[end\]|SUCCESS Step|RunningAvgSamplesPerSec"
      r"|[\d.]+ (?:samples|tokens)/s(?:ec(?:ond)?)?\b|global_step|epoch: \[\d"
      r"|\b(?:Img|[Ii]mages?)/sec(?: per \w+)?:? ?[\d.]+|[\d.]+ img/sec per \w+|Total img/sec on \d+"
      r"|(?:Model|Adapter|Recipe) checkpoint of size [\d.]+ GiB saved to"   # torchtune's checkpointers
      r"|Training finished iteration \d+",   # Ray Train's report after each iteration
      "the run progressed",
      example="Saving model checkpoint to saves/llama3-8b/lora/sft/checkpoint-500",
      source="transformers Trainer (_save_checkpoint's log line); throughput: Horovod's and BytePS's "
             "pytorch_synthetic_benchmark.py ('Iter #0: 181.2 img/sec per GPU', 'Img/sec per GPU: ...', 'Total img/sec "
             "on 16 GPU(s): ...'), tf_cnn_benchmarks ('total images/sec: ...'), a per-rank 'samples/second' "
             "(https://github.com/aws/aws-k8s-tester/pull/467); Ray Train / Tune's 'Training finished iteration N at ...'"),
)

# ============================================================================ our own preflight's verdict
# `dsv3-preflight launch` (and `run`) print the causes of a NO-GO as "1. ✘ FAIL host.resources: port 39511 is held
# by pid 1321 (…)" (reports/console.py), the launch log repeats them behind "# ", the JSON report holds the results.
# The preflight has judged: the doctor repeats its judgement (dsv3_preflight.doctor.gate reads it), one finding per
# failed check, under that check's id.

#: the corpus class a failed check stands for, where the check guards one; a check that guards several (host.resources:
#: a held port, /dev/shm or a full disk) is GATE_CLASS, and so is a plugin's. Every built-in check is listed (a test
#: holds the table to the registry), so a new check comes with a decision.
CHECK_CLASS: dict[str, str] = {
    "cluster.env_consistency": GATE_CLASS, "cluster.master_node": "port_rendezvous", "cluster.node_count": "port_rendezvous",
    "cluster.node_rank": "pci_rank_dup", "cluster.unique_hostnames": GATE_CLASS, "dist.allreduce": GATE_CLASS, "dist.allreduce_cluster": GATE_CLASS,
    "dist.pairs": GATE_CLASS, "env.launch_vars": GATE_CLASS, "env.torchrun_python": "version_drift",
    "gpu.clocks": GATE_CLASS, "gpu.cuda_init": GATE_CLASS,
    "gpu.fabric_manager": "cuda_fabric", "gpu.inventory": GATE_CLASS, "gpu.memory_errors": GPU_FAULT_CLASS,
    "gpu.modes": GATE_CLASS, "gpu.nvlink": "nccl_transport", "gpu.pcie_link": GATE_CLASS,
    "gpu.rank_mapping": "pci_rank_dup", "gpu.rank_mapping_cluster": "pci_rank_dup", "gpu.reset_pending": GPU_FAULT_CLASS,
    "gpu.versions": "version_drift", "gpu.xid": GPU_FAULT_CLASS, "host.resources": GATE_CLASS,
    "kuberay.backoff": GATE_CLASS, "kuberay.deadline": GATE_CLASS, "kuberay.gpu_limits": GATE_CLASS,
    "kuberay.nccl_ifname": GATE_CLASS, "kuberay.shm": GATE_CLASS, "kuberay.storage": GATE_CLASS,
    "lora.adapter_base": "lora_empty", "lora.deepspeed_config": GATE_CLASS, "lora.output_dir": GATE_CLASS,
    "lora.targets": "lora_empty", "net.mtu": GATE_CLASS, "net.nic_route": "nic_iface", "net.port_free": "port_rendezvous",
    "net.port_reach": "port_rendezvous",
}
#: a cause of the preflight's console ("Why NO-GO" block; the launch log has it behind "# ")
GATE_CAUSE_RE = (r"^\s*(?:#\s*)?\d+\. (?:\u2718 |\u203c )(?P<status>FAIL|ERROR) (?P<check>{check})"
                 r"(?: on (?P<nodes>[^:]+?))?: (?P<summary>.+)$")
_GATE_TITLE = "Preflight check {check} {status}[[ on {nodes}]]: {summary}"
_GATE_ROOT = ("The preflight judged this before the run[[ (who must act: {who})]]: a check that is FAIL or ERROR keeps "
              "`dsv3-preflight launch` from starting torchrun[[; {launched}]][[; the same cause blocks {also}]].[[ {error_note}]]")
#: the gate's {launched}, when a line of `dsv3-preflight launch` is among the inputs (a plain `run` says nothing of one)
GATE_LAUNCHED = "this launch did not start it, so no training ran"
#: placeholders filled by the triage itself, not by a signature's pattern (derived findings, the preflight's verdict)
DERIVED_NAMES = frozenset({"values", "node", "rank", "pid", "error", "seq", "op", "ahead", "who", "also", "report",
                           "error_note", "nodes", "launched", "host", "port", "meaning", "action", "bus"})
#: what an ERROR is (the root cause's {error_note} for a check that is ERROR)
GATE_ERROR_NOTE = "ERROR: the check could not run (its probe failed or timed out); unknown is never taken as healthy."


def gate_rerun(check: str) -> str:
    """The last line of a failed check's fix: the check again."""
    import shlex

    return f"dsv3-preflight run --only {shlex.quote(check)}    # once fixed: this check again (--all-nodes, as for the launch)"


def _gate_fix(check: str) -> str:
    return ("# the preflight printed this cause's fix under it (\"fix: (paste as is)\") with the node's own values"
            "[[; the doctor reads it from the report:\ndsv3-preflight doctor {report}]]\n" + gate_rerun(check))


def gate_signature(check: str) -> Signature:
    """The finding of a failed preflight check (built-in or a plugin's: any id the preflight printed)."""
    sig = _GATE_SIGNATURES.get(check)
    if sig is None:
        sig = _GATE_SIGNATURES[check] = S(
            f"preflight.{check}", CHECK_CLASS.get(check, GATE_CLASS), "cause", ("\u2718 FAIL ".encode(),),
            GATE_CAUSE_RE.format(check=re.escape(check)), _GATE_TITLE, _GATE_ROOT, _gate_fix(check), check, 1,
            f"1. \u2718 FAIL {check}: the summary the check gave", "dsv3-preflight's console (reports/console.py: the causes of a NO-GO)",
            actor=None)   # who acts is the preflight's word on each failure (its "who acts" line), not a guess per check
    return sig


_GATE_SIGNATURES: dict[str, Signature] = {}
GATE_SIGNATURES: tuple[Signature, ...] = tuple(gate_signature(c) for c in CHECK_CLASS)
#: the gate's closing line, or the launch log's verdict, without the causes above it
GATE_NO_GO = S(
    "preflight.no_go", GATE_CLASS, "cause", (b"NO-GO",),
    r"dsv3-preflight launch: NO-GO \((?P<why>[^)]*)\): torchrun not started(?:; report: (?P<report>\S+\.json)$)?"
    r"|^# preflight: NO-GO \(exit \d+; (?P<why2>[^)]*)\)",
    "The preflight said NO-GO ({why}): torchrun was not started",
    "The gate of `dsv3-preflight launch` stopped the launch: a check was FAIL or ERROR. Which one is not in these "
    "lines: the console printed the causes above its last line (\"Why NO-GO\"), each with who must act and its fix.",
    "[[dsv3-preflight doctor {report}    # the causes, who must act and the fixes, from the preflight's report"
    "||dsv3-preflight run    # the preflight again: each cause with its fix (--all-nodes, as for the launch)]]",
    None, 2, "dsv3-preflight launch: NO-GO (2 FAIL): torchrun not started; report: reports/preflight-20261124-092911-vm.json",
    "launch/gate.py (red_line)")


# Findings made from more than one line (dsv3_preflight.doctor.evidence, .flight_recorder, the triage): the same
# fields, so they are listed, documented and their fixes tested like the line signatures; the matcher never uses them.
DERIVED: tuple[Signature, ...] = (
    # an NCCL WARN no signature knows, printed before the run's first progress in its file: NCCL went on (a fatal
    # error ends its init: no "Init COMPLETE", no step after it), so the line is no failure (triage: _went_on)
    S("nccl.warned_then_progressed", None, "benign", (b"NCCL WARN",), r"NCCL WARN (?P<what>.+)",
      "NCCL warned, and the run went on: {what}",
      example="gpu1:123:456 [0] graph/xml.cc:420 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:00/../../0000:00:04.0",
      source="NCCL: a WARN that fails a call returns an error up to ncclCommInitRank / the collective, which then never "
             "reports Init COMPLETE nor lets the step finish"),
    # an error line no signature knows, printed before its file says the run succeeded (train_runtime, torchrun's
    # workers all exited 0), when every error of the logs was: the run survived it (triage: _survived)
    S("run.error_survived", None, "benign", (b"",), r"(?P<what>.+)",
      "An error line, and the run succeeded after it: {what}",
      example="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
      source="transformers Trainer (auto_find_batch_size catches the OOM and halves the batch); torchrun's restarts "
             "(--max-restarts) before '[default] worker group successfully finished'"),
    # two nodes' agents waiting for the global ranks of the same node rank (torchelastic/assigned_ranks/<N>), or two
    # waiting, as node rank 0, for every node's info: two nodes run with one --node-rank (triage: _derive)
    S("elastic.duplicate_node_rank", "pci_rank_dup", "cause", (b"torchelastic/",), r"torchelastic/",
      "Two nodes run with --node-rank {rank}: {nodes}",
      "torchrun numbers the nodes by --node-rank: {nodes} both took node rank {rank}, so its workers were started twice "
      "and a node rank nobody took was waited for until the rendezvous timed out. Had it passed, two processes would "
      "hold each of those global ranks (NCCL's 'Duplicate GPU detected', ranks that never meet).",
      "ps -eo args | grep -E '[t]orchrun|[t]orch[.]distributed[.]run'    # on each node: its --node-rank\n"
      "# every node a distinct --node-rank from 0 to NNODES-1, 0 on the node at --master-addr (Slurm: \"$SLURM_NODEID\"),\n"
      "# or let torchrun number them: --rdzv-backend c10d --rdzv-endpoint \"$MASTER_ADDR:$MASTER_PORT\" instead of --node-rank\n"
      "dsv3-preflight run --all-nodes --only cluster.node_rank", "cluster.node_rank", 0,
      "node1: ... keys: /none/torchelastic/assigned_ranks/1; node2: ... keys: /none/torchelastic/assigned_ranks/1",
      "torch/distributed/elastic/agent/server/api.py (_assign_worker_ranks: each agent waits for assigned_ranks/<its "
      "node rank>, node rank 0 for role_info/<every rank>); produced here (tests/test_doctor_netns.py)"),
    # every node's torchrun (two or more files) timed out connecting to the same c10d rendezvous endpoint: nobody
    # hosted the store. The C10d backend starts it only on the node whose host name resolves to the endpoint's
    # address (rendezvous/utils.py _matches_machine_hostname) unless --rdzv-conf is_host says so (triage: _derive)
    S("elastic.c10d_store_not_hosted", "port_rendezvous", "cause", (b"RendezvousConnectionError",), r"RendezvousConnectionError",
      "No node hosted the c10d rendezvous store at {host}:{port} ({nodes} all timed out connecting)",
      "Every node's torchrun timed out connecting to the rendezvous endpoint {host}:{port}, the node at that address "
      "among them if its log is here. torchrun's C10d backend starts the store only on the node whose host name "
      "resolves to the endpoint's address (torch's _matches_machine_hostname); when the endpoint is an IP address "
      "and that node's name resolves elsewhere (Debian and Ubuntu map it to 127.0.1.1 in /etc/hosts; a second "
      "NIC's address), no node hosts it and every node times out. A firewall on that port gives the same lines on "
      "the other nodes only: the node at {host} would then be waiting for them, not timing out.",
      "getent hosts \"$(hostname)\"    # on the node at {host}: the store is hosted only where this answers {host}\n"
      "# on that node only, add to its torchrun command: --rdzv-conf is_host=1 --local-addr {host}\n"
      "# (--local-addr also hands the workers {host} as MASTER_ADDR instead of the host name, which resolves the same way)\n"
      "# or map the host name to {host} in /etc/hosts on that node (Debian and Ubuntu map it to 127.0.1.1)\n"
      "nc -vz -w 3 {host} {port}    # from every node, once the store runs", "net.port_reach", 0,
      "node0, node1, node2: The client socket has timed out after 60000ms while trying to connect to (10.77.0.10, "
      "29531); torch.distributed.elastic.rendezvous.api.RendezvousConnectionError",
      "torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py (_create_tcp_store: is_host from the "
      "is_host config, else _matches_machine_hostname); produced here (tests/test_doctor_netns.py: the host name on "
      "127.0.1.1 on every node, --rdzv-endpoint the head's IP address)"),
    S("nccl.version_drift", "version_drift", "cause", (b"NCCL version",), r"NCCL version (?P<values>\S+)",
      "NCCL versions differ between nodes ({values})",
      "The nodes run different NCCL libraries (different containers, torch wheels or system NCCL): NCCL refuses to "
      "connect mismatched versions or hangs.", VERSIONS_FIX, "gpu.versions", 0,
      "node1:1234:1234 [0] NCCL INFO NCCL version 2.18.1+cuda12.1", "NCCL src/init.cc (showVersion) on each node"),
    S("cuda.driver_drift", "version_drift", "cause", (b"cudaDriverVersion",), r"cudaDriverVersion (?P<values>\d+)",
      "CUDA driver versions differ between nodes ({values})",
      "The nodes run different NVIDIA drivers; behaviour (and what CUDA they support) differs between ranks.",
      VERSIONS_FIX, "gpu.versions", 0,
      "node1:1234:1234 [0] NCCL INFO cudaDriverVersion 12020", "NCCL src/misc/cudawrap.cc"),
    S("nccl.plugin_drift", "version_drift", "cause", (b"NET/Plugin", b"Plugin Path"), r"NET/Plugin: (?P<values>.+)",
      "The NCCL net plugin differs between nodes ({values})",
      "Some nodes load a network plugin (libnccl-net.so: IB SHARP, AWS OFI) and others use NCCL's internal "
      "transports, so the ranks cannot agree on a network and the job hangs.",
      VERSIONS_FIX + "\n# or make the plugin path identical on every node (LD_LIBRARY_PATH, NCCL_NET_PLUGIN)", "gpu.versions", 0,
      "HGX-H100-11:18226:18274 [5] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
      "https://github.com/NVIDIA/nccl/issues/1634"),
    S("nccl.network_drift", "nccl_transport", "cause", (b"Using network",), r"Using network (?P<values>\S+)",
      "Nodes chose different NCCL networks ({values})",
      "Some nodes use InfiniBand/RoCE (or a plugin) and others fall back to sockets: the IB device or its driver is "
      "missing on those nodes (or hidden by NCCL_IB_DISABLE/NCCL_IB_HCA).",
      "ibv_devinfo | head; echo \"NCCL_IB_DISABLE=${NCCL_IB_DISABLE-} NCCL_IB_HCA=${NCCL_IB_HCA-}\"    # on each node\n" + ALLREDUCE_FIX,
      "dist.allreduce", 1,
      "node1:1234:1234 [0] NCCL INFO Using network IB", "NCCL src/init.cc"),
    S("ras.dead", "nccl_hang", "cause", (b"considered dead",), r"Process (?P<pid>\d+) on node (?P<node>\S+)",
      "NCCL RAS: process {pid} on node {node} is dead (unreachable)",
      "NCCL's RAS network lost this process: it crashed, was killed, or its node went down; the other ranks hang "
      "waiting for it. Its own log (or dmesg on that node) holds the cause.",
      "# on that node: dmesg -T | tail -50; and read that rank's own log for its first error\n" + ALLREDUCE_FIX,
      "dist.allreduce", 2,
      "  Process 323032 on node 10.0.0.7 managing GPU 4", "NCCL src/ras/client_support.cc (DEAD section)"),
    S("ras.incomplete", "nccl_hang", "cause", (b"Missing communicator data",), r"Rank (?P<rank>\d+) -- GPU \S+ managed by process (?P<pid>\d+) on node (?P<node>\S+)",
      "NCCL RAS: rank {rank} on node {node} does not respond",
      "RAS could not get this rank's communicator state: the process is stuck (not progressing NCCL) or gone. "
      "Its log holds the cause.",
      "# on that node: py-spy dump --pid the_pid_named_above; read that rank's own log\n" + ALLREDUCE_FIX,
      "dist.allreduce", 2,
      "  Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124", "NCCL src/ras/client_support.cc (INCOMPLETE)"),
    S("ras.mismatch", "nccl_hang", "cause", (b") MISMATCH",), r"Rank (?P<rank>\d+) -- GPU \S+ managed by process \d+ on node (?P<node>\S+)",
      "NCCL RAS: ranks are at different collective counts (rank {rank} on {node} is an outlier)",
      "The communicator's ranks launched different numbers of collectives: the outlier ranks are ahead or behind "
      "(a skipped or extra collective, a rank stuck in its data loader): the job hangs.",
      "export TORCH_DISTRIBUTED_DEBUG=DETAIL    # names the first mismatching collective\n" + ALLREDUCE_FIX,
      "dist.allreduce", 1,
      "  Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124", "https://github.com/NVIDIA/nccl/issues/1911 (after '#0-0 (fa93daea854b060b) MISMATCH')"),
    S("ras.rank_error", None, "symptom", (b" reported ",), r"Rank (?P<rank>\d+) reported (?P<error>.+?) --",
      "NCCL RAS: rank {rank} reported {error}",
      "RAS collected an NCCL error from this rank.", ALLREDUCE_FIX, "dist.allreduce", 4,
      "  Rank 3 reported remote process exited or there was a network error -- GPU 3 managed by process 77 on node n2",
      "NCCL src/ras/client_support.cc (rasClientBreakDownErrors)"),
    S("store.lost_after_start", None, "symptom", (b"lost after start",), r"lost after start",
      "The rendezvous store went away after the run had started",
      "The store answered at the start (the ranks rendezvoused and the run made progress), and later a rank or an "
      "agent lost its connection to it: the process hosting it (node rank 0's torchrun agent, or rank 0) exited or "
      "crashed first, or that node dropped off the network. Not a port or address problem: that node's own log holds "
      "the first failure.",
      "dmesg -T | tail -50    # on node rank 0, the store's host: an OOM kill or a crash at this time\n"
      "# then node rank 0's own log: its first error before this time is the cause",
      None, 4, "lost after start", "doctor (a store error after the run's progress)"),
    # `doctor --hung`: the user says the run hung; a log without an error is judged by the last phase it shows
    S("hang.after_progress", "nccl_hang", "cause", (b"hung after",), r"hung after (?P<shown>.+)",
      "The run hung after it made progress ({shown})",
      "The log shows the run working and then nothing, with no error: a collective never completed. A rank is stuck "
      "outside NCCL (data loading, a checkpoint written by one rank, a rank-dependent branch) or ranks issued "
      "different collectives; the watchdog (TORCH_NCCL timeout, 10-30 min) had not fired yet. A link so slow that "
      "a collective has not finished looks the same until the timeout fires.",
      "# on each node, while it hangs: where every rank waits\n"
      "py-spy dump --pid \"${RANK_PID:?pid of a training process}\"\n"
      "# next run: a flight recorder dump and a desync report when the watchdog fires\n"
      "export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_NCCL_DESYNC_DEBUG=1\n" + ALLREDUCE_FIX
      + "\ndsv3-preflight run --all-nodes --probe=pairs    # every pair of nodes: names a slow node or link",
      "dist.allreduce", 2, "hung after training loss lines", "doctor --hung (the user's statement and the log's last phase)"),
    S("hang.nccl_init", "nic_iface", "cause", (b"hung in NCCL init",), r"hung in NCCL init \((?P<world>\d+) ranks, (?P<hosts>\d+) host\(s\) in the log\)",
      "The run hung while NCCL connected its {world} ranks across nodes",
      "NCCL started (bootstrap, interface choice) and the log stops before 'Init COMPLETE', with no error: the "
      "connections between nodes never complete, which is what an interface other nodes cannot reach (or a "
      "firewall between the nodes on NCCL's ports) looks like.",
      "export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET    # the interface and address each rank uses\n" + IFACE_FIX,
      "net.nic_route", 2, "hung in NCCL init (16 ranks, 2 host(s) in the log)", "doctor --hung (the user's statement and the log's last phase)"),
    S("hang.nccl_init_one_node", "nccl_transport", "cause", (b"hung in NCCL init on one node",), r"hung in NCCL init on one node",
      "The run hung while NCCL connected the GPUs of one node",
      "NCCL started and the log stops before 'Init COMPLETE' on a job NCCL shows on one node, with no error: the "
      "intra-node transport (GPU peer-to-peer, or shared memory in a container) does not complete; PCIe ACS or an "
      "IOMMU blocking P2P is the usual cause.",
      "nvidia-smi topo -m\nexport NCCL_P2P_DISABLE=1    # confirms it when the run then starts\n" + ALLREDUCE_FIX,
      "dist.allreduce", 2, "hung in NCCL init on one node", "doctor --hung (the user's statement and the log's last phase)"),
    S("c10d.fingerprints_diverge", "nccl_hang", "suspect", (b"CollectiveFingerPrint",),
      r"\[Rank (?P<rank>\d+)\] Running collective: CollectiveFingerPrint\(SequenceNumber=(?P<seq>\d+)",
      "Ranks out of step: rank(s) {behind} last entered collective #{seq_behind} ({op_behind}), rank(s) {ahead} #{seq_ahead} ({op_ahead})",
      "With TORCH_DISTRIBUTED_DEBUG=DETAIL every rank logs each collective it enters. The log stops with rank(s) "
      "{behind} behind the others: they skipped or have not reached a collective the others entered (a "
      "rank-dependent branch, different metric keys logged per rank, uneven data, a rank stuck in data loading "
      "or I/O), so the others wait in it until the timeout. With several process groups, compare ranks of one "
      "group: each group counts its own collectives.",
      "# read what rank(s) {behind} did after collective #{seq_behind}: their own log lines, and their stacks while it hangs:\n"
      "py-spy dump --pid \"${PID:?pid of a rank that is behind}\"\n"
      "# every rank must issue the same collectives in the same order (no collective under 'if rank == 0', the same "
      "metric keys logged on every rank)", None, 2,
      "[I ProcessGroupWrapper.cpp:562] [Rank 1] Running collective: CollectiveFingerPrint(SequenceNumber=3, "
      "OpType=BROADCAST, TensorShape=[1], TensorDtypes=Long)",
      "torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp (runCollectiveChecks); "
      "https://github.com/Lightning-AI/pytorch-lightning/issues/19106", stall="any"),
    S("fr.rank_behind", "nccl_hang", "cause", (b"flight recorder",),
      r"rank (?P<rank>\d+) last collective #\d+, ranks (?P<ahead>\S+) at #(?P<seq>\d+) \((?P<op>[^)]+)\)",
      "Flight Recorder: rank {rank} never issued collective #{seq} ({op}) that ranks {ahead} entered",
      "The Flight Recorder dumps show this rank stopped issuing collectives before the others: it failed or is "
      "stuck outside NCCL (data loading, a crash, a different code path); the others time out waiting for it.",
      "# read rank {rank}'s own log and stack (py-spy dump); then:\n" + ALLREDUCE_FIX, "dist.allreduce", 2,
      "flight recorder: rank 1 last collective #3, ranks [0] at #4 (gloo:broadcast)", "torch.distributed.flight_recorder loader output"),
    S("fr.desync", "nccl_hang", "cause", (b"flight recorder",), r"at #(?P<seq>\d+)",
      "Flight Recorder: ranks issued different collectives at #{seq}",
      "At the same sequence number the ranks recorded different operations or sizes: the program is desynchronised.",
      "export TORCH_DISTRIBUTED_DEBUG=DETAIL    # then make every rank issue the same collectives\n" + ALLREDUCE_FIX,
      "dist.allreduce", 1,
      "flight recorder: at #4 rank 0: gloo:broadcast [[4]]; rank 1: gloo:all_reduce [[4]]", "torch.distributed.flight_recorder loader output"),
) + GATE_SIGNATURES + (GATE_NO_GO,)

# Lines that look like errors. A line matching no signature but this is an unrecognised error line: reported, never
# guessed at. (Benign signatures above come first; NCCL INFO and glog INFO lines are never error lines.)
ERROR_NEEDLES: tuple[bytes, ...] = (
    b"Error", b"error", b"ERROR", b"Exception", b"Traceback", b"FAIL", b"Fail", b"fail", b"WARN", b"Fatal", b"FATAL",
    b"fatal", b"terminate called", b"core dumped", b"Segmentation fault", b"Aborted", b"Killed", b"timed out",
    b"Timed out", b"exitcode", b"exit code", b"return code", b"refused", b"unreachable", b"CRITICAL", b"panic",
    b"[E", b"[F",   # glog's ERROR/FATAL prefix (torch's C++)
)
ERROR_RE = re.compile(
    r"Traceback \(most recent call last\)|(?:^|[\s\]:>('\"])(?:[A-Za-z_][\w.]*)?(?:Error|Exception)(?:_[A-Za-z]\w*)?\b(?=:|\s*$| \()"
    r"|\bERROR\b|\bFATAL\b|\bCRITICAL\b|\b[Ff]atal\b|NCCL WARN|\bWARN\b.*\b(?:[Ff]ail|[Ee]rror)"
    r"|terminate called|core dumped|Segmentation fault|\bAborted\b|\bKilled\b|\b(?:CUDA|[Cc]uda|NCCL) (?:error|failure)\b"
    r"|\b(?:failed|FAILED|Failed to)\b|\berror(?:[:=]| \d| code|s? occurred)|[Tt]imed out"
    r"|exit ?code:? ?-?[1-9]|return code = -?[1-9]|[Cc]onnection refused|unreachable|\bpanic\b"
    # glog's severity prefix, as torch's C++ prints ERROR and FATAL lines: [E socket.cpp:601], [F1229 20:37:13.09 X.cpp:1306]
    r"|\[[EF](?:\d{4} \d\d:\d\d:\d\d\.\d+)? ?\w[\w./-]*\.(?:cpp|cc|hpp|h):\d+\]"
)
# (torch's C++ INFO lines: glog's "I1124 00:14:01.93 123 x.cpp:9]" and c10's own "[I1124 00:14:01.939 socket.cpp:931]",
# "[I socket.cpp:480]": with TORCH_CPP_LOG_LEVEL=INFO the store's client prints "... not yet listening (errno: 111 -
# Connection refused), will retry" at INFO while it waits for the server: a retry, not an error)
QUIET_RE = re.compile(r"^" + LABELS + r"frame #\d+: |\bNCCL INFO\b|^" + LABELS + r"I\d{4} \d\d:\d\d"
                      r"|^" + LABELS + r"\[I(?:\d{4} \d\d:\d\d:\d\d\.\d+)? ?\w[\w./-]*\.(?:cpp|cc|hpp|h):\d+\]"
                      r"|\[INFO\]|(?<!=)\bINFO\b[ :|-]|UserWarning|FutureWarning|DeprecationWarning")

# First words that do not help tell causes apart (for "nearest known causes").
STOPWORDS = frozenset("""the a an of to in on for and or is was not no be by at with from this that it as are
    error errors failed failure warn warning info nccl torch rank ranks process line file call run""".split())


def by_id() -> dict[str, Signature]:
    return {s.id: s for s in SIGNATURES}
