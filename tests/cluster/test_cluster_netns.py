"""`run --all-nodes` over real Ray nodes in three network namespaces (tests/cluster_lab.py's RayLab): the
quick start's path (docs/cluster.md: the job's environment exported before `ray start`, then
`dsv3-preflight run --all-nodes --config preflight.toml` on the head), and the field's misconfigurations
(issue 19): two nodes exporting the same NODE_RANK, a head resolving its own name to loopback, an MTU that
differs, a DROP rule on the master port, a bad launch variable on one node.
"""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("ray")
from cluster_lab import GCS_PORT, MASTER_PORT, ONLY, RayLab, results_by, shared_lab  # noqa: E402
from paste_lint import paste_problems  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.netns, pytest.mark.ray, pytest.mark.shared_ray_lab]
ALL = ["lab-node0", "lab-node1", "lab-node2"]
QUICK_START_TOML = f"""\
# docs/cluster.md's profile for this machine: the cpu profile (no GPU here), the lab's three nodes
profile = "cpu"
nnodes = 3
master_addr = "lab-node0"
master_port = {MASTER_PORT}
collective_timeout = 60
run_timeout = 150
"""


@pytest.fixture(scope="module")
def lab(request) -> RayLab:
    return shared_lab(request.config)


@pytest.fixture(scope="module")
def quick_start(lab, tmp_path_factory):
    """`dsv3-preflight run --all-nodes --config preflight.toml --probe` on the head, as the quick start says."""
    where = tmp_path_factory.mktemp("quick")
    (where / "preflight.toml").write_text(QUICK_START_TOML)
    # `auto` finds the cluster `ray start --head` recorded in the head's Ray temp dir; Ray's auto also scans this
    # machine's processes for GCS servers, and on a shared development machine another lab's would be found too
    others = subprocess.run(["pgrep", "-c", "gcs_server"], capture_output=True, text=True, timeout=10).stdout.strip()
    env = {"RAY_ADDRESS": lab.gcs} if int(others or 0) > 1 else {}
    return lab.run(where / "green.json", "--only", ONLY, "--probe", config=Path("preflight.toml"), timeout=300, env=env)


def test_the_quick_start_run_from_the_head_is_green(quick_start):
    proc, doc = quick_start
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert doc["verdict"] == "GO" and doc["cluster"]["embedded"] is False
    assert doc["cluster"]["ray"]["gcs_address"] == f"10.77.0.10:{GCS_PORT}"  # `auto`, as on a real head


def test_nodes_get_ranks_by_address_and_node_0_holds_master_addr(quick_start):
    _, doc = quick_start
    assert doc["cluster"]["node_ranks"] == {"lab-node0": 0, "lab-node1": 1, "lab-node2": 2}
    assert results_by(doc, "cluster.master_node")["cluster"]["summary"] == \
        "node 0 (lab-node0) holds MASTER_ADDR lab-node0 (10.77.0.10 on every node)"
    assert results_by(doc, "cluster.node_rank")["cluster"]["status"] == "pass"  # NODE_RANK 0, 1, 2 as exported
    assert results_by(doc, "net.mtu")["cluster"]["summary"] == "MTU 1500 on lab-node0 (eth0), lab-node1 (eth0), lab-node2 (eth0)"
    assert {n: s["state"] for n, s in doc["cluster"]["node_states"].items()} == dict.fromkeys(ALL, "alive")


def test_workers_reach_the_heads_listener_and_the_gang_all_reduces(quick_start, lab):
    _, doc = quick_start
    reach = results_by(doc, "net.port_reach")
    for worker in ("lab-node1", "lab-node2"):
        assert reach[worker]["status"] == "pass" and "reached the dsv3-preflight listener" in reach[worker]["summary"]
    listener = doc["cluster"]["listener"]
    assert listener["ok"] is True and {s["peer"] for s in listener["served"]} >= {lab.addr(1), lab.addr(2)}
    assert results_by(doc, "dist.allreduce_cluster")["cluster"]["status"] == "pass"


@pytest.fixture(scope="module")
def misconfigured(lab, tmp_path_factory):
    """lab-node2 exports NODE_RANK=1 (as lab-node1 does) and OMP_NUM_THREADS=zero; its eth0 has MTU 9000; the
    head drops TCP to the master port. One run; the lab is put back before the tests look at it."""
    where = tmp_path_factory.mktemp("misconfigured")
    rule = ["INPUT", "-p", "tcp", "--dport", str(MASTER_PORT), "!", "-i", "lo", "-j", "DROP"]
    lab.restart_node("lab-node2", NODE_RANK="1", OMP_NUM_THREADS="zero")
    try:
        lab.wait_alive(ALL)
        lab.net.set_mtu(2, "eth0", 9000)
        lab.net.add_rule(0, ["-A", *rule])
        try:
            outcome = lab.run(where / "misconfigured.json", "--only", ONLY)
        finally:
            lab.net.exec(0, [shutil.which("iptables") or "iptables", "-D", *rule])
            lab.net.set_mtu(2, "eth0", 1500)
    finally:
        lab.restart_node("lab-node2", NODE_RANK="2", OMP_NUM_THREADS="2")
        lab.wait_alive(ALL)
    return outcome


