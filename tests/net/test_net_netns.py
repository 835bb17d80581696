"""The net.* checks run by the CLI inside real network namespaces (tests/netns_lab.py): head node 0,
workers 1 and 2; node 1 has a second NIC (eth1, holding its default route) and a docker0 bridge."""
import json
import os
import select
import sys
import time

import pytest
from netns_lab import NETNS_ETC, netns_lab  # noqa: F401  (the fixture)
from paste_lint import paste_problems

from dsv3_preflight.engine import run_cluster_checks
from dsv3_preflight.profile import Profile
from dsv3_preflight.registry import load_registry

pytestmark = [pytest.mark.netns, pytest.mark.slow]
PY = sys.executable
PORT = 39500
TOKEN = "lab-token-1"


def start_listener(lab, deadline=40):
    proc = lab.popen(0, [PY, "-m", "dsv3_preflight", "listen", "--port", str(PORT), "--deadline", str(deadline),
                         "--token", TOKEN])
    ready, _, _ = select.select([proc.stdout], [], [], 20)
    assert ready, "the listener did not start within 20 s"
    line = proc.stdout.readline()
    assert line.startswith("listening on 0.0.0.0:39500"), line + proc.stderr.read()
    return proc


def run_checks(lab, tmp_path, node, only="net.*", **env):
    """`dsv3-preflight run` inside node's namespace; returns ({check: result}, exit code, facts doc, stderr)."""
    out, facts = tmp_path / f"result-n{node}.json", tmp_path / f"facts-n{node}.json"
    base = {"MASTER_ADDR": lab.addr(0), "MASTER_PORT": str(PORT), "NNODES": "3", "NODE_RANK": str(node),
            "DSV3_PREFLIGHT_NODE_NAME": f"lab-node{node}", "DSV3_PREFLIGHT_LISTENER_TOKEN": TOKEN,
            "DSV3_PREFLIGHT_REACH_TIMEOUT": "1.5"}
    base.update(env)
    env_clean = {k: v for k, v in base.items() if v is not None}
    proc = lab.exec(node, [PY, "-m", "dsv3_preflight", "run", "--only", only, "--no-report", "-q", "--no-color",
                           "--json", str(out), "--facts-out", str(facts)], env=env_clean, timeout=90)
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    doc = json.loads(out.read_text())
    return {r["name"]: r for r in doc["results"]}, proc.returncode, json.loads(facts.read_text()), proc.stderr


