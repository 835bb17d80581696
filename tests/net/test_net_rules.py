"""Each rule of net.nic_route, net.port_free and net.port_reach on its own, as tables over facts recorded in
the netns lab (tests/data/net/lab_*.json), varied per row; and the MASTER_ADDR fixes they share.

Every finding a rule returns must name who acts, and its fix must paste (tests/paste_lint.py).
"""
import copy
import json

import pytest
from paste_lint import paste_problems

from dsv3_preflight.checks import net_nic_route as nic
from dsv3_preflight.checks import net_port_free as free
from dsv3_preflight.checks import net_port_reach as reach
from dsv3_preflight.net import causes
from dsv3_preflight.net.master import HEAD_ADDR, is_loopback, loopback_fix, training_addresses, unresolvable_fix
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Actor, Status

MULTI = resolve_profile(environ={"NNODES": "3", "MASTER_ADDR": "10.77.0.10", "NODE_RANK": "1"})
HEAD = resolve_profile(environ={"NNODES": "3", "MASTER_ADDR": "10.77.0.10", "NODE_RANK": "0"})
MULTI_GLOO = resolve_profile(environ={"NNODES": "3", "MASTER_ADDR": "10.77.0.10", "NODE_RANK": "1"},
                             profile_name="cpu").with_values("test", nnodes=3)
SINGLE = resolve_profile(profile_name="cpu")


@pytest.fixture
def lab(data_dir):
    def load(name):
        return copy.deepcopy(json.loads((data_dir / "net" / f"lab_{name}.json").read_text())["facts"])
    return load


def route(lab, node="worker_two_nics", **changes):
    fact = lab(node)["nic_route"]
    env = {k: changes.pop(k) for k in list(changes) if k.isupper()}
    fact["env"].update(env)
    fact.update(changes)
    return fact


def assert_finding(found, status, cause, actor, *words):
    assert found is not None, "the rule found nothing"
    assert found.status is status, found
    assert found.cause == cause and found.actor is actor, found
    for word in words:
        assert word in found.message, found.message
    assert found.fix and paste_problems(found.fix) == [], (found.fix, paste_problems(found.fix))


# -- net.nic_route: gate rules ------------------------------------------------------------------------
def test_master_resolves_names_the_cause_shared_with_env_and_port_reach(lab):
    bad = route(lab, resolved=False, resolve_error="Name or service not known (errno -2)", master_addr="head.invalid")
    found = nic.master_resolves(bad)
    assert_finding(found, Status.FAIL, causes.MASTER_UNRESOLVABLE, Actor.JOB, "'head.invalid' does not resolve")
    assert found.fix == unresolvable_fix("head.invalid")
    assert nic.master_resolves(route(lab)) is None


def test_kernel_has_route_gives_the_ip_route_get_of_the_target(lab):
    found = nic.kernel_has_route(route(lab, route_error="Network is unreachable", route_errno=101, target="10.99.0.1"))
    assert_finding(found, Status.FAIL, causes.NO_ROUTE_TO_MASTER, Actor.NODE, "no route", "Network is unreachable")
    assert found.fix.startswith("ip route get 10.99.0.1")
    assert nic.kernel_has_route(route(lab)) is None


def test_route_names_interface(lab):
    assert_finding(nic.route_names_interface(route(lab, ifname=None)), Status.FAIL, causes.NO_ROUTE_TO_MASTER,
                   Actor.NODE, "names no interface")
    assert nic.route_names_interface(route(lab)) is None


def test_a_gate_leaves_only_the_rules_about_names(lab):
    # an unresolvable MASTER_ADDR leaves no route to compare NCCL with; a name that matches nothing is still wrong
    fact = route(lab, resolved=False, resolve_error="x", ifname=None, NCCL_SOCKET_IFNAME="ib", GLOO_SOCKET_IFNAME="eth9")
    result = nic.nic_route(fact, MULTI)
    assert [f.rule for f in result.findings] == ["master_resolves", "nccl_selects_something", "gloo_names_exist"]
    assert result.cause == causes.MASTER_UNRESOLVABLE
    assert "reaches MASTER_ADDR" not in result.findings[1].message
    assert result.findings[1].fix == nic.PIN_UNKNOWN and paste_problems(nic.PIN_UNKNOWN) == []
    pinned = nic.nic_route(route(lab, resolved=False, resolve_error="x", ifname=None, NCCL_SOCKET_IFNAME="eth0",
                                 GLOO_SOCKET_IFNAME="eth0"), MULTI)
    assert [f.rule for f in pinned.findings] == ["master_resolves"]