def test_two_nodes_exporting_the_same_node_rank_fail_naming_them_with_the_export_to_paste(misconfigured):
    proc, doc = misconfigured
    assert proc.returncode == 1
    rank = results_by(doc, "cluster.node_rank")["cluster"]
    assert rank["status"] == "fail" and rank["actor"] == "job"
    assert rank["summary"].startswith("2 nodes export NODE_RANK=1: lab-node1, lab-node2")
    assert rank["remediation"].splitlines()[0] == "export NODE_RANK=2   # on lab-node2"
    assert rank["evidence"]["exported"] == {"lab-node0": "0", "lab-node1": "1", "lab-node2": "1"}


def test_an_mtu_differing_on_one_node_fails_telling_that_node_to_match(misconfigured):
    _, doc = misconfigured
    result = results_by(doc, "net.mtu")["cluster"]
    assert result["status"] == "fail" and result["actor"] == "network"
    assert result["remediation"].startswith("ip link set dev eth0 mtu 1500   # on lab-node2")


def test_a_drop_rule_on_the_master_port_fails_port_reach_as_filtered_on_every_worker(misconfigured):
    _, doc = misconfigured
    reach = results_by(doc, "net.port_reach")
    for worker in ("lab-node1", "lab-node2"):
        assert reach[worker]["status"] == "fail" and reach[worker]["evidence"]["outcome"] == "filtered", reach[worker]
    assert all(n["state"] == "ok" for n in doc["nodes"])  # Ray itself still works: only the master port is dropped


def test_a_bad_launch_variable_fails_on_its_node_and_in_env_consistency(misconfigured):
    _, doc = misconfigured
    launch = results_by(doc, "env.launch_vars")
    assert launch["lab-node2"]["status"] == "fail" and "OMP_NUM_THREADS='zero'" in launch["lab-node2"]["summary"]
    consistency = results_by(doc, "cluster.env_consistency")["cluster"]
    assert consistency["summary"].startswith("OMP_NUM_THREADS differs between nodes") and "lab-node2=zero" in consistency["summary"]
    assert "export OMP_NUM_THREADS=2   # on lab-node2" in consistency["remediation"]


def test_every_cluster_fix_of_the_misconfigured_run_pastes(misconfigured):
    _, doc = misconfigured
    red = [r for r in doc["results"] if r["node"] == "cluster" and r["status"] in ("fail", "warn")]
    assert {r["name"] for r in red} >= {"cluster.node_rank", "net.mtu", "cluster.env_consistency"}
    for r in red:
        assert r["actor"], r["name"]
        assert paste_problems(r["remediation"]) == [], (r["name"], r["remediation"])


@pytest.fixture(scope="module")
def loopback_head(lab, tmp_path_factory):
    """The head's own /etc/hosts maps its name (MASTER_ADDR) to 127.0.1.1, the Debian default; the workers' map
    it to 10.77.0.10. Run, paste cluster.master_node's fix into the head's shell, run again; then the hosts file
    is put back."""
    where = tmp_path_factory.mktemp("loopback")
    hosts = lab.hosts(0)
    before = hosts.read_text()
    hosts.write_text(before.replace(f"{lab.addr(0)} lab-node0\n", "127.0.1.1 lab-node0\n"))
    try:
        red = lab.run(where / "loopback.json", "--only", ONLY)
        fix = results_by(red[1], "cluster.master_node")["cluster"]["remediation"]
        pasted = lab.net.exec(0, ["bash", "-c", fix], timeout=20)  # as the person pastes it on the head
        after = hosts.read_text()
        green = lab.run(where / "fixed.json", "--only", ONLY)
    finally:
        hosts.write_text(before)
    return red, pasted, green, after


def test_a_head_resolving_its_name_to_loopback_fails_with_the_workers_address_and_the_hosts_line(loopback_head):
    (proc, doc), *_ = loopback_head
    assert proc.returncode == 1
    master = results_by(doc, "cluster.master_node")["cluster"]
    assert master["status"] == "fail" and master["cause"] == "net.master_loopback"
    assert master["summary"].startswith("lab-node0 resolves MASTER_ADDR lab-node0 to 127.0.1.1 (loopback); "
                                        "lab-node1, lab-node2 resolve it to 10.77.0.10")
    assert "no node holds" not in master["summary"]
    assert "'10.77.0.10 lab-node0'" in master["remediation"] and "# on lab-node0" in master["remediation"]
    assert paste_problems(master["remediation"]) == []


