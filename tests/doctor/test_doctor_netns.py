"""The doctor on the logs of a real multi-node job on the wrong interface: three torchrun nodes in network
namespaces (tests/netns_lab.py), Gloo, torch as installed here. Each node's output goes to its own file, as a
scheduler writes it; when the first node has failed, the others are stopped a few seconds later (a scheduler ending
the job), and ``dsv3-preflight doctor`` reads the directory.

- The host name does not resolve inside the nodes (nothing in their hosts files names it): every Gloo rank falls
  back to loopback and publishes 127.0.0.1. The doctor must lead with that fallback, on the nodes that printed it,
  and put the refused connections and the failed full mesh under it as consequences.
- The host name resolves to 127.0.1.1 on every node (the line Debian's installer writes into /etc/hosts): Gloo
  binds there without a warning and the other nodes' connects to 127.0.1.1 are refused. The doctor must say that a
  peer published that loopback address, and how to see the host name's address.
- The head's firewall rejects every new connection but the store's: the interfaces are right, and the doctor names
  the address that refuses and says a firewall is one way to get there.
- A leftover process of a crashed run still holds the rendezvous port on the head: the doctor names the port and
  the head, and its fix asks who holds that port, by number.
- A rank killed with SIGKILL on node 1: the root cause is on node 1 alone (torchrun's summary calls the node by its
  host name, the file by its label: one node).
- A rank stuck before a collective (node 2): the others time out in Gloo; the node whose log does not is named.
- A slow link (tc tbf on node 2) holds a large step until the scheduler stops the job (before the timeout): with ``--hung`` the doctor
  names the hang after progress, not the "Connection closed by peer" lines the stop caused.
- A worker raises on node 2 and torchrun restarts it (``--max-restarts 1``): what the restarted worker prints
  while it connects to peers that are gone is a consequence, not a second (network) root cause.
- c10d rendezvous where node 2 was given another ``--rdzv-id``: "not every node joined in time" on the nodes that
  waited, and node 2's lost store connection under it.
- torchrun ``--log-dir`` on every node, the per-rank files collected under one directory: the failing rank is named
  with its node and local rank from the files' paths.
- ``--master-addr`` set to the head's own container-bridge address (172.17.0.2 on its docker0): the address, not
  the port, is the cause (c10d.store_on_local_address).
- Two nodes given the same ``--node-rank`` (static rendezvous): the store answers and every agent waits for the
  rank nobody took; the doctor names the two nodes and the rank. ``--nnodes 4`` on three nodes: the store's host saw
  3 of its 4 clients join, and no network fix is given (also when the workers were stopped before their own waits
  timed out).
- The same job with the fix the doctor prints (GLOO_SOCKET_IFNAME set to the interface toward MASTER_ADDR) runs:
  the doctor says healthy, exit 0.
"""
from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest
from netns_lab import netns_lab, stop_group  # noqa: F401 - the fixture

from dsv3_preflight.doctor import triage

pytestmark = [pytest.mark.slow, pytest.mark.netns]
PORT = 29531          # inside the lab's own namespaces: no other run shares it
JOB_LIMIT_S = 90.0    # Gloo's own connect timeout is longer; the job is stopped before it
#: after the first node fails, as a scheduler ends the job. Longer than the spread of the nodes' start-ups on a loaded
#: machine (each torchrun imports torch before its rendezvous timers start; several seconds apart on CI's 2 busy
#: cores), so a node whose own timeout the test reads has printed it; tests where a node must be stopped before its
#: own timeout give it a longer one than the others (the store's wait alone, --nnodes 4)
STOP_AFTER_S = 10.0

TRAIN = """\
import datetime, os, signal, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=float(os.environ.get("PG_TIMEOUT", "30"))))
t = torch.ones(4) * dist.get_rank()
dist.all_reduce(t)
print(f"rank {dist.get_rank()} step 1 loss 0.4213 allreduce {t.tolist()}", flush=True)
if os.environ.get("KILL_RANK") == str(dist.get_rank()):   # as the kernel's OOM killer ends a process
    os.kill(os.getpid(), signal.SIGKILL)
if os.environ.get("RAISE_RANK") == str(dist.get_rank()):
    raise ValueError("Target modules {'q_proj', 'v_proj'} not found in the base model. Please check the target modules and try again.")
if os.environ.get("STALL_RANK") == str(dist.get_rank()):   # stuck before the next step (its data loader, a rank-0-only save)
    import time; time.sleep(600)
big = int(os.environ.get("STEP2_FLOATS", "0"))
if big:   # a second step with a large gradient
    dist.all_reduce(torch.ones(big))
    print(f"rank {dist.get_rank()} step 2 loss 0.4102", flush=True)
dist.destroy_process_group()
"""