# -- net.nic_route: the interface ---------------------------------------------------------------------------
@pytest.mark.parametrize("changes, down", [
    ({}, False),
    ({"up": False}, True),
    ({"operstate": "down"}, True),
    ({"operstate": "lowerlayerdown"}, True),  # carrier lost at the switch
    ({"operstate": "unknown"}, False),        # virtual links report unknown while working
])
def test_interface_up(lab, changes, down):
    found = nic.interface_up(route(lab, **changes))
    if not down:
        assert found is None
    else:
        assert_finding(found, Status.FAIL, causes.NIC_DOWN, Actor.NODE, "eth0, the interface toward MASTER_ADDR", "is down")
        assert found.fix.startswith("ip link set dev eth0 up")


@pytest.mark.parametrize("profile, changes, fires", [
    (MULTI, {"ifname": "lo", "loopback": True, "master_addr": "127.0.0.1", "target": "127.0.0.1"}, True),
    (SINGLE, {"ifname": "lo", "loopback": True, "master_addr": "127.0.0.1", "target": "127.0.0.1"}, False),
    (MULTI, {}, False),
])
def test_not_loopback_on_multi_node(lab, profile, changes, fires):
    found = nic.not_loopback_on_multi_node(route(lab, **changes), profile)
    if not fires:
        assert found is None
        return
    assert_finding(found, Status.FAIL, causes.MASTER_LOOPBACK, Actor.JOB, "through loopback lo", "3 nodes")
    assert "IFNAME=lo" not in found.fix
    # not known to be the head (node_rank 1): a placeholder, and this node's own addresses in a comment
    assert f'export MASTER_ADDR="{HEAD_ADDR}"' in found.fix and "eth0 10.77.0.11, eth1 10.77.1.11" in found.fix


def test_not_loopback_names_the_hosts_line_and_the_heads_address_when_this_node_is_the_head(lab):
    fact = route(lab, "head", ifname="lo", loopback=True, master_addr="lab-head", target="127.0.1.1",
                 addresses=["127.0.1.1"],
                 hosts_entries=[{"line": 2, "address": "127.0.1.1", "names": ["lab-head"], "text": "127.0.1.1 lab-head"}])
    found = nic.not_loopback_on_multi_node(fact, HEAD)
    assert_finding(found, Status.FAIL, causes.MASTER_LOOPBACK, Actor.JOB, "lab-head")
    assert "# /etc/hosts line 2 maps lab-head to loopback: 127.0.1.1 lab-head" in found.fix
    assert "  sed -E '2s/[[:space:]]+lab-head([[:space:]]|$)/\\1/' /etc/hosts > \"$new_hosts\" &&" in found.fix
    assert '  echo "10.77.0.10 lab-head" >> "$new_hosts" &&' in found.fix  # the head's own address, known


@pytest.mark.parametrize("family, ipv4, fires", [("AF_INET", [], True), ("AF_INET", ["10.77.0.11"], False),
                                                  (None, [], False), ("AF_INET6", [], False)])
def test_family_has_address(lab, family, ipv4, fires):
    found = nic.family_has_address(route(lab, ipv4=ipv4, NCCL_SOCKET_FAMILY=family))
    if fires:
        assert_finding(found, Status.FAIL, causes.SOCKET_FAMILY, Actor.JOB, "AF_INET", "no IPv4")
        assert found.fix.startswith("unset NCCL_SOCKET_FAMILY")
    else:
        assert found is None


# -- net.nic_route: NCCL_SOCKET_IFNAME ----------------------------------------------------------------------
EXPORTS = "export NCCL_SOCKET_IFNAME=eth0\nexport GLOO_SOCKET_IFNAME=eth0"

NCCL_RULES = [nic.nccl_value_honoured, nic.nccl_entries_valid, nic.nccl_selects_something,
              nic.nccl_includes_route_interface, nic.nccl_bootstraps_on_route_interface,
              nic.nccl_selects_only_route_interface]


@pytest.mark.parametrize("value, profile, rule, status, words", [
    ("eth0", MULTI, None, None, []),
    ("=eth0", MULTI, None, None, []),
    (None, MULTI, None, None, []),
    # NCCL ignores a one-character value and picks by itself: eth0 and eth1 here
    ("e", MULTI, ("nccl_value_honoured", "nccl_selects_only_route_interface"), Status.WARN, ["NCCL ignores"]),
    ("eth0 ;reboot", MULTI, "nccl_entries_valid", Status.FAIL, ["cannot be interface names"]),
    ("ib", MULTI, "nccl_selects_something", Status.FAIL, ["selects no interface"]),
    ("ib", SINGLE, "nccl_selects_something", Status.FAIL, ["selects no interface"]),
    ("eth1", MULTI, "nccl_includes_route_interface", Status.FAIL, ["selects eth1, not eth0"]),
    ("eth1", SINGLE, None, None, []),  # one node: any existing interface works
    ("^eth0", MULTI, "nccl_includes_route_interface", Status.FAIL, ["selects lo, eth1, docker0, not eth0"]),
    ("lo,eth", MULTI, "nccl_bootstraps_on_route_interface", Status.FAIL, ["bootstraps on the first, lo, not eth0"]),
    ("eth", MULTI, "nccl_selects_only_route_interface", Status.WARN, ["also selects eth1"]),
    ("^docker,lo", MULTI, "nccl_selects_only_route_interface", Status.WARN, ["also selects eth1"]),
])
def test_each_nccl_rule_fires_alone(lab, value, profile, rule, status, words):
    fact = route(lab, NCCL_SOCKET_IFNAME=value)
    fired = {r.__name__: r(fact, profile) for r in NCCL_RULES}
    fired = {name: f for name, f in fired.items() if f is not None}
    rules = [rule] if isinstance(rule, str) else list(rule or [])
    assert list(fired) == rules, fired
    if rules:
        assert_finding(fired[rules[0]], status, causes.NCCL_IFNAME, Actor.JOB, *words)
        assert all(f.fix == EXPORTS for f in fired.values())


