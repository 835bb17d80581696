"""Findings made from more than one line (dsv3_preflight.doctor.evidence, .flight_recorder, the triage): the same
fields as a line's signature, so they are listed, documented and their fixes tested like the line signatures; the
matcher never uses them. ``DERIVED_NAMES`` are the placeholders the triage fills itself.

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from .record import S, Signature
from .shared import ALLREDUCE_FIX, IFACE_FIX, VERSIONS_FIX

#: placeholders filled by the triage itself, not by a signature's pattern (derived findings, the preflight's verdict)
DERIVED_NAMES = frozenset({"values", "node", "rank", "pid", "error", "seq", "op", "ahead", "who", "also", "report",
                           "error_note", "nodes", "launched", "host", "port", "meaning", "action", "bus", "joined",
                           "expected"})

SIGNATURES: tuple[Signature, ...] = (
    # an NCCL WARN no signature knows, printed before the run's first progress in its file: NCCL went on (a fatal
    # error ends its init: no "Init COMPLETE", no step after it), so the line is no failure (triage: _went_on)
    S(id="nccl.warned_then_progressed", cls=None, kind="benign", needles=(b"NCCL WARN",), pattern=r"NCCL WARN (?P<what>.+)",
      title="NCCL warned, and the run went on: {what}",
      example="gpu1:123:456 [0] graph/xml.cc:420 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:00/../../0000:00:04.0",
      source="NCCL: a WARN that fails a call returns an error up to ncclCommInitRank / the collective, which then never "
             "reports Init COMPLETE nor lets the step finish"),
    # an error line no signature knows, printed before its file says the run succeeded (train_runtime, torchrun's
    # workers all exited 0), when every error of the logs was: the run survived it (triage: _survived)
    S(id="run.error_survived", cls=None, kind="benign", needles=(b"",), pattern=r"(?P<what>.+)",
      title="An error line, and the run succeeded after it: {what}",
      example="torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
      source="transformers Trainer (auto_find_batch_size catches the OOM and halves the batch); torchrun's restarts "
             "(--max-restarts) before '[default] worker group successfully finished'"),
    # two nodes' agents waiting for the global ranks of the same node rank (torchelastic/assigned_ranks/<N>), or two
    # waiting, as node rank 0, for every node's info: two nodes run with one --node-rank (triage: _derive)
    S(id="elastic.duplicate_node_rank", cls="pci_rank_dup", kind="cause", needles=(b"torchelastic/",), pattern=r"torchelastic/",
      title="Two nodes run with --node-rank {rank}: {nodes}",
      root_cause="torchrun numbers the nodes by --node-rank: {nodes} both took node rank {rank}, so its workers were started twice "
      "and a node rank nobody took was waited for until the rendezvous timed out. Had it passed, two processes would "
      "hold each of those global ranks (NCCL's 'Duplicate GPU detected', ranks that never meet).",
      fix="ps -eo args | grep -E '[t]orchrun|[t]orch[.]distributed[.]run'    # on each node: its --node-rank\n"
      "# every node a distinct --node-rank from 0 to NNODES-1, 0 on the node at --master-addr (Slurm: \"$SLURM_NODEID\"),\n"
      "# or let torchrun number them: --rdzv-backend c10d --rdzv-endpoint \"$MASTER_ADDR:$MASTER_PORT\" instead of --node-rank\n"
      "dsv3-preflight run --all-nodes --only cluster.node_rank", check="cluster.node_rank", tier=0,
      example="node1: ... keys: /none/torchelastic/assigned_ranks/1; node2: ... keys: /none/torchelastic/assigned_ranks/1",
      source="torch/distributed/elastic/agent/server/api.py (_assign_worker_ranks: each agent waits for assigned_ranks/<its "
      "node rank>, node rank 0 for role_info/<every rank>); produced here (tests/test_doctor_netns.py)"),
    # every node's torchrun (two or more files) timed out connecting to the same c10d rendezvous endpoint: nobody
    # hosted the store. The C10d backend starts it only on the node whose host name resolves to the endpoint's
    # address (rendezvous/utils.py _matches_machine_hostname) unless --rdzv-conf is_host says so (triage: _derive)
    S(id="elastic.c10d_store_not_hosted", cls="port_rendezvous", kind="cause", needles=(b"RendezvousConnectionError",), pattern=r"RendezvousConnectionError",
      title="No node hosted the c10d rendezvous store at {host}:{port} ({nodes} all timed out connecting)",
      root_cause="Every node's torchrun timed out connecting to the rendezvous endpoint {host}:{port}, the node at that address "
      "among them if its log is here. torchrun's C10d backend starts the store only on the node whose host name "
      "resolves to the endpoint's address (torch's _matches_machine_hostname); when the endpoint is an IP address "
      "and that node's name resolves elsewhere (Debian and Ubuntu map it to 127.0.1.1 in /etc/hosts; a second "
      "NIC's address), no node hosts it and every node times out. A firewall on that port gives the same lines on "
      "the other nodes only: the node at {host} would then be waiting for them, not timing out.",
      fix="getent hosts \"$(hostname)\"    # on the node at {host}: the store is hosted only where this answers {host}\n"
      "# on that node only, add to its torchrun command: --rdzv-conf is_host=1 --local-addr {host}\n"
      "# (--local-addr also hands the workers {host} as MASTER_ADDR instead of the host name, which resolves the same way)\n"
      "# or map the host name to {host} in /etc/hosts on that node (Debian and Ubuntu map it to 127.0.1.1)\n"
      "nc -vz -w 3 {host} {port}    # from every node, once the store runs", check="net.port_reach", tier=0,
      example="node0, node1, node2: The client socket has timed out after 60000ms while trying to connect to (10.77.0.10, "
      "29531); torch.distributed.elastic.rendezvous.api.RendezvousConnectionError",
      source="torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py (_create_tcp_store: is_host from the "
      "is_host config, else _matches_machine_hostname); produced here (tests/test_doctor_netns.py: the host name on "
      "127.0.1.1 on every node, --rdzv-endpoint the head's IP address)"),
    # the store's host gave up waiting for its clients ("3/4 clients joined"), some besides itself came, and no log
    # here shows a node failing to reach the store: the store was reachable, a node (or rank) never came. The
    # nodes that came may have been stopped before their own waits timed out (triage: _derive)
    S(id="elastic.store_clients_missing", cls="port_rendezvous", kind="cause", needles=(b"clients joined",),
      pattern=r"(?P<joined>\d+)/(?P<expected>\d+) clients joined",
      title="The rendezvous store on {node} saw {joined} of its {expected} clients join: the rest never came",
      root_cause="The store on {node} waited for {expected} clients (torchrun's static rendezvous: one per node, --nnodes; "
      "init_process_group: one per rank, WORLD_SIZE) and {joined} connected, so it was reached from other nodes (no "
      "network problem between them and the store), and no log here shows a node that failed to reach it. The rest "
      "never connected: a node was not started, was started with another --master-addr or --master-port, or "
      "--nnodes (WORLD_SIZE) is larger than the nodes (ranks) launched.",
      fix="ps -eo args | grep -E '[t]orchrun|[t]orch[.]distributed[.]run'    # on each node: --nnodes, --node-rank, --master-addr, --master-port\n"
      "# start every node, each with a distinct --node-rank from 0 to NNODES-1 and the same --nnodes, --master-addr and\n"
      "# --master-port; --nnodes is the number of nodes launched, not more\n"
      "dsv3-preflight run --all-nodes --only cluster.node_rank,cluster.node_count,net.port_reach", check="cluster.node_count", tier=1,
      example="node0: torch.distributed.DistStoreError: Timed out after 16 seconds waiting for clients. 3/4 clients joined.; "
      "node1, node2: nothing but the store's own wait (stopped before theirs timed out)",
      source="torch/csrc/distributed/c10d/TCPStore.cpp ('Timed out after {} seconds waiting for clients. {}/{} clients "
      "joined.'); produced here (tests/doctor/test_doctor_netns.py: torchrun --nnodes 4 on three network-namespace "
      "nodes, static rendezvous)"),
    S(id="nccl.version_drift", cls="version_drift", kind="cause", needles=(b"NCCL version",), pattern=r"NCCL version (?P<values>\S+)",
      title="NCCL versions differ between nodes ({values})",
      root_cause="The nodes run different NCCL libraries (different containers, torch wheels or system NCCL): NCCL refuses to "
      "connect mismatched versions or hangs.", fix=VERSIONS_FIX, check="gpu.versions", tier=0,
      example="node1:1234:1234 [0] NCCL INFO NCCL version 2.18.1+cuda12.1", source="NCCL src/init.cc (showVersion) on each node"),
    S(id="cuda.driver_drift", cls="version_drift", kind="cause", needles=(b"cudaDriverVersion",), pattern=r"cudaDriverVersion (?P<values>\d+)",
      title="CUDA driver versions differ between nodes ({values})",
      root_cause="The nodes run different NVIDIA drivers; behaviour (and what CUDA they support) differs between ranks.",
      fix=VERSIONS_FIX, check="gpu.versions", tier=0,
      example="node1:1234:1234 [0] NCCL INFO cudaDriverVersion 12020", source="NCCL src/misc/cudawrap.cc"),
    S(id="nccl.plugin_drift", cls="version_drift", kind="cause", needles=(b"NET/Plugin", b"Plugin Path"), pattern=r"NET/Plugin: (?P<values>.+)",
      title="The NCCL net plugin differs between nodes ({values})",
      root_cause="Some nodes load a network plugin (libnccl-net.so: IB SHARP, AWS OFI) and others use NCCL's internal "
      "transports, so the ranks cannot agree on a network and the job hangs.",
      fix=VERSIONS_FIX + "\n# or make the plugin path identical on every node (LD_LIBRARY_PATH, NCCL_NET_PLUGIN)", check="gpu.versions", tier=0,
      example="HGX-H100-11:18226:18274 [5] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
      source="https://github.com/NVIDIA/nccl/issues/1634"),
    S(id="nccl.network_drift", cls="nccl_transport", kind="cause", needles=(b"Using network",), pattern=r"Using network (?P<values>\S+)",
      title="Nodes chose different NCCL networks ({values})",
      root_cause="Some nodes use InfiniBand/RoCE (or a plugin) and others fall back to sockets: the IB device or its driver is "
      "missing on those nodes (or hidden by NCCL_IB_DISABLE/NCCL_IB_HCA).",
      fix="ibv_devinfo | head; echo \"NCCL_IB_DISABLE=${NCCL_IB_DISABLE-} NCCL_IB_HCA=${NCCL_IB_HCA-}\"    # on each node\n" + ALLREDUCE_FIX,
      check="dist.allreduce", tier=1,
      example="node1:1234:1234 [0] NCCL INFO Using network IB", source="NCCL src/init.cc"),
    S(id="ras.dead", cls="nccl_hang", kind="cause", needles=(b"considered dead",), pattern=r"Process (?P<pid>\d+) on node (?P<node>\S+)",
      title="NCCL RAS: process {pid} on node {node} is dead (unreachable)",
      root_cause="NCCL's RAS network lost this process: it crashed, was killed, or its node went down; the other ranks hang "
      "waiting for it. Its own log (or dmesg on that node) holds the cause.",
      fix="# on that node: dmesg -T | tail -50; and read that rank's own log for its first error\n" + ALLREDUCE_FIX,
      check="dist.allreduce", tier=2,
      example="  Process 323032 on node 10.0.0.7 managing GPU 4", source="NCCL src/ras/client_support.cc (DEAD section)"),
    S(id="ras.incomplete", cls="nccl_hang", kind="cause", needles=(b"Missing communicator data",), pattern=r"Rank (?P<rank>\d+) -- GPU \S+ managed by process (?P<pid>\d+) on node (?P<node>\S+)",
      title="NCCL RAS: rank {rank} on node {node} does not respond",
      root_cause="RAS could not get this rank's communicator state: the process is stuck (not progressing NCCL) or gone. "
      "Its log holds the cause.",
      fix="# on that node: py-spy dump --pid the_pid_named_above; read that rank's own log\n" + ALLREDUCE_FIX,
      check="dist.allreduce", tier=2,
      example="  Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124", source="NCCL src/ras/client_support.cc (INCOMPLETE)"),
    S(id="ras.mismatch", cls="nccl_hang", kind="cause", needles=(b") MISMATCH",), pattern=r"Rank (?P<rank>\d+) -- GPU \S+ managed by process \d+ on node (?P<node>\S+)",
      title="NCCL RAS: ranks are at different collective counts (rank {rank} on {node} is an outlier)",
      root_cause="The communicator's ranks launched different numbers of collectives: the outlier ranks are ahead or behind "
      "(a skipped or extra collective, a rank stuck in its data loader): the job hangs.",
      fix="export TORCH_DISTRIBUTED_DEBUG=DETAIL    # names the first mismatching collective\n" + ALLREDUCE_FIX,
      check="dist.allreduce", tier=1,
      example="  Rank 12 -- GPU 4 managed by process 323032 on node 10.137.190.124", source="https://github.com/NVIDIA/nccl/issues/1911 (after '#0-0 (fa93daea854b060b) MISMATCH')"),
    S(id="ras.rank_error", cls=None, kind="symptom", needles=(b" reported ",), pattern=r"Rank (?P<rank>\d+) reported (?P<error>.+?) --",
      title="NCCL RAS: rank {rank} reported {error}",
      root_cause="RAS collected an NCCL error from this rank.", fix=ALLREDUCE_FIX, check="dist.allreduce", tier=4,
      example="  Rank 3 reported remote process exited or there was a network error -- GPU 3 managed by process 77 on node n2",
      source="NCCL src/ras/client_support.cc (rasClientBreakDownErrors)"),
    S(id="store.lost_after_start", cls=None, kind="symptom", needles=(b"lost after start",), pattern=r"lost after start",
      title="The rendezvous store went away after the run had started",
      root_cause="The store answered at the start (the ranks rendezvoused and the run made progress), and later a rank or an "
      "agent lost its connection to it: the process hosting it (node rank 0's torchrun agent, or rank 0) exited or "
      "crashed first, or that node dropped off the network. Not a port or address problem: that node's own log holds "
      "the first failure.",
      fix="dmesg -T | tail -50    # on node rank 0, the store's host: an OOM kill or a crash at this time\n"
      "# then node rank 0's own log: its first error before this time is the cause",
      check=None, tier=4, example="lost after start", source="doctor (a store error after the run's progress)"),
    # `doctor --hung`: the user says the run hung; a log without an error is judged by the last phase it shows
    S(id="hang.after_progress", cls="nccl_hang", kind="cause", needles=(b"hung after",), pattern=r"hung after (?P<shown>.+)",
      title="The run hung after it made progress ({shown})",
      root_cause="The log shows the run working and then nothing, with no error: a collective never completed. A rank is stuck "
      "outside NCCL (data loading, a checkpoint written by one rank, a rank-dependent branch) or ranks issued "
      "different collectives; the watchdog (TORCH_NCCL timeout, 10-30 min) had not fired yet. A link so slow that "
      "a collective has not finished looks the same until the timeout fires.",
      fix="# on each node, while it hangs: where every rank waits\n"
      "py-spy dump --pid \"${RANK_PID:?pid of a training process}\"\n"
      "# next run: a flight recorder dump and a desync report when the watchdog fires\n"
      "export TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_NCCL_DESYNC_DEBUG=1\n" + ALLREDUCE_FIX
      + "\ndsv3-preflight run --all-nodes --probe=pairs    # every pair of nodes: names a slow node or link",
      check="dist.allreduce", tier=2, example="hung after training loss lines", source="doctor --hung (the user's statement and the log's last phase)"),
    S(id="hang.nccl_init", cls="nic_iface", kind="cause", needles=(b"hung in NCCL init",), pattern=r"hung in NCCL init \((?P<world>\d+) ranks, (?P<hosts>\d+) host\(s\) in the log\)",
      title="The run hung while NCCL connected its {world} ranks across nodes",
      root_cause="NCCL started (bootstrap, interface choice) and the log stops before 'Init COMPLETE', with no error: the "
      "connections between nodes never complete, which is what an interface other nodes cannot reach (or a "
      "firewall between the nodes on NCCL's ports) looks like.",
      fix="export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET    # the interface and address each rank uses\n" + IFACE_FIX,
      check="net.nic_route", tier=2, example="hung in NCCL init (16 ranks, 2 host(s) in the log)", source="doctor --hung (the user's statement and the log's last phase)"),
    S(id="hang.nccl_init_one_node", cls="nccl_transport", kind="cause", needles=(b"hung in NCCL init on one node",), pattern=r"hung in NCCL init on one node",
      title="The run hung while NCCL connected the GPUs of one node",
      root_cause="NCCL started and the log stops before 'Init COMPLETE' on a job NCCL shows on one node, with no error: the "
      "intra-node transport (GPU peer-to-peer, or shared memory in a container) does not complete; PCIe ACS or an "
      "IOMMU blocking P2P is the usual cause.",
      fix="nvidia-smi topo -m\nexport NCCL_P2P_DISABLE=1    # confirms it when the run then starts\n" + ALLREDUCE_FIX,
      check="dist.allreduce", tier=2, example="hung in NCCL init on one node", source="doctor --hung (the user's statement and the log's last phase)"),
    S(id="c10d.fingerprints_diverge", cls="nccl_hang", kind="suspect", needles=(b"CollectiveFingerPrint",),
      pattern=r"\[Rank (?P<rank>\d+)\] Running collective: CollectiveFingerPrint\(SequenceNumber=(?P<seq>\d+)",
      title="Ranks out of step: rank(s) {behind} last entered collective #{seq_behind} ({op_behind}), rank(s) {ahead} #{seq_ahead} ({op_ahead})",
      root_cause="With TORCH_DISTRIBUTED_DEBUG=DETAIL every rank logs each collective it enters. The log stops with rank(s) "
      "{behind} behind the others: they skipped or have not reached a collective the others entered (a "
      "rank-dependent branch, different metric keys logged per rank, uneven data, a rank stuck in data loading "
      "or I/O), so the others wait in it until the timeout. With several process groups, compare ranks of one "
      "group: each group counts its own collectives.",
      fix="# read what rank(s) {behind} did after collective #{seq_behind}: their own log lines, and their stacks while it hangs:\n"
      "py-spy dump --pid \"${PID:?pid of a rank that is behind}\"\n"
      "# every rank must issue the same collectives in the same order (no collective under 'if rank == 0', the same "
      "metric keys logged on every rank)", check=None, tier=2,
      example="[I ProcessGroupWrapper.cpp:562] [Rank 1] Running collective: CollectiveFingerPrint(SequenceNumber=3, "
      "OpType=BROADCAST, TensorShape=[1], TensorDtypes=Long)",
      source="torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp (runCollectiveChecks); "
      "https://github.com/Lightning-AI/pytorch-lightning/issues/19106", stall="any"),
    S(id="fr.rank_behind", cls="nccl_hang", kind="cause", needles=(b"flight recorder",),
      pattern=r"rank (?P<rank>\d+) last collective #\d+, ranks (?P<ahead>\S+) at #(?P<seq>\d+) \((?P<op>[^)]+)\)",
      title="Flight Recorder: rank {rank} never issued collective #{seq} ({op}) that ranks {ahead} entered",
      root_cause="The Flight Recorder dumps show this rank stopped issuing collectives before the others: it failed or is "
      "stuck outside NCCL (data loading, a crash, a different code path); the others time out waiting for it.",
      fix="# read rank {rank}'s own log and stack (py-spy dump); then:\n" + ALLREDUCE_FIX, check="dist.allreduce", tier=2,
      example="flight recorder: rank 1 last collective #3, ranks [0] at #4 (gloo:broadcast)", source="torch.distributed.flight_recorder loader output"),
    S(id="fr.desync", cls="nccl_hang", kind="cause", needles=(b"flight recorder",), pattern=r"at #(?P<seq>\d+)",
      title="Flight Recorder: ranks issued different collectives at #{seq}",
      root_cause="At the same sequence number the ranks recorded different operations or sizes: the program is desynchronised.",
      fix="export TORCH_DISTRIBUTED_DEBUG=DETAIL    # then make every rank issue the same collectives\n" + ALLREDUCE_FIX,
      check="dist.allreduce", tier=1,
      example="flight recorder: at #4 rank 0: gloo:broadcast [[4]]; rank 1: gloo:all_reduce [[4]]", source="torch.distributed.flight_recorder loader output"),
)
