"""The MASTER_ADDR helpers (dsv3_preflight/net/master.py) the net checks, env.launch_vars and the cluster checks
share: what is loopback, the training addresses, and the fixes for a loopback or unresolvable MASTER_ADDR.
Each net check's rule tables are in tests/net/test_net_<check>.py.
"""
import copy

import pytest
from net_facts_lab import lab  # noqa: F401 (pytest fixtures)
from paste_lint import paste_problems

from dsv3_preflight.net.master import (
    HEAD_ADDR,
    is_loopback,
    loopback_fix,
    resolves_to_loopback,
    training_addresses,
    unresolvable_fix,
)


# -- MASTER_ADDR helpers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("addr, loop", [("127.0.0.1", True), ("127.0.1.1", True), ("::1", True), ("localhost", True),
                                        ("10.77.0.10", False), ("head", False), ("", False), (None, False)])
def test_is_loopback(addr, loop):
    assert is_loopback(addr) is loop


@pytest.mark.parametrize("addr, loop", [("::ffff:127.0.0.1", True), ("::ffff:127.0.1.1", True), ("::ffff:10.77.0.10", False),
                                        ("127.0.0.1%lo", True), ("::1%lo", True), ("fe80::1%eth0", False),
                                        ("LOCALHOST", True), ("localhost.", True), ("ip6-localhost", True),
                                        ("node0.localhost", True), ("localhost.example.com", False), (" 127.0.0.1 ", True)])
def test_is_loopback_knows_mapped_addresses_scopes_and_the_names_that_always_mean_this_host(addr, loop):
    """IPv4-mapped loopback (a dual-stack socket's view of 127.0.0.1) and RFC 6761's *.localhost are loopback;
    a name that merely starts with localhost is not (it resolves like any other name)."""
    assert is_loopback(addr) is loop


def test_a_name_is_loopback_when_it_resolves_to_loopback():
    assert resolves_to_loopback("head", ["127.0.1.1"]) and resolves_to_loopback("localhost", [])
    assert not resolves_to_loopback("head", ["10.77.0.10"]) and not resolves_to_loopback("head", None)


def test_one_is_loopback_for_master_addr_everywhere():
    """The cluster runner's node-0 choice and the checks share net.master's is_loopback."""
    from dsv3_preflight.cluster import master as cluster_master
    from dsv3_preflight.cluster.nodes import NodeInfo, assign_node_ranks
    assert cluster_master.is_loopback is is_loopback
    nodes = [NodeInfo("aa" * 14, "10.0.0.1", "gpu-a"), NodeInfo("dd" * 14, "10.0.0.200", "driver-host", is_driver=True)]
    for addr in ("::ffff:127.0.0.1", "LOCALHOST"):
        assert assign_node_ranks(nodes, addr, addresses={addr})[0].hostname == "driver-host"


def test_training_addresses_leave_out_loopback_bridges_and_link_local(lab):
    interfaces = lab("worker_two_nics")["nic_route"]["interfaces"]
    assert training_addresses(interfaces) == [("eth0", "10.77.0.11"), ("eth1", "10.77.1.11")]
    down = copy.deepcopy(interfaces)
    down[2]["up"] = False
    assert training_addresses(down) == [("eth0", "10.77.0.11")]