def test_nccl_is_not_compared_with_lo_when_master_addr_is_loopback(lab):
    # the loopback finding's fix is a new MASTER_ADDR; "selects eth0, not lo" would advise pinning lo
    fact = route(lab, ifname="lo", loopback=True, master_addr="127.0.0.1", NCCL_SOCKET_IFNAME="eth0",
                 GLOO_SOCKET_IFNAME="eth0")
    assert nic.nccl_includes_route_interface(fact, MULTI) is None
    assert nic.gloo_uses_only_route_interface(fact, MULTI) is None
    assert nic.ifnames_pinned(route(lab, ifname="lo", loopback=True), MULTI) is None


# -- net.nic_route: interfaces that are not RUNNING (NCCL 2.28.3 and later skip them) --------------------------
@pytest.fixture
def audit_node(lab, data_dir):
    """The lab worker's fact on the interfaces of the audit's namespace (eth2 down and nocarr0 without carrier
    before eth0, the route's interface), where NCCL 2.29.7's own code was run."""
    recorded = json.loads((data_dir / "net" / "nccl_2.29.7_audit_netns.json").read_text())

    def make(**changes):
        fact = route(lab, **changes)
        fact["interfaces"] = copy.deepcopy(recorded["interfaces"])
        return fact
    return make


def test_a_prefix_matching_a_down_interface_first_is_no_bootstrap_failure_with_nccl_2_29(audit_node):
    # we said "NCCL bootstraps on the first, eth2, not eth0"; NCCL 2.29.7 skips eth2 and bootstraps on eth0
    fact = audit_node(NCCL_SOCKET_IFNAME="eth", GLOO_SOCKET_IFNAME="eth0", nccl_version="2.29.7")
    assert nic.nccl_bootstraps_on_route_interface(fact, MULTI) is None
    assert_finding(nic.nccl_selects_only_route_interface(fact, MULTI), Status.WARN, causes.NCCL_IFNAME, Actor.JOB,
                   "also selects eth01, eth1")
    old = audit_node(NCCL_SOCKET_IFNAME="eth", GLOO_SOCKET_IFNAME="eth0", nccl_version="2.27.7")
    assert_finding(nic.nccl_bootstraps_on_route_interface(old, MULTI), Status.FAIL, causes.NCCL_IFNAME, Actor.JOB,
                   "NCCL bootstraps on the first, eth2, not eth0")


def test_a_value_matching_only_interfaces_that_are_not_running_fails_saying_nccl_skips_them(audit_node):
    found = nic.nccl_selects_something(audit_node(NCCL_SOCKET_IFNAME="eth2"), MULTI)
    assert_finding(found, Status.FAIL, causes.NCCL_IFNAME, Actor.JOB,
                   "NCCL_SOCKET_IFNAME='eth2' matches only eth2, not RUNNING (down or no carrier): NCCL 2.29.7 "
                   "(assumed: this node's is unknown) skips it, selects nothing and fails at init; eth0 reaches MASTER_ADDR")
    assert found.fix == "export NCCL_SOCKET_IFNAME==eth0\nexport GLOO_SOCKET_IFNAME=eth0"   # eth01 exists here
    assert nic.nccl_includes_route_interface(audit_node(NCCL_SOCKET_IFNAME="eth2"), MULTI) is None  # said once
    assert nic.nccl_selects_something(audit_node(NCCL_SOCKET_IFNAME="eth2", nccl_version="2.27.7"), MULTI) is None


def test_unset_nccl_would_pick_the_first_running_interface(audit_node):
    found = nic.ifnames_pinned(audit_node(nccl_version="2.29.7"), MULTI)
    assert "NCCL would pick eth0;" in found.message
    assert "NCCL would pick eth2, not eth0" in nic.ifnames_pinned(audit_node(nccl_version="2.27.7"), MULTI).message


# -- net.nic_route: GLOO_SOCKET_IFNAME ----------------------------------------------------------------------
GLOO_RULES = [nic.gloo_names_valid, nic.gloo_names_exist, nic.gloo_names_have_address]