PINNED = {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0"}


def test_healthy_lab_is_green_on_head_and_worker_and_the_route_skips_the_default_nic(netns_lab, tmp_path):
    lab = netns_lab
    start_listener(lab)
    worker, rc, facts, _ = run_checks(lab, tmp_path, 1, **PINNED)
    assert rc == 0, worker
    nic = worker["net.nic_route"]
    assert nic["status"] == "pass" and nic["evidence"]["interface"] == "eth0"  # not eth1, the default route
    assert nic["evidence"]["src"] == lab.addr(1) and nic["evidence"]["method"] == "netlink"
    reach = worker["net.port_reach"]
    assert reach["status"] == "pass" and reach["evidence"]["listener"] == "ours" and reach["evidence"]["token_match"]
    assert worker["net.port_free"]["status"] == "skip"

    head, rc, _, _ = run_checks(lab, tmp_path, 0, **PINNED)
    assert rc == 0, head
    assert head["net.nic_route"]["evidence"]["interface"] == "eth0" and head["net.nic_route"]["evidence"]["local"]
    assert head["net.port_free"]["status"] == "pass" and "listener" in head["net.port_free"]["summary"]
    assert head["net.port_reach"]["status"] == "skip"


def test_drop_on_the_port_at_the_head_is_filtered_within_the_timeout(netns_lab, tmp_path):
    lab = netns_lab
    start_listener(lab)
    lab.add_rule(0, ["-A", "INPUT", "-p", "tcp", "--dport", str(PORT), "-j", "DROP"])
    started = time.monotonic()
    worker, rc, facts, _ = run_checks(lab, tmp_path, 2, only="net.port_reach", **PINNED)
    reach = worker["net.port_reach"]
    assert rc == 1 and reach["status"] == "fail" and reach["evidence"]["outcome"] == "filtered"
    assert 1.4 <= facts["facts"]["port_reach"]["elapsed_s"] < 2.5
    assert "-j ACCEPT" in reach["remediation"]
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("reject_with", [None, "tcp-reset"])
def test_reject_on_the_port_is_refused(netns_lab, tmp_path, reject_with):
    lab = netns_lab
    start_listener(lab)
    rule = ["-A", "INPUT", "-p", "tcp", "--dport", str(PORT), "-j", "REJECT"]
    lab.add_rule(0, rule + (["--reject-with", reject_with] if reject_with else []))
    worker, rc, _, _ = run_checks(lab, tmp_path, 1, only="net.port_reach", **PINNED)
    assert rc == 1 and worker["net.port_reach"]["evidence"]["outcome"] == "refused"
    assert "refused" in worker["net.port_reach"]["summary"]


def test_nothing_listening_at_the_head_is_refused_with_the_listen_hint(netns_lab, tmp_path):
    # no listener was started, and none is expected (no token exported)
    worker, rc, _, _ = run_checks(netns_lab, tmp_path, 2, only="net.port_reach", DSV3_PREFLIGHT_LISTENER_TOKEN=None,
                                  **PINNED)
    reach = worker["net.port_reach"]
    assert rc == 1 and reach["evidence"]["outcome"] == "refused"
    assert "nothing listens on 39500" in reach["summary"] and reach["cause"] == "net.port_not_listening"
    assert "dsv3-preflight listen --port 39500 --deadline 120" in reach["remediation"].splitlines()
    assert paste_problems(reach["remediation"]) == []


def test_a_reject_while_our_listener_serves_is_called_a_firewall_and_its_fix_finds_and_opens_it(netns_lab, tmp_path):
    # issue 19.4: the head REJECTs one worker while the listener serves; the other worker reaches it
    lab = netns_lab
    start_listener(lab, deadline=90)
    lab.add_rule(0, ["-A", "INPUT", "-p", "tcp", "-s", lab.addr(1), "--dport", str(PORT), "-j", "REJECT",
                     "--reject-with", "tcp-reset"])
    other, rc2, _, _ = run_checks(lab, tmp_path, 2, only="net.port_reach", **PINNED)
    assert rc2 == 0 and other["net.port_reach"]["evidence"]["listener"] == "ours"
    worker, rc, facts, _ = run_checks(lab, tmp_path, 1, only="net.port_reach", **PINNED)
    reach = worker["net.port_reach"]
    assert rc == 1 and reach["evidence"]["outcome"] == "refused" and facts["facts"]["port_reach"]["listener_expected"]
    assert "actively refused" in reach["summary"] and "firewall REJECT" in reach["summary"], reach["summary"]
    assert "nothing listens" not in reach["summary"]
    assert reach["cause"] == "net.port_rejected" and reach["actor"] == "network"
    fix = reach["remediation"]
    assert paste_problems(fix) == []
    # the fix's own listing command, run on the head, shows the REJECT rule; its ACCEPT line opens the port
    [listing] = [line for line in fix.splitlines() if line.startswith("iptables -L INPUT")]
    shown = lab.exec(0, ["bash", "-c", listing], check=True).stdout
    assert "REJECT" in shown and f"dpt:{PORT}" in shown and lab.addr(1) in shown, shown
    [nft] = [line for line in fix.splitlines() if line.startswith("nft ")]
    assert "reject" in lab.exec(0, ["bash", "-c", nft], check=True).stdout
    [accept] = [line for line in fix.splitlines() if line.startswith("iptables -I INPUT")]
    lab.exec(0, ["bash", "-c", accept], check=True)
    again, rc, _, _ = run_checks(lab, tmp_path, 1, only="net.port_reach", **PINNED)
    assert rc == 0 and again["net.port_reach"]["status"] == "pass", again["net.port_reach"]["summary"]


def test_a_reject_with_icmp_host_prohibited_is_unreachable_and_names_the_firewall(netns_lab, tmp_path):
    # firewalld's default REJECT answers icmp-host-prohibited: connect() says EHOSTUNREACH, not ECONNREFUSED
    lab = netns_lab
    start_listener(lab)
    lab.add_rule(0, ["-A", "INPUT", "-p", "tcp", "--dport", str(PORT), "-j", "REJECT", "--reject-with",
                     "icmp-host-prohibited"])
    worker, rc, _, _ = run_checks(lab, tmp_path, 1, only="net.port_reach", **PINNED)
    reach = worker["net.port_reach"]
    assert rc == 1 and reach["evidence"]["outcome"] == "unreachable", reach["evidence"]
    assert "icmp-host-prohibited" in reach["summary"] and reach["cause"] == "net.master_unreachable"
    assert paste_problems(reach["remediation"]) == []


def test_no_route_beyond_the_gateway_is_unreachable_and_the_route_shows_the_gateway(netns_lab, tmp_path):
    worker, rc, _, _ = run_checks(netns_lab, tmp_path, 2, MASTER_ADDR="10.99.0.1", **PINNED)
    assert worker["net.nic_route"]["evidence"]["gateway"] == "10.77.0.1"
    assert worker["net.port_reach"]["evidence"]["outcome"] == "unreachable", worker["net.port_reach"]


def test_a_stale_process_holding_the_port_is_named_by_pid(netns_lab, tmp_path):
    lab = netns_lab
    stale = lab.popen(0, [PY, "-c", "import socket,time,sys; s=socket.socket(); s.bind(('0.0.0.0', 39500)); "
                                    "s.listen(); print('held', flush=True); time.sleep(120)  # stale train.py"])
    ready, _, _ = select.select([stale.stdout], [], [], 20)
    assert ready and stale.stdout.readline().strip() == "held"
    head, rc, _, _ = run_checks(lab, tmp_path, 0, only="net.port_free", **PINNED)
    free = head["net.port_free"]
    assert rc == 1 and free["status"] == "fail"
    assert f"pid {stale.pid}" in free["summary"] and "stale train.py" in free["summary"]
    assert free["remediation"].startswith(f"kill {stale.pid}")


@pytest.mark.parametrize("node, env, status, word", [
    (1, {"NCCL_SOCKET_IFNAME": "eth1", "GLOO_SOCKET_IFNAME": "eth0"}, "fail", "selects eth1, not eth0"),
    (1, {"NCCL_SOCKET_IFNAME": "eth", "GLOO_SOCKET_IFNAME": "eth0"}, "warn", "also selects eth1"),
    (1, {"NCCL_SOCKET_IFNAME": "^docker,lo", "GLOO_SOCKET_IFNAME": "eth0"}, "warn", "also selects eth1"),
    (2, {"NCCL_SOCKET_IFNAME": "^docker,lo", "GLOO_SOCKET_IFNAME": "eth0"}, "pass", "via eth0"),
    (1, {"NCCL_SOCKET_IFNAME": "docker", "GLOO_SOCKET_IFNAME": "docker0"}, "fail", "selects docker0, not eth0"),
    (1, {"NCCL_SOCKET_IFNAME": None, "GLOO_SOCKET_IFNAME": None}, "warn", "unset"),
])
def test_nccl_socket_ifname_is_judged_against_the_kernels_route(netns_lab, tmp_path, node, env, status, word):
    results, _, _, _ = run_checks(netns_lab, tmp_path, node, only="net.nic_route", **env)
    nic = results["net.nic_route"]
    assert nic["status"] == status and word in nic["summary"], nic["summary"]
    if status != "pass":
        assert "export NCCL_SOCKET_IFNAME=eth0" in nic["remediation"]


def test_master_addr_as_a_host_name_resolves_through_the_nodes_hosts_file(netns_lab, tmp_path):
    lab = netns_lab
    start_listener(lab)
    results, rc, facts, _ = run_checks(lab, tmp_path, 2, MASTER_ADDR="lab-node0", **PINNED)
    assert rc == 0, results
    assert facts["facts"]["nic_route"]["target"] == lab.addr(0)
    assert results["net.port_reach"]["evidence"]["token_match"] is True


def test_unresolvable_master_addr_gives_clear_results_not_a_traceback(netns_lab, tmp_path):
    results, rc, _, stderr = run_checks(netns_lab, tmp_path, 1, MASTER_ADDR="no-such-head.invalid", **PINNED)
    assert rc == 1
    assert results["net.nic_route"]["status"] == "fail" and "does not resolve" in results["net.nic_route"]["summary"]
    assert results["net.port_reach"]["evidence"]["outcome"] == "name_resolution"


def test_mtu_mismatch_across_the_lab_fails_and_equal_mtu_passes(netns_lab, tmp_path):
    lab = netns_lab
    registry = load_registry()
    spec = [registry.checks["net.mtu"]]

    def gather():
        nodes = {}
        for node in range(3):
            # net.nic_route needs the fact, so the run waits for it (net.mtu alone is skipped on one node)
            _, _, facts, _ = run_checks(lab, tmp_path, node, only="net.nic_route", **PINNED)
            nodes[f"lab-node{node}"] = facts
        profile = Profile.from_dict(nodes["lab-node0"]["profile"])
        return run_cluster_checks(spec, profile, nodes, {f"lab-node{i}": i for i in range(3)})[0]

    first = gather()
    assert first.status.value == "pass", first.summary
    lab.set_mtu(2, "eth0", 1400)
    result = gather()
    assert result.status.value == "fail" and "lab-node2 eth0=1400" in result.summary
    assert "ip link set dev eth0 mtu 1500   # on lab-node2:" in result.remediation


def test_a_lost_carrier_on_the_route_interface_fails_nic_route(netns_lab, tmp_path):
    lab = netns_lab
    lab.set_switch_port(2, up=False)  # node 2's eth0 loses carrier but keeps its routes
    results, rc, _, _ = run_checks(lab, tmp_path, 2, only="net.nic_route", **PINNED)
    nic = results["net.nic_route"]
    assert rc == 1 and nic["status"] == "fail" and "is down" in nic["summary"]
    assert "ip link set dev eth0 up" in nic["remediation"]


def test_an_interface_set_down_leaves_no_route_to_the_head(netns_lab, tmp_path):
    lab = netns_lab
    lab.set_link(2, "eth0", up=False)
    results, rc, _, _ = run_checks(lab, tmp_path, 2, only="net.nic_route", **PINNED)
    nic = results["net.nic_route"]
    assert rc == 1 and "no route" in nic["summary"] and "unreachable" in nic["summary"].lower()


def test_a_stalled_resolver_is_cut_off_at_the_deadline(netns_lab):
    lab = netns_lab
    import os

    from netns_lab import NETNS_ETC

    with open(os.path.join(NETNS_ETC, lab.ns(2), "resolv.conf"), "w") as fh:  # a DNS server that never answers
        fh.write(f"nameserver {lab.addr(0)}\noptions timeout:5 attempts:1\n")
    lab.add_rule(0, ["-A", "INPUT", "-p", "udp", "--dport", "53", "-j", "DROP"])
    code = ("import json,time; from dsv3_preflight.net.probes.resolve import resolve; t=time.monotonic(); "
            "a,e,n=resolve('head.example.internal', 0.5); print(json.dumps([a, e, time.monotonic()-t]))")
    addresses, error, took = json.loads(lab.exec(2, [PY, "-c", code], timeout=30, check=True).stdout)
    assert addresses == [] and "within 0.5 s" in error and took < 2


def test_a_head_whose_hosts_file_maps_master_addr_to_loopback_gets_the_hosts_line_and_its_own_address(netns_lab, tmp_path):
    # issue 19.2 on the head: MASTER_ADDR lab-head, which the head's own /etc/hosts maps to 127.0.1.1 (Debian's
    # default for the host's own name); the fix names that line and the head's address, and applying it works
    import os

    from netns_lab import NETNS_ETC

    lab = netns_lab
    hosts = os.path.join(NETNS_ETC, lab.ns(0), "hosts")
    with open(hosts, "a") as fh:
        fh.write("127.0.1.1\tlab-head\n")
    line = sum(1 for _ in open(hosts))
    results, rc, facts, _ = run_checks(lab, tmp_path, 0, only="env.launch_vars,net.nic_route", MASTER_ADDR="lab-head",
                                       **PINNED)
    env, nic = results["env.launch_vars"], results["net.nic_route"]
    assert rc == 1 and nic["status"] == "fail" and env["status"] == "fail"
    assert facts["facts"]["resolve_master"]["hosts_entries"] == [
        {"line": line, "address": "127.0.1.1", "names": ["lab-head"], "text": "127.0.1.1 lab-head"}]
    [env_loop] = [f for f in env["findings"] if f["cause"] == "net.master_loopback"]
    [nic_loop] = [f for f in nic["findings"] if f["cause"] == "net.master_loopback"]
    assert env_loop["fix"] == nic_loop["fix"]  # one cause, one fix
    fix = nic_loop["fix"]
    assert f"# /etc/hosts line {line} maps lab-head to loopback: 127.0.1.1 lab-head" in fix
    assert f'echo "{lab.addr(0)} lab-head"' in fix and paste_problems(fix) == []
    applied = lab.exec(0, ["bash", "-c", fix.replace("sudo ", "")], env={"TMPDIR": str(tmp_path)}, check=True)
    assert applied.returncode == 0
    assert "lab-head" not in open(hosts).read().splitlines()[line - 1]
    again, rc, facts, _ = run_checks(lab, tmp_path, 0, only="env.launch_vars,net.nic_route", MASTER_ADDR="lab-head",
                                     **PINNED)
    assert facts["facts"]["resolve_master"]["addresses"] == [lab.addr(0)]
    assert again["net.nic_route"]["status"] == "pass" and again["net.nic_route"]["evidence"]["interface"] == "eth0"
    assert not [f for f in again["env.launch_vars"]["findings"] if f["cause"] == "net.master_loopback"]


def test_a_worker_whose_hosts_file_maps_master_addr_to_a_stale_address_is_told_so_not_blamed_on_a_firewall(
        netns_lab, tmp_path):
    """Issue 46.13a: MASTER_ADDR lab-head, which the head and worker 1 map to the head and worker 2's /etc/hosts to
    an old address (worker 1's, where nothing serves the port): port_reach called that address the head and
    suggested an iptables ACCEPT."""
    lab = netns_lab
    for i, addr in ((0, lab.addr(0)), (1, lab.addr(0)), (2, lab.addr(1))):
        with open(os.path.join(NETNS_ETC, lab.ns(i), "hosts"), "a") as fh:
            fh.write(f"{addr} lab-head\n")
    start_listener(lab)
    good, rc, _, _ = run_checks(lab, tmp_path, 1, only="net.port_reach", MASTER_ADDR="lab-head", **PINNED)
    assert rc == 0 and good["net.port_reach"]["status"] == "pass", good
    stale, rc, facts, _ = run_checks(lab, tmp_path, 2, only="net.port_reach", MASTER_ADDR="lab-head", **PINNED)
    reach = stale["net.port_reach"]
    assert rc == 1 and reach["cause"] == "net.master_name_stale" and reach["actor"] == "node", reach
    assert f"at {lab.addr(1)}, the address this node's /etc/hosts gives lab-head" in reach["summary"]
    assert f"the head ({lab.addr(1)})" not in reach["summary"] and "firewall" not in reach["summary"]
    assert "grep -n 'lab-head' /etc/hosts" in reach["remediation"]
    assert not reach["remediation"].splitlines()[0].startswith("iptables")
