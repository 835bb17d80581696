"""``nic_iface``: the wrong network interface (loopback, docker, a name that does not exist, an address other nodes cannot reach).

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from ...text import IFACE, NCCL_EXACT, NCCL_IFACE
from .record import Decode, S, Signature
from .shared import (
    GLOO_BOUND_UNREACHABLE,
    GLOO_MESH_CAUSES,
    HOROVODRUN_FIX,
    HOST_NETWORK_FIX,
    IFACE_FIX,
    OMPI_IFACE_FIX,
    RAY_IP_FIX,
    UNREACHABLE_IFACE,
)

SIGNATURES: tuple[Signature, ...] = (
    S(id="tensorpipe.listen_failed", cls="nic_iface", kind="cause", needles=(b"transport/uv/listener.cc",),
      pattern=r"In (?P<fn>\w+) at \S*tensorpipe/transport/uv/listener\.cc:\d+ \"(?P<cond>[^\"]*)\"",
      title="TensorPipe could not listen on this node's address ({cond})",
      root_cause="TensorPipe's uv transport listens on the address this node's host name resolves to (or on TP_SOCKET_IFNAME's). "
      "It fails there on an address it cannot bind: an IPv6 link-local address (fe80::...) without its interface, or "
      "an address that is not this host's (a stale /etc/hosts entry).",
      fix="getent ahosts \"$(hostname)\"    # what TensorPipe binds: an address of this host toward the others, not fe80::...\n"
      "export TP_SOCKET_IFNAME=${IFACE:?interface toward MASTER_ADDR, e.g. eth0}    # TensorPipe's, with Gloo's and NCCL's:\n"
      + IFACE_FIX, check="net.nic_route", tier=1,
      example='what():  In initFromLoop at /pytorch/third_party/tensorpipe/tensorpipe/transport/uv/listener.cc:126 "rv < 0: '
      'invalid argument"',
      source="https://github.com/pytorch/tensorpipe/issues/224 (tensorpipe/transport/uv/listener.cc, TP_THROW_UV_IF)"),
    S(id="ray.node_ip_mismatch", cls="nic_iface", kind="cause", needles=(b"Ray expects this IP address", b"none of these match this node's IP"),
      pattern=r"This node has an IP address of (?P<addr>[\w.:-]+), and Ray expects this IP address to be either the GCS address or one of the Raylet addresses"
      r"|none of these match this node's IP (?P<addr2>[\w.:-]+)",
      title="Ray knows this node under another address than {addr}",
      root_cause="The driver or worker on this node found no raylet registered with its address {addr}: the node joined the "
      "cluster with another interface's address (a container's bridge address, a second NIC), so Ray cannot route "
      "to it.", fix=RAY_IP_FIX, check="net.nic_route", tier=1,
      example="[2024-05-08 08:47:31,877 C 2211 2211] global_state_accessor.cc:415: This node has an IP address of 172.17.0.3, "
      "and Ray expects this IP address to be either the GCS address or one of the Raylet addresses. Connected to GCS "
      "at 10.41.0.2:6379, and found no Raylet with this IP address. You might need to provide --node-ip-address to "
      "specify the IP address that the head should use when sending to this node.",
      source="ray src/ray/gcs/gcs_client/global_state_accessor.cc (Ray 2.60 strings; older wording ray#35022)"),
    # GetValidLocalIp finds the node's address by connecting toward a public DNS server and, when that fails, by
    # probing the non-virtual interfaces; with neither it falls back to loopback: an air-gapped node, or one whose
    # only route is through an interface Ray excludes (docker, br-, veth, virbr, tun)
    S(id="ray.local_ip_loopback", cls="nic_iface", kind="cause", needles=(b"not possible to go distributed",),
      pattern=r"Failed to find other valid local IP\. Using (?P<addr>\S+?),? not possible to go distributed",
      title="Ray found no address for this node but {addr}",
      root_cause="Ray could not tell which of this node's addresses the other nodes reach (it asks the route toward a public DNS "
      "server, then probes the Ethernet and Wi-Fi interfaces) and uses loopback: no other node can reach this one. "
      "On a node without internet access, or whose only route is a bridge or tunnel interface, give Ray the address.",
      fix=RAY_IP_FIX, check="net.nic_route", tier=1,
      example="network_util.cc:62] Failed to find other valid local IP. Using 127.0.0.1, not possible to go distributed!",
      source="https://github.com/ray-project/ray/issues/10574 (ray src/ray/common/network_util.cc, GetValidLocalIp)"),
    S(id="ray.no_local_raylet_address", cls="nic_iface", kind="suspect", needles=(b"but we cannot find a local Raylet",
                                                                                 b"can not find the matched Raylet address"),
      pattern=r"This node has an IP address of (?P<addr>[\w.:*-]+), (?:but we cannot find a local Raylet with the same address"
      r"|while we can not find the matched Raylet address)",
      title="Ray found no local raylet with this node's address {addr}",
      root_cause="The process connected to the cluster with an address no raylet of this node registered under (a container, "
      "a second interface): Ray falls back to another raylet, and work scheduled here may not reach this node.",
      fix=RAY_IP_FIX, check="net.nic_route", tier=2,
      example="[2023-05-10 22:52:47,666 I 108 108] global_state_accessor.cc:356: This node has an IP address of 10.244.0.56, "
      "but we cannot find a local Raylet with the same address. This can happen when you connect to the Ray cluster "
      "with a different IP address or when connecting to a container.",
      source="https://github.com/vllm-project/vllm/issues/6689 (ray src/ray/gcs/gcs_client/global_state_accessor.cc)",
      hang_suspect=True),
    S(id="ray.node_resource_unreachable", cls="nic_iface", kind="cause", needles=(b"fulfill resource request",),
      # the request's keys come in any order ({'GPU': 1.0, 'node:ADDR': 0.001} too); the address as printed, whatever
      # it is (an IP, a host name, a reporter's "<IP>")
      pattern=r"No available node types can fulfill resource request \{[^}]*?['\"]node:(?P<addr>[^'\"]+)['\"]",
      title="No Ray node has the address {addr} that the job asks for",
      root_cause="The job pins work to the Ray node with address {addr} (vLLM pins its first worker to its own detected IP), but "
      "no node of the cluster registered under that address: the process picked another interface's address than "
      "the one Ray uses (VLLM_HOST_IP, a second NIC, a container bridge).", fix=RAY_IP_FIX, check="net.nic_route", tier=1,
      example="(autoscaler +7s) Error: No available node types can fulfill resource request {'node:192.168.50.192': 0.001, "
      "'GPU': 1.0}. Add suitable node types to this cluster to resolve this issue.",
      source="https://github.com/vllm-project/vllm/issues/7815 (Ray autoscaler event)"),
    S(id="ray.node_demand_pending", cls="nic_iface", kind="suspect", needles=(b"pending placement groups",),
      # `ray status`'s Demands section (python/ray/autoscaler/_private/util.py): "{'node:ADDR': 0.001, 'GPU': 1.0} * 1
      # (PACK): 1+ pending placement groups"
      pattern=r"\{[^}]*?['\"]node:(?P<addr>[^'\"]+)['\"]: 0\.001[^}]*\} \* \d+.*pending placement groups",
      title="A placement group pinned to the Ray node with address {addr} is pending",
      root_cause="The job pins work to the Ray node registered under {addr} (vLLM pins its first worker to its own detected "
      "address) and the placement group waits for it: no node of the cluster registered under that address, so the "
      "job waits for ever. The process picked another interface's address or name than the one Ray uses "
      "(VLLM_HOST_IP, a second NIC, a host name where Ray has an IP).", fix=RAY_IP_FIX, check="net.nic_route", tier=2,
      example=" {'node:ec2-10-0-0-12.us-west-2.compute.amazonaws.com': 0.001, 'GPU': 1.0} * 1, {'GPU': 1.0} * 15 (PACK): "
      "1+ pending placement groups",
      source="ray python/ray/autoscaler/_private/util.py (ray status, Demands); corpus development excerpt vllm#12670",
      stall="any"),
    S(id="vllm.node_ip", cls="nic_iface", kind="cause", needles=(b"Every node should have a unique IP address", b"does not allocate any GPUs on the driver node",
                                                                b"Can not get local ip from NIC"),
      pattern=r"Every node should have a unique IP address\. Got (?P<nodes>\d+) nodes with node ids .*? and (?P<ips>\d+) unique IP addresses (?P<addrs>.*?)\. Please"
      r"|Every node should have a unique IP address|Ray does not allocate any GPUs on the driver node"
      r"|Can not get local ip from NIC",
      title="The nodes' addresses do not tell them apart[[ ({nodes} nodes, {ips} unique addresses {addrs})]]",
      root_cause="vLLM (or SGLang) detects each node's own address to map its workers onto Ray's nodes; the detected addresses "
      "are the same on several nodes (a container bridge's 172.17.0.x, VLLM_HOST_IP copied to every node) or not the "
      "ones Ray registered, or the interface named for it has no address.", fix=RAY_IP_FIX, check="net.nic_route", tier=1,
      example="RuntimeError: Every node should have a unique IP address. Got 2 nodes with node ids ['a1', 'b2'] and 1 unique "
      "IP addresses {'172.17.0.2'}. Please check your network configuration. If you set `VLLM_HOST_IP` environment "
      "variable, make sure it is unique for each node.",
      source="vllm vllm/executor/ray_distributed_executor.py, vllm/v1/executor/ray_executor.py; sglang utils.py (get_local_ip_auto)"),
    S(id="vllm.ip_fallback", cls="nic_iface", kind="suspect", needles=(b"Failed to get the IP address, using 0.0.0.0",
                                                                      b"Waiting for creating a placement group of specs"),
      pattern=r"Failed to get the IP address, using 0\.0\.0\.0 by default"
      r"|Waiting for creating a placement group of specs for \d+ seconds\..*?same as VLLM_HOST_IP",
      title="vLLM could not tell this node's address (VLLM_HOST_IP)",
      root_cause="vLLM detects the node's address by routing toward a public address; without a default route it uses 0.0.0.0, "
      "and a placement group pinned to a node address waits forever when that address is not the one Ray uses.",
      fix=RAY_IP_FIX, check="net.nic_route", tier=2,
      example="/usr/local/lib/python3.10/dist-packages/vllm/utils.py:534: UserWarning: Failed to get the IP address, using "
      "0.0.0.0 by default.The value can be set by the environment variable VLLM_HOST_IP or HOST_IP.",
      source="vllm vllm/utils.py (get_ip), vllm/executor/ray_utils.py (_wait_until_pg_ready)", hang_suspect=True),
    S(id="nccl.no_socket_interface", cls="nic_iface", kind="cause", needles=(b"no socket interface found", b"No usable listening interface",
                                                                             b"NET/Socket : no interface found", b"no device found matching",
                                                                             b"no device found after excluding"),
      pattern=r"no socket interface found|No usable listening interface found|NET/Socket ?: no interface found|no device found (?:matching|after excluding)",
      title="NCCL found no usable socket interface",
      root_cause="NCCL_SOCKET_IFNAME names an interface that does not exist on this node or container (or has no address of "
      "NCCL_SOCKET_FAMILY), so NCCL cannot bootstrap.",
      fix=IFACE_FIX, check="net.nic_route", tier=1,
      example="Bootstrap : no socket interface found",
      source="https://github.com/EasonXiao-888/MambaTree/issues/14 (NCCL src/bootstrap.cc)",
      decode=(Decode(kind="nccl_ifname_missing",
                     pattern=r"(Bootstrap|NET/Socket)\s*:\s*no (usable listening )?(socket )?interface found",
                     cause=lambda m: "NCCL found no interface matching NCCL_SOCKET_IFNAME on this host (from NCCL 2.28.3: none of those "
                                     "matching is up with a carrier)",
                     remediation=lambda m: f"export NCCL_SOCKET_IFNAME={NCCL_IFACE}   {NCCL_EXACT}",
                     actor="job", cause_id="net.nccl_socket_ifname"),)),
    S(id="gloo.no_address_for_interface", cls="nic_iface", kind="cause", needles=(b"Unable to find address for",),
      pattern=r"Unable to find address for:? (?P<iface>\S+)",
      title="Gloo cannot find an address for {iface}",
      root_cause="GLOO_SOCKET_IFNAME (or the host name Gloo resolves) is not an interface of this node with an address; Gloo "
      "takes one concrete interface name, not NCCL's '^lo,docker' list syntax.",
      fix=IFACE_FIX, check="net.nic_route", tier=1,
      example="RuntimeError: Unable to find address for: eth0",
      source="https://github.com/spark-arena/sparkrun/issues/275 (gloo/transport/tcp/device.cc)",
      decode=(Decode(kind="gloo_ifname_missing",
                     pattern=r"Unable to find address for:\s*(?P<ifname>\S+)",
                     cause=lambda m: f"GLOO_SOCKET_IFNAME names {m['ifname']!r}, an interface with no IPv4/IPv6 address on this host "
                                     "(or no such interface)",
                     remediation=lambda m: f"export GLOO_SOCKET_IFNAME={IFACE}   # one exact interface name, not a list, not an address",
                     actor="job", cause_id="net.gloo_socket_ifname"),)),
    S(id="gloo.address_family_mismatch", cls="nic_iface", kind="cause", needles=(b"ss1.ss_family == ss2.ss_family", b"address family mismatch"),
      # gloo since 2019 (transport/tcp/device.cc); before it, pair.cc's "self_.ss_.ss_family == peer_.ss_.ss_family.
      # 2 vs 10. address family mismatch"
      pattern=r"ss1\.ss_family == ss2\.ss_family\.? (?P<mine>\d+) vs (?P<peer>\d+)"
      r"|(?:ss_family == \S*ss_family\.? (?P<mine2>\d+) vs (?P<peer2>\d+)\.? )?address family mismatch",
      title="Gloo ranks published addresses of different families (IPv4 and IPv6[[: {mine} vs {peer}]])",
      root_cause="Each rank's Gloo device takes the address of GLOO_SOCKET_IFNAME or of its host name, and Gloo connects only "
      "ranks whose addresses share a family (2 is IPv4, 10 is IPv6): on some node the interface or the host name "
      "gave an IPv6 address (an AAAA record, an interface with only IPv6, ::1 for a host name in /etc/hosts) while "
      "the others gave IPv4.",
      fix="getent ahosts \"$(hostname)\"    # on every node: the first address Gloo would take without GLOO_SOCKET_IFNAME\n"
      + IFACE_FIX, check="net.nic_route", tier=1,
      example="RuntimeError: [enforce fail at /__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/device.cc:285] "
      "ss1.ss_family == ss2.ss_family. 2 vs 10",
      source="gloo/transport/tcp/device.cc (the pair's address families must match); produced here by two Gloo ranks whose "
      "devices were created for 127.0.0.1 and ::1; the field report: https://github.com/pytorch/pytorch/issues/135355"),
    S(id="nccl.no_interface_same_subnet", cls="nic_iface", kind="cause", needles=(b"No interface found in the same subnet",),
      pattern=r"No interface found in the same subnet as remote address ?(?P<addr>\S*)",
      title="NCCL found no interface in the same subnet as the bootstrap address[[ {addr}]]",
      root_cause="No local interface shares a subnet with the bootstrap address: the nodes are on different networks or the "
      "wrong interface is up.", fix=IFACE_FIX, check="net.nic_route", tier=1,
      example="misc/socket.cc:361 NCCL WARN Net : No interface found in the same subnet as remote address 10.136.80.18<43431>",
      source="https://github.com/NVIDIA/nccl/issues/474"),
    # a Gloo connect to a loopback address of a peer (gloo's pair.cc before 2024: "connect [127.0.1.1]:25472: ...";
    # since then "timed out connecting: ..., remote=[127.0.1.1]:N" and the DebugLogger's "remote=[...]" lines)
    S(id="gloo.loopback_peer", cls="nic_iface", kind="cause", needles=(b"remote=[127.", b"connect [127."),
      pattern=r"timed out connecting: (?:SO_ERROR: )?(?P<err>[^,\n]+), remote=\[(?P<addr>127\.\d+\.\d+\.\d+)\]"
      r"|(?:remote=|connect )\[(?P<addr2>127\.\d+\.\d+\.\d+)\]:\d+\S*(?:(?:, error=|: )(?:SO_ERROR: )?(?P<err2>[A-Z][^,\n]*))?",
      title="A Gloo peer published the loopback address {addr}[[ ({err})]]",
      root_cause="Each Gloo rank publishes the address of GLOO_SOCKET_IFNAME or, without it, of its host name; here a rank "
      "published {addr}, so the ranks of other nodes connect to their own loopback, where nothing listens. The host "
      "name resolves to a loopback address on that node (Debian and Ubuntu write '127.0.1.1 <hostname>' into "
      "/etc/hosts; a container may map it to 127.0.0.1), or GLOO_SOCKET_IFNAME is lo. (In a one-node job loopback "
      "is right, and a refused connect there means the peer's process is gone.)",
      fix="getent hosts \"$(hostname)\"    # on every node: a 127.x answer is the cause\n"
      "# map the host name to the node's routable address in /etc/hosts, or bind Gloo and NCCL to the interface:\n"
      + IFACE_FIX, check="net.nic_route", tier=1,
      example="[E1124 05:42:28.898042854 ProcessGroupGloo.cpp:67] Gloo connectFullMesh failed with [/__w/pytorch/pytorch/"
      "third_party/gloo/gloo/transport/tcp/pair.cc:152] timed out connecting: SO_ERROR: Connection refused, "
      "remote=[127.0.1.1]:49542$1",
      source="gloo/transport/tcp/pair.cc and debug_logger.cc; produced here by torch 2.13 Gloo ranks in three network "
      "namespaces whose hosts files map the host name to 127.0.1.1 (tests/test_doctor_netns.py); the field report: "
      "https://github.com/pytorch/examples/issues/812", consequence_of=GLOO_BOUND_UNREACHABLE),
    S(id="gloo.connect_full_mesh", cls="nic_iface", kind="cause", needles=(b"connectFullMesh failed",),
      pattern=r"Gloo connectFullMesh failed(?: with)?(?P<detail>.*)",
      title="Gloo could not connect the full mesh of ranks",
      root_cause="Gloo bound to an address the other nodes cannot reach (the host name resolving to 127.0.1.1, or a "
      "docker/bridge interface), so its pairwise connections fail.", fix=IFACE_FIX, check="net.nic_route", tier=1,
      example="[rank10]:[E130 18:11:34.707542570 ProcessGroupGloo.cpp:143] Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no error",
      source="https://github.com/sgl-project/sglang/issues/3226", consequence_of=GLOO_MESH_CAUSES,
      decode=(Decode(kind="gloo_full_mesh_connect",
                     pattern=r"(connectFullMesh|Connect timeout|gloo/transport/tcp/pair\.cc.*(timed out|Timed out|Connection reset|refused))",
                     cause=lambda m: "Gloo's full-mesh connect between ranks failed: the store port is open but the ranks' own "
                                     "listening ports (ephemeral, chosen per run) are blocked or the addresses they advertise are unreachable",
                     remediation=lambda m: ("# open TCP between all nodes on the training interface, not only MASTER_PORT (Gloo's ranks listen on ephemeral ports)\n"
                                            f"export GLOO_SOCKET_IFNAME={IFACE}   # the interface that routes between the nodes"),
                     actor="network", cause_id="collective.ports_blocked_between_nodes"),)),
    S(id="gloo.connect_refused", cls="nic_iface", kind="cause", needles=(b"pair.cc", b"pair.h", b"Connect timeout ["),
      pattern=r"pair\.(?:cc|h):\d+\]\s*(?:connect \[(?P<addr>[^\]]+)\]:\d+: (?P<err>[^.\n]+)"
      r"|timed out connecting: (?P<err2>[^,\n]+?)(?:, remote=\[(?P<addr3>[^\]]+)\]\S*)?$"
      r"|(?P<err3>Connect timeout) \[(?P<addr2>[^\]]+)\])",  # gloo transport/tcp/pair.h
      title="Gloo cannot connect to a peer[[ at {addr}]][[ ({err})]]",
      root_cause="Gloo connects to the address each rank published, and that address is not reachable from here: the host name resolves "
      "to a loopback or container address, or the wrong interface was chosen.", fix=IFACE_FIX, check="net.nic_route", tier=1,
      example="RuntimeError: [/opt/conda/conda-bld/pytorch_1623448255797/work/third_party/gloo/gloo/transport/tcp/pair.cc:799] "
      "connect [192.168.0.222]:2226: Connection refused",
      source="gloo/transport/tcp/pair.cc ('connect [addr]:port: strerror', torch 1.x); a line of a public project report "
      "(torch 1.9, conda build)",
      consequence_of=GLOO_BOUND_UNREACHABLE),
    # gloo's DebugLogger (torch 2.6+): one line per failed connect of the full mesh, willRetry=1 while it retries
    S(id="gloo.connect_retry", cls="nic_iface", kind="cause", needles=(b"failed to connect, willRetry=",),
      pattern=r"failed to connect, willRetry=\d, retry=\d+, retryLimit=\d+, rank=(?P<rank>\d+), size=\d+, local=\S+, "
      r"remote=\[(?P<addr>[^\]]+)\]\S*, error=(?:SO_ERROR: )?(?P<err>[^,\n]+)",
      title="A Gloo rank cannot connect to a peer at {addr} ({err})",
      root_cause="Each Gloo rank connects to the address every other rank published in the store; {addr} does not answer from "
      "here. A peer published an address other nodes cannot reach (loopback when its host name does not resolve, "
      "a docker or bridge interface chosen by GLOO_SOCKET_IFNAME), its process is gone, or a firewall blocks the port.",
      fix=IFACE_FIX + "\n# the interfaces are right and the peer still runs: a firewall rejects Gloo's ports (chosen at random) "
      "between the nodes\niptables -S INPUT; nft list ruleset | head -40    # on the node that holds the address named",
      check="net.nic_route", tier=1,
      example="[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/debug_logger.cc:9] ERROR failed to connect, willRetry=0, "
      "retry=4, retryLimit=3, rank=1, size=3, local=[10.77.0.11]:41642, remote=[10.77.0.10]:36740$1, error=SO_ERROR: "
      "Connection refused, remote=[10.77.0.10]:36740$1",
      source="gloo/transport/tcp/debug_logger.cc; produced here by torch 2.13 Gloo ranks in three network namespaces, the "
      "head's rejecting every new connection but the store's (tests/test_doctor_netns.py)", transient=True,
      consequence_of=GLOO_BOUND_UNREACHABLE + ("gloo.loopback_peer",)),
    S(id="store.retry_loopback", cls="nic_iface", kind="suspect", needles=(b"Retry to connect to 127.",),
      pattern=r"Retry to connect to (?P<addr>127\.\d+\.\d+\.\d+):(?P<port>\d+) while the server is not yet listening",
      title="A rank keeps retrying the master's store at {addr}:{port}, a loopback address",
      root_cause="The master address the launcher handed out is a loopback address: on the master its host name resolves to "
      "127.0.1.1 (Debian's /etc/hosts line) or the master was given as localhost. The master's own ranks connect to "
      "themselves; a rank on another node retries its own loopback, where nothing listens, until it times out.",
      fix="getent hosts \"$(hostname)\"    # on the master: a 127.x answer is the cause\n"
      "# pass the master's routable address to the launcher (paddle.distributed.launch --master IP:PORT or --ips; "
      "torchrun --master-addr IP),\n# or map the host name to that address in /etc/hosts on every node\n" + IFACE_FIX,
      check="net.nic_route", tier=2,
      example="I0224 13:50:30.278173 1512912 tcp_utils.cc:107] Retry to connect to 127.0.1.1:63917 while the server is not yet listening.",
      source="Paddle paddle/phi/core/distributed/store/tcp_utils.cc (VLOG 'Retry to connect to host:port while the server is "
      "not yet listening.')", stall="multi_node"),
    S(id="gloo.hostname_loopback", cls="nic_iface", kind="suspect", needles=(b"Using the loopback address as fallback",
                                                                             b"Unable to resolve hostname to a (local) address"),
      pattern=r"Unable to resolve hostname to a \(local\) address\. Using the loopback(?: address as fallback)?",
      title="Gloo fell back to the loopback address",
      root_cause="The host name does not resolve to a routable local address, so Gloo listens on loopback: other nodes cannot "
      "connect.", fix=IFACE_FIX, check="net.nic_route", tier=2,
      example="(RayWorkerWrapper pid=1978, ip=10.41.0.8) [rank9]:[W ProcessGroupGloo.cpp:721] **Warning: Unable to resolve hostname "
      "to a (local) address. Using the loopback address as fallback. Manually set the network interface to bind to with** "
      "GLOO_SOCKET_IFNAME. (function operator())",
      source="https://github.com/vllm-project/vllm/issues/7074 (torch ProcessGroupGloo.cpp)", stall="multi_node"),
    # a socket failure whose peer is an address Docker gives its bridges: a rank published its container's bridge
    # address. Docker's default bridge is 172.17.0.0/16 and its user-defined networks take 172.18-172.31.0.0/16 in
    # turn; 172.31 is left out (AWS's default VPC, where 172.31.0.x are real hosts)
    S(id="tensorpipe.hostname_loopback", cls="nic_iface", kind="suspect", needles=(b"Failed to look up the IP address for the hostname",),
      pattern=r"Failed to look up the IP address for the hostname \([^)]*\), defaulting to (?P<addr>127\.\S+)",
      title="torch RPC (TensorPipe) fell back to {addr}",
      root_cause="This host's name does not resolve, so the TensorPipe RPC agent advertises the loopback address: other nodes "
      "cannot connect to it.",
      fix="export TP_SOCKET_IFNAME=${IFACE:?interface toward MASTER_ADDR, e.g. eth0}    # TensorPipe's interface\n" + IFACE_FIX,
      check="net.nic_route", tier=2,
      example="Jan 16 03:14:24 [W tensorpipe_agent.cpp:63] Failed to look up the IP address for the hostname (EAI_NONAME: "
      "unknown node or service), defaulting to 127.0.0.1",
      source="https://github.com/pytorch/pytorch/issues/50700 (torch/csrc/distributed/rpc/tensorpipe_agent.cpp)", stall="multi_node"),
    S(id="gloo.cannot_resolve_local", cls="nic_iface", kind="cause", needles=(b"to a (local) address",),
      pattern=r"Cannot resolve (?P<host>\S+) to a \(local\) address",
      title="Gloo cannot resolve {host} to an address of this host",
      root_cause="The host name Gloo was given for its device does not resolve to an address of this machine.",
      fix=IFACE_FIX, check="net.nic_route", tier=1,
      example="RuntimeError: Cannot resolve node1 to a (local) address",
      source="torch/csrc/distributed/c10d/ProcessGroupGloo.cpp (createDeviceForHostname)"),
    S(id="nccl.ib_oob_interface", cls="nic_iface", kind="suspect", needles=(b"; OOB lo", b"; OOB docker", b"; OOB virbr", b"; OOB veth", b"; OOB br-",
                                                                            b"; OOB cni", b"; OOB flannel"),
      pattern=r"NET/IB ?: Using.*; OOB (?P<iface>" + UNREACHABLE_IFACE + r"):(?P<addr>\S+?)<",
      title="NCCL's InfiniBand transport exchanges its connection data over {iface} ({addr})",
      root_cause="NET/IB sets up queue pairs through a socket on the out-of-band interface (NCCL_SOCKET_IFNAME's choice); on "
      "{iface} other nodes cannot reach it, so inter-node connections hang or fail.",
      fix=IFACE_FIX, check="net.nic_route", tier=2,
      example="gpu-node07:24817:24901 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB docker0:172.17.0.1<0>",
      source="NCCL src/transport/net_ib.cc (\"NET/IB : Using%s ; OOB %s:%s\")", stall="multi_node"),
    S(id="nccl.bridge_peer", cls="nic_iface", kind="cause", needles=(b"172.1", b"172.2", b"172.30."),   # NCCL, Gloo, MPI, UCX (dest_addr=)
      pattern=r"(?:(?:Call to (?:recv from|send to|connect to)|[Cc]onnect(?:ion)? to|Connection closed by (?:remote )?peer|connect\(\) to"
      r"|(?:Read|Write) (?:error|timeout)|Socket (?:unexpectedly )?closed) \[?"   # Gloo's pair.cc: "... [172.17.0.2]:5922"
      r"|dest_addr=)(?P<addr>172\.(?:1[7-9]|2\d|30)\.0\.\d{1,3})(?:[<:\]\s,)]|\.?$)",
      title="A connection to {addr} failed, an address of a container bridge",
      root_cause="{addr} lies in the networks Docker gives its bridges (172.17.0.0/16 for the default bridge, 172.18-172.30 for "
      "user-defined ones): every host has its own such network, so a rank published its container's bridge address "
      "and ranks on other nodes reach no one, or the wrong host, there. The containers of a multi-node job need the "
      "host's network (docker run --network=host, hostNetwork: true in Kubernetes), and NCCL/Gloo the interface "
      "toward MASTER_ADDR.",
      fix=HOST_NETWORK_FIX, check="net.nic_route", tier=1,
      example="ip-172-31-12-104:28056:39685 [0] misc/socket.cc:503 NCCL WARN Net : Call to recv from 172.18.0.1<34483> failed : Broken pipe",
      source="https://github.com/dmlc/xgboost/issues/7982 (NCCL src/misc/socket.cc); Docker's address pools: "
      "https://docs.docker.com/engine/network/ (default-address-pools 172.17-172.31, then 192.168)", multi_node_only=True),
    S(id="ucx.connect_failed", cls="nic_iface", kind="cause", needles=(b"UCX  ERROR", b"UCX ERROR", b"ucp_ep_create", b"Failed to resolve UCX endpoint"),
      pattern=r"UCX\s+ERROR\s+connect\(fd=\d+, dest_addr=(?P<addr>[\w.:%\[\]-]+?):\d+\) failed: (?P<err>[^.\n]+)"
      r"|ucp_ep_create\(proc=\d+\) failed: (?P<err2>Destination is unreachable|[^.\n]+)"
      r"|Failed to resolve UCX endpoint for rank (?P<rank>\d+)"
      # ucp/wireup/select.c "no %s transport to %s: %s": no transport UCX_TLS / UCX_NET_DEVICES allow reaches the peer
      r"|no active messages transport to [^:]*: (?P<err3>.+)",
      title="UCX could not connect to a peer[[ at {addr}]][[ ({err})]]",
      root_cause="Open MPI's UCX layer connects the ranks over the addresses each one published. A refused connection or an "
      "unreachable destination means a rank published an interface the others cannot reach (docker0's 172.17.0.1, a "
      "bridge, a second NIC on another network), or a firewall blocks the ports UCX picked. \"No active messages "
      "transport\" means none of the transports UCX_TLS and UCX_NET_DEVICES leave (shared memory alone between two "
      "hosts, a device not on the peer's network) reaches the peer.",
      fix="export UCX_NET_DEVICES=\"${IFACE:?interface toward the other nodes, e.g. eth0 or mlx5_0:1}\"    # mpirun -x UCX_NET_DEVICES ...\n"
      + OMPI_IFACE_FIX + "\n" + IFACE_FIX, check="net.nic_route", tier=1,
      example="[1700554343.440877] [node-a:7356 :0]            sock.c:323  UCX  ERROR   connect(fd=48, dest_addr=10.0.0.7:42887) "
      "failed: Connection refused",
      source="openucx/ucx src/ucs/sys/sock.c (ucs_socket_connect), src/ucp/wireup/select.c ('no active messages transport "
      "to <no debug data>: self/memory - Destination is unreachable'), Open MPI ompi/mca/pml/ucx/pml_ucx.c "
      "(ucp_ep_create failed)"),
    S(id="nccl.socket_connect_failed", cls="nic_iface", kind="cause", needles=(b"Connect to ", b"Call to connect", b"connect() to ", b"socketStartConnect",
                                                                              b"connect to ", b"PollConnect"),
      pattern=r"(?:socketStartConnect|socketPollConnect|socketFinalizeConnect)?:? ?Connect to (?P<peer>\S+) failed ?: (?P<err>.+)"
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
      title="A connection to a peer failed[[ ({err})]][[: {peer}]]",
      root_cause="NCCL (or Open MPI's TCP transport) tried to reach a peer at an address that does not answer from here: the "
      "peer published an address on an interface other nodes cannot reach (docker0, a bridge, loopback), or a "
      "firewall blocks the ports.", fix=IFACE_FIX, check="net.nic_route", tier=1,
      example="jnlh102072:8969:8969 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.37.12.78<46417> failed : Software caused connection abort",
      source="https://blog.gitcode.com/c78323ca6ecbd73b92ec3459c9ac1ed1.html (NCCL src/misc/socket.cc)",
      decode=(Decode(kind="nccl_socket_connect",
                     pattern=r"socketStartConnect: Connect to (?P<addr>\S+) failed\s*:\s*(?P<why>[^\n]+)",
                     cause=lambda m: f"NCCL could not connect to {m['addr']}: {m['why'].strip()}",
                     remediation=lambda m: ("# open TCP between the nodes on the training interface: NCCL connects on the kernel's ephemeral ports\n"
                                            "cat /proc/sys/net/ipv4/ip_local_port_range   # the range to open, then pin the interface:\n"
                                            f"export NCCL_SOCKET_IFNAME={NCCL_IFACE}   {NCCL_EXACT}"),
                     actor="network", cause_id="collective.ports_blocked_between_nodes"),)),
    S(id="nccl.connect_retry", cls="nic_iface", kind="cause", needles=(b"Call to connect returned", b", retrying ("),
      pattern=r"Call to connect returned (?P<err>[A-Z][^,\n]+), retrying"
      r"|[Cc]onnect to (?P<peer>[^\s<]+<\d+>) returned (?P<err2>[^,\n]+), retrying \(",  # NCCL 2.23+
      title="NCCL keeps retrying a connection[[ ({err})]]",
      root_cause="NCCL could not reach a peer's address and retries: the peer published an address on an interface other "
      "nodes cannot reach (docker0, a bridge, loopback), the peer is not up yet, or a firewall blocks the ports.",
      fix=IFACE_FIX, check="net.nic_route", tier=1,
      example="worker:101542:101934 [0] NCCL INFO Call to connect returned Connection timed out, retrying",
      source="https://github.com/Oneflow-Inc/oneflow/issues/3586 (NCCL src/misc/socket.cc)", transient=True),
    S(id="ompi.unexpected_identifier", cls="nic_iface", kind="cause", needles=(b"received unexpected process identifier", b"cannot find a corresponding process"),
      pattern=r"received unexpected process identifier|but cannot find a corresponding process",  # [server accept cannot find guid]
      title="Open MPI's TCP transport connected to the wrong process",
      root_cause="Open MPI used an interface whose addresses are the same on several nodes (docker0's 172.17.0.1, a bridge), "
      "so connections reach the wrong peer.",
      fix=OMPI_IFACE_FIX + "\ndsv3-preflight run --only net.nic_route",
      check="net.nic_route", tier=1,
      example="[u10-154-66-206][[39817,1],2][btl_tcp_endpoint.c:638:mca_btl_tcp_endpoint_recv_connect_ack] received unexpected process identifier [[39817,1],3]",
      source="https://github.com/horovod/horovod/issues/310 (Open MPI btl_tcp_endpoint.c)"),
    S(id="nccl.socket_family", cls="nic_iface", kind="cause", needles=(b"Address family not supported", b"is neither AF_INET"),
      pattern=r"Socket creation failed ?: Address family not supported|is neither AF_INET\(\d+\) nor AF_INET6",
      title="NCCL cannot create a socket of the chosen address family",
      root_cause="The interface or NCCL_SOCKET_FAMILY selects an address family (IPv6/IPv4) this node or container does not "
      "support, or the interface has no address.", fix=IFACE_FIX + "\nexport NCCL_SOCKET_FAMILY=AF_INET",
      check="net.nic_route", tier=1,
      example="include/socket.h:344 WARN Socket creation failed : Address family not supported by protocol",
      source="https://github.com/NVIDIA/nccl/issues/210"),
    S(id="gloo.no_interface_for_address", cls="nic_iface", kind="cause", needles=(b"Unable to find interface for",),
      pattern=r"Unable to find interface for:? \[?(?P<addr>[^\]\s]+)",
      title="Gloo finds no interface holding {addr}",
      root_cause="Gloo was told to bind an address (GLOO_SOCKET_IFADDR, or what the host name resolves to) that no interface "
      "of this node holds.", fix=IFACE_FIX, check="net.nic_route", tier=1,
      example="RuntimeError: [enforce fail at /pytorch/third_party/gloo/gloo/transport/tcp/http://device.cc:208] ifa != nullptr. "
      "Unable to find interface for: [10.16.32.68]",
      source="https://github.com/PeizeSun/SparseR-CNN/issues/28 (gloo/transport/tcp/device.cc)"),
    S(id="ompi.no_usable_interface", cls="nic_iface", kind="cause", needles=(b"An invalid value was given for btl_tcp_if_", b"An invalid value was given for oob_tcp_if_",
                                                                            b"None of the TCP networks specified to be included", b"resulted in no networks being available",
                                                                            b"No network interfaces were found for out-of-band"),
      pattern=r"An invalid value was given for (?P<param>(?:btl|oob)_tcp_if_\w+)|None of the TCP networks specified to be included"
      r"|resulted in no networks being available|No network interfaces were found for out-of-band communications",
      title="Open MPI has no usable interface for its TCP traffic[[ ({param} is wrong)]]",
      root_cause="The interfaces given to Open MPI (btl_tcp_if_include/exclude, oob_tcp_if_include/exclude) name no interface or "
      "subnet of this host, or exclude every one, so its out-of-band wire-up or its TCP transport has no interface.",
      fix="ip -br addr    # the interface names and subnets on this host\n" +
      OMPI_IFACE_FIX + "\ndsv3-preflight run --only net.nic_route", check="net.nic_route", tier=1,
      example="WARNING: An invalid value was given for btl_tcp_if_include.  This",
      source="Open MPI opal/mca/btl/tcp/help-mpi-btl-tcp.txt, orte/mca/oob/tcp/help-oob-tcp.txt, orte/mca/oob/base/help-oob-base.txt (v4.1.8)"),
    S(id="ompi.daemon_failed", cls="nic_iface", kind="cause", needles=(b"daemon has unexpectedly failed after launch",),
      pattern=r"(?:ORTE|PRTE) daemon has unexpectedly failed after launch and before",
      title="An Open MPI daemon failed before it could connect back to mpirun",
      root_cause="A remote orted/prted started but never connected back: most often the nodes share no routable interface (a "
      "bridge or a second network chosen), a firewall, or the daemon could not start there.",
      fix=OMPI_IFACE_FIX + "\ndsv3-preflight run --only net.nic_route,cluster.node_count", check="net.nic_route", tier=2,
      example="An ORTE daemon has unexpectedly failed after launch and before",
      source="Open MPI orte/mca/errmgr/base/help-errmgr-base.txt [failed-daemon]; openpmix/prrte (PRTE wording)"),
    S(id="ompi.tcp_connect_failed", cls="nic_iface", kind="cause", needles=(b"failed to TCP connect to a peer", b"Match incoming connection from",
                                                                           b"Unable to connect to the peer", b"inbound MPI TCP connection request",
                                                                           b"unable to complete a TCP connection", b"unable to establish a communication connection"),
      pattern=r"Open MPI failed to TCP connect to a peer MPI process"
      r"|Match incoming connection from \S+ (?P<addr>\S+) with locally known IP (?P<local>\S+) failed"
      r"|Unable to connect to the peer (?P<addr2>\S+) on port \d+: (?P<err>.+)"          # btl_tcp_endpoint.c (4.x, 5.x)
      r"|detected an inbound MPI TCP connection request from a peer"                     # help-mpi-btl-tcp.txt [dropped inbound]
      r"|A process or daemon was unable to complete a TCP connection"                   # orte oob_tcp_connection.c
      r"|(?:ORTE|PRTE) is unable to establish a communication connection to the",       # help-errmgr-base.txt [no-connect]
      title="Open MPI's TCP transport cannot connect its peers[[ ({addr} does not match {local})]]",
      root_cause="Open MPI's TCP transport (used by mpirun and Horovod) picked interfaces whose addresses the other node cannot "
      "reach or does not expect (docker0's 172.17.0.1, virbr0's 192.168.122.1, a second network).",
      fix=OMPI_IFACE_FIX + "\ndsv3-preflight run --only net.nic_route",
      check="net.nic_route", tier=1,
      example="WARNING: Open MPI failed to TCP connect to a peer MPI process.  This",
      source="https://github.com/open-mpi/ompi/issues/6377 (Open MPI help-mpi-btl-tcp.txt)"),
    S(id="horovod.no_common_interface", cls="nic_iface", kind="cause", needles=(b"Launching horovod task function was not successful",
                                                                               b"routable network interface", b"'Linux.'.format(service_name",
                                                                               b"common task-to-task communication interfaces", b"was unable to connect to",
                                                                               b"No available network interface found matching", b"IPv4 address of the common interface"),
      pattern=r"Launching horovod task function was not successful|routable network interface with the same name"
      r"|'Linux\.'\.format\(service_name|Unable to find a set of common task-to-task communication interfaces"
      r"|Horovod(?:run)? was unable to connect to \S+ on any of the following addresses"
      r"|No available network interface found matching user provided interface|Cannot find an IPv4 address of the common interface",
      title="horovodrun could not reach its tasks over a common network interface",
      root_cause="horovodrun's driver and task services talk over the interfaces all hosts share by name; with none routable "
      "in common (docker0, different names per host), the tasks never connect.",
      fix="ip -br addr    # on every host: one routable interface with the same name everywhere\n" +
      HOROVODRUN_FIX + "\n"
      "dsv3-preflight run --only net.nic_route    # on each host: the interface toward the head",
      check="net.nic_route", tier=2,
      example="Launching horovod task function was not successful:",
      source="https://github.com/horovod/horovod/issues/2421 (horovod/runner/common/util/network.py)"),
    S(id="nccl.bootstrap_error", cls="nic_iface", kind="cause", needles=(b"bootstrap.cc:", b"bootstrap.cu:"),
      pattern=r"bootstrap\.c[cu]:\d+ -> (?P<code>[236])\b",
      title="NCCL's bootstrap failed (error {code})",
      root_cause="NCCL's bootstrap (the socket ring that exchanges every rank's address before any GPU traffic) failed: it runs "
      "over the NCCL_SOCKET_IFNAME interface, and fails when that interface is not the one toward the other nodes "
      "or cannot reach them.", fix=IFACE_FIX, check="net.nic_route", tier=2,
      example="71d46aa8dab5:5241:5262 [2] NCCL INFO bootstrap.cc:100 -> 2",
      source="https://github.com/NVIDIA/nccl/issues/331 (NCCL src/bootstrap.cc error propagation)"),
    S(id="nccl.system_error", cls="nic_iface", kind="cause", needles=(b"unhandled system error", b"ncclSystemError"),
      pattern=r"unhandled system error|ncclSystemError",
      title="NCCL reported a system error (a system call failed)",
      root_cause="ncclSystemError is a failed system call; without a more specific line it is most often a socket to a peer "
      "over the wrong or an unreachable interface (docker0, loopback, a bridge) or a firewall, less often /dev/shm. "
      "NCCL_DEBUG=INFO prints the call that failed.",
      fix=IFACE_FIX + "\nexport NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET    # rerun: the WARN line names the call that failed",
      check="net.nic_route", tier=2,
      example="RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:518, unhandled system error, NCCL version 2.4.8",
      source="https://github.com/deepinsight/insightface/issues/1444 (NCCL ncclSystemError; torch ProcessGroupNCCL.cpp)",
      decode=(Decode(kind="nccl_system_error",
                     pattern=r"(unhandled system error|remote process exited or there was a network error)",
                     cause=lambda m: "NCCL reported a system/network error (see the NCCL WARN lines in the log tail)",
                     remediation=lambda m: "export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET   # rerun, then read the NCCL WARN lines",
                     actor="node", cause_id="collective.nccl_system_error"),)),
    S(id="nccl.bad_interface_selected", cls="nic_iface", kind="suspect", needles=(b"Using lo", b"]lo:", b"Using docker", b"]docker", b"virbr", b"veth",
                                                                                 b"Using interface lo:", b"]cni", b"flannel", b"Using br-", b"]br-"),
      pattern=r"(?:Bootstrap|NET/Socket|NET) ?: Using (?:interface )?(?:\[\d+\])?(?P<iface>" + UNREACHABLE_IFACE + r"):(?P<addr>\S+?)<",
      title="NCCL selected interface {iface} ({addr})",
      root_cause="NCCL uses {iface}, which other nodes cannot reach (loopback, docker or bridge interfaces hold the same "
      "addresses on every node): multi-node init hangs or times out.", fix=IFACE_FIX, check="net.nic_route", tier=2,
      example="paigcr-b-gpu-1012:4152:4206 [0] NCCL INFO NET : Using interface lo:127.0.0.1<0>",
      source="https://github.com/horovod/horovod/issues/584", stall="multi_node"),
    S(id="nccl.container_bridge_address", cls="nic_iface", kind="suspect", needles=(b"172.17.", b"192.168.122."),
      pattern=r"(?:Bootstrap|NET/Socket) ?: Using (?:interface )?(?:\[\d+\])?(?P<iface>[A-Za-z][\w.-]*):"
      r"(?P<addr>172\.17\.\d+\.\d+|192\.168\.122\.\d+)<",
      title="NCCL selected {iface} with {addr}, an address of a host's own bridge network",
      root_cause="{addr} lies in 172.17.0.0/16, the network Docker gives containers on its default bridge, or 192.168.122.0/24, "
      "libvirt's default network (virbr0): each host has its own "
      "such network, so ranks on other nodes cannot reach this address and a multi-node init hangs or times out. "
      "The containers of a multi-node job need the host's network (docker run --network=host, hostNetwork: true in "
      "Kubernetes) or an overlay whose addresses route between the nodes.",
      fix=HOST_NETWORK_FIX, check="net.nic_route", tier=2,
      example="c6ad99331184:117277:117277 [0] NCCL INFO Bootstrap : Using [0]eth0:172.17.0.2<0>",
      source="https://github.com/NVIDIA/nccl/issues/367 (Docker's default bridge network is 172.17.0.0/16)", stall="multi_node"),
    # NCCL's first (or only) interface holds a link-local address only: fe80::/10 or 169.254.0.0/16 are not routed
    # between hosts, and appliance interfaces carry the same one on every node (the BMC's USB network of GH200 and
    # DGX nodes, 169.254.3.1). A later interface with one is no such sign: NCCL uses its first
    S(id="nccl.link_local_interface", cls="nic_iface", kind="suspect", needles=(b"fe80:", b"169.254."),
      pattern=r"(?:Bootstrap|NET/Socket) ?: Using (?:\[0\])?(?P<iface>[A-Za-z][\w.-]*):"
      r"(?P<addr>fe80:[0-9a-fA-F:]*(?:%[\w.-]+)?|169\.254\.\d{1,3}\.\d{1,3})<",
      title="NCCL's first interface {iface} has only a link-local address ({addr})",
      root_cause="{addr} is link-local (IPv6 fe80::/10, IPv4 169.254.0.0/16): such addresses are not routed between hosts, and "
      "an appliance interface carries the same one on every node (the BMC's USB network on GH200 and DGX nodes is "
      "169.254.3.1 everywhere). NCCL listens and publishes its bootstrap address on {iface}, so ranks on other nodes "
      "cannot reach it: a multi-node init hangs or its connections are refused.",
      fix=IFACE_FIX + "\nexport NCCL_SOCKET_FAMILY=AF_INET    # when the interface has IPv4 too but NCCL took its IPv6 address",
      check="net.nic_route", tier=2,
      example="gh200-1:2211:2211 [0] NCCL INFO Bootstrap : Using [0]usb0:169.254.3.1<0>",
      source="https://github.com/uccl-project/uccl/pull/1034 (NCCL bootstrap on GH200's 169.254.3.1 link-local NIC: "
      "'Connection refused' across two nodes); https://github.com/NVIDIA/nccl/issues/529 (ip6tnl0:fe80::... first)",
      stall="multi_node"),
    # Open MPI's (PRRTE's, ORTE's) out-of-band wire-up lists every address it may use: one of a host's own bridge
    # network among them is tried too, but runs that list it also work, so it only explains a hang the user reports
    S(id="ompi.oob_bridge_address", cls="nic_iface", kind="suspect", needles=(b"to our list of V4 connections",),
      pattern=r"oob:tcp:init adding (?P<addr>172\.17\.\d+\.\d+|192\.168\.122\.\d+) to our list of V4 connections",
      title="Open MPI's out-of-band wire-up also uses {addr}, an address of a host's own bridge network",
      root_cause="{addr} lies in Docker's default bridge (172.17.0.0/16) or libvirt's default network (192.168.122.0/24, "
      "virbr0): every host has its own, so daemons that connect to it reach no one, or the wrong host, and the job's "
      "start can hang. Exclude the bridge, or include only the interface toward the other nodes.",
      fix="dsv3-preflight run --only net.nic_route    # on each node: its interface toward the other nodes\n"
      "export PRTE_MCA_oob_tcp_if_include=${IFACE:?interface toward the other nodes}    # Open MPI 5 (PRRTE)\n"
      + OMPI_IFACE_FIX, check="net.nic_route", tier=2,
      example="[ucc-h5:200668] [prte-ucc-h5-200668@0,0] oob:tcp:init adding 192.168.122.195 to our list of V4 connections",
      source="https://github.com/open-mpi/ompi/issues/13155 (prrte src/mca/oob/tcp/oob_tcp_component.c; Open MPI 4's ORTE "
      "orte/mca/oob/tcp)", hang_suspect=True),
    # a suspect interface listed after a routable first one: NCCL's socket transport may use it too, but runs like this
    # also work (round 4's development part has one), so it never explains a log that just stops
    S(id="nccl.bad_interface_listed", cls="nic_iface", kind="suspect", needles=(b"]lo:", b"]docker", b"virbr", b"veth", b"]cni", b"flannel", b"]br-"),
      pattern=r"(?:Bootstrap|NET/Socket) ?: Using .*\[\d+\](?P<iface>" + UNREACHABLE_IFACE + r"):(?P<addr>\S+?)<",
      title="NCCL also lists interface {iface} ({addr})",
      root_cause="Besides its first interface NCCL lists {iface}, which other nodes cannot reach (loopback, docker or bridge "
      "interfaces hold the same addresses on every node); connections NCCL makes over it fail or hang. In a failed "
      "run that is a likely cause: restrict NCCL to the interface toward MASTER_ADDR.", fix=IFACE_FIX, check="net.nic_route", tier=2,
      example="ip-172-31-0-137:14605:14673 [0] NCCL INFO NET/Socket : Using [0]ens5:172.31.0.137<0> "
      "[1]veth75fa783:fe80::14ad:64ff:fe64:b31e%veth75fa783<0>",
      source="https://github.com/pytorch/pytorch/issues/68893", hang_suspect=True),
)