@pytest.mark.parametrize("value, rule, words", [
    ("eth0", None, []),
    (None, None, []),
    ("eth0 x", "gloo_names_valid", ["cannot be interfaces"]),  # whitespace: no interface name
    ("eth", "gloo_names_exist", ["names eth, which does not exist here", "exact names"]),
    ("eth0,eth9", "gloo_names_exist", ["names eth9"]),
    ("eth0,", None, []),                                   # torch drops a trailing empty piece
    (",eth0", "gloo_names_valid", ["has an empty name (a leading or doubled comma)", "hostname can't be empty"]),
    ("eth0,,eth0", "gloo_names_valid", ["has an empty name"]),
    ("e", None, []),                                       # torch ignores it: gloo_value_honoured says so
    ("", None, []),
])
def test_each_gloo_name_rule_fires_alone(lab, value, rule, words):
    fact = route(lab, GLOO_SOCKET_IFNAME=value)
    fired = {r.__name__: r(fact) for r in GLOO_RULES}
    fired = {name: f for name, f in fired.items() if f is not None}
    assert list(fired) == ([rule] if rule else []), fired
    if rule:
        assert_finding(fired[rule], Status.FAIL, causes.GLOO_IFNAME, Actor.JOB, *words)


@pytest.mark.parametrize("value", ["e", ""])
def test_a_gloo_value_of_one_character_or_less_is_ignored_like_unset(lab, value):
    fact = route(lab, GLOO_SOCKET_IFNAME=value, NCCL_SOCKET_IFNAME="eth0")
    assert_finding(nic.gloo_value_honoured(fact), Status.WARN, causes.GLOO_IFNAME, Actor.JOB,
                   f"torch ignores GLOO_SOCKET_IFNAME={value!r} (one character or less)",
                   "Gloo binds 127.0.0.1, the first address the host name 'vm' resolves to")
    result = nic.nic_route(fact, MULTI_GLOO)    # what unset gives: the gloo backend on loopback fails
    assert [f.rule for f in result.findings] == ["gloo_backend_has_a_reachable_address", "gloo_value_honoured"]
    assert nic.nic_route(fact, SINGLE).status is Status.WARN
    assert nic.gloo_value_honoured(route(lab, GLOO_SOCKET_IFNAME="eth0")) is None


def test_gloo_names_have_address(lab):
    fact = route(lab, GLOO_SOCKET_IFNAME="eth1")
    next(i for i in fact["interfaces"] if i["name"] == "eth1").update(ipv4=[], ipv6=[])
    assert_finding(nic.gloo_names_have_address(fact), Status.FAIL, causes.GLOO_IFNAME, Actor.JOB, "eth1 has no address")


@pytest.mark.parametrize("value, profile, fires", [("eth1", MULTI, True), ("eth0,eth1", MULTI, True),
                                                   ("eth0", MULTI, False), ("eth1", SINGLE, False)])
def test_gloo_uses_only_route_interface(lab, value, profile, fires):
    found = nic.gloo_uses_only_route_interface(route(lab, GLOO_SOCKET_IFNAME=value), profile)
    if fires:
        assert_finding(found, Status.FAIL, causes.GLOO_IFNAME, Actor.JOB, f"uses {value.replace(',', ', ')}",
                       "not only eth0")
    else:
        assert found is None


# -- net.nic_route: unset on a multi-node job -----------------------------------------------------------------
def test_ifnames_pinned_warns_with_what_the_libraries_would_pick(lab):
    found = nic.ifnames_pinned(route(lab), MULTI)
    assert_finding(found, Status.WARN, causes.SOCKET_IFNAME_UNSET, Actor.JOB, "NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME unset",
                   "NCCL would pick eth0", "Gloo binds 127.0.0.1, the first address the host name 'vm' resolves to",
                   "loopback, unreachable from the other nodes")
    assert found.fix == EXPORTS
    assert nic.ifnames_pinned(route(lab, NCCL_SOCKET_IFNAME="eth0", GLOO_SOCKET_IFNAME="eth0"), MULTI) is None
    assert nic.ifnames_pinned(route(lab), SINGLE) is None


def test_ifnames_pinned_names_the_host_name_address_gloo_binds(lab):
    fact = route(lab, hostname_addresses=["10.77.0.11"])
    assert "Gloo binds 10.77.0.11, the first address the host name 'vm' resolves to;" in nic.ifnames_pinned(fact, MULTI).message
    assert nic.gloo_bound_address(route(lab))["address"] == "127.0.0.1"  # recorded: the host name resolves to 127.0.0.1


HOSTS_127_0_1_1_FIRST = [{"line": 2, "address": "127.0.1.1", "names": ["nodeA"], "text": "127.0.1.1 nodeA"},
                         {"line": 3, "address": "10.77.0.11", "names": ["nodeA"], "text": "10.77.0.11 nodeA"}]


