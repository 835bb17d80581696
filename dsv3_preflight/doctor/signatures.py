"""The signature table: log patterns → failure class, root cause, fix and the preflight check that catches it.

A signature is data. To add one, append a ``Signature(...)`` to ``SIGNATURES`` with a real ``example`` line
(copied from a public issue thread or the library's source, named in ``source``); the parametrised test
``tests/test_doctor_signatures.py`` then proves the example is recognised by that signature and no earlier one.

Fields:
- ``needles``: literal byte strings, at least one of which must occur in a line for ``pattern`` to be tried.
  The reader scans big files for needles only (fast), then runs the full pattern on the cleaned line.
- ``pattern``: a Python regex searched in the cleaned line (ANSI codes stripped, one ``\\r`` segment). Named
  groups fill ``{name}`` placeholders in ``title``, ``root_cause`` and ``fix``.
- ``kind``: ``cause`` (a root cause), ``symptom`` (what other ranks print once something else failed),
  ``suspect`` (a cause only when the log also shows a failure, e.g. NCCL choosing ``lo``), ``healthy`` (a sign
  of a successful init), ``context`` (lines that attribute later lines: the torchrun failure summary).
- ``priority``: causal depth, lower is further upstream (CUDA init explains everything after it). Causes are
  ordered by priority, then by first appearance.
- ``check``: the preflight check that catches this before launch (``None`` for pure consequences).
- ``consequence_of``: ids of signatures that, when also present, explain this one (CUDA error 802 is the
  consequence of a Fabric Manager version mismatch); it is then listed as their consequence.

Table order matters: on one line the first matching signature wins, so specific entries precede general ones.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Pattern

CLASSES = ("cuda_init", "rank_mapping", "rendezvous", "nic_selection", "collective_timeout", "transport", "oom",
           "lora_save", "process_exit")
KINDS = ("cause", "symptom", "suspect", "healthy", "context")


@dataclass(frozen=True)
class Signature:
    id: str
    cls: str
    kind: str
    needles: tuple[bytes, ...]
    pattern: str
    title: str
    root_cause: str = ""
    fix: str = ""
    check: str | None = None
    priority: int = 50
    example: str = ""
    source: str = ""
    consequence_of: tuple[str, ...] = ()
    regex: Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.cls not in CLASSES and self.kind not in ("healthy", "context"):
            raise ValueError(f"signature {self.id}: unknown class {self.cls!r}")
        if self.kind not in KINDS:
            raise ValueError(f"signature {self.id}: unknown kind {self.kind!r}")
        if not self.needles:
            raise ValueError(f"signature {self.id}: needs at least one needle")
        object.__setattr__(self, "regex", re.compile(self.pattern))


S = Signature
FM_FIX = ("systemctl status nvidia-fabricmanager; journalctl -u nvidia-fabricmanager -b --no-pager | tail -20\n"
          "# install the Fabric Manager of exactly the driver version (nvidia-smi --query-gpu=driver_version --format=csv,noheader):\n"
          "apt-get install -y nvidia-fabricmanager-<branch>=<driver version>-1 && apt-mark hold nvidia-fabricmanager-<branch>\n"
          "systemctl enable --now nvidia-fabricmanager")

# The interface toward MASTER_ADDR: `ip route get $MASTER_ADDR` says `dev lo` on the head itself, so the preflight
# (which knows the head holds the address) is the first answer; the by-hand way differs on the head and the workers.
IFACE_HOWTO = ("dsv3-preflight run --only net.nic_route    # on each node: prints the exact exports for its interface\n"
               "# by hand: on a worker, the 'dev' of `ip route get $MASTER_ADDR`; on the head, the interface holding "
               "MASTER_ADDR: ip -br addr | grep -wF \"$MASTER_ADDR\"\n")

SIGNATURES: tuple[Signature, ...] = (
    # ---------------------------------------------------------------- CUDA init / Fabric Manager
    S("fabricmanager.version_mismatch", "cuda_init", "cause", (b"fabric manager NVIDIA GPU driver interface version",),
      r"fabric manager NVIDIA GPU driver interface version (?P<fm>\S+) do(?:n['’]t|esn['’]t) match with driver version (?P<driver>\d+(?:\.\d+)+)",
      "Fabric Manager {fm} does not match the driver {driver}",
      "nv-fabricmanager refuses to start when its version differs from the kernel driver's; without it the NVSwitch "
      "fabric is never configured and CUDA fails with error 802 (system not yet initialized).",
      FM_FIX.replace("<driver version>", "{driver}"), "gpu.cuda_init", 0,
      "Feb 24 09:28:28 ip-172-31-92-157 nv-fabricmanager[1507]: fabric manager NVIDIA GPU driver interface version "
      "535.183.01 don't match with driver version 535.230.02. Please update with matching NVIDIA driver package.",
      "https://github.com/NVIDIA/gpu-operator/issues/544 ; https://github.com/dstackai/dstack/issues/2348"),
    S("fabricmanager.service_failed", "cuda_init", "cause", (b"fabricmanager.service", b"fabric manager service"),
      r"nvidia-fabricmanager\.service: (?:Main|Control) process exited, code=\w+, status=(?P<status>[\w/]+)"
      r"|Failed to start NVIDIA fabric manager service",
      "nvidia-fabricmanager service failed",
      "The Fabric Manager service is not running, so the NVSwitch fabric is not configured and CUDA init fails "
      "with error 802 on every GPU of the node.", FM_FIX, "gpu.cuda_init", 0,
      "Nov 05 13:55:26 node1 systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited, status=1/FAILURE",
      "https://github.com/akash-network/website/pull/632",
      consequence_of=('fabricmanager.version_mismatch',)),
    S("cuda.error_802", "cuda_init", "cause", (b"system not yet initialized", b"cudaErrorSystemNotReady"),
      r"(?:Error 802: system not yet initialized|\(802\) : system not yet initialized|code=802\(cudaErrorSystemNotReady\)"
      r"|CUDA error: system not yet initialized|system not yet initialized)",
      "CUDA error 802: system not yet initialized",
      "On NVSwitch systems (HGX A100/H100) CUDA cannot initialise until nv-fabricmanager has configured the fabric: "
      "the service is missing, stopped, or its version differs from the driver's.", FM_FIX, "gpu.cuda_init", 1,
      "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
      "NumCudaDevices() that might have already set an error? Error 802: system not yet initialized",
      "https://github.com/huggingface/huggingface_hub/issues/4134 ; https://github.com/pytorch/pytorch/issues/35710",
      consequence_of=('fabricmanager.version_mismatch', 'fabricmanager.service_failed')),
    S("cuda.error_803", "cuda_init", "cause", (b"Error 803", b"unsupported display driver / cuda driver combination"),
      r"(?:Error 803: )?system has unsupported display driver / cuda driver combination",
      "CUDA error 803: unsupported display driver / cuda driver combination",
      "The user-space CUDA driver (libcuda.so, often a cuda-compat copy inside the container) is a different version "
      "from the loaded kernel module.",
      "cat /proc/driver/nvidia/version; ldconfig -p | grep libcuda.so\n"
      "# use the host's libcuda (nvidia-container-toolkit) or remove the cuda-compat directory from LD_LIBRARY_PATH",
      "gpu.cuda_init", 1,
      "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
      "NumCudaDevices() that might have already set an error? Error 803: system has unsupported display driver / cuda driver combination",
      "torch c10/cuda/CUDAFunctions.cpp message with cudaGetErrorString(803)"),
    S("cuda.error_804", "cuda_init", "cause", (b"forward compatibility was attempted",),
      r"(?:Error 804: )?forward compatibility was attempted on non supported HW",
      "CUDA error 804: forward compatibility was attempted on non supported HW",
      "The container's CUDA forward-compatibility libraries (cuda-compat) are newer than the host driver supports "
      "on this GPU.",
      "# upgrade the host driver to the container's CUDA branch, or drop /usr/local/cuda/compat from LD_LIBRARY_PATH",
      "gpu.cuda_init", 1,
      "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
      "NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW",
      "https://github.com/gpustack/gpustack/issues/1254"),
    # ---------------------------------------------------------------- rank → device mapping
    S("nccl.duplicate_gpu", "rank_mapping", "cause", (b"both on CUDA device",),
      r"rank (?P<rank_a>\d+) and rank (?P<rank_b>\d+) both on CUDA device (?P<busid>\w+)",
      "Duplicate GPU: rank {rank_a} and rank {rank_b} both on CUDA device {busid}",
      "Two ranks of one node opened the same GPU (bus id {busid}): LOCAL_RANK is not applied with "
      "torch.cuda.set_device, CUDA_VISIBLE_DEVICES is narrowed differently per process, or device ordering "
      "differs between processes/nodes.",
      "export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\n"
      "# in the script, before init_process_group: torch.cuda.set_device(int(os.environ['LOCAL_RANK']))",
      "gpu.rank_mapping", 10,
      "smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000",
      "https://github.com/horovod/horovod/issues/3929 ; https://github.com/NVIDIA/Megatron-LM/issues/661"),
    # ---------------------------------------------------------------- network interface selection
    S("nccl.no_socket_interface", "nic_selection", "cause", (b"no socket interface found",),
      r"Bootstrap ?: no socket interface found",
      "NCCL found no usable socket interface",
      "NCCL_SOCKET_IFNAME names an interface that does not exist on this node/container (or has no address of "
      "NCCL_SOCKET_FAMILY), so NCCL cannot bootstrap.",
      IFACE_HOWTO + "export NCCL_SOCKET_IFNAME=<that interface> GLOO_SOCKET_IFNAME=<that interface>",
      "net.nic_route", 20,
      "Bootstrap : no socket interface found",
      "https://github.com/EasonXiao-888/MambaTree/issues/14"),
    S("gloo.no_address_for_interface", "nic_selection", "cause", (b"Unable to find address for",),
      r"Unable to find address for:? (?P<iface>\S+)",
      "Gloo cannot find interface {iface}",
      "GLOO_SOCKET_IFNAME={iface} is not an interface of this node with an address (Gloo takes one concrete "
      "name, not NCCL's '^lo,docker' list syntax).",
      IFACE_HOWTO + "export GLOO_SOCKET_IFNAME=<that interface>",
      "net.nic_route", 20,
      "RuntimeError: [enforce fail at .../gloo/transport/tcp/device.cc:84] ifa != nullptr. Unable to find address for: ^lo",
      "https://github.com/aws-samples/aws-do-eks/pull/51"),
    S("nccl.no_interface_same_subnet", "nic_selection", "cause", (b"No interface found in the same subnet",),
      r"No interface found in the same subnet as remote address ?(?P<addr>\S*)",
      "NCCL found no interface in the same subnet as {addr}",
      "No local interface shares a subnet with the bootstrap address (NCCL_COMM_ID / master): the nodes are on "
      "different networks or the wrong interface is up.",
      IFACE_HOWTO + "export NCCL_SOCKET_IFNAME=<interface on the master's subnet>",
      "net.nic_route", 20,
      "misc/socket.cc:361 NCCL WARN Net : No interface found in the same subnet as remote address 10.136.80.18<43431>",
      "https://github.com/NVIDIA/nccl/issues/474"),
    S("gloo.connect_full_mesh", "nic_selection", "cause", (b"connectFullMesh failed",),
      r"Gloo connectFullMesh failed with (?P<detail>.*)",
      "Gloo could not connect the full mesh of ranks",
      "Gloo bound to an address the other nodes cannot reach (typically the hostname resolving to 127.0.1.1 or a "
      "docker/bridge interface), so its pairwise connections fail.",
      IFACE_HOWTO + "export GLOO_SOCKET_IFNAME=<that interface> NCCL_SOCKET_IFNAME=<that interface>",
      "net.nic_route", 22,
      "[rank4]:[E421 02:05:38.764490322 ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed with "
      "[../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
      "https://github.com/sgl-project/sglang/issues/3226 ; https://github.com/gpustack/gpustack/issues/2125"),
    S("nccl.loopback_selected", "nic_selection", "suspect", (b"Using lo:127.", b"]lo:127."),
      r"(?:Bootstrap|NET/Socket) ?: Using (?:\[\d+\])?lo:(?P<addr>127\.[\d.]+)",
      "NCCL selected the loopback interface lo ({addr})",
      "With only lo usable (or NCCL_SOCKET_IFNAME=lo), ranks on other nodes cannot reach this one: multi-node "
      "init hangs or times out.",
      IFACE_HOWTO + "export NCCL_SOCKET_IFNAME=<that interface>",
      "net.nic_route", 21,
      "axa:3048391:3048391 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>",
      "https://github.com/NVIDIA/nccl/pull/2047 ; https://github.com/NVIDIA/nccl/issues/1053"),
    # ---------------------------------------------------------------- rendezvous / ports
    S("c10d.address_in_use", "rendezvous", "cause", (b"Address already in use", b"EADDRINUSE"),
      r"failed to (?:bind to|listen on) \S*?:(?P<port>\d+) \(errno: 98 - Address already in use\)"
      r"|port: (?P<port2>\d+), useIpv6: \w+, code: -98, name: EADDRINUSE",
      "Rendezvous port {port} already in use",
      "Port {port} on the master is still held, usually by a leftover torchrun/python of the previous run or "
      "another job using the same MASTER_PORT.",
      "ss -ltnp 'sport = :{port}'    # find the holder\nkill <pid>    # after checking it is a leftover; or choose another MASTER_PORT",
      "net.port_free", 30,
      "[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:25641 (errno: 98 - Address already in use).",
      "https://github.com/hunto/DIST_KD/issues/10 ; https://github.com/deepspeedai/DeepSpeed/issues/3916"),
    S("c10d.numeric_hostname", "rendezvous", "cause", (b"network address of (", b"network addresses of (", b"::ffff:0."),
      r"network address(?:es)? of \((?P<host>\d+), (?P<port>\d+)\)|connect to \[::ffff:(?P<addr>0\.\d+\.\d+\.\d+)\]:(?P<port2>\d+)",
      "Hostname '{host}' is only digits and is read as an IP address",
      "getaddrinfo/inet_aton parse an all-digit hostname as a 32-bit IPv4 number (e.g. 6841231 → 0.104.99.143), "
      "so ranks connect to a nonsense address instead of the master.",
      "export MASTER_ADDR=$(getent ahostsv4 <master host> | awk 'NR==1{print $1}')    # use the IP, or a name with a letter",
      "net.port_reach", 31,
      "[E socket.cpp:753] [c10d] The client socket has failed to connect to any network address of (6841231, 47389).",
      "https://github.com/hpcaitech/Open-Sora/issues/667"),
    S("c10d.client_timeout", "rendezvous", "cause", (b"client socket has timed out", b"failed to connect/validate"),
      r"client socket has timed out after (?P<after>\S+) while trying to connect to \((?P<host>[^,]+), (?P<port>\d+)\)"
      r"|TCP client failed to connect/validate to host (?P<host2>[^:\s]+):(?P<port2>\d+) - timed out",
      "Cannot reach the rendezvous store at {host}:{port}",
      "Nothing answered on {host}:{port}: the master's agent had not started or died, MASTER_ADDR/PORT differ "
      "between nodes, or a firewall/security group drops the port.",
      "nc -vz -w 3 {host} {port}    # from every node, while the master is listening\n"
      "# open the port between the nodes; use the same MASTER_ADDR/MASTER_PORT everywhere",
      "net.port_reach", 32,
      "[E socket.cpp:793] [c10d] The client socket has timed out after 1800s while trying to connect to (127.0.0.1, 48391).",
      "https://github.com/lllyasviel/ControlNet/issues/382 ; https://github.com/vllm-project/vllm/issues/19670",
      consequence_of=('c10d.numeric_hostname',)),
    S("c10d.client_connect_failed", "rendezvous", "cause", (b"client socket has failed to connect",),
      r"client socket has failed to connect to (?P<target>\S+?)\.? \(errno: (?P<errno>\d+) - (?P<err>[^)]*)\)",
      "Cannot connect to the rendezvous store {target} ({err})",
      "The store address {target} refused or dropped the connection ({err}): wrong MASTER_ADDR/PORT, the master "
      "is not listening yet, or a firewall.",
      "nc -vz -w 3 $MASTER_ADDR $MASTER_PORT    # from every node",
      "net.port_reach", 33,
      "[W socket.cpp:697] [c10d] The client socket has failed to connect to 0.104.99.143:47389 (errno: 110 - Connection timed out).",
      "https://github.com/hpcaitech/Open-Sora/issues/667",
      consequence_of=('c10d.numeric_hostname',)),
    S("elastic.rendezvous_connection", "rendezvous", "cause", (b"RendezvousConnectionError",),
      r"RendezvousConnectionError: The connection to the C10d store has failed",
      "torchrun could not connect to the C10d rendezvous store",
      "The rendezvous endpoint (--rdzv-endpoint / MASTER_ADDR:MASTER_PORT) is unreachable from this node.",
      "nc -vz -w 3 $MASTER_ADDR $MASTER_PORT    # from every node",
      "net.port_reach", 34,
      "\"message\": \"RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.\",",
      "https://github.com/pytorch/pytorch/issues/79388",
      consequence_of=('c10d.client_timeout', 'c10d.client_connect_failed', 'c10d.numeric_hostname', 'c10d.address_in_use')),
    S("c10d.ipv6_lookup", "rendezvous", "suspect", (b"cannot be retrieved (gai error",),
      r"The IPv6 network addresses of \((?P<host>[^,]+), (?P<port>\d+)\) cannot be retrieved \(gai error: (?P<gai>-?\d+) - (?P<msg>[^)]*)\)",
      "Name lookup of {host} failed ({msg})",
      "The master hostname {host} does not resolve on this node (an IPv6 miss alone is harmless; it matters when "
      "the connection then fails).",
      "getent hosts {host}    # on every node; or set MASTER_ADDR to the master's IP",
      "net.port_reach", 35,
      "[W socket.cpp:601] [c10d] The IPv6 network addresses of (localhost, 51595) cannot be retrieved (gai error: -2 - Name or service not known).",
      "https://github.com/antgroup/animate-x/issues/15"),
    # ---------------------------------------------------------------- host resources
    S("nccl.shm_no_space", "transport", "cause", (b"/dev/shm/", b"posix_fallocate failed", b"shared memory segment"),
      r"failed to extend (?P<path>/dev/shm/\S+) to (?P<size>\d+) bytes"
      r"|Error while creating shared memory segment (?P<path2>\S+) \(size (?P<size2>\d+)\)"
      r"|posix_fallocate failed : No space left on device",
      "NCCL could not allocate shared memory in /dev/shm",
      "/dev/shm is too small for NCCL's intra-node buffers (docker's default is 64 MB) or full of stale "
      "segments of earlier runs.",
      "df -h /dev/shm; ls /dev/shm | head\n"
      "docker run --ipc=host ...   # or --shm-size=16g; remove stale /dev/shm/nccl-* of dead runs",
      "host.resources", 40,
      "ubuntu:9621:9691 [6] misc/shmutils.cc:71 NCCL WARN Error: failed to extend /dev/shm/nccl-fjwOOB to 5967876 bytes",
      "https://github.com/NVIDIA/nccl-tests/issues/166 ; https://github.com/pytorch/ci-infra/pull/490"),
    # ---------------------------------------------------------------- out of memory
    S("cuda.out_of_memory", "oom", "cause", (b"CUDA out of memory",),
      r"CUDA out of memory\. Tried to allocate (?P<size>[\d.]+ [KMGT]?i?B)(?:.*?GPU (?P<gpu>\d+))?",
      "CUDA out of memory (tried to allocate {size})",
      "A rank ran out of GPU memory; with ZeRO-3 the usual reasons are too large micro-batch/sequence, buckets "
      "(reduce_bucket_size, stage3_prefetch_bucket_size) too big, or another process holding GPU memory.",
      "nvidia-smi --query-compute-apps=pid,used_memory --format=csv    # nothing else on the GPUs\n"
      "# lower per_device_train_batch_size / max length, stage3_max_live_parameters, bucket sizes; or enable offload_param/offload_optimizer",
      "host.resources", 45,   # catches the leftover process holding GPU memory (batch sizes no check can judge)
      "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.39 GiB. GPU 1 has a total capacity of "
      "79.32 GiB of which 2.40 GiB is free.",
      "https://github.com/hiyouga/LlamaFactory/issues/7532"),
    S("host.oom_killer", "oom", "cause", (b"Out of memory: Killed process", b"Signal 9 (SIGKILL)"),
      r"Out of memory: Killed process (?P<pid>\d+) \((?P<comm>[^)]*)\)|Signal 9 \(SIGKILL\) received by PID (?P<pid2>\d+)",
      "Rank process killed by SIGKILL (host out of memory?)",
      "A rank was killed with SIGKILL, most often by the kernel OOM killer: host RAM exhausted by CPU offload, "
      "pinned memory or dataloader workers (check dmesg on that node).",
      "dmesg -T | grep -i -E 'out of memory|killed process'; free -g\n"
      "# reduce offload (pin_memory), preprocessing_num_workers, or give the container more memory",
      "host.resources", 46,
      "  traceback : Signal 9 (SIGKILL) received by PID 14750",
      "https://github.com/lzhxmu/CPPO/issues/6 ; kernel mm/oom_kill.c 'Out of memory: Killed process %d (%s)'"),
    # ---------------------------------------------------------------- transport errors
    S("nccl.ib_completion_error", "transport", "cause", (b"Got completion from peer",),
      r"NET/IB ?: Got completion from peer (?P<peer>\S+) with (?:error |status=)(?P<status>\d+)",
      "InfiniBand completion error (status {status}) from peer {peer}",
      "An RDMA work request failed (status 12 = transport retry counter exceeded: the link or the peer became "
      "unreachable; status 5 = flushed after an earlier error). A flapping link, wrong NCCL_IB_HCA / GID index, "
      "or the peer process dying.",
      "ibstat; ibv_devinfo | grep -E 'state|link_layer'    # on both nodes\n"
      "# set NCCL_IB_HCA / NCCL_IB_GID_INDEX (RoCE); NCCL_IB_DISABLE=1 confirms by falling back to sockets",
      "dist.allreduce", 50,
      "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
      "10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
      "https://github.com/NVIDIA/nccl/issues/1405 ; https://github.com/NVIDIA/nccl/issues/928"),
    # ---------------------------------------------------------------- LoRA / ZeRO-3 save
    S("peft.target_modules_not_found", "lora_save", "cause", (b"not found in the base model",),
      r"Target modules (?P<mods>.+?) not found in the base model",
      "LoRA target modules {mods} not found in the base model",
      "The names in lora_target do not exist in this model (DeepSeek-V3 attention has q_a_proj, q_b_proj, "
      "kv_a_proj_with_mqa, kv_b_proj, o_proj; there is no q_proj/k_proj/v_proj).",
      "--lora_target q_a_proj,q_b_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj",
      "lora.targets", 55,
      "ValueError: Target modules {'q_proj', 'v_proj'} not found in the base model. Please check the target modules and try again.",
      "https://github.com/linhduongtuan/BLOOM-LORA/issues/15"),
    S("lora.empty_tensor_on_load", "lora_save", "cause", (b"torch.Size([0]) from checkpoint",),
      r"size mismatch for (?P<param>\S+): copying a param with shape torch\.Size\(\[0\]\) from checkpoint",
      "Saved LoRA tensors are empty (shape [0]), e.g. {param}",
      "The adapter was saved under ZeRO-3 without gathering the partitioned parameters, so rank 0 wrote the "
      "empty placeholders of shape [0].",
      "\"zero_optimization\": {\"stage3_gather_16bit_weights_on_model_save\": true}    # in the DeepSpeed config\n"
      "# save with trainer.save_model() on all ranks, or gather with deepspeed.zero.GatheredParameters before get_peft_model_state_dict",
      "lora.deepspeed_config", 56,
      "\tsize mismatch for base_model.model.model.layers.0.mlp.gate_proj.lora_B.default.weight: copying a param with "
      "shape torch.Size([0]) from checkpoint, the shape in current model is torch.Size([11008, 8]).",
      "https://github.com/huggingface/peft/issues/2500 ; https://github.com/OpenRLHF/OpenRLHF/issues/651"),
    S("safetensors.bad_header", "lora_save", "cause", (b"Error while deserializing header",),
      r"Error while deserializing header: (?P<err>\w+)",
      "safetensors file unreadable: {err}",
      "The .safetensors file is truncated, empty or not a safetensors file ({err}): a save interrupted by a "
      "crash or a full disk, or a Git LFS pointer instead of the weights.",
      "ls -l <dir>/*.safetensors; head -c 8 <file> | od -An -tu8    # header length must be < file size\n"
      "# re-save the adapter (dsv3-preflight run --only 'lora.scan' lists the broken files)",
      "lora.scan", 57,
      "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
      "https://github.com/huggingface/diffusers/issues/5520 ; https://github.com/lyogavin/airllm/issues/137"),
    # ---------------------------------------------------------------- consequences (noise on the other ranks)
    S("nccl.watchdog_timeout", "collective_timeout", "symptom", (b"Watchdog caught collective operation timeout",),
      r"Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)"
      r".*?Timeout\(ms\)=(?P<timeout>\d+)\) ran for (?P<ran>\d+) milliseconds",
      "Collective {op} (SeqNum {seq}) timed out after {timeout} ms",
      "Some rank never entered {op} #{seq}: it crashed or is stuck elsewhere (see the first error on another "
      "rank), or NCCL's data connections between nodes are blocked.",
      "# find the rank that did not reach SeqNum {seq} (first error above); verify the data path before launch:\n"
      "dsv3-preflight run --only 'dist.allreduce'",
      "dist.allreduce", 80,
      "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
      "timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, "
      "Timeout(ms)=600000) ran for 600061 milliseconds before timing out.",
      "https://github.com/hiyouga/LlamaFactory/issues/6269"),
    S("nccl.remote_error", "transport", "symptom", (b"ncclRemoteError", b"remote process exited or there was a network error"),
      r"ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely"
      r"|remote process exited or there was a network error",
      "NCCL remote error: a peer exited or the network failed",
      "A peer rank exited (see its own first error) or the inter-node network dropped the connection.",
      "dsv3-preflight run --only 'dist.allreduce'", "dist.allreduce", 81,
      "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely.",
      "https://github.com/NVIDIA/nccl/issues/2076 ; https://github.com/NVIDIA/nccl/issues/934"),
    S("nccl.connection_closed", "transport", "symptom", (b"Connection closed by remote peer", b"Call to recv from"),
      r"Connection closed by remote peer (?P<peer>\S+)|Call to recv from (?P<peer2>\S+) failed ?: (?P<err>.+)",
      "Socket to peer {peer} closed",
      "The peer's process went away (crash, OOM kill) or the connection was reset by the network.",
      "dsv3-preflight run --only 'dist.allreduce'", "dist.allreduce", 82,
      "a100-st-p4d24xlarge-22:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv from 10.200.84.247<58355> failed : Broken pipe",
      "https://github.com/NVIDIA/nccl/issues/795"),
    S("elastic.worker_failed", "process_exit", "symptom", (b"failed (exitcode:",),
      r"failed \(exitcode: (?P<exitcode>-?\d+)\) local_rank: (?P<local_rank>\d+) \(pid: (?P<pid>\d+)\)",
      "torchrun worker local_rank {local_rank} exited with code {exitcode}",
      "torchrun saw a worker exit; the worker's own error above is the cause.", "", None, 90,
      "[2024-05-08 08:47:31,877] torch.distributed.elastic.multiprocessing.api: [ERROR] failed (exitcode: 1) "
      "local_rank: 2 (pid: 5939) of binary: /home/ubuntu/anaconda3/envs/salience_detr/bin/python",
      "https://github.com/xiuqhou/Salience-DETR/issues/4"),
    S("elastic.child_failed", "process_exit", "symptom", (b"ChildFailedError",),
      r"ChildFailedError",
      "torchrun: a child process failed (ChildFailedError)",
      "torchrun's summary of a failed worker; its 'Root Cause (first observed failure)' block names the rank.",
      "", None, 91,
      "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
      "https://github.com/hiyouga/LlamaFactory/issues/7032"),
    # ---------------------------------------------------------------- context and health
    S("elastic.summary_field", "process_exit", "context", (b"  host      : ", b"  rank      : "),
      r"^\s*(?P<field>host|rank)\s+: (?P<value>\S+)(?: \(local_rank: (?P<local_rank>\d+)\))?",
      "torchrun failure summary field", example="  rank      : 0 (local_rank: 0)",
      source="https://github.com/hiyouga/LlamaFactory/issues/7032"),
    S("nccl.init_complete", "transport", "healthy", (b"Init COMPLETE",),
      r"comm 0x[0-9a-f]+ rank (?P<rank>\d+) nranks (?P<nranks>\d+) .*Init COMPLETE",
      "NCCL communicator initialised",
      example="simple-layoutlm:97:176 [0] NCCL INFO comm 0x7ff1ec001060 rank 0 nranks 2 cudaDev 0 busId 100000 - Init COMPLETE",
      source="https://github.com/huggingface/transformers/issues/11658"),
    S("hf.running_training", "transport", "healthy", (b"Running training",),
      r"\*+ Running training \*+", "HF Trainer started training",
      example="[INFO|trainer.py:2409] 2025-09-02 20:12:55,418 >> ** Running training **",
      source="/work/shared/seeds/001 (the users' own successful launch)"),
    S("deepspeed.zero_offload_ready", "transport", "healthy", (b"DeepSpeedZeRoOffload initialize [end]",),
      r"DeepSpeedZeRoOffload initialize \[end\]", "DeepSpeed ZeRO-3 initialised",
      example="DeepSpeedZeRoOffload initialize [end] ... MA 39.45 GB, CA ~71 GB",
      source="/work/shared/seeds/003 (the users' own successful init)"),
    S("hf.train_runtime", "transport", "healthy", (b"'train_runtime'",),
      r"'train_runtime': (?P<seconds>[\d.]+)", "training finished",
      example="{'train_runtime': 1234.5, 'train_samples_per_second': 3.1, 'train_steps_per_second': 0.1, 'train_loss': 1.2, 'epoch': 1.0}",
      source="transformers Trainer.train() metrics log"),
)

# Lines that look like errors but match no signature: reported as unrecognised, never guessed at.
# (A "Traceback" line itself is not counted: the exception line at its end is.)
UNRECOGNISED_NEEDLES: tuple[bytes, ...] = (b"NCCL WARN", b"Error: ", b"Exception: ")
UNRECOGNISED_RE = re.compile(r"NCCL WARN|(?:^|[\]:>]\s*)[A-Za-z_][\w.]*(?:Error|Exception): ")


def by_id() -> dict[str, Signature]:
    return {s.id: s for s in SIGNATURES}
