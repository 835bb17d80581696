"""cluster.master_node (checks/cluster_master_node.py): how every node resolves MASTER_ADDR, rule by rule
(dsv3_preflight/net/master_node.py) and on recorded node facts."""
from __future__ import annotations

import subprocess

from cluster_judges_lab import data_dir_module, judge_all, recorded  # noqa: F401 - the fixtures
from paste_lint import paste_problems

from dsv3_preflight.net.master_node import (
    hosts_fix,
    rule_literal_loopback,
    rule_node0_holds,
    rule_resolutions_differ,
    rule_resolves_to_loopback,
    rule_unresolved,
)
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Actor, Status


def test_head_resolving_its_own_name_to_loopback_fails_with_the_hosts_line_and_the_workers_address(recorded):
    scenario = recorded["loopback_head"]
    result = judge_all(scenario)["cluster.master_node"]
    assert result.status is Status.FAIL and result.actor is Actor.NODE and result.cause == "net.master_loopback"
    assert result.summary.startswith("lab-node0 resolves MASTER_ADDR lab-node0 to 127.0.1.1 (loopback); "
                                     "lab-node1, lab-node2 resolve it to 10.77.0.10")
    assert "no node holds" not in result.summary  # issue 19.2: it contradicted itself
    assert result.remediation == hosts_fix("lab-node0", "lab-node0", "127.0.1.1", "10.77.0.10")
    assert "# on lab-node0" in result.remediation and paste_problems(result.remediation) == []


def test_the_hosts_fix_moves_the_name_off_the_loopback_line_in_place(tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n127.0.1.1\tlab-node0.lab lab-node0\n10.77.0.11 lab-node1\n")
    line = hosts_fix("lab-node0", "lab-node0", "127.0.1.1", "10.77.0.10").splitlines()[0].replace("/etc/hosts", str(hosts))
    inode = hosts.stat().st_ino
    subprocess.run(["bash", "-c", line], check=True, timeout=10)
    assert hosts.read_text() == ("127.0.0.1 localhost\n127.0.1.1\tlab-node0.lab\n10.77.0.11 lab-node1\n"
                                 "10.77.0.10 lab-node0\n")
    assert hosts.stat().st_ino == inode  # written in place: a bind-mounted /etc/hosts cannot be renamed over


def test_rule_resolves_to_loopback_is_silent_when_every_node_resolves_the_training_address():
    res = {"a": ["10.0.0.1"], "b": ["10.0.0.1"]}
    assert rule_resolves_to_loopback("head", res, "10.0.0.1") == []
    found = rule_resolves_to_loopback("head", {"a": ["127.0.1.1"], "b": ["10.0.0.1"]}, "10.0.0.1")
    assert len(found) == 1 and found[0].message.startswith("a resolves MASTER_ADDR head to 127.0.1.1")


def test_rule_literal_loopback_fails_a_multi_node_job_with_node_0s_address():
    p = resolve_profile({"nnodes": 3, "master_addr": "127.0.0.1"}, {})
    found = rule_literal_loopback("127.0.0.1", p, "lab-node0", "10.77.0.10")
    assert found.fix.startswith("export MASTER_ADDR=10.77.0.10   # on every node")
    assert rule_literal_loopback("127.0.0.1", resolve_profile({"nnodes": 1}, {}), "x", None) is None


def test_rule_unresolved_adds_the_hosts_line_the_other_nodes_resolve():
    found = rule_unresolved("head", {"a": ["10.0.0.1"], "b": []}, "10.0.0.1")
    assert found.message == "MASTER_ADDR head does not resolve on b"
    assert found.fix.startswith("echo '10.0.0.1 head' >> /etc/hosts   # on b")


def test_rule_resolutions_differ_names_each_nodes_answer():
    found = rule_resolutions_differ("head", {"a": ["10.0.0.1"], "b": ["10.0.0.2"]})
    assert "a -> 10.0.0.1, b -> 10.0.0.2" in found.message and paste_problems(found.fix) == []


def test_rule_node0_holds_names_the_holder_and_the_export_to_paste():
    found = rule_node0_holds("10.0.0.1", "node-a", ["node-b"], {"10.0.0.1"}, "10.0.0.2", {"node-a": ["10.0.0.1"]})
    assert found.message == "MASTER_ADDR 10.0.0.1 belongs to node-b, but node 0 is node-a"
    assert found.fix.startswith("export MASTER_ADDR=10.0.0.2   # on every node: node 0 node-a")
    nobody = rule_node0_holds("10.9.9.9", "node-a", [], {"10.9.9.9"}, None, {"node-a": ["10.9.9.9"]})
    assert nobody.message.startswith("no node holds MASTER_ADDR 10.9.9.9") and paste_problems(nobody.fix) == []
    assert rule_node0_holds("10.0.0.1", "node-a", ["node-a"], {"10.0.0.1"}, None, {}) is None