def test_gloo_binds_a_loopback_address_the_host_name_resolves_to_first_and_the_gloo_backend_fails_naming_the_line(lab):
    # torch 2.13 with '127.0.1.1 nodeA' above '192.168.50.1 nodeA' listened on 127.0.1.1 and its peer got
    # "Connection refused, remote=[127.0.1.1]" (the audit's run); we used to say "Gloo would bind 192.168.50.1"
    fact = route(lab, hostname="nodeA", hostname_addresses=["127.0.1.1", "10.77.0.11"],
                 hostname_hosts_entries=HOSTS_127_0_1_1_FIRST)
    found = nic.gloo_backend_has_a_reachable_address(fact, MULTI_GLOO)
    assert_finding(found, Status.FAIL, causes.SOCKET_IFNAME_UNSET, Actor.JOB,
                   "Gloo binds 127.0.1.1, the first address the host name 'nodeA' resolves to "
                   "(/etc/hosts line 2: 127.0.1.1 nodeA): a loopback address, unreachable from the other nodes")
    assert found.fix.startswith(EXPORTS) and "/etc/hosts line 2 (127.0.1.1 nodeA)" in found.fix
    assert nic.gloo_backend_has_a_reachable_address(fact, SINGLE) is None                # one node: loopback is right
    assert nic.ifnames_pinned(fact, MULTI_GLOO).message.count("127.0.1.1") == 0          # said once, by the failure
    assert "Gloo binds 127.0.1.1" in nic.ifnames_pinned(fact, MULTI).message             # nccl backend: a warning
    first_real = route(lab, hostname="nodeA", hostname_addresses=["10.77.0.11", "127.0.1.1"])
    assert nic.gloo_backend_has_a_reachable_address(first_real, MULTI_GLOO) is None


def test_gloo_backend_fails_when_the_host_name_gives_no_reachable_address(lab):
    found = nic.gloo_backend_has_a_reachable_address(route(lab), MULTI_GLOO)
    assert_finding(found, Status.FAIL, causes.SOCKET_IFNAME_UNSET, Actor.JOB, "Gloo binds 127.0.0.1",
                   "a loopback address, unreachable from the other nodes")
    assert nic.gloo_backend_has_a_reachable_address(route(lab), MULTI) is None  # nccl backend: only a warning
    assert nic.gloo_backend_has_a_reachable_address(route(lab, GLOO_SOCKET_IFNAME="eth0"), MULTI_GLOO) is None
    assert nic.gloo_backend_has_a_reachable_address(route(lab, hostname_addresses=["10.77.0.11"]), MULTI_GLOO) is None
    elsewhere = nic.gloo_backend_has_a_reachable_address(route(lab, hostname_addresses=["10.1.2.3"]), MULTI_GLOO)
    assert_finding(elsewhere, Status.FAIL, causes.SOCKET_IFNAME_UNSET, Actor.JOB,
                   "resolves to 10.1.2.3, no address of this node, so torch falls back to 127.0.0.1")


def test_nic_route_keeps_every_distinct_problem_with_its_own_fix(lab):
    fact = route(lab, up=False, operstate="down", NCCL_SOCKET_IFNAME="eth1", GLOO_SOCKET_IFNAME="eth9")
    result = nic.nic_route(fact, MULTI)
    assert [f.rule for f in result.findings] == ["interface_up", "nccl_includes_route_interface", "gloo_names_exist"]
    assert result.cause == causes.NIC_DOWN and result.actor is Actor.NODE  # the first failure leads
    assert "(+" not in result.summary
    assert result.remediation.splitlines()[0].startswith("ip link set dev eth0 up")
    assert result.remediation.count("export NCCL_SOCKET_IFNAME=eth0") == 1  # one fix shared by two findings
    assert paste_problems(result.remediation) == []


# -- MASTER_ADDR helpers ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("addr, loop", [("127.0.0.1", True), ("127.0.1.1", True), ("::1", True), ("localhost", True),
                                        ("10.77.0.10", False), ("head", False), ("", False), (None, False)])
def test_is_loopback(addr, loop):
    assert is_loopback(addr) is loop


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


# -- net.port_free ---------------------------------------------------------------------------------------------
def test_port_binds_names_the_holder_and_its_kill_lines(lab):
    f = lab("head")
    f["port_holders"]["holders"][0]["process"]["cmdline"] = "python train.py"
    found = free.port_binds(f["port_bind"], f["port_holders"])
    pid = f["port_holders"]["holders"][0]["process"]["pid"]
    assert_finding(found, Status.FAIL, causes.PORT_HELD, Actor.NODE, f"held by pid {pid} (python train.py")
    assert found.fix.splitlines()[0].startswith(f"kill {pid}   # after checking it is a leftover")


def test_port_binds_passes_our_own_listener(lab):
    f = lab("head")  # recorded: the port is held by `dsv3-preflight listen`
    assert free.held_only_by_our_listener(f["port_bind"], f["port_holders"])
    assert free.port_binds(f["port_bind"], f["port_holders"]) is None


