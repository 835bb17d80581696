"""``port_rendezvous``: the rendezvous (a port held, a store unreachable or timing out, name resolution, launchers that cannot reach their hosts).

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from ...text import IFACE, NCCL_IFACE
from .record import Decode, S, Signature
from .shared import (
    ALLREDUCE_FIX,
    HOROVODRUN_FIX,
    HOST_NETWORK_FIX,
    IFACE_FIX,
    LABELS,
    LAUNCH_FIX,
    STORE_FIX,
    STORE_FIX_AT,
)

SIGNATURES: tuple[Signature, ...] = (
    S(id="c10d.address_in_use", cls="port_rendezvous", kind="cause", needles=(b"Address already in use", b"EADDRINUSE", b"errno: 98", b"already in use"),
      pattern=r"(?:bind to|listen on) \S*?:(?P<port>\d+) \(errno: 98 - Address already in use\)"
      r"|port: (?P<port2>\d+), useIpv6: \w+, code: -98, name: EADDRINUSE|Address already in use|EADDRINUSE"
      r"|on \S+, port: (?P<port3>\d+) already in use",  # torch/distributed/elastic/utils/distributed.py
      title="Rendezvous port[[ {port}]] already in use",
      root_cause="The port[[ {port}]] on the master is still held, usually by a leftover torchrun/python of an earlier run or another "
      "job using the same MASTER_PORT on this machine.",
      fix="ss -ltnp \"sport = :[[{port}||${MASTER_PORT:?the port in the error}]]\"    # who holds it\n"
      "# stop that leftover process, or launch with another MASTER_PORT\n"
      "dsv3-preflight run --only net.port_free",
      check="net.port_free", tier=1,
      example="torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
      "The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
      source="https://github.com/meta-pytorch/torchtune/issues/392 (torch/csrc/distributed/c10d/socket.cpp)",
      decode=(Decode(kind="store_port_in_use",
                     pattern=r"(address already in use|EADDRINUSE)",
                     cause=lambda m: "MASTER_PORT is already in use on the master: a leftover process holds it",
                     remediation=lambda m: 'sudo fuser -v "${MASTER_PORT:-39500}/tcp"   # then end the leftover process it names',
                     actor="node", cause_id="net.port_held"),)),
    S(id="c10d.numeric_hostname", cls="port_rendezvous", kind="cause", needles=(b"network address of (", b"network addresses of (", b"::ffff:0."),
      pattern=r"network address(?:es)? of \((?P<host>\d+), (?P<port>\d+)\)|connect to \[::ffff:(?P<addr>0\.\d+\.\d+\.\d+)\]:(?P<port2>\d+)",
      title="Hostname '{host}' is only digits and is read as an IP address",
      root_cause="getaddrinfo/inet_aton parse an all-digit hostname as a 32-bit IPv4 number (6841231 → 0.104.99.143), so "
      "ranks connect to a nonsense address instead of the master.",
      fix="export MASTER_ADDR=$(getent ahostsv4 \"${MASTER_HOST:?the master host name}\" | awk 'NR==1{print $1}')    # use its IP",
      check="env.launch_vars", tier=1,
      example="[E socket.cpp:753] [c10d] The client socket has failed to connect to any network address of (6841231, 47389).",
      source="https://github.com/hpcaitech/Open-Sora/issues/667"),
    S(id="c10d.ipv6_lookup", cls="port_rendezvous", kind="suspect", needles=(b"IPv6 network addresses of",),
      pattern=r"The IPv6 network addresses of \((?P<host>[^,]+), (?P<port>\d+)\) cannot be retrieved \(gai error: -(?:2|5|9) ",
      title="IPv6 lookup of {host} failed",
      root_cause="{host} has no IPv6 address (harmless by itself: torch then tries IPv4; it matters when the connection then "
      "fails). getaddrinfo answers -2 (EAI_NONAME), -5 (EAI_NODATA) or -9 (EAI_ADDRFAMILY) for a family a host lacks.",
      fix="getent hosts {host}    # on every node", check="env.launch_vars", tier=2,
      example="[W socket.cpp:601] [c10d] The IPv6 network addresses of (localhost, 51595) cannot be retrieved (gai error: -2 - Name or service not known).",
      source="https://github.com/antgroup/animate-x/issues/15 (torch/csrc/distributed/c10d/socket.cpp; glibc netdb.h EAI_* codes)"),
    S(id="nccl.bootstrap_root_mismatch", cls="port_rendezvous", kind="cause", needles=(b"Bootstrap Root",),
      pattern=r"Bootstrap Root ?: (?:rank (?P<rank_x>\d+) of (?P<n>\d+) ranks has already checked in"
      r"|mismatch in (?:rank count|info) from procs(?:,? nranks)? ?(?P<a>\d+) ?(?::|vs) ?(?P<b>\d+))",
      title="NCCL's bootstrap root got ranks that do not belong to one job[[ (rank {rank_x} of {n} checked in twice)]]"
      "[[ ({a} vs {b} ranks)]]",
      root_cause="The processes that reached one NCCL bootstrap root disagree on the number of ranks, or one rank checked in "
      "twice: two jobs share a MASTER_PORT or NCCL_COMM_ID, a process of a crashed run is still there, or the nodes "
      "were launched with different --nnodes / --nproc-per-node.",
      fix="dsv3-preflight run --all-nodes --only cluster.env_consistency,net.port_free    # one world size everywhere; nobody else on the port\n"
      "ss -ltnp | grep \":${MASTER_PORT:?the rendezvous port}\"    # on the head: a process of another run?\n"
      "# start every node with the same --nnodes and --nproc-per-node; give each concurrent job its own MASTER_PORT",
      check="cluster.env_consistency", tier=1,
      example="gpu-a:4101:4190 [0] bootstrap.cc:348 NCCL WARN Bootstrap Root : rank 3 of 16 ranks has already checked in",
      source="NCCL src/bootstrap.cc (format strings, 2.18-2.30)"),
    S(id="net.name_resolution", cls="port_rendezvous", kind="cause", needles=(b"name resolution", b"Name or service not known", b"nodename nor servname",
                                                                             b"Could not resolve hostname", b"gai error", b"getaddrinfo", b"Unknown host",
                                                                             b"No address associated with hostname", b"host not found",
                                                                             b"Name does not resolve", b"Servname not supported"),
      pattern=r"(?:gai error: -?\d+ - )?(?:Temporary failure in name resolution|Name or service not known|nodename nor servname provided"
      r"|No address associated with hostname|Name does not resolve|Servname not supported|Non-recoverable failure in name resolution)"
      r"|Could not resolve hostname (?P<host>\S+?):|getaddrinfo(?: failed|\(\) failed|: )|Unknown host|host not found"
      r"|network addresses of \((?P<host2>[^,]+), \d+\) cannot be retrieved \(gai error",
      title="Host name does not resolve",
      root_cause="A host name used for the rendezvous (MASTER_ADDR, a node in the hostfile, this machine's own name) does not "
      "resolve on this node: missing /etc/hosts or DNS entry.",
      fix="getent hosts \"$MASTER_ADDR\"; getent hosts \"$(hostname)\"    # on every node\n"
      "# add the name to /etc/hosts on all nodes, or set MASTER_ADDR to the master's IP\n"
      "dsv3-preflight run --only env.launch_vars",
      check="env.launch_vars", tier=1,
      example="[W socket.cpp:601] [c10d] The IPv6 network addresses of (user, 53821) cannot be retrieved (gai error: -3 - Temporary failure in name resolution).",
      source="https://github.com/nyu-systems/Grendel-GS/issues/9 (glibc gai_strerror; torch 1.x TCPStore 'host not found')",
      # before the store's connect timeout: a name that does not resolve is why the store did not answer
      decode=(Decode(kind="master_unresolvable",
                     pattern=r"(Name or service not known|nodename nor servname provided|Temporary failure in name resolution|getaddrinfo.*failed)",
                     cause=lambda m: "MASTER_ADDR does not resolve on this host",
                     remediation=lambda m: 'export MASTER_ADDR="${HEAD_ADDR:?the head node address on the training network}"   # on every node',
                     actor="job", cause_id="net.master_unresolvable"),)),
    S(id="c10d.desync_report_failed", cls=None, kind="symptom", needles=(b"TORCH_NCCL_DESYNC_DEBUG report", b"NCCL_DESYNC_DEBUG report"),
      pattern=r"Failed to re?t?rieve (?:TORCH_)?NCCL_DESYNC_DEBUG report",
      title="torch could not collect its desync report",
      root_cause="While handling a collective timeout, the desync debugger could not read the other ranks' state from the store "
      "(it went away with them): the timeout is the failure.", fix=ALLREDUCE_FIX, check="dist.allreduce", tier=4,
      example="[rank0]:[E1021 10:00:00.000000000 ProcessGroupNCCL.cpp:2241] Rank 0 Failed to retrieve TORCH_NCCL_DESYNC_DEBUG report.  "
      "Please file an issue. Error: Socket Timeout",
      source="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (DesyncDebugger::run)"),
    # the store's client trying an address that only its own host reaches: the head's host name on Debian's 127.0.1.1
    # line (torchrun's c10d rendezvous hands the head's host name to the workers as MASTER_ADDR), or a container's
    # bridge address given as MASTER_ADDR. Whatever the port, a rank on another node cannot get there
    S(id="c10d.store_on_local_address", cls="nic_iface", kind="cause", needles=(b"client socket has", b"failed to connect/validate"),
      pattern=r"(?:client socket has timed out after \S+ while trying to connect to \(|client socket has failed to connect to \[?"
      r"|TCP client failed to connect/validate to host \[?)"
      r"(?:(?P<loop>127\.0\.1\.1)|(?P<bridge>172\.(?:1[7-9]|2\d|30)\.0\.\d{1,3}|192\.168\.122\.\d{1,3}))\]?[:,] ?(?P<port>\d+)",
      title="The rendezvous store is sought at [[{loop}]][[{bridge}]]:{port}, an address only its own host reaches",
      root_cause="[[{loop} is a loopback address: Debian and Ubuntu map the host name to it in /etc/hosts, so a head whose "
      "address was handed out by its host name (torchrun's c10d rendezvous gives the workers the head's host name as "
      "MASTER_ADDR; a launcher that resolves its own name) is, on every other node, that node itself.]]"
      "[[{bridge} lies in a container bridge's network (Docker's 172.17-172.30.0.x, libvirt's 192.168.122.x): every "
      "host has its own, so MASTER_ADDR set to the head container's bridge address leads the other nodes to no one, "
      "or to their own bridge.]] Whatever the port, a rank on another node cannot reach the store there.",
      fix="getent hosts \"$(hostname)\"    # on the head: a 127.x answer is the cause; map the name to its routable address\n"
      "# or name the head by the address the other nodes reach it at: torchrun --rdzv-endpoint IP:PORT (--master-addr IP)\n"
      + HOST_NETWORK_FIX, check="net.nic_route", tier=1,
      example="[E521 15:43:02.707733876 socket.cpp:1023] [c10d] The client socket has timed out after 600000ms while trying to "
      "connect to (172.17.0.2, 29500).",
      source="torch/csrc/distributed/c10d/socket.cpp and TCPStore.cpp (the client's connect lines); Debian's /etc/hosts "
      "'127.0.1.1 <hostname>'; Docker's address pools https://docs.docker.com/engine/network/",
      transient=True, multi_node_only=True),
    # torch 2.4+ TCPStore client: a connect attempt that it retries (workers often start before the master listens);
    # the terminal form ends "- timed out" and is c10d.store_timeout
    S(id="c10d.store_connect_retry", cls="port_rendezvous", kind="cause", needles=(b"failed to connect/validate",),
      pattern=r"TCP client failed to connect/validate to host (?P<host>\S+?):(?P<port>\d+) - retrying",
      title="The rendezvous store {host}:{port} did not answer yet (torch retries)",
      root_cause="This node tried to reach the rendezvous store (MASTER_ADDR:MASTER_PORT) and retries: harmless while the master "
      "starts; the cause of the failure when nothing follows (the master never started, the address or port is "
      "wrong, or a firewall drops the packets).", fix=STORE_FIX_AT, check="net.port_reach", tier=1,
      example="[W1021 10:00:00.123 TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to host node1:29500 - retrying "
      "(try=0, timeout=1800000ms, delay=1496ms): Connection refused",
      source="torch/csrc/distributed/c10d/TCPStore.cpp (TCPClient::connect, torch 2.4+)", transient=True,
      # the retries of the attempt whose timeout is the failure (both name the same store)
      consequence_of=("c10d.store_on_local_address", "c10d.numeric_hostname", "c10d.address_in_use", "net.name_resolution", "c10d.store_timeout",
                      "elastic.rendezvous_timeout", "elastic.c10d_store_not_hosted")),
    # torchrun's dynamic (c10d, etcd) rendezvous: the store answered (an unreachable one raises
    # RendezvousConnectionError) but the rendezvous did not complete before join_timeout. Produced here: a three-node
    # job whose third node was given another --rdzv-id, and one whose third node started 40 s late (join_timeout=25)
    S(id="elastic.rendezvous_timeout", cls="port_rendezvous", kind="cause", needles=(b"RendezvousTimeoutError",),
      pattern=r"RendezvousTimeoutError",
      title="torchrun's rendezvous did not complete: not every node joined in time",
      root_cause="The rendezvous store answered, but fewer nodes than --nnodes (its minimum) joined before join_timeout (600 s "
      "unless --rdzv-conf sets it): a node did not start, or started too late, or its torchrun was given another "
      "--rdzv-id, --rdzv-endpoint or --nnodes than the others.",
      fix="# on every node: the same --rdzv-id, --rdzv-endpoint and --nnodes, and every node started within join_timeout\n"
      "ps -eo lstart,args | grep -E '[t]orchrun|[t]orch[.]distributed[.]run'\n"
      "dsv3-preflight run --only cluster.node_count", check="cluster.node_count", tier=1,
      example="torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
      source="torch/distributed/elastic/rendezvous/dynamic_rendezvous.py (_RendezvousJoinOp: raise RendezvousTimeoutError)"),
    # torchrun's agents exchange their node's info through the store (agent/server/api.py _assign_worker_ranks, torch
    # 2.3+): each writes torchelastic/role_info/<node rank>, node rank 0 reads them all and writes
    # torchelastic/assigned_ranks/<node rank>, which each agent waits for. A wait on these keys that times out: the
    # store answered, a node rank never wrote. Produced here (netns lab): three nodes, two given --node-rank 1
    S(id="elastic.ranks_not_assigned", cls="port_rendezvous", kind="cause", needles=(b"torchelastic/role_info/", b"torchelastic/assigned_ranks/"),
      pattern=r"wait timeout after (?P<ms>\d+)ms, keys: \S*torchelastic/(?P<kind>role_info|assigned_ranks)/(?P<rank>\d+)",
      title="torchrun's rendezvous: the store answered, but not every node rank joined",
      root_cause="The rendezvous store was reached (no network problem): torchrun's agents write their node's info under its "
      "--node-rank, and node rank 0 hands out the global ranks once every node rank from 0 to NNODES-1 has written. "
      "One never did: a node did not start (or started with another --nnodes, --master-addr or --master-port), or "
      "two nodes were given the same --node-rank, so one rank is claimed twice and another by no one.",
      fix="ps -eo args | grep -E '[t]orchrun|[t]orch[.]distributed[.]run'    # on each node: its --node-rank and --nnodes\n"
      "# every node a distinct --node-rank from 0 to NNODES-1 (0 on the node at --master-addr), all the same --nnodes\n"
      "dsv3-preflight run --all-nodes --only cluster.node_rank,cluster.node_count", check="cluster.node_rank", tier=1,
      example="torch.distributed.DistStoreError: wait timeout after 15000ms, keys: /none/torchelastic/assigned_ranks/1",
      source="torch/distributed/elastic/agent/server/api.py (SimpleElasticAgent._assign_worker_ranks: store.multi_get of "
      "role_info/<i>, store.get of assigned_ranks/<node rank>); produced here by torch 2.13 torchrun on three "
      "network-namespace nodes, two with --node-rank 1 (tests/test_doctor_netns.py)",
      # a node whose own connect to the store failed is the node rank that never wrote
      consequence_of=("elastic.duplicate_node_rank", "elastic.store_clients_missing", "c10d.store_timeout",
                      "c10d.client_connect_failed")),
    S(id="c10d.store_timeout", cls="port_rendezvous", kind="cause", needles=(b"client socket has timed out", b"failed to connect/validate",
                                                                            b"connect() timed out", b"Socket Timeout", b"waiting for clients",
                                                                            b"store based barrier", b"wait timeout after",
                                                                            b"waiting for workers", b"clients joined", b"workers joined", b"Wait timeout",
                                                                            b"members to join"),
      pattern=r"client socket has timed out after (?P<after>\S+) while trying to connect to \(?(?P<host>[^,\s)]+)(?:, |:)(?P<port>\d+)"
      r"|TCP client failed to connect/validate to host (?P<host2>\S+?):(?P<port2>\d+)|connect\(\) timed out"
      r"|Socket Timeout|Timed out after \d+ seconds waiting for (?:clients|workers)|Timed out initializing process group in store based barrier"
      r"|\d+/\d+ (?:clients|workers) joined|wait timeout after \d+ms, keys:|(?:DistStoreError|RuntimeError): Wait timeout\b"
      r"|timed out waiting for all (?P<members>\d+) members to join",  # elastic/utils/distributed.py
      title="Rendezvous store[[ {host}:{port}]] not reached in time",
      root_cause="This node could not reach the rendezvous store (MASTER_ADDR:MASTER_PORT) or not all ranks joined in time: "
      "the master is not started, the address or port is wrong, a firewall drops the packets, or a node never launched. "
      "A host name must resolve to the head's address on every node: torchrun's c10d rendezvous gives the workers "
      "the head's host name as their MASTER_ADDR, and a name on 127.0.1.1 (Debian's /etc/hosts line) is each node "
      "itself.",
      fix=STORE_FIX_AT, check="net.port_reach", tier=1,
      example="[E108 20:04:34.467642512 socket.cpp:957] [c10d] The client socket has timed out after 900s while trying to connect to (33.145.124.128, 29500).",
      source="https://github.com/pytorch/pytorch/issues/105782 (torch/csrc/distributed/c10d/socket.cpp; TCPStore.cpp "
      "'Timed out after {} seconds waiting for clients. {}/{} clients joined.')",
      consequence_of=("c10d.store_on_local_address", "c10d.numeric_hostname", "c10d.address_in_use", "net.name_resolution", "c10d.bind_failed",
                      "c10d.env_var_missing", "elastic.c10d_store_not_hosted", "elastic.store_clients_missing"),
      decode=(Decode(kind="store_connect_timeout",
                     pattern=r"The client socket has timed out after (?P<ms>\d+)\s*m?s while trying to connect to \((?P<host>[^,]+),\s*(?P<port>\d+)\)",
                     cause=lambda m: f"the rendezvous store at {m['host']}:{m['port']} did not answer within {int(m['ms']) / 1000:g} s: "
                                     "the master is not running yet, or the port is filtered on the way",
                     remediation=lambda m: (f"# start node 0 first (it hosts the store); then, from this node, test the port:\n"
                                            f"timeout 3 bash -c 'exec 3<>/dev/tcp/{m['host'].strip()}/{m['port']}' && echo open"),
                     actor="network", cause_id="net.port_filtered"),
              # the probe's own worker (collective/probes/worker.py) names the ranks its timed-out store wait missed
              Decode(kind="ranks_missing",
                     pattern=r"ranks \[(?P<ranks>[\d, ]+)\] never joined",
                     cause=lambda m: f"ranks {m['ranks']} never reached the rendezvous store",
                     remediation=lambda m: ("# run `dsv3-preflight probe` on every node with the same MASTER_ADDR and MASTER_PORT, or all at once from the Ray head:\n"
                                            "dsv3-preflight run --all-nodes --probe"),
                     actor="job", cause_id="collective.ranks_missing"),
              Decode(kind="store_wait_timeout",
                     pattern=r"(Wait timeout|Timed out (waiting|after).{0,80}for (key|keys)|Socket Timeout)",
                     cause=lambda m: "a rank waited for the others in the rendezvous store until the timeout: some rank is missing or stuck",
                     remediation=lambda m: "# see which ranks never joined (the evidence); start the missing node or fix its network",
                     actor="job", cause_id="collective.ranks_missing"))),
    S(id="c10d.client_connect_failed", cls="port_rendezvous", kind="cause", needles=(b"client socket has failed to connect",
                                                                                    b"client socket cannot be initialized",
                                                                                    b"RuntimeError: No route to host", b"RuntimeError: Network is unreachable"),
      pattern=r"client socket has failed to connect to (?P<target>\S+?)\.? \((?:errno|system error): (?P<errno>-?\d+) - (?P<err>[^)]*)\)"
      r"|client socket has failed to connect to any network address|client socket cannot be initialized to connect to (?P<target2>\S+)"
      r"|^\s*RuntimeError: (?P<err3>No route to host|Network is unreachable)\s*$",  # torch <= 1.9 torch/lib/c10d/Utils.cpp
      title="Cannot connect to the rendezvous store[[ {target}]][[ ({err})]]",
      root_cause="The store address refused or dropped the connection: wrong MASTER_ADDR/PORT, the master is not listening yet, "
      "or a firewall.", fix=STORE_FIX, check="net.port_reach", tier=1,
      example="[W socket.cpp:697] [c10d] The client socket has failed to connect to 10.0.0.5:29500 (errno: 111 - Connection refused).",
      source="torch/csrc/distributed/c10d/socket.cpp (Linux '(errno: N - strerror)', Windows '(system error: N - message)')",
      # torch 2.4+ prints these per-address lines under its TCPStore client's own line for the same attempt, which
      # names the host and port as configured (torch 2.13's per-address addresses can be garbage: "[::]:25987" for
      # 10.77.0.99:29531, seen in the network-namespace lab)
      consequence_of=("c10d.store_on_local_address", "c10d.numeric_hostname", "c10d.address_in_use", "net.name_resolution", "c10d.store_connect_retry",
                      "c10d.store_timeout"), transient=True,
      decode=(Decode(kind="no_route",
                     pattern=r"(No route to host|Network is unreachable|EHOSTUNREACH|ENETUNREACH)",
                     cause=lambda m: "no route from this host to a peer (wrong interface or subnet)",
                     remediation=lambda m: f"export NCCL_SOCKET_IFNAME={NCCL_IFACE} GLOO_SOCKET_IFNAME={IFACE}   # and check the peers are on a subnet it reaches",
                     actor="network", cause_id="collective.no_route_to_peer"),)),
    S(id="store.retry_not_listening", cls="port_rendezvous", kind="suspect", needles=(b"while the server is not yet listening",),
      pattern=r"Retry to connect to (?!127\.)(?P<target>\S+?):(?P<port>\d+) while the server is not yet listening",  # 127.x: below
      title="A rank keeps retrying the master's store at {target}:{port}: nothing listens there yet",
      root_cause="The rank connects to the master's store and is refused: the master has not started (or failed before it "
      "listened), MASTER_ADDR/port name another host or port, or a firewall rejects the port. A run that goes on "
      "after such retries only waited for the master to start.", fix=STORE_FIX, check="net.port_reach", tier=2,
      example="I0224 13:50:33.278455 1512912 tcp_utils.cc:107] Retry to connect to 10.0.0.5:63917 while the server is not yet listening.",
      source="Paddle paddle/phi/core/distributed/store/tcp_utils.cc", stall="any", transient=True),
    S(id="c10d.server_waiting", cls="port_rendezvous", kind="suspect", needles=(b"server socket on",),
      pattern=r"server socket on (?P<addr>\S+) has timed out, will retry",
      title="The rendezvous server waited for clients that did not connect",
      root_cause="Workers are not reaching the master's store (wrong MASTER_ADDR on the workers, a firewall, or they never started).",
      fix=STORE_FIX, check="net.port_reach", tier=2,
      example="[W416 15:37:25.363094293 socket.cpp:933] [c10d] The server socket on [::ffff:36.xxx.xxx.13]:40613 has timed out, will retry.",
      source="torch/csrc/distributed/c10d/socket.cpp", stall="any"),
    # torchrun's agent waits at the exit barrier only after its worker group SUCCEEDED (elastic/agent/server/api.py
    # _invoke_run); it logs the barrier's failure and exits 0. Produced here: a three-node Gloo job in network
    # namespaces whose node 0 (the store's host) exited first (tests/test_doctor_netns.py)
    S(id="elastic.exit_barrier_failed", cls=None, kind="symptom", needles=(b"Error waiting on exit barrier", b"torchelastic/agent/terminal_state"),
      pattern=r"Error waiting on exit barrier|waiting on barrier.*torchelastic/agent/terminal_state",
      title="torchrun's agent could not pass the exit barrier after its workers succeeded",
      root_cause="This node's workers had all finished successfully; its agent then waited for the other nodes at the exit barrier "
      "in the rendezvous store, and the store was gone: the node hosting it (node rank 0) had already exited. Noise "
      "of a finished run unless another node's log shows a failure.", fix="", check=None, tier=4,
      example="E1124 05:49:31.128000 12736 .venv/lib/python3.11/site-packages/torch/distributed/elastic/agent/server/api.py:1008] "
      "Error waiting on exit barrier. Elapsed: 0.011486291885375977 seconds",
      source="torch/distributed/elastic/agent/server/api.py (_exit_barrier, called when the worker group SUCCEEDED)",
      teardown=True, workers_done=True),
    S(id="elastic.rendezvous_teardown", cls=None, kind="symptom", needles=(b"has failed to shutdown the rendezvous", b"keep-alive heartbeat to the rendezvous",
                                                                           b"RendezvousGracefulExitError"),
      pattern=r"has failed to (?:shutdown the rendezvous|send a keep-alive heartbeat to the rendezvous)"
      r"|RendezvousGracefulExitError",
      title="torchrun's agents could not close the rendezvous together",
      root_cause="After its workers ended, an agent could not reach the rendezvous store to shut down or pass the exit barrier: "
      "the node hosting the store (node rank 0) had already stopped, or another node's workers failed or hang. The "
      "first failure is elsewhere.", fix="", check=None, tier=4,
      example="[2024-05-08 08:47:31,877] torch.distributed.elastic.rendezvous.dynamic_rendezvous: [WARNING] The node "
      "'node1_1234_0' has failed to shutdown the rendezvous 'none' due to an error of type RendezvousConnectionError.",
      source="torch/distributed/elastic/rendezvous/dynamic_rendezvous.py (shutdown, _keep_alive)", teardown=True),
    S(id="elastic.rendezvous_state", cls="port_rendezvous", kind="cause", needles=(b"RendezvousStateError", b"state object is corrupt"),
      pattern=r"RendezvousStateError|The (?:rendezvous )?state (?:object )?is corrupt",
      title="torchrun's rendezvous state is corrupt",
      root_cause="The state under the rendezvous key cannot be decoded: another job (or another torch version) uses the same "
      "--rdzv-endpoint and --rdzv-id.",
      fix="# give each job its own rendezvous: a unique --rdzv-id (and port) per job\n"
      "torchrun --rdzv-id \"${JOB_ID:?a unique id for this job}\" --rdzv-endpoint \"${MASTER_ADDR:?head address}:${MASTER_PORT:-29500}\" \"${TRAIN_SCRIPT:?the training script and its arguments}\"\n"
      "dsv3-preflight run --only net.port_free", check="net.port_free", tier=2,
      example="torch.distributed.elastic.rendezvous.api.RendezvousStateError: The rendezvous state is corrupt. See inner exception for details.",
      source="torch/distributed/elastic/rendezvous/dynamic_rendezvous.py, c10d_rendezvous_backend.py"),
    S(id="elastic.endpoint_invalid", cls="port_rendezvous", kind="cause", needles=(b"of the rendezvous endpoint",),
      pattern=r"The (?P<what>hostname|port number) of the rendezvous endpoint '(?P<endpoint>.*)'(?: must be|\s*$)",
      title="The rendezvous endpoint {endpoint} is not a host and port",
      root_cause="torchrun parses --rdzv-endpoint (or --master-addr and --master-port) as HOST[:PORT], a host name or an IPv4 or "
      "IPv6 address, then a port number; its {what} is neither: a stray quote, a space, a scheme (tcp://) or a second "
      "colon in the value.",
      fix="printf '%s\\n' \"$MASTER_ADDR:$MASTER_PORT\"    # must print HOST:PORT, nothing else (no quotes, no tcp://)\n"
      "dsv3-preflight run --only env.launch_vars",
      check="env.launch_vars", tier=1,
      example="ValueError: The hostname of the rendezvous endpoint '127.0.0.1':10764' ",
      source="https://github.com/learnables/learn2learn/issues/263 (torch/distributed/elastic/rendezvous/utils.py, "
      "parse_rendezvous_endpoint)"),
    S(id="elastic.rendezvous_connection", cls="port_rendezvous", kind="cause", needles=(b"RendezvousConnectionError",),
      pattern=r"RendezvousConnectionError",
      title="torchrun could not connect to the C10d rendezvous store",
      root_cause="The rendezvous endpoint (--rdzv-endpoint / MASTER_ADDR:MASTER_PORT) is unreachable from this node.",
      fix=STORE_FIX, check="net.port_reach", tier=1,
      example="torch.distributed.elastic.rendezvous.api.RendezvousConnectionError: The connection to the C10d store has failed. See inner exception for details.",
      source="https://github.com/pytorch/pytorch/issues/107021",
      consequence_of=("c10d.store_on_local_address", "c10d.store_timeout", "c10d.client_connect_failed", "c10d.numeric_hostname", "c10d.address_in_use",
                      "net.name_resolution", "elastic.c10d_store_not_hosted"), lost_after_start=True),
    S(id="elastic.store_call_failed", cls="port_rendezvous", kind="cause", needles=(b"Broken pipe", b"Connection reset by peer", b"Connection refused"),
      pattern=r"^" + LABELS + r"(?:RuntimeError|torch\.distributed\.DistNetworkError|DistNetworkError): (?P<err>Broken pipe|Connection reset by peer|Connection refused)\s*$",
      title="torchrun's rendezvous store connection failed ({err})",
      root_cause="The C10d rendezvous backend lost or could not open its connection to the store on the rendezvous endpoint: the "
      "port is not open between the nodes (a firewall, a cloud security group, a cluster that exposes few ports), or "
      "the node hosting the store stopped.", fix=STORE_FIX, check="net.port_reach", tier=2,
      example="RuntimeError: Broken pipe",
      source="https://github.com/meta-pytorch/torchx/issues/540 (torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py)",
      requires="rdzv_store", lost_after_start=True),
    S(id="elastic.rendezvous_closed", cls="port_rendezvous", kind="symptom", needles=(b"RendezvousClosedError",),
      pattern=r"RendezvousClosedError",
      title="torchrun's rendezvous was already closed",
      root_cause="This agent tried to join a rendezvous the other nodes had closed: they stopped (a failure, or max_restarts "
      "used up) or finished before it arrived. The other nodes' logs hold the first failure.",
      fix="dsv3-preflight run --only cluster.node_count    # every node up and launched together", check="cluster.node_count", tier=3,
      example="torch.distributed.elastic.rendezvous.api.RendezvousClosedError",
      source="torch/distributed/elastic/rendezvous/dynamic_rendezvous.py (raise RendezvousClosedError)"),
    S(id="torch.heartbeat_store_gone", cls=None, kind="symptom", needles=(b'"should dump" flag on TCPStore',),
      pattern=r'Failed to check the "should dump" flag on TCPStore',
      title="torch's heartbeat monitor lost the rendezvous store",
      root_cause="ProcessGroupNCCL's heartbeat thread polls the TCPStore hosted by rank 0; the store went away. After a finished run "
      "rank 0 simply exited first (teardown noise: end the script with dist.destroy_process_group()); otherwise the "
      "master's process failed or was killed, and its own log holds the first failure.",
      fix=STORE_FIX, check="net.port_reach", tier=4,
      example="[rank5]:[W509 02:29:39.508328002 ProcessGroupNCCL.cpp:1771] [PG ID 0 PG GUID 0 Rank 5] Failed to check the "
      "\"should dump\" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: Broken pipe",
      source="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (HeartbeatMonitor::runLoop, torch 2.3+)", teardown=True),
    S(id="c10d.store_closed", cls=None, kind="symptom", needles=(b"Connection was likely closed", b"got 0 bytes", b"recvValue", b"sendBytes failed",
                                                                 b"DistNetworkError: Connection reset", b"DistNetworkError: Broken pipe"),
      pattern=r"got 0 bytes\. Connection was likely closed|Connection was likely closed|[Ff]ailed to recv, got 0 bytes"
      r"|(?:recvValue(?:WithTimeout)?|sendBytes|recvBytes) failed on SocketImpl.*(?:Connection reset by peer|Broken pipe)"
      r"|DistNetworkError: (?:Connection reset by peer|Broken pipe)",
      title="The rendezvous store closed the connection",
      root_cause="The process hosting the TCPStore (rank 0 / the master) went away: a consequence of its own failure.",
      fix=STORE_FIX, check="net.port_reach", tier=4,
      example="torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?",
      source="torch/csrc/distributed/c10d/TCPStore.cpp", teardown=True,
      decode=(Decode(kind="store_closed",
                     pattern=r"Failed to recv, got 0 bytes\. Connection was likely closed",
                     cause=lambda m: "the rendezvous store (hosted by rank 0 on MASTER_ADDR) closed the connection: rank 0 failed or "
                                     "was ended, so the other ranks cannot go on",
                     remediation=lambda m: ("# read rank 0's error first (node 0's output): it is the cause; fix it, then rerun on every node\n"
                                            "dsv3-preflight probe --node-rank 0   # on node 0, with the same MASTER_ADDR and MASTER_PORT"),
                     actor="node", cause_id="collective.rank0_failed"),)),
    S(id="c10d.bind_not_local", cls="port_rendezvous", kind="cause", needles=(b"Cannot assign requested address", b"errno: 99"),
      pattern=r"(?:bind to|listen on) (?P<addr>\S+?) \(errno: 99 - Cannot assign requested address\)|Cannot assign requested address",
      title="The rendezvous address[[ {addr}]] is not an address of this host",
      root_cause="The process that hosts the store (node rank 0) was given a MASTER_ADDR that belongs to another machine or "
      "interface, so it cannot listen there: node ranks or MASTER_ADDR are wrong.",
      fix="ip -br addr | grep -wF \"$MASTER_ADDR\"    # on the node that should be the master\n"
      "dsv3-preflight run --only cluster.master_node,env.launch_vars",
      check="cluster.master_node", tier=1,
      example="[W socket.cpp:436] [c10d] The server socket has failed to bind to 10.0.0.1:29500 (errno: 99 - Cannot assign requested address).",
      source="torch/csrc/distributed/c10d/socket.cpp (strerror(EADDRNOTAVAIL))"),
    S(id="c10d.bind_failed", cls="port_rendezvous", kind="cause", needles=(b"server socket has failed to bind", b"server socket has failed to listen"),
      pattern=r"server socket has failed to bind to (?P<addr>\S+?) \((?:errno|system error): (?P<errno>\d+) - (?P<err>[^)]*)\)"
      r"|server socket has failed to (?:listen on any local network address|listen on (?P<addr2>\S+)|bind\b)",
      title="The rendezvous store cannot listen[[ on {addr}]][[ ({err})]]",
      root_cause="The process that hosts the store (node rank 0) could not open MASTER_PORT: the port is held by another process, "
      "below 1024 (only root may bind it: errno 13, Permission denied), or the address is not one of this host's.",
      fix="ss -ltnp \"sport = :${MASTER_PORT:?the port in the error}\"    # who holds it, if anyone\n"
      "# use a free port above 1024 on the head: export MASTER_PORT=29500 (or --master_port / --rdzv-endpoint host:port)\n"
      "dsv3-preflight run --only net.port_free",
      check="net.port_free", tier=1,
      example="torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
      "The server socket has failed to bind to [::]:80 (errno: 13 - Permission denied).",
      source="torch/csrc/distributed/c10d/socket.cpp (SocketListenOp format strings; strerror(EACCES))",
      consequence_of=("c10d.address_in_use", "c10d.bind_not_local")),
    S(id="c10d.env_var_missing", cls="port_rendezvous", kind="cause", needles=(b"rendezvous: ", b"requires the LOCAL_RANK environment"),
      pattern=r"(?:env|tcp|file)://\s*rendezvous: (?:environment variable (?P<var>\w+) expected, but not set|(?P<var2>[A-Z_]+) not set"
      r"|(?P<var3>port number|rank parameter|world size parameter|path) missing)"
      r"|DeepSpeed requires the (?P<var4>LOCAL_RANK) environment variable",
      title="The rendezvous variables are not set[[ ({var} missing)]]",
      root_cause="init_process_group('env://') reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT (and DeepSpeed LOCAL_RANK) "
      "from the environment, which a launcher sets for each process; this process was started without one (plain "
      "python) or the launcher's variables were lost.",
      fix=LAUNCH_FIX, check="env.launch_vars", tier=1,
      example="ValueError: Error initializing torch.distributed using env:// rendezvous: environment variable MASTER_ADDR expected, but not set",
      source="torch/distributed/rendezvous.py (_env_error, _error); deepspeed/runtime/engine.py (LOCAL_RANK assertion)"),
    # a collective or dist.get_rank() before init_process_group: the script was started without the launcher its
    # framework expects (plain python), or its own init was skipped. A rank whose init failed prints its own error
    # first; this line is then its consequence (tier 2: any cause of tier 1 leads)
    S(id="c10d.not_initialized", cls="config", kind="cause", needles=(b"process group has not been initialized",),
      pattern=r"Default process group has not been initialized, please make sure to call init_process_group",
      title="A collective was called before init_process_group",
      root_cause="torch.distributed was used (a collective, get_rank, a DeepSpeed/accelerate step) in a process whose default "
      "process group was never created: the script was started with plain python instead of its launcher, or the "
      "code that calls init_process_group (deepspeed.init_distributed, Accelerator()) did not run first.",
      fix=LAUNCH_FIX, check="env.launch_vars", tier=2,
      example="ValueError: Default process group has not been initialized, please make sure to call init_process_group.",
      source="torch/distributed/distributed_c10d.py (_get_default_group)"),
    S(id="c10d.store_error", cls="port_rendezvous", kind="cause", needles=(b"DistStoreError", b"DistNetworkError", b"TCPStore", b"Stop_waiting response"),
      # not the source file of a C++ log line ("[I... TCPStoreLibUvBackend.cpp:1354] [c10d] uv_loop_close failed": the
      # store's server closing its event loop at exit, logged at INFO while it retries)
      pattern=r"DistStoreError|DistNetworkError|TCPStore(?!\w*\.(?:cpp|hpp|h):\d)\S*.{0,60}(?:failed|timed out|Timeout)"
      r"|Stop_waiting response is expected",
      title="The rendezvous store (TCPStore) failed",
      root_cause="torch's rendezvous store could not be reached or did not answer in time (wrong MASTER_ADDR/PORT, the master "
      "not running, a firewall, or not all ranks joining).", fix=STORE_FIX, check="net.port_reach", tier=2,
      example="torch.distributed.DistStoreError: Stop_waiting response is expected",
      source="torch/csrc/distributed/c10d/TCPStore.cpp (DistStoreError, DistNetworkError)", lost_after_start=True),
    S(id="nccl.comm_id_invalid", cls="port_rendezvous", kind="cause", needles=(b"Invalid NCCL_COMM_ID", b"No valid <IPv4_or_hostname>"),
      pattern=r"Invalid NCCL_COMM_ID|No valid <IPv4_or_hostname>:<port> pair found",
      title="NCCL_COMM_ID is not a valid address:port",
      root_cause="NCCL_COMM_ID makes NCCL bootstrap through that address instead of the framework's store; NCCL cannot parse it.",
      fix="echo \"NCCL_COMM_ID=${NCCL_COMM_ID-}\"    # <ipv4>:<port>, [<ipv6>]:<port> or <hostname>:<port>\n"
      "unset NCCL_COMM_ID    # torch and DeepSpeed pass NCCL its id themselves\n"
      "dsv3-preflight run --only cluster.env_consistency", check="cluster.env_consistency", tier=1,
      example="gpu-node07:24817:24901 [3] bootstrap.cc:35 NCCL WARN Invalid NCCL_COMM_ID, please use format: <ipv4>:<port> or "
      "[<ipv6>]:<port> or <hostname>:<port>",
      source="NCCL src/bootstrap.cc, src/misc/socket.cc (format strings, 2.4-2.30)"),
    S(id="launcher.ssh_unreachable", cls="port_rendezvous", kind="cause", needles=(b"ssh: connect to host", b"ORTE was unable to reliably start",
                                                                                  b"Permission denied (publickey", b"not reachable via ssh",
                                                                                  b"ssh exited with exit code 255", b"Host key verification failed",
                                                                                  b"returned non-zero exit status 255", b"PRTE was unable to reliably start",
                                                                                  b"could not connect to some hosts via ssh", b"ssh not successful for host"),
      pattern=r"ssh: connect to host (?P<host>\S+) port \d+: (?P<err>.+)|(?:ORTE|PRTE) was unable to reliably start one or more daemons"
      r"|could not connect to some hosts via ssh|ssh not successful for host (?P<host5>[^\s:]+)"  # horovod runner/launch.py
      r"|Permission denied \(publickey|host=(?P<host2>\S+) was not reachable via ssh|(?P<host3>[\w.-]+): ssh exited with exit code 255"
      r"|Host key verification failed|Command '\[?'?ssh [^']*?(?P<host4>[\w.-]+) hostname[^']*'?\]?' returned non-zero exit status 255"
      # deepspeed/launcher/runner.py passes a list: Command '['ssh', 'worker-0', 'hostname', '-I']'
      r"|Command '\['ssh',(?: '-\S+',)*? '(?P<host6>[\w.@-]+)', 'hostname', '-I'\]' returned non-zero exit status 255",
      title="The launcher cannot reach a node[[ ({host})]]",
      root_cause="mpirun/pdsh/deepspeed reach the other nodes over ssh: the host is unreachable, sshd is not listening (or on "
      "another port), or keys are not set up.",
      fix="ssh -o BatchMode=yes \"${NODE:?a node of the hostfile}\" true    # from the launching node, to every node\n"
      "dsv3-preflight run --only cluster.node_count",
      check="cluster.node_count", tier=1,
      example="ssh: connect to host worker-2 port 22: Connection refused",
      source="OpenSSH client message; Open MPI orte/mca/plm help text; deepspeed/launcher/runner.py (ssh check); pdsh"),
    S(id="horovod.gloo_rendezvous", cls="port_rendezvous", kind="cause", needles=(b"HTTP GET request failed too many times", b"HTTP PUT request failed too many times"),
      pattern=r"HTTP (?:GET|PUT) request failed too many times",
      title="Horovod's Gloo rendezvous server did not answer",
      root_cause="Horovod's Gloo ranks rendezvous through an HTTP store that horovodrun serves on the launching host; a worker "
      "could not reach it (a firewall, the launching host's address as seen from the workers, a wrong interface).",
      fix=HOROVODRUN_FIX + "\n"
      "dsv3-preflight run --only net.port_reach", check="net.port_reach", tier=1,
      example="[1,0]<stderr>:[2024-05-08 08:47:31.877 E /tmp/pip-install/horovod/common/gloo/http_store.cc:96] HTTP GET request "
      "failed too many times, aborting. See exception message above.",
      source="horovod horovod/common/gloo/http_store.cc (2626dc87)"),
    S(id="hydra.proxy_connect", cls="port_rendezvous", kind="cause", needles=(b"HYDU_sock_connect", b"check for firewalls"),
      pattern=r"HYDU_sock_connect \([^)]*\): unable to (?:connect from \"?(?P<src>[^\"\s]+)\"? to \"?(?P<dst>[^\"\s]+)\"?(?: \((?P<err>[^)]+)\))?"
      r"|get host address(?: for (?P<dst2>\S+))?)|unable to connect to server (?P<dst3>\S+) at port (?P<port>\d+) \(check for firewalls!\)",
      title="MPICH/Intel MPI's proxy cannot reach mpiexec[[ at {dst}]][[ ({err})]]",
      root_cause="Hydra's proxies connect back to mpiexec's control port on the launching host: the name does not resolve there, "
      "the route goes elsewhere, or a firewall blocks the port.",
      fix="getent hosts \"${LAUNCH_HOST:?the host mpiexec runs on}\"    # on every node\n"
      "dsv3-preflight run --only net.port_reach,net.nic_route", check="net.port_reach", tier=1,
      example="[proxy:0:1@node2] HYDU_sock_connect (utils/sock/sock.c:145): unable to connect from \"node2\" to \"node1\" (No route to host)",
      source="MPICH src/pm/hydra utils/sock/sock.c (messages quoted in pmodels/mpich#3777, mpich#4599)"),
    S(id="deepspeed.master_addr_undetected", cls="port_rendezvous", kind="cause", needles=(b"Unable to detect suitable master address",),
      pattern=r"Unable to detect suitable master address via .hostname -I.",
      title="The DeepSpeed launcher could not find a master address",
      root_cause="Without --master_addr the launcher asks the first host of the hostfile for `hostname -I`, which failed or gave "
      "nothing usable.",
      fix="# pass the head's address on the training network explicitly\n"
      "deepspeed --master_addr \"${MASTER_ADDR:?address of the head node}\" --master_port \"${MASTER_PORT:-29500}\" "
      "--hostfile \"${HOSTFILE:?the hostfile}\" \"${TRAIN_SCRIPT:?the training script}\"\n"
      "dsv3-preflight run --only cluster.master_node",
      check="cluster.master_node", tier=1,
      example="RuntimeError: Unable to detect suitable master address via `hostname -I`, please manually specify one via --master_addr",
      source="deepspeed/launcher/runner.py"),
    # TensorPipe's RPC agents met at the rendezvous already: a refused or unreachable peer is the address it published
    # (before the generic ECONNREFUSED rule below, which is about the rendezvous endpoint)
    S(id="tensorpipe.peer_unreachable", cls="nic_iface", kind="cause", needles=(b"encountered error when sending outgoing request",),
      pattern=r"RPC agent for (?P<me>\S+) encountered error when sending outgoing request #\d+ to (?P<peer>\S+): "
      r"(?P<err>ECONNREFUSED|EHOSTUNREACH|ENETUNREACH|EADDRNOTAVAIL|ETIMEDOUT)",
      title="TensorPipe could not reach RPC peer {peer} ({err})",
      root_cause="The RPC agents met at the rendezvous store, then each one connects to the address its peer published: the "
      "address its host name resolves to, or TP_SOCKET_IFNAME's. A refused or unreachable connection there means "
      "{peer} published an address the others cannot reach: a host name resolving to 127.0.1.1, a docker, bridge or "
      "second interface.",
      fix="getent hosts \"$(hostname)\"    # on every node: its address toward the others, not 127.0.1.1\n"
      "export TP_SOCKET_IFNAME=${IFACE:?interface toward MASTER_ADDR, e.g. eth0}    # TensorPipe's, with Gloo's and NCCL's:\n"
      + IFACE_FIX, check="net.nic_route", tier=1,
      example="[W tensorpipe_agent.cpp:641] RPC agent for Test0 encountered error when sending outgoing request #0 to Test1: "
      "ECONNREFUSED: connection refused",
      source="https://github.com/pytorch/tensorpipe/issues/201 (torch/csrc/distributed/rpc/tensorpipe_agent.cpp; "
      "TP_SOCKET_IFNAME: kSocketIfnameEnvVar there)"),
    S(id="net.connection_refused", cls="port_rendezvous", kind="cause", needles=(b"Errno 111", b"ECONNREFUSED"),
      pattern=r"(?:ConnectionRefusedError: )?\[Errno 111\] Connection refused|ECONNREFUSED",
      title="A connection was refused: nothing listens at that address and port",
      root_cause="A client reached the host but no process listens on the port: the rendezvous endpoint (the store, etcd, the "
      "Ray head) is not started yet or has exited, or MASTER_ADDR/MASTER_PORT (the endpoint) is wrong.",
      fix=STORE_FIX, check="net.port_reach", tier=2,
      example="ConnectionRefusedError: [Errno 111] Connection refused",
      source="CPython socket errors (strerror(ECONNREFUSED)); torch elastic's etcd backend through urllib3",
      consequence_of=("c10d.address_in_use", "c10d.bind_failed", "c10d.bind_not_local", "c10d.env_var_missing",
                      "net.name_resolution", "c10d.numeric_hostname", "c10d.store_timeout", "c10d.client_connect_failed",
                      "elastic.rendezvous_connection", "launcher.ssh_unreachable", "ray.gcs_unreachable"),
      decode=(Decode(kind="store_connect_refused",
                     pattern=r"(Connection refused|ECONNREFUSED).{0,200}?(\((?P<host>[^,()]+),\s*(?P<port>\d+)\))?",
                     cause=lambda m: "the rendezvous store refused the connection: nothing listens on MASTER_ADDR:MASTER_PORT"
                                     + (f" ({m['host']}:{m['port']})" if m["host"] else ""),
                     remediation=lambda m: ("# start node 0 (it hosts the store) first; MASTER_ADDR and MASTER_PORT must be the same on every node:\n"
                                            'echo "MASTER_ADDR=${MASTER_ADDR:-unset} MASTER_PORT=${MASTER_PORT:-unset}"   # compare on every node'),
                     actor="job", cause_id="net.port_not_listening"),)),
    S(id="ray.gcs_unreachable", cls="port_rendezvous", kind="cause", needles=(b"GCS", b"Could not find any running Ray instance",
                                                                             b"Failed to connect to Ray cluster at"),
      pattern=r"(?:Failed|Unable) to connect to GCS|GCS (?:server|client).{0,40}(?:timed out|unavailable|failed)|Timed out while waiting for GCS"
      r"|Could not find any running Ray instance|Failed to connect to Ray cluster at (?P<addr>\S+)",
      title="Ray workers cannot reach the head (GCS)",
      root_cause="The Ray head is not started, or its address/port (6379 by default) is not reachable from this node.",
      fix="ray status --address \"${RAY_HEAD:?head address:port}\"    # from the failing node\n"
      "dsv3-preflight run --only net.port_reach,cluster.master_node",
      check="net.port_reach", tier=1,
      example="Failed to connect to GCS at address 10.0.0.1:6379 within 5 seconds.",
      source="ray python/ray/_private/gcs_utils.py; python/ray/_private/services.py (no running instance found)"),

    S(id="ray.already_running", cls="port_rendezvous", kind="cause", needles=(b"but is already running at", b"Found multiple active Ray instances"),
      pattern=r"Ray is trying to start at (?P<addr>\S+), but is already running at|Found multiple active Ray instances",
      title="Another Ray instance already runs on this node",
      root_cause="A Ray head (GCS) of an earlier or another run still runs here: `ray start --head` cannot take its port, and "
      "`address=\"auto\"` cannot tell which cluster to join.",
      fix="ps -eo pid,lstart,args | grep -E '[g]cs_server|[r]aylet'    # the Ray processes of this node, with their start time\n"
      "# stop the stale one by its PID (ray stop would stop every Ray on this host), or give this cluster its own --port\n"
      "kill \"${STALE_GCS_PID:?pid of the stale gcs_server}\"\n"
      "dsv3-preflight run --only net.port_free", check="net.port_free", tier=1,
      example="ConnectionError: Ray is trying to start at 10.41.0.2:6379, but is already running at 10.41.0.2:6379. Please "
      "specify a different port using the `--port` flag of `ray start` command.",
      source="ray python/ray/scripts/scripts.py; python/ray/_private/services.py (2.60)"),
    S(id="ray.no_local_raylet", cls="port_rendezvous", kind="cause", needles=(b"node_ip_address.json",),
      pattern=r"Can't find a `?node_ip_address\.json`? file",
      title="No Ray node runs on this host",
      root_cause="The driver was started on a host where no raylet of the cluster runs (RAY_ADDRESS set on a login node or in "
      "another container than the one `ray start` ran in).",
      fix="ray status    # on this host: it must list this node\n"
      "ray start --address \"${RAY_HEAD:?head address:port}\"    # join this host to the cluster, or run the driver on a node of it\n"
      "dsv3-preflight run --only cluster.node_count", check="cluster.node_count", tier=1,
      example="ValueError: Can't find a `node_ip_address.json` file from /tmp/ray/session_2024-05-08_08-47-31_877_1/. for 60 "
      "seconds. A ray instance hasn't started. Did you do `ray start` or `ray.init` on this host?",
      source="ray python/ray/_private/node.py (Ray 2.x before 2.60; quoted in public notes)"),
    S(id="sglang.dist_init_addr", cls="port_rendezvous", kind="cause", needles=(b"please provide --dist-init-addr",),
      pattern=r"please provide --dist-init-addr as host:port of head node",
      title="SGLang needs --dist-init-addr host:port of the head",
      root_cause="A multi-node SGLang server was started without the head's rendezvous address and port.",
      fix="# on every node, the same head address and port:\n"
      "python -m sglang.launch_server --dist-init-addr \"${MASTER_ADDR:?head address}:${MASTER_PORT:-20000}\" "
      "--nnodes \"${NNODES:?number of nodes}\" --node-rank \"${NODE_RANK:?rank of this node}\" \"$@\"",
      check="env.launch_vars", tier=1,
      example="AssertionError: please provide --dist-init-addr as host:port of head node",
      source="sglang python/sglang/srt/server_args.py (PortArgs.init_new)"),
    S(id="c10d.store_wait_timeout", cls="port_rendezvous", kind="cause", needles=(b"waitForInput",),
      pattern=r"waitForInput: (?:socket SocketImpl\(.*?remote=(?P<remote>\S+?)\) timed out after (?P<ms>\d+)ms"
      r"|poll for socket SocketImpl\(.*?\) returned 0, likely a timeout)",
      title="A rendezvous store request got no answer[[ from {remote}]][[ in {ms} ms]]",
      root_cause="This rank's connection to the rendezvous store (TCPStore) is open but the store never answered: the store's "
      "host stopped or stalls, or the name resolves to another address (IPv6/IPv4) than the one it serves on.",
      fix=STORE_FIX, check="net.port_reach", tier=2,
      example="[rank1]:[W623 15:37:01.824135523 socket.cpp:485] [c10d] waitForInput: socket SocketImpl(fd=100, "
      "addr=[node-0.company.net]:43590, remote=[node-0.company.net]:20000) timed out after 1800000ms",
      source="https://github.com/sgl-project/sglang/issues/7478 (torch/csrc/distributed/c10d/socket.cpp)",
      # the store's host waiting on the ranks that could not reach it (the network-namespace lab, c10d rendezvous)
      consequence_of=("c10d.store_timeout", "c10d.store_connect_retry", "c10d.client_connect_failed",
                      "elastic.ranks_not_assigned", "elastic.duplicate_node_rank", "elastic.store_clients_missing")),
)
