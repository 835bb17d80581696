"""``nccl_transport``: NCCL's data transport (InfiniBand/RoCE, /dev/shm, P2P/NVLink).

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from ...gpu.xid_rules import NVLINK_XIDS
from .record import S, Signature
from .shared import ALLREDUCE_FIX, SHM_FIX, VERSIONS_FIX, one_of

SIGNATURES: tuple[Signature, ...] = (
    # NCCL 2.16+ sends its socket's type after the magic (include/socket.h: 3 = the socket transport, 4 = IB's
    # out-of-band socket): a peer of type 4 at a listener of type 3 (or the reverse) runs the other network
    S(id="nccl.socket_type_mismatch", cls="nccl_transport", kind="cause", needles=(b"socketFinalizeAccept",),
      pattern=r"socketFinalizeAccept(?: from \S+?)?: wrong type (?P<got>[34]) != (?P<want>[34])\b",   # 2.27+: "from <peer>"
      title="Ranks chose different NCCL networks (a peer's connection of type {got} at a listener of type {want}; "
      "3 = sockets, 4 = InfiniBand)",
      root_cause="NCCL's connection handshake carries the transport: type 3 is the TCP socket transport, type 4 InfiniBand/"
      "RoCE's. This rank and the peer that connected chose different networks: the IB device, its driver "
      "(rdma-core, libibverbs) or a net plugin is missing on some nodes, or NCCL_IB_DISABLE / NCCL_NET / "
      "NCCL_IB_HCA differ between them.",
      fix="ibv_devinfo | head; echo \"NCCL_IB_DISABLE=${NCCL_IB_DISABLE-} NCCL_NET=${NCCL_NET-} NCCL_IB_HCA=${NCCL_IB_HCA-}\"    # on each node: the same everywhere\n"
      + ALLREDUCE_FIX, check="dist.allreduce", tier=1,
      example="user:16899:16961 [0] misc/socket.cc:441 NCCL WARN socketFinalizeAccept: wrong type 4 != 3",
      source="https://github.com/NVIDIA/nccl-tests/issues/188 (NCCL 2.16+ src/misc/socket.cc socketFinalizeAccept, 2.27+ "
      "'socketFinalizeAccept from 10.1.0.2<43017>: wrong type 4 != 3'; "
      "src/include/socket.h ncclSocketType)"),
    S(id="nccl.shm_no_space", cls="nccl_transport", kind="cause", needles=(b"/dev/shm/nccl", b"posix_fallocate failed", b"shared memory segment",
                                                                          b"shmutils", b"nccl-shm", b"Call to shm_open failed"),
      pattern=r"failed to extend (?P<path>/dev/shm/\S+) to (?P<size>\d+) bytes|Error while (?:creating|attaching to) shared memory segment (?P<path2>\S+)"
      r"|posix_fallocate failed ?: No space left on device|shmutils\.cc:\d+ NCCL WARN"
      r"|(?:include/)?shm\.h:\d+ NCCL WARN Call to shm_open failed",  # NCCL <= 2.11 include/shm.h
      title="NCCL could not allocate shared memory in /dev/shm",
      root_cause="/dev/shm is too small for NCCL's intra-node buffers (docker's default is 64 MB) or full of stale segments, or "
      "ranks NCCL sees on one host do not share /dev/shm (containers without --ipc=host).",
      fix=SHM_FIX, check="host.resources", tier=1,
      example="ubuntu:9621:9691 [6] misc/shmutils.cc:71 NCCL WARN Error: failed to extend /dev/shm/nccl-fjwOOB to 5967876 bytes",
      source="https://github.com/NVIDIA/nccl-tests/issues/166 (NCCL src/misc/shmutils.cc)"),
    S(id="nccl.ib_gid_unreadable", cls="nccl_transport", kind="cause", needles=(b"ncclIbRoceGetVersionNum",),
      pattern=r"NET/IB ?: (?:read|open) failed in ncclIbRoceGetVersionNum: (?P<err>.+?)\s*$"
      r"|Check failed: ncclIbRoceGetVersionNum",
      title="The RoCE version of an RDMA GID could not be read[[ ({err})]]",
      root_cause="NCCL's IB transport (and libraries built on its code) reads the RoCE version of each GID index from "
      "/sys/class/infiniband/HCA/ports/PORT/gid_attrs/types/INDEX to pick one. The read failed: in a container the "
      "host's GID indexes are often not mapped into the container's sysfs (EINVAL), or the index holds no GID. "
      "Newer NCCL skips such an index; older NCCL and code copied from it abort.",
      fix="grep -H . /sys/class/infiniband/*/ports/*/gid_attrs/types/* 2>&1 | head -40    # each GID index and its RoCE version\n"
      "export NCCL_IB_GID_INDEX=${GID_INDEX:?a GID index that reads RoCE v2 on every node, e.g. 3}\n" + ALLREDUCE_FIX,
      check="dist.allreduce", tier=1,
      example="W20250825 11:10:33.595331   331 util_rdma.h:547] NET/IB: read failed in ncclIbRoceGetVersionNum: Invalid argument",
      source="NCCL src/transport/net_ib.cc (WARN 'NET/IB: read failed in ncclIbRoceGetVersionNum: %s'); UCCL util_rdma.h"),
    S(id="nccl.ib_completion_error", cls="nccl_transport", kind="cause", needles=(b"Got completion from peer", b"Got completion with error",
                                                                                 b"IBV_WC_", b"retry counter exceeded", b"Retry count exceeded"),
      pattern=r"NET/IB ?: Got completion (?:from peer (?P<peer>\S+) )?with (?:error |status=)(?P<status>\d+)"
      r"|IBV_WC_\w+_ERR|[Tt]ransport retry counter exceeded|Retry count exceeded",
      title="InfiniBand/RoCE completion error[[ (status {status})]][[ from peer {peer}]]",
      root_cause="An RDMA work request failed (12 = transport retry counter exceeded: the link or peer became unreachable; "
      "4 = local protection error; 5 = flushed after an earlier error): a flapping link, a wrong NCCL_IB_HCA or "
      "GID index, rail/cross-NIC wiring NCCL does not expect, or the peer process dying.",
      fix="ibstat; ibv_devinfo | grep -E 'state|link_layer'    # on both nodes\n"
      "# set NCCL_IB_HCA / NCCL_IB_GID_INDEX (RoCE), try NCCL_CROSS_NIC=0; NCCL_IB_DISABLE=1 confirms by falling back to sockets\n"
      + ALLREDUCE_FIX, check="dist.allreduce", tier=1,
      example="kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.216.210.236<54862> "
      "with status=12 opcode=0 len=0 vendor err 129 (Recv)",
      source="https://github.com/NVIDIA/nccl/issues/1405 (NCCL src/transport/net_ib.cc)"),
    # the fabric's own events, as NCCL's async thread reports them (ibv_get_async_event): a port that goes down, again and
    # again, is a flapping link; the subnet manager reassigning LIDs is the fabric's too. The network's administrator acts
    S(id="nccl.ib_port_event", cls="nccl_transport", kind="cause", needles=(b"Got async event",),
      pattern=r"(?:NET/IB ?: (?:\S+:\d+ )?|\bIB )Got async event ?: (?P<event>port error|LID change|SM change|client reregistration)",
      title="An InfiniBand/RoCE port changed state during the run ({event})",
      root_cause="NCCL's RDMA device reported '{event}': the link of that port went down (a 'port error' again and again is a "
      "flapping link: a cable, a transceiver or a switch port) or the subnet manager changed the fabric under the job. "
      "Transfers over it fail or stall; the collectives' errors and timeouts follow from it.",
      fix="ibstat | grep -E 'CA |State|Physical state|Rate'    # on the node that reports it: each port Active / LinkUp at its rate\n"
      "ibqueryerrors    # the fabric's error counters (symbol errors, link downed), from a node with the IB tools\n"
      "# a port that keeps going down: have its cable, transceiver and switch port checked; drain the node meanwhile\n"
      + ALLREDUCE_FIX,
      check="dist.allreduce", tier=1,
      example="gpu-a:1:2 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got async event : port error",
      source="NCCL src/transport/net_ib.cc (ncclIbAsyncThreadMain: 'NET/IB : Got async event : %s'; net_ib forks of later "
      "releases name the device and port first, 'NET/IB : %s:%d Got async event : %s'; NCCL 2.3's 'IB Got async event'); "
      "https://github.com/NVIDIA/nccl/issues/905 (the maintainer: a log full of port errors is a flapping link)"),
    S(id="nccl.ibv_call_failed", cls="nccl_transport", kind="cause", needles=(b"Call to ibv_", b"ibv_modify_qp", b"ibv_create_qp", b"ibv_reg_mr",
                                                                             b"ibv_open_device", b"Got async event", b"ibv_post_"),
      pattern=r"Call to (?P<call>ibv_\w+) failed|(?P<call2>ibv_(?:modify_qp|create_qp|reg_mr|reg_dmabuf_mr|open_device|create_cq)) failed"
      r"|NET/IB ?: Got async event ?: (?P<event>.+)"
      # the verbs queue is full (ENOMEM here is not host RAM); polling the completion queue failed
      r"|(?P<call3>ibv_post_(?:send|recv))\(\) failed|Call to (?P<call4>ibv_poll_cq)\(\) returned",
      title="InfiniBand/RoCE setup failed[[ ({call})]]",
      root_cause="The RDMA device refused a queue-pair or memory-registration call: port down, wrong GID index (RoCE), "
      "rail-only wiring with NCCL crossing NICs, or the memlock ulimit too low for ibv_reg_mr.",
      fix="ibstat; ibv_devinfo | grep -E 'state|link_layer'; ulimit -l    # memlock must be unlimited\n"
      "# set NCCL_IB_HCA / NCCL_IB_GID_INDEX for RoCE, try NCCL_CROSS_NIC=0\n" + ALLREDUCE_FIX,
      check="dist.allreduce", tier=1,
      example="machine1:196207:196244 [0] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error Invalid argument",
      source="https://github.com/NVIDIA/nccl/issues/622 (NCCL src/misc/ibvwrap.cc)"),
    S(id="nccl.p2p_failure", cls="nccl_transport", kind="cause", needles=(b"peer access is not supported", b"CUDA IPC", b"cudaIpc", b"failed to peer with device",
                                                                         b"PeerAccessUnsupported", b"P2P/IPC"),
      pattern=r"peer access is not supported between these two devices|failed to (?:open|get) CUDA IPC handle|cudaIpc\w+ failed"
      r"|failed to peer with device|cudaErrorPeerAccessUnsupported|P2P/IPC.*(?:fail|error)",
      title="GPU peer-to-peer (P2P/IPC) access failed",
      root_cause="NCCL tried direct GPU-to-GPU access that this topology or virtualisation does not allow (PCIe ACS, IOMMU, "
      "VMs, consumer GPUs).",
      fix="nvidia-smi topo -m\nexport NCCL_P2P_DISABLE=1    # confirms it: NCCL falls back to shared memory\n" + ALLREDUCE_FIX,
      check="dist.allreduce", tier=1,
      example="z-pc:909608:910337 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer access is not supported between these two devices",
      source="https://github.com/ray-project/ray_lightning/issues/24 (NCCL src/transport/p2p.cc)"),
    S(id="nccl.no_transport", cls="nccl_transport", kind="cause", needles=(b"No transport found",),
      pattern=r"No transport found(?: for rank (?P<rank_a>\d+)\[\w+\] -> rank (?P<rank_b>\d+))?",
      title="NCCL found no transport between two ranks[[ ({rank_a} -> {rank_b})]]",
      root_cause="None of P2P, shared memory and the network accepted this pair of ranks: usually two ranks on one node with "
      "NCCL_P2P_DISABLE and NCCL_SHM_DISABLE set while the network transport is not allowed within the node.",
      fix="env | grep -E '^NCCL_(P2P|SHM|NET)_DISABLE|^NCCL_NET_DISABLE_INTRA'    # unset what disables every path\n" + ALLREDUCE_FIX,
      check="dist.allreduce", tier=1,
      example="gpu-node07:24817:24901 [3] transport.cc:38 NCCL WARN No transport found for rank 3[1a000] -> rank 11[1a000]",
      source="NCCL src/transport.cc (selectTransport, format strings 2.4-2.30)"),
    S(id="nccl.net_not_found", cls="nccl_transport", kind="cause", needles=(b"Error: network ",),
      pattern=r"Error: network (?P<net>\S+) not found",
      title="NCCL_NET names network {net}, which this node does not have",
      root_cause="NCCL_NET selects a network transport (IB, Socket or a plugin's) that is not loaded on this node: the plugin or "
      "the InfiniBand libraries are missing here.",
      fix="echo \"NCCL_NET=${NCCL_NET-}\"; ls /usr/lib/x86_64-linux-gnu/libibverbs.so* 2>/dev/null\n"
      "unset NCCL_NET    # let NCCL choose, or install the plugin on every node\n" + VERSIONS_FIX, check="gpu.versions", tier=1,
      example="gpu-node07:24817:24901 [3] net.cc:285 NCCL WARN Error: network IB not found.",
      source="NCCL src/net.cc (format string 2.10-2.30)"),
    S(id="nccl.net_device_count_mismatch", cls="nccl_transport", kind="cause", needles=(b"Detected mixed local Net device counts",),
      pattern=r"Detected mixed local Net device counts across ranks \(min (?P<min>\d+), max (?P<max>\d+)\)",
      title="The ranks see different numbers of network devices ({min} to {max})",
      root_cause="NCCL 2.30 compares how many network devices (InfiniBand/RoCE ports) each rank found and stops when they differ: "
      "on some node a port is down, a driver did not load, or NCCL_IB_HCA selects differently. NCCL's INFO lines "
      "'Rank N has M local Net devices' name the ranks short of devices.",
      fix="ibstat | grep -E 'CA |State|Rate'    # on every node: each port Active at the same rate\n"
      "echo \"NCCL_IB_HCA=${NCCL_IB_HCA-}\"    # the same on every node\n" + ALLREDUCE_FIX, check="dist.allreduce", tier=1,
      example="gpu-a:4101:4190 [0] init.cc:1339 NCCL WARN Detected mixed local Net device counts across ranks (min 4, max 8). "
      "Set NCCL_IGNORE_NET_MISMATCH=1 to continue.",
      source="NCCL src/init.cc (2.30: WARN and ncclSystemError unless NCCL_IGNORE_NET_MISMATCH)"),
    S(id="nccl.p2p_disabled_nvlink", cls="nccl_transport", kind="cause", needles=(b"P2P is disabled between NVLINK connected GPUs",),
      pattern=r"P2P is disabled between NVLINK connected GPUs (?P<gpu_a>\d+) and (?P<gpu_b>\d+)",
      title="P2P is off between NVLink-connected GPUs {gpu_a} and {gpu_b}",
      root_cause="The GPUs are NVLink-connected but the driver reports no peer-to-peer access between them: on NVSwitch systems "
      "(HGX/DGX) Fabric Manager not running or not matching the driver, otherwise NVLink links that are down, or "
      "a hardware fault. NCCL refuses to go on rather than run slowly over PCIe.",
      fix="nvidia-smi nvlink -s; nvidia-smi topo -p2p r\n"
      "systemctl status nvidia-fabricmanager --no-pager    # NVSwitch systems: it must run, at the driver's version\n"
      "dsv3-preflight run --only gpu.fabric_manager,gpu.nvlink",
      check="gpu.nvlink", tier=1,
      example="gpu-a:4101:4190 [0] graph/paths.cc:325 NCCL WARN P2P is disabled between NVLINK connected GPUs 1 and 0. This "
      "should not be the case given their connectivity, and is probably due to a hardware issue. If you still want to "
      "proceed, you can set NCCL_IGNORE_DISABLED_P2P=1.",
      source="NCCL 2.21.5 src/graph/paths.cc:325 (format string)"),
    S(id="nccl.ib_warning", cls="nccl_transport", kind="cause", needles=(b"NCCL WARN NET/IB", b"NCCL WARN NET/IBext"),
      pattern=r"NCCL WARN NET/IB\w* ?: (?P<what>.+)",
      title="NCCL InfiniBand/RoCE warning: {what}",
      root_cause="NCCL's InfiniBand transport reported a problem with the RDMA device, link or peer.",
      fix="ibstat; ibv_devinfo | grep -E 'state|link_layer'    # on the nodes named\n" + ALLREDUCE_FIX,
      check="dist.allreduce", tier=2,
      example="node1:1234:1290 [0] transport/net_ib.cc:1101 NCCL WARN NET/IB : req 3/1 tag 7 peer 10.0.0.2<4242> collective mismatch error, local size 4096 remote size 2048",
      source="NCCL src/transport/net_ib.cc (every WARN there starts with 'NET/IB :')",
      transient=True),   # before the run's progress (one HCA of several unusable, an async port event): NCCL went on
    S(id="gpu.nvlink_xid", cls="nccl_transport", kind="cause", needles=(b"Xid", b"NVLink"),
      pattern=r"NVRM: Xid \([^)]*\): (?P<xid>" + one_of(NVLINK_XIDS) + r")\b|NVLink.{0,40}(?:error|fatal|failed|down)"
      # Xid 45, the cleanup of a process, names the Xid that caused it when that came first ("caused by previous Xid 149")
      r"|caused by previous Xid (?P<xid2>" + one_of(NVLINK_XIDS) + r")\b",
      title="NVLink error[[ (Xid {xid})]]",
      root_cause="An NVLink link reported errors: collectives over it fail or hang.",
      fix="nvidia-smi nvlink --status; nvidia-smi -q | grep -i -A3 nvlink\n# drain the node and reset the GPU (nvidia-smi -r) or have the link inspected",
      check="gpu.nvlink", tier=1,
      example="NVRM: Xid (PCI:0000:07:00): 74, pid=2345, NVLink: fatal error detected on link 3",
      source="NVIDIA Xid catalogue (Xid 74 NVLink error)"),
)