@pytest.mark.parametrize("errno_name, words, fix, cause", [
    ("EACCES", ["permission denied"], "export MASTER_PORT=39500", causes.PORT_PRIVILEGED),
    ("EADDRNOTAVAIL", ["not on this node"], "export MASTER_ADDR=", causes.RANK0_NOT_MASTER),
    ("EIO", ["Input/output error"], "ss -ltnp 'sport = :39500'", causes.PORT_HELD),
])
def test_port_binds_explains_each_errno(lab, errno_name, words, fix, cause):
    f = lab("head")
    f["port_bind"]["attempts"] = [{"address": "0.0.0.0", "ok": False, "errno": 1, "error": "Input/output error",
                                   "errno_name": errno_name}]
    found = free.port_binds(f["port_bind"], {"holders": []})
    assert found.cause == cause and fix in found.fix and all(w in found.message for w in words), found
    assert paste_problems(found.fix) == []


@pytest.mark.parametrize("ephemeral, reserved_ports, expect_reserve", [
    ({"ephemeral_range": [32768, 60999], "in_ephemeral_range": True, "reserved": False}, "", "39500"),
    ({"ephemeral_range": [32768, 60999], "in_ephemeral_range": True, "reserved": False}, "8080,9000-9010",
     "8080,9000-9010,39500"),   # the ports already reserved are kept
    ({"ephemeral_range": [32768, 60999], "in_ephemeral_range": True, "reserved": True}, "39500", None),
    ({"ephemeral_range": [40000, 60999], "in_ephemeral_range": False, "reserved": False}, "", None),
    ({"ephemeral_range": None, "in_ephemeral_range": None, "reserved": None}, None, None),   # /proc unreadable
])
def test_a_port_in_use_with_no_holder_in_the_ephemeral_range_is_reserved(lab, ephemeral, reserved_ports, expect_reserve):
    """Nobody listens on MASTER_PORT yet it cannot be bound: where the port is one the kernel hands to outgoing
    connections, the fix reserves it (keeping the ports reserved already); elsewhere, how to find the holder."""
    f = lab("head")
    f["port_bind"].update(ephemeral, reserved_ports=reserved_ports)
    found = free.port_binds(f["port_bind"], {"holders": []})
    assert_finding(found, Status.FAIL, causes.PORT_HELD, Actor.NODE, "port 39500 cannot be bound on 0.0.0.0")
    if expect_reserve:
        assert "ephemeral range 32768-60999" in found.message and "no process listens" in found.message
        assert f"sysctl -w net.ipv4.ip_local_reserved_ports={expect_reserve}\n" in found.fix
        assert "${MASTER_PORT_FREE:?a free port below 32768" in found.fix
    else:
        assert "ip_local_reserved_ports" not in found.fix and "ss -ltnp 'sport = :39500'" in found.fix


def test_rank0_holds_master_addr_proposes_this_nodes_own_address(lab):
    f = lab("worker")
    f["port_bind"].update(role="head", rank0_without_master_addr=True, attempts=[])
    found = free.rank0_holds_master_addr(f["port_bind"], MULTI, f["nic_route"])
    assert_finding(found, Status.FAIL, causes.RANK0_NOT_MASTER, Actor.JOB, "node_rank 0")
    assert "export MASTER_ADDR=10.77.0.12   # this node's address on eth0" in found.fix  # worker 2's one address
    assert free.rank0_holds_master_addr(lab("head")["port_bind"], MULTI) is None


def test_nccl_port_range_is_named_as_ignored_with_the_ephemeral_range_a_firewall_must_open(lab):
    """Issue 46.8: NCCL has no NCCL_PORT_RANGE (NVIDIA/nccl#388): it and Gloo connect on the ephemeral ports."""
    from dsv3_preflight.checks.env_launch_vars import nccl_port_range_ignored

    fact = route(lab)
    fact["ephemeral_range"] = [32768, 60999]
    found = nccl_port_range_ignored({"NCCL_PORT_RANGE": "50000-51000"}, fact)
    assert found.status is Status.WARN and found.actor is Actor.JOB
    assert "NCCL has no such variable and ignores it" in found.message and "32768-60999 on this node" in found.message
    assert "must be open between the nodes on the training interface" in found.message
    assert found.fix.splitlines()[0].startswith("unset NCCL_PORT_RANGE")
    assert "/proc/sys/net/ipv4/ip_local_port_range" in found.fix and "export NCCL_PORT_RANGE" not in found.fix
    assert paste_problems(found.fix) == []
    assert "ip_local_port_range" in nccl_port_range_ignored({"NCCL_PORT_RANGE": "x"}, None).message
    assert nccl_port_range_ignored({}, fact) is None