def test_mtu_is_judged_on_the_heads_interface_toward_the_workers_not_its_loopback(loopback_head):
    (_, doc), *_ = loopback_head
    result = results_by(doc, "net.mtu")["cluster"]
    assert result["status"] == "pass", result
    assert result["evidence"]["nodes"]["lab-node0"]["interface"] == "eth0"
    assert "65536" not in result["summary"] and "mtu 65536" not in (result["remediation"] or "")


def test_pasting_the_hosts_fix_on_the_head_makes_the_next_run_green(loopback_head):
    _, pasted, (proc, doc), hosts = loopback_head
    assert pasted.returncode == 0, pasted.stderr
    assert pasted.stdout.split() == ["10.77.0.10", "lab-node0"]  # the fix's own check: getent hosts
    assert "127.0.1.1 lab-node0" not in hosts
    assert results_by(doc, "cluster.master_node")["cluster"]["status"] == "pass"
    assert results_by(doc, "net.nic_route")["lab-node0"]["status"] != "fail"
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.fixture(scope="module")
def cloned(lab, tmp_path_factory):
    """lab-node2 answers lab-node1's host name (its UTS namespace renamed, as a cloned VM image or a container
    started with one --hostname would be); put back after the run."""
    where = tmp_path_factory.mktemp("cloned")
    lab.set_hostname("lab-node2", "lab-node1")
    try:
        return lab.run(where / "cloned.json", "--only", "host.*,cluster.unique_hostnames")
    finally:
        lab.set_hostname("lab-node2", "lab-node2")


def test_two_nodes_answering_one_host_name_fail_naming_both_by_address(cloned, quick_start):
    proc, doc = cloned
    assert proc.returncode == 1, proc.stdout[-2000:]
    result = results_by(doc, "cluster.unique_hostnames")["cluster"]
    assert result["status"] == "fail" and result["actor"] == "node" and result["cause"] == "host.duplicate_hostname"
    assert result["summary"].startswith("2 nodes answer the host name 'lab-node1': lab-node1 (10.77.0.11), "
                                        "lab-node2 (10.77.0.12)"), result["summary"]
    assert "hostnamectl set-hostname" in result["remediation"] and "# on lab-node2 (10.77.0.12)" in result["remediation"]
    assert paste_problems(result["remediation"]) == []
    # the lab's nodes, each in a UTS namespace of its own, pass it
    assert results_by(quick_start[1], "cluster.unique_hostnames")["cluster"]["status"] == "pass"


@pytest.fixture(scope="module")
def firewalled(lab, tmp_path_factory):
    """lab-node2 drops new TCP from the other nodes to Ray's worker ports (10002-19999): its raylet stays registered,
    the head cannot reach its workers (issue 46.12). The rule is removed after the run."""
    where = tmp_path_factory.mktemp("firewalled")
    rule = ["INPUT", "-p", "tcp", "-m", "conntrack", "--ctstate", "NEW", "--dport", "10002:19999", "!", "-i", "lo",
            "-j", "DROP"]
    lab.net.add_rule(2, ["-A", *rule])
    try:
        return lab.run(where / "firewalled.json", "--only", "env.*", "--timeout", "90"), lab.entry("lab-node2")
    finally:
        lab.net.exec(2, [shutil.which("iptables") or "iptables", "-D", *rule])


def test_a_node_whose_ray_worker_ports_are_filtered_is_alive_and_unreachable_with_the_port_fix(firewalled):
    (proc, doc), entry = firewalled
    assert proc.returncode == 1
    row = results_by(doc, "cluster.node_run")["lab-node2"]
    assert row["status"] == "error" and row["actor"] == "node" and row["cause"] == "cluster.node_unreachable"
    assert row["summary"].startswith("the node at 10.77.0.12 is alive in Ray's node table, but its Ray workers cannot be "
                                     "reached from here: a connect to 10.77.0.12:10002 (Ray's worker port range "
                                     "10002-19999) got timeout"), row["summary"]
    assert "lost or killed" not in row["summary"] and row["evidence"]["kind"] == "unreachable"
    fix = row["remediation"]
    assert "iptables -I INPUT -p tcp --dport 10002:19999 -j ACCEPT   # on lab-node2 (10.77.0.12)" in fix
    assert f"--dport {entry['NodeManagerPort']} -j ACCEPT" in fix and f"--dport {entry['ObjectManagerPort']} -j" in fix
    assert paste_problems(fix) == []
    assert doc["cluster"]["node_states"]["lab-node2"]["state"] == "alive"
    assert {n["node"]: n["state"] for n in doc["nodes"]} == {"lab-node0": "ok", "lab-node1": "ok", "lab-node2": "error"}