@pytest.mark.parametrize("name, addresses, entries, candidates, head, has", [
    ("127.0.0.1", ["127.0.0.1"], [], [("eth0", "10.0.0.5")], True, "export MASTER_ADDR=10.0.0.5   # this node is the head"),
    ("127.0.0.1", ["127.0.0.1"], [], [("eth0", "10.0.0.5")], False, f'export MASTER_ADDR="{HEAD_ADDR}"'),
    ("127.0.0.1", ["127.0.0.1"], [], [("eth0", "10.0.0.5"), ("eth1", "10.1.0.5")], True, f'export MASTER_ADDR="{HEAD_ADDR}"'),
    ("head", ["127.0.1.1"], [{"line": 3, "address": "127.0.1.1", "text": "127.0.1.1 vm head"}], [], False,
     f'echo "{HEAD_ADDR} head" >> "$new_hosts" &&'),
    ("my.head-1", ["127.0.1.1"], [{"line": 7, "address": "127.0.1.1", "text": "127.0.1.1 my.head-1"}], [], False,
     "'7s/[[:space:]]+my\\.head-1([[:space:]]|$)/\\1/'"),
    ("head", ["127.0.1.1"], [], [], False, "# MASTER_ADDR head is loopback (it resolves to 127.0.1.1)"),
])
def test_loopback_fix_pastes_and_names_what_it_knows(name, addresses, entries, candidates, head, has):
    fix = loopback_fix(name, addresses, entries, candidates, head)
    assert has in fix, fix
    assert paste_problems(fix) == []


def test_the_hosts_line_fix_drops_only_that_name_and_maps_it_to_the_head(tmp_path):
    # the fix, run on a copy of a Debian hosts file: the name leaves the loopback line, the other names stay
    import subprocess

    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n127.0.1.1 vm head\n10.77.0.11 lab-node1\n")
    fix = loopback_fix("head", ["127.0.1.1"], [{"line": 2, "address": "127.0.1.1", "text": "127.0.1.1 vm head"}],
                       [("eth0", "10.77.0.10")], True)
    script = fix.replace("sudo ", "").replace("/etc/hosts", str(hosts))
    subprocess.run(["bash", "-c", script], check=True, timeout=10, env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})
    assert hosts.read_text() == "127.0.0.1 localhost\n127.0.1.1 vm\n10.77.0.11 lab-node1\n10.77.0.10 head\n"
    assert [p.name for p in tmp_path.iterdir()] == ["hosts"]  # its temporary file is gone


def test_loopback_fix_takes_the_heads_address_a_cluster_check_knows():
    # cluster scope: the head maps its name to 127.0.1.1, the workers resolve it to 10.77.0.10
    entries = [{"line": 2, "address": "127.0.1.1", "text": "127.0.1.1 head"}]
    fix = loopback_fix("head", ["127.0.1.1"], entries, [("eth0", "10.77.0.10"), ("eth1", "10.77.1.10")], False,
                       head_address=("as the workers resolve head", "10.77.0.10"))
    assert 'echo "10.77.0.10 head" >> "$new_hosts" &&' in fix and "as the workers resolve head" in fix
    assert paste_problems(fix) == []
    literal = loopback_fix("127.0.0.1", ["127.0.0.1"], [], [], False, head_address=("node 0's eth0", "10.77.0.10"))
    assert "export MASTER_ADDR=10.77.0.10   # the head's address (node 0's eth0)" in literal


def test_the_hosts_line_fix_changes_nothing_without_the_head_address(tmp_path):
    import subprocess

    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.1.1 vm head\n")
    fix = loopback_fix("head", ["127.0.1.1"], [{"line": 1, "address": "127.0.1.1", "text": "127.0.1.1 vm head"}], [], False)
    script = fix.replace("sudo ", "").replace("/etc/hosts", str(hosts))
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=10,
                          env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})
    assert proc.returncode != 0 and "set HEAD_ADDR" in proc.stderr
    assert hosts.read_text() == "127.0.1.1 vm head\n"


def test_unresolvable_fix_fails_loudly_without_the_head_address():
    import subprocess

    fix = unresolvable_fix("head.invalid")
    assert paste_problems(fix) == []
    proc = subprocess.run(["bash", "-c", fix + "\necho reached"], capture_output=True, text=True, timeout=10,
                          env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode != 0 and "reached" not in proc.stdout
    assert "set HEAD_ADDR to the head node address on the training network" in proc.stderr
    proc = subprocess.run(["bash", "-c", fix + "\necho $MASTER_ADDR"], capture_output=True, text=True, timeout=10,
                          env={"PATH": "/usr/bin:/bin", "HEAD_ADDR": "10.77.0.10"})
    assert proc.stdout.strip() == "10.77.0.10"