def test_the_collective_fixes_for_blocked_ports_name_the_ephemeral_range_never_nccl_port_range():
    """Issue 46.8: 'open the NCCL port range (NCCL_PORT_RANGE)' sent admins to open a range NCCL never uses."""
    from dsv3_preflight.collective.decode import decode, phase_finding

    found = next(f for f in decode("socketStartConnect: Connect to 10.0.0.2<45123> failed : Connection refused",
                                   interface="eth0") if f["kind"] == "nccl_socket_connect")
    stuck = phase_finding("all_joined", master="10.0.0.1:39500", ifnames="eth0", interface="eth0")
    for fix in (found["remediation"], stuck["remediation"]):
        assert "NCCL_PORT_RANGE" not in fix and "/proc/sys/net/ipv4/ip_local_port_range" in fix, fix
        assert paste_problems(fix) == []


# -- net.port_reach --------------------------------------------------------------------------------------------
def worker_reach(lab, **changes):
    fact = lab("worker")["port_reach"]
    fact.update(changes)
    return fact


REFUSED = {"outcome": "refused", "listener": None, "latency_ms": None, "errno": 111, "error": "Connection refused"}


@pytest.mark.parametrize("changes, status, cause, actor, words", [
    ({}, None, None, None, []),
    ({"token_match": False, "token": "other"}, Status.WARN, None, Actor.JOB, ["not the expected"]),
    ({"listener": "other", "banner": "SSH-2.0-OpenSSH_9.2"}, Status.FAIL, causes.PORT_HELD, Actor.NODE, ["something other"]),
    ({**REFUSED, "expected_token": None, "listener_expected": False}, Status.FAIL, causes.PORT_NOT_LISTENING, Actor.JOB,
     ["nothing listens"]),
    ({**REFUSED, "listener_expected": True}, Status.FAIL, causes.PORT_REJECTED, Actor.NETWORK,
     ["actively refused", "firewall REJECT"]),
    ({"outcome": "filtered", "listener": None, "error": "no answer within 3 s"}, Status.FAIL, causes.PORT_FILTERED,
     Actor.NETWORK, ["no answer", "DROPs"]),
    ({"outcome": "unreachable", "errno": 113, "error": "No route to host"}, Status.FAIL, causes.MASTER_UNREACHABLE,
     Actor.NETWORK, ["unreachable"]),
    ({"outcome": "unreachable", "errno": 101, "error": "Network is unreachable"}, Status.FAIL, causes.NO_ROUTE_TO_MASTER,
     Actor.NODE, ["unreachable"]),
    ({"outcome": "name_resolution", "errno": -2, "error": "Name or service not known", "host": "head.invalid"},
     Status.FAIL, causes.MASTER_UNRESOLVABLE, Actor.JOB, ["does not resolve"]),
    ({"outcome": "invalid", "invalid": "address", "error": "fe80::1 is an IPv6 link-local address"}, Status.FAIL,
     causes.MASTER_ADDR_INVALID, Actor.JOB, ["link-local"]),
    ({"outcome": "error", "errno": 5, "error": "Input/output error"}, Status.FAIL, None, Actor.NETWORK, ["errno 5"]),
])
def test_each_reach_outcome_has_its_rule(lab, changes, status, cause, actor, words):
    fact = worker_reach(lab, **changes)
    found = reach.RULES.get(fact["outcome"], reach.other_error)(fact)
    if status is None:
        assert found is None
        return
    assert found.status is status and found.cause == cause and found.actor is actor, found
    assert all(w in found.message for w in words), found.message
    assert paste_problems(found.fix) == [], found.fix


def test_refused_while_our_listener_serves_shows_how_to_find_and_open_the_reject(lab):
    found = reach.refused(worker_reach(lab, **REFUSED, listener_expected=True))
    lines = found.fix.splitlines()
    assert "iptables -L INPUT -n -v --line-numbers | grep -E 'REJECT|dpt:39500'" in lines
    assert "nft -a list ruleset | grep -E 'reject|dport 39500'" in lines
    assert "iptables -I INPUT -p tcp --dport 39500 -j ACCEPT" in lines
    assert "the head (10.77.0.10)" in found.message and "no `dsv3-preflight listen` running" not in found.message


STALE = {"host": "head-0", "address": "10.77.0.99",
         "hosts_entries": [{"line": 7, "address": "10.77.0.99", "names": ["head-0"], "text": "10.77.0.99 head-0"}]}


@pytest.mark.parametrize("outcome", [
    {**REFUSED, "listener_expected": True},
    {**REFUSED, "listener_expected": False, "expected_token": None},
    {"outcome": "filtered", "listener": None, "error": "no answer within 3 s", "timeout_s": 3.0},
    {"outcome": "unreachable", "listener": None, "errno": 113, "error": "No route to host"},
])
def test_a_name_this_nodes_hosts_file_maps_to_a_stale_address_is_not_called_the_head(lab, outcome):
    """Issue 46.13a: MASTER_ADDR head-0, which this worker's /etc/hosts maps to an old address: port_reach called
    that address 'the head' and suggested an iptables ACCEPT. The address is not the head's: fix /etc/hosts here."""
    f = worker_reach(lab, **outcome, **STALE)
    found = reach.RULES[f["outcome"]](f)
    assert_finding(found, Status.FAIL, causes.MASTER_NAME_STALE, Actor.NODE,
                   "10.77.0.99, the address this node's /etc/hosts gives head-0 (line 7: '10.77.0.99 head-0')",
                   "resolves head-0 to another address than the head and the other nodes do")
    assert "the head (10.77.0.99)" not in found.message and "firewall" not in found.message
    lines = found.fix.splitlines()
    assert "grep -n 'head-0' /etc/hosts" in found.fix and lines.index("hostname -I") < len(lines) - 2
    assert not lines[0].startswith("iptables")