def run_job(lab, tmp_path, env_by_node=None, stop_after_s=None, torchrun_args=(), master_addr=None):
    """Three torchrun nodes, one process each; returns the logs directory and the nodes' exit codes.
    ``torchrun_args``: more arguments for every node, or a dict of them by node. With
    ``stop_after_s``, the job is stopped that long after every node printed its first step (a scheduler's time limit
    ending a hung job: node after node, each with its grace)."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    logs = tmp_path / "logs"
    logs.mkdir()
    scratch = tmp_path / "tmp"   # torchrun leaves a torchelastic_* log directory in TMPDIR: keep it in tmp_path
    scratch.mkdir()
    procs, files = [], []
    for n in range(3):
        argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "3", "--nproc-per-node", "1",
                "--node-rank", str(n), "--master-addr", master_addr or lab.addr(0), "--master-port", str(PORT),
                *(torchrun_args.get(n, ()) if isinstance(torchrun_args, dict) else torchrun_args), str(script)]
        fh = open(logs / f"node{n}.log", "w")
        files.append(fh)
        env = {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "TMPDIR": str(scratch),
               **((env_by_node or {}).get(n, {}))}
        procs.append(lab.popen(n, argv, env=env, stdout=fh, stderr=subprocess.STDOUT))
    deadline, failed_at, stepped_at = time.monotonic() + JOB_LIMIT_S, None, None
    try:
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            if failed_at is None and any(p.poll() not in (None, 0) for p in procs):
                failed_at = time.monotonic()
            if failed_at is not None and time.monotonic() - failed_at > STOP_AFTER_S:
                break
            if stop_after_s is not None and stepped_at is None and all(
                    "step 1 loss" in (logs / f"node{n}.log").read_text() for n in range(3)):
                stepped_at = time.monotonic()
            if stepped_at is not None and time.monotonic() - stepped_at > stop_after_s:
                break
            time.sleep(0.2)
    finally:
        for p in procs:
            if p.poll() is None:
                stop_group(p, grace=3.0)
        for fh in files:
            fh.close()
    return logs, [p.returncode for p in procs]


def failed_job_doc(lab, tmp_path, torchrun_args, want_class: str, every_node: bool = False) -> dict:
    """A job with Gloo on eth0 and ``torchrun_args`` that fails (on ``every_node``, or on one at least): the doctor's
    document on its logs, which must name a cause of ``want_class``."""
    env = {n: {"GLOO_SOCKET_IFNAME": lab.PRIMARY_IF} for n in range(3)}
    logs, rcs = run_job(lab, tmp_path, env, torchrun_args=torchrun_args)
    assert (all if every_node else any)(rc not in (0, None) for rc in rcs), rcs
    doc = triage([str(logs)])
    text = "\n".join(p.read_text() for p in sorted(logs.iterdir()))
    assert (doc["exit_code"], doc["cause_class"]) == (1, want_class), (doc["summary"], text[-3000:])
    return doc


def test_gloo_falling_back_to_loopback_on_every_node_is_the_root_cause_of_the_refused_mesh(netns_lab, tmp_path):
    logs, rcs = run_job(netns_lab, tmp_path)
    assert any(rc not in (0, None) for rc in rcs), rcs
    doc = triage([str(logs)])
    text = "\n".join(p.read_text() for p in sorted(logs.iterdir()))
    assert "Using the loopback address as fallback" in text, text[-3000:]   # what this torch printed
    assert (doc["exit_code"], doc["cause_class"]) == (1, "nic_iface"), doc["summary"]
    head = doc["findings"][0]
    assert head["id"] == "gloo.hostname_loopback" and head.get("headline"), doc["summary"]
    assert head["check"] == "net.nic_route" and "GLOO_SOCKET_IFNAME" in head["fix"]
    consequences = {f["id"]: f for f in doc["findings"] if f["role"] == "consequence"}
    # the peers' side of it: their connects to the loopback address the ranks published, and the full mesh that
    # failed on them (torch 2.6+ names the address; older Gloo only says the full mesh failed)
    mesh = consequences.get("gloo.loopback_peer") or consequences.get("gloo.connect_full_mesh")
    assert mesh is not None and mesh["explained_by"] == "gloo.hostname_loopback", doc["summary"]
    if "remote=[127.0.0.1]" in text:
        assert mesh["title"].startswith("A Gloo peer published the loopback address 127.0.0.1"), mesh["title"]
    assert not [f for f in doc["findings"][1:] if f["role"] == "root_cause"], doc["summary"]   # one root cause
    assert doc["first_failure"]["node"] in ("node0", "node1", "node2"), doc["first_failure"]


def test_a_host_name_on_127_0_1_1_names_the_wrong_interface_and_the_address(netns_lab, tmp_path):
    netns_lab.map_host(socket.gethostname(), "127.0.1.1")   # Debian's /etc/hosts line, on every node
    logs, rcs = run_job(netns_lab, tmp_path)
    assert any(rc not in (0, None) for rc in rcs), rcs
    doc = triage([str(logs)])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "nic_iface"), doc["summary"]
    head = doc["findings"][0]
    assert head["id"] == "gloo.loopback_peer" and head.get("headline"), doc["summary"]
    assert "127.0.1.1" in head["title"] and "/etc/hosts" in head["root_cause"], head
    assert 'getent hosts "$(hostname)"' in head["fix"] and head["check"] == "net.nic_route"
    assert not [f for f in doc["findings"][1:] if f["role"] == "root_cause"], doc["summary"]


def test_a_head_whose_firewall_rejects_gloos_ports_is_named_by_its_address(netns_lab, tmp_path):
    netns_lab.add_rule(0, ["-A", "INPUT", "-p", "tcp", "--syn", "!", "--dport", str(PORT), "!", "-i", "lo",
                           "-j", "REJECT", "--reject-with", "tcp-reset"])
    env = {n: {"GLOO_SOCKET_IFNAME": netns_lab.PRIMARY_IF} for n in range(3)}
    logs, rcs = run_job(netns_lab, tmp_path, env)
    assert any(rc not in (0, None) for rc in rcs), rcs
    doc = triage([str(logs)])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "nic_iface"), doc["summary"]
    head = doc["findings"][0]
    text = "\n".join(p.read_text() for p in sorted(logs.iterdir()))
    head_addr = netns_lab.addr(0)
    assert head_addr in head["title"] or any(head_addr in e["text"] for e in head["evidence"]), (head, text[-2000:])
    assert "firewall" in head["root_cause"] and "GLOO_SOCKET_IFNAME" in head["fix"], head


def test_a_rendezvous_port_held_by_a_leftover_process_is_named_with_the_port_in_the_fix(netns_lab, tmp_path):
    holder = netns_lab.popen(0, [sys.executable, "-c", "import socket, time; s = socket.socket(); "
                                 f"s.bind(('0.0.0.0', {PORT})); s.listen(); print('held', flush=True); time.sleep(120)"])
    assert holder.stdout.readline().strip() == "held"
    env = {n: {"GLOO_SOCKET_IFNAME": netns_lab.PRIMARY_IF} for n in range(3)}
    logs, rcs = run_job(netns_lab, tmp_path, env)
    assert rcs[0] not in (0, None), rcs
    doc = triage([str(logs)])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "port_rendezvous"), doc["summary"]
    head = doc["findings"][0]
    assert head["id"] == "c10d.address_in_use" and head["nodes"] == ["node0"], head
    assert str(PORT) in head["title"] and f'ss -ltnp "sport = :{PORT}"' in head["fix"], head


def test_the_same_job_with_the_interface_the_fix_names_is_healthy(netns_lab, tmp_path):
    env = {n: {"GLOO_SOCKET_IFNAME": netns_lab.PRIMARY_IF} for n in range(3)}
    logs, rcs = run_job(netns_lab, tmp_path, env)
    assert rcs == [0, 0, 0], [(p.name, p.read_text()[-1500:]) for p in sorted(logs.iterdir())]
    doc = triage([str(logs)])
    assert (doc["exit_code"], doc["verdict"]) == (0, "healthy"), doc["summary"]


def test_a_rank_killed_on_one_node_is_the_root_cause_on_that_node_alone(netns_lab, tmp_path):
    # torchrun's failure summary names the node by its host name ("host : <hostname>"), the file by its own label:
    # they are one node, not two
    env = {n: {"GLOO_SOCKET_IFNAME": netns_lab.PRIMARY_IF, "KILL_RANK": "1"} for n in range(3)}
    logs, rcs = run_job(netns_lab, tmp_path, env)
    assert rcs[1] not in (0, None), rcs
    doc = triage([str(logs)])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "host_resources"), doc["summary"]
    head = doc["findings"][0]
    assert head["id"] == "host.sigkill" and head["nodes"] == ["node1"] and head["ranks"] == [1], head
    assert (doc["first_failure"]["node"], doc["first_failure"]["rank"]) == ("node1", 1), doc["first_failure"]
    nodes = {n for f in doc["findings"] for n in f["nodes"]}
    assert nodes <= {"node0", "node1", "node2"}, doc["summary"]
    assert doc["files"][1]["host"] == socket.gethostname(), doc["files"]   # what torchrun's summary called it


def test_a_rank_stuck_before_a_collective_is_named_by_the_node_whose_log_does_not_time_out(netns_lab, tmp_path):
    # rank 2 (node 2) stalls before step 2 (its data loader); ranks 0-1 time out in Gloo after 6 s, torchrun fails
    # there and the scheduler stops node 2. Gloo prints no world size: the node that did not time out is named
    env = {n: {"GLOO_SOCKET_IFNAME": netns_lab.PRIMARY_IF, "PG_TIMEOUT": "6", "STEP2_FLOATS": "1000", "STALL_RANK": "2"}
           for n in range(3)}
    logs, rcs = run_job(netns_lab, tmp_path, env)
    doc = triage([str(logs)])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "nccl_hang"), doc["summary"]
    assert doc["findings"][0]["id"] == "gloo.recv_timeout" and doc["findings"][0]["nodes"] == ["node0", "node1"]
    assert doc["silent_nodes"] == ["node2"] and doc["first_failure"]["node"] == "node2", doc["first_failure"]


def test_a_job_stopped_while_a_slow_link_holds_a_step_is_a_hang_after_progress_with_hung(netns_lab, tmp_path):
    # node 2's link at 2 Mbit/s and a 16 MB second step (about a minute on that link), a 120 s timeout, and the
    # scheduler stops the job 12 s after the first step. The peers' "Connection closed by peer" lines are what the
    # stop caused
    netns_lab.exec(2, ["tc", "qdisc", "add", "dev", netns_lab.PRIMARY_IF, "root", "tbf", "rate", "2mbit",
                       "burst", "32kbit", "latency", "400ms"], check=True)
    env = {n: {"GLOO_SOCKET_IFNAME": netns_lab.PRIMARY_IF, "PG_TIMEOUT": "120", "STEP2_FLOATS": "4000000"}
           for n in range(3)}
    logs, rcs = run_job(netns_lab, tmp_path, env, stop_after_s=12.0)
    text = "\n".join(p.read_text() for p in sorted(logs.iterdir()))
    assert "step 2 loss" not in text and "Timed out waiting" not in text, text[-3000:]
    doc = triage([str(logs)])
    assert doc["cause_class"] == "interrupted" and doc["exit_code"] == 1, doc["summary"]
    hung = triage([str(logs)], hung=True)
    assert (hung["exit_code"], hung["cause_class"]) == (1, "nccl_hang"), hung["summary"]
    assert hung["findings"][0]["id"] == "hang.after_progress", hung["summary"]
    assert "slow" in hung["findings"][0]["root_cause"] and "--probe=pairs" in hung["findings"][0]["fix"]
    assert not [f for f in hung["findings"] if f["id"] == "net.connection_closed"], hung["summary"]


def test_what_a_restarted_worker_group_prints_is_a_consequence_of_the_first_failure(netns_lab, tmp_path):
    # --max-restarts 1 with static rendezvous: node 2's worker raises, its launcher restarts it alone, and the new
    # worker's Gloo connects go to the addresses of the old group's peers, which are gone
    env = {n: {"GLOO_SOCKET_IFNAME": netns_lab.PRIMARY_IF, "RAISE_RANK": "2"} for n in range(3)}
    logs, rcs = run_job(netns_lab, tmp_path, env, torchrun_args=("--max-restarts", "1"))
    assert rcs[2] not in (0, None), rcs
    doc = triage([str(logs)])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "lora_empty"), doc["summary"]
    head = doc["findings"][0]
    assert head["id"] == "peft.target_modules_not_found" and head["nodes"] == ["node2"], head
    roots = [f["id"] for f in doc["findings"] if f["role"] == "root_cause"]
    assert roots == ["peft.target_modules_not_found"], doc["summary"]


def test_a_node_given_another_rendezvous_id_is_named_as_a_rendezvous_that_did_not_complete(netns_lab, tmp_path):
    # c10d rendezvous: nodes 0 and 1 wait for a third node that joined another rendezvous (--rdzv-id); the store
    # answered all along. Which agent's timer fires first varies from run to run: when node 0's does, it takes the
    # store with it and node 2's agent, waiting in its own rendezvous on that store, loses the connection; when node
    # 1's does, it closes the rendezvous and node 0 ends on RendezvousClosedError (and node 2 times out in its own).
    # Either way the nodes' own lost or closed rendezvous are consequences, not causes
    netns_lab.map_own_host(socket.gethostname())   # each node resolves its name to itself: node 0 hosts the store
    rdzv = ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{netns_lab.addr(0)}:{PORT}", "--rdzv-conf", "join_timeout=20"]
    args = {n: (*rdzv, "--rdzv-id", "job-7" if n < 2 else "job-8") for n in range(3)}
    env = {n: {"GLOO_SOCKET_IFNAME": netns_lab.PRIMARY_IF} for n in range(3)}
    logs, rcs = run_job(netns_lab, tmp_path, env, torchrun_args=args)
    assert rcs[0] not in (0, None), rcs
    doc = triage([str(logs)])
    assert (doc["exit_code"], doc["cause_class"]) == (1, "port_rendezvous"), doc["summary"]
    head = doc["findings"][0]
    assert head["id"] == "elastic.rendezvous_timeout" and {"node0", "node1"} & set(head["nodes"]), doc["summary"]
    named = {n for f in doc["findings"] for n in f["nodes"]}
    assert named == {"node0", "node1", "node2"}, doc["summary"]   # every node's ending is under the one cause
    assert "--rdzv-id" in head["root_cause"] and head["check"] == "cluster.node_count", head
    roots = [f["id"] for f in doc["findings"] if f["role"] == "root_cause"]
    assert roots == ["elastic.rendezvous_timeout"], doc["summary"]


def test_torchrun_log_dirs_collected_from_every_node_name_the_node_and_local_rank(netns_lab, tmp_path):
    # torchrun --log-dir on each node, two ranks per node, the per-rank files collected under logs/node<N>/ (the
    # console output is not given to the doctor): the files' paths are all that says which node a rank ran on
    collected = tmp_path / "collected"
    args = {n: ("--nproc-per-node", "2", "--log-dir", str(collected / f"node{n}"), "--redirects", "3") for n in range(3)}
    env = {n: {"GLOO_SOCKET_IFNAME": netns_lab.PRIMARY_IF, "RAISE_RANK": "2"} for n in range(3)}
    _, rcs = run_job(netns_lab, tmp_path, env, torchrun_args=args)
    assert rcs[1] not in (0, None), rcs
    doc = triage([str(collected)])
    assert doc["cause_class"] == "lora_empty", doc["summary"]
    ff = doc["first_failure"]
    assert (ff["node"], ff["rank"], ff["local_rank"]) == ("node1", 2, 0), ff   # rank 2 = node 1's first process
    assert {n for f in doc["findings"] for n in f["nodes"]} <= {"node0", "node1", "node2"}, doc["summary"]
    assert sorted({f["node"] for f in doc["files"]}) == ["node0", "node1", "node2"], doc["files"]


def test_a_master_addr_on_the_heads_container_bridge_names_the_address_not_the_port(netns_lab, tmp_path):
    # MASTER_ADDR given as the head's container-bridge address (172.17.0.2 on its docker0): the head reaches its own
    # store there, node 1 has its own 172.17.0.0/16 (its docker0) and node 2 routes it nowhere: a wrong address for
    # the other nodes, whatever the port
    for argv in (["ip", "link", "add", "docker0", "type", "bridge"], ["ip", "addr", "add", "172.17.0.2/16", "dev", "docker0"],
                 ["ip", "link", "set", "docker0", "up"]):
        netns_lab.exec(0, argv, check=True)
    env = {n: {"GLOO_SOCKET_IFNAME": netns_lab.PRIMARY_IF} for n in range(3)}
    logs, rcs = run_job(netns_lab, tmp_path, env, torchrun_args=("--rdzv-conf", "timeout=15"),
                        master_addr="172.17.0.2")
    assert any(rc not in (0, None) for rc in rcs), rcs
    doc = triage([str(logs)])
    text = "\n".join(p.read_text() for p in sorted(logs.iterdir()))
    assert "172.17.0.2" in text, text[-3000:]
    assert (doc["exit_code"], doc["cause_class"]) == (1, "nic_iface"), (doc["summary"], text[-3000:])
    head = doc["findings"][0]
    assert head["id"] == "c10d.store_on_local_address" and head.get("headline"), doc["summary"]
    assert "172.17.0.2" in head["title"] and "--network=host" in head["fix"], head
    assert set(head["nodes"]) <= {"node1", "node2"} and head["nodes"], head
    assert not [f for f in doc["findings"][1:] if f["role"] == "root_cause"], doc["summary"]


def test_two_nodes_given_one_node_rank_are_named_with_the_rank(netns_lab, tmp_path):
    # static rendezvous, node 2 started with --node-rank 1 as well: the store answers, node rank 2 never writes its
    # info, every agent waits until the rendezvous timeout (15 s here)
    conf = ("--rdzv-conf", "timeout=15")
    doc = failed_job_doc(netns_lab, tmp_path, {0: conf, 1: conf, 2: (*conf, "--node-rank", "1")}, "pci_rank_dup",
                         every_node=True)
    head = doc["findings"][0]
    assert head["id"] == "elastic.duplicate_node_rank" and head.get("headline"), doc["summary"]
    assert head["title"] == "Two nodes run with --node-rank 1: node1, node2", head["title"]
    assert head["check"] == "cluster.node_rank" and "--node-rank" in head["fix"]
    roles = {f["id"]: f["role"] for f in doc["findings"]}
    assert roles["elastic.ranks_not_assigned"] == "consequence", roles
    assert not [f for f in doc["findings"][1:] if f["role"] == "root_cause"], doc["summary"]


@pytest.mark.parametrize("workers_timeout", [15, 60], ids=["every-wait-timed-out", "the-stores-wait-alone"])
def test_a_node_rank_nobody_started_is_a_rendezvous_that_did_not_complete_not_the_network(netns_lab, tmp_path,
                                                                                         workers_timeout):
    # --nnodes 4 on three nodes: node rank 3 never comes; the store answered, so no port or firewall advice. The head's
    # TCPStore gives up waiting for its 4th client ("3/4 clients joined"); the workers wait for their ranks. With 60 s
    # for the workers, they are stopped (STOP_AFTER_S after the head failed) before their own waits time out, as a
    # scheduler ends a job: the head's line alone must say it (what CI's loaded machine once produced with 15 s
    # everywhere)
    args = {0: ("--rdzv-conf", "timeout=15", "--nnodes", "4"),
            1: ("--rdzv-conf", f"timeout={workers_timeout}", "--nnodes", "4"),
            2: ("--rdzv-conf", f"timeout={workers_timeout}", "--nnodes", "4")}
    doc = failed_job_doc(netns_lab, tmp_path, args, "port_rendezvous", every_node=True)
    head = doc["findings"][0]
    assert head["id"] == "elastic.store_clients_missing" and head.get("headline"), doc["summary"]
    assert head["title"] == "The rendezvous store on node0 saw 3 of its 4 clients join: the rest never came", head["title"]
    assert "no network problem" in head["root_cause"] and "nc -vz" not in head["fix"], head
    assert head["check"] == "cluster.node_count", head
    roles = {f["id"]: f["role"] for f in doc["findings"]}
    assert roles.get("elastic.ranks_not_assigned", "consequence") == "consequence", roles   # the workers' side of it
    assert roles["c10d.store_timeout"] == "consequence", roles
    assert "elastic.duplicate_node_rank" not in roles, roles
    assert not [f for f in doc["findings"][1:] if f["role"] == "root_cause"], doc["summary"]


def test_a_rendezvous_port_the_heads_firewall_drops_is_the_store_unreachable_from_the_workers(netns_lab, tmp_path):
    # the guide's "rendezvous port unreachable from workers": the head drops every packet to the store's port from
    # outside; its own agent reaches the store over loopback, the workers time out
    netns_lab.add_rule(0, ["-A", "INPUT", "-p", "tcp", "--dport", str(PORT), "!", "-i", "lo", "-j", "DROP"])
    doc = failed_job_doc(netns_lab, tmp_path, ("--rdzv-conf", "timeout=15"), "port_rendezvous")
    head = doc["findings"][0]
    assert head["id"] in ("c10d.store_timeout", "c10d.client_connect_failed"), doc["summary"]
    assert {"node1", "node2"} <= set(head["nodes"]), head   # the head's own "1/3 clients joined" is the same finding
    assert "nc -vz" in head["fix"] and head["check"] == "net.port_reach", head
    assert netns_lab.addr(0) in head["title"] and str(PORT) in head["title"], head["title"]


C10D = ("--rdzv-backend", "c10d", "--rdzv-id", "job1")


def test_a_c10d_endpoint_no_node_recognises_as_its_own_is_a_store_nobody_hosted(netns_lab, tmp_path):
    # the host name on 127.0.1.1 on every node (Debian's line) and --rdzv-endpoint the head's IP address: torchrun's
    # C10d backend hosts the store only where the host name resolves to the endpoint, so nobody does
    netns_lab.map_host(socket.gethostname(), "127.0.1.1")
    args = (*C10D, "--rdzv-endpoint", f"{netns_lab.addr(0)}:{PORT}", "--rdzv-conf", "join_timeout=20,read_timeout=10")
    doc = failed_job_doc(netns_lab, tmp_path, args, "port_rendezvous")
    head = doc["findings"][0]
    assert head["id"] == "elastic.c10d_store_not_hosted" and head.get("headline"), doc["summary"]
    assert f"{netns_lab.addr(0)}:{PORT}" in head["title"] and "node0, node1, node2" in head["title"], head["title"]
    assert f"--rdzv-conf is_host=1 --local-addr {netns_lab.addr(0)}" in head["fix"], head["fix"]
    # the fix it prints, on the head only: the job runs
    fixed = {0: (*args[:-1], "join_timeout=20,read_timeout=10,is_host=1", "--local-addr", netns_lab.addr(0)), 1: args, 2: args}
    logs2 = tmp_path / "fixed"
    logs2.mkdir()
    env = {n: {"GLOO_SOCKET_IFNAME": netns_lab.PRIMARY_IF} for n in range(3)}
    logs, rcs = run_job(netns_lab, logs2, env, torchrun_args=fixed)
    assert rcs == [0, 0, 0], [(p.name, p.read_text()[-1500:]) for p in sorted(logs.iterdir())]
    healthy = triage([str(logs)])
    assert healthy["exit_code"] == 0, (healthy["summary"], [(p.name, p.read_text()[-3000:]) for p in sorted(logs.iterdir())])


def test_a_c10d_store_the_heads_firewall_hides_is_not_called_unhosted(netns_lab, tmp_path):
    # every node resolves its name to itself: the head hosts the store and waits for nodes its firewall keeps out
    netns_lab.map_own_host(socket.gethostname())
    netns_lab.add_rule(0, ["-A", "INPUT", "-p", "tcp", "--dport", str(PORT), "!", "-i", "lo", "-j", "DROP"])
    args = (*C10D, "--rdzv-endpoint", f"{netns_lab.addr(0)}:{PORT}", "--rdzv-conf", "join_timeout=20,read_timeout=10")
    doc = failed_job_doc(netns_lab, tmp_path, args, "port_rendezvous")
    assert "elastic.c10d_store_not_hosted" not in {f["id"] for f in doc["findings"]}, doc["summary"]