def test_a_name_resolved_by_dns_keeps_the_firewall_verdict_but_checks_the_address_first(lab):
    f = worker_reach(lab, **REFUSED, listener_expected=True, host="head-0", address="10.77.0.99", hosts_entries=[])
    found = reach.refused(f)
    assert found.cause == causes.PORT_REJECTED and "the head (10.77.0.99)" not in found.message
    assert "10.77.0.99 (what head-0 resolves to on this node)" in found.message
    assert "unless 10.77.0.99 is not the head's address" in found.message
    assert found.fix.index("getent ahosts head-0") < found.fix.index("iptables -I INPUT")
    assert "comes from DNS here" in found.fix and paste_problems(found.fix) == []


def test_refused_with_no_listener_expected_starts_one(lab):
    found = reach.refused(worker_reach(lab, **REFUSED, expected_token=None, listener_expected=False))
    assert "dsv3-preflight listen --port 39500 --deadline 120" in found.fix.splitlines()


def test_unresolvable_master_addr_has_one_fix_in_all_three_checks(lab):
    from dsv3_preflight.checks.env_launch_vars import master_resolves as env_rule

    name = "head.invalid"
    profile = resolve_profile(environ={"NNODES": "3", "MASTER_ADDR": name, "NODE_RANK": "1"})
    fixes = {
        env_rule(profile, {"name": name, "ok": False, "error": "Name or service not known", "addresses": []}).fix,
        nic.master_resolves(route(lab, resolved=False, master_addr=name, resolve_error="x")).fix,
        reach.name_resolution(worker_reach(lab, outcome="name_resolution", host=name, error="x")).fix,
    }
    assert fixes == {unresolvable_fix(name)}


# -- net.nic_route: NCCL's settings files and NCCL_COMM_ID ------------------------------------------------------------
def test_an_nccl_socket_ifname_from_nccl_conf_is_judged_and_named_with_its_file(lab):
    fact = route(lab, NCCL_SOCKET_IFNAME=None)
    fact["nccl_conf"] = [{"path": "/etc/nccl.conf", "exists": True, "values": {"NCCL_SOCKET_IFNAME": "eth1"}}]
    assert_finding(nic.nccl_includes_route_interface(fact, MULTI), Status.FAIL, causes.NCCL_IFNAME, Actor.JOB,
                   "selects eth1, not eth0", "(from /etc/nccl.conf: an export overrides it)")
    assert nic.ifnames_pinned(fact, MULTI) is None or "NCCL_SOCKET_IFNAME" not in nic.ifnames_pinned(fact, MULTI).message
    assert nic.evidence_of(fact)["nccl_conf"] == {"NCCL_SOCKET_IFNAME": "/etc/nccl.conf"}
    fact["env"]["NCCL_SOCKET_IFNAME"] = "eth0"   # the export the fix gives wins over the file
    assert nic.nccl_includes_route_interface(fact, MULTI) is None and nic.evidence_of(fact)["nccl_conf"] == {}


@pytest.mark.parametrize("where, actor, fix", [
    (None, Actor.JOB, "unset NCCL_COMM_ID"),
    ("/etc/nccl.conf", Actor.NODE, "sed -i '/^NCCL_COMM_ID=/d' /etc/nccl.conf"),
    ("/root/.nccl.conf", Actor.JOB, "sed -i '/^NCCL_COMM_ID=/d' /root/.nccl.conf"),
])
def test_nccl_comm_id_is_a_warning_naming_where_it_is_set(lab, where, actor, fix):
    fact = route(lab, NCCL_SOCKET_IFNAME="=eth0", GLOO_SOCKET_IFNAME="eth0")
    if where:
        fact["nccl_conf"] = [{"path": where, "exists": True, "values": {"NCCL_COMM_ID": "10.77.0.10:29500"}}]
    else:
        fact["env"]["NCCL_COMM_ID"] = "10.77.0.10:29500"
    found = nic.nccl_comm_id_unset(fact, MULTI)
    assert_finding(found, Status.WARN, causes.NCCL_COMM_ID, actor, "NCCL_COMM_ID='10.77.0.10:29500' is set",
                   "not NCCL_SOCKET_IFNAME's")
    assert fix in found.fix
    assert nic.nccl_comm_id_unset(route(lab), MULTI) is None
