"""net.nic_route (checks/net_nic_route.py): the check and each of its rules (dsv3_preflight/net/route_rules.py) on
its own, as tables over facts recorded in the netns lab (tests/data/net/lab_*.json), varied per row.

Every finding a rule returns must name who acts, and its fix must paste (tests/paste_lint.py)."""
import copy
import json

import pytest
from net_facts_lab import HEAD, MULTI, MULTI_GLOO, SINGLE, assert_finding, facts, lab, route, with_env  # noqa: F401 (pytest fixtures)
from paste_lint import paste_problems

from dsv3_preflight.checks.net_nic_route import nic_route
from dsv3_preflight.net import causes
from dsv3_preflight.net import route_rules as nic
from dsv3_preflight.net.master import (
    HEAD_ADDR,
    unresolvable_fix,
)
from dsv3_preflight.result import Actor, Status


# -- net.nic_route: the check on recorded facts ---------------------------------------------------------------------
@pytest.mark.parametrize("node, env, status, words", [
    ("worker_two_nics", {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0"}, Status.PASS, ["via eth0", "select it"]),
    ("worker_two_nics", {"NCCL_SOCKET_IFNAME": "=eth0", "GLOO_SOCKET_IFNAME": "eth0"}, Status.PASS, ["via eth0"]),
    ("worker_two_nics", {"NCCL_SOCKET_IFNAME": "eth1", "GLOO_SOCKET_IFNAME": "eth0"}, Status.FAIL, ["selects eth1, not eth0"]),
    ("worker_two_nics", {"NCCL_SOCKET_IFNAME": "eth", "GLOO_SOCKET_IFNAME": "eth0"}, Status.WARN, ["also selects eth1"]),
    ("worker_two_nics", {"NCCL_SOCKET_IFNAME": "^docker,lo", "GLOO_SOCKET_IFNAME": "eth0"}, Status.WARN, ["also selects eth1"]),
    ("worker", {"NCCL_SOCKET_IFNAME": "^docker,lo", "GLOO_SOCKET_IFNAME": "eth0"}, Status.PASS, ["via eth0"]),
    ("worker_two_nics", {"NCCL_SOCKET_IFNAME": "^eth0", "GLOO_SOCKET_IFNAME": "eth0"}, Status.FAIL, ["selects lo, eth1, docker0, not eth0"]),
    ("worker_two_nics", {"NCCL_SOCKET_IFNAME": "ib", "GLOO_SOCKET_IFNAME": "eth0"}, Status.FAIL, ["selects no interface"]),
    ("worker_two_nics", {"NCCL_SOCKET_IFNAME": "eth0 ;reboot", "GLOO_SOCKET_IFNAME": "eth0"}, Status.FAIL, ["cannot be interface names"]),
    ("worker_two_nics", {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth"}, Status.FAIL, ["exact names"]),
    ("worker_two_nics", {"NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth1"}, Status.FAIL, ["GLOO_SOCKET_IFNAME='eth1' uses eth1"]),
    ("worker_two_nics", {"NCCL_SOCKET_IFNAME": "e", "GLOO_SOCKET_IFNAME": "eth0"}, Status.WARN, ["ignores"]),
])
def test_nic_route_judges_nccl_and_gloo_ifname_against_the_route(facts, node, env, status, words):
    result = nic_route(nic_route=with_env(facts(node)["nic_route"], **env), profile=MULTI)
    assert result.status == status, result.summary
    for word in words:
        assert word in result.summary
    if status in (Status.FAIL, Status.WARN) and "SOCKET_IFNAME" in result.summary:
        assert "export NCCL_SOCKET_IFNAME=eth0" in result.remediation
        assert "export GLOO_SOCKET_IFNAME=eth0" in result.remediation


def test_nic_route_warns_with_exact_exports_when_unset(facts):
    result = nic_route(nic_route=facts("worker_two_nics")["nic_route"], profile=MULTI)
    assert result.status == Status.WARN
    assert "NCCL would pick eth0" in result.summary
    assert result.remediation == "export NCCL_SOCKET_IFNAME=eth0\nexport GLOO_SOCKET_IFNAME=eth0"
    assert result.evidence["interface"] == "eth0" and result.evidence["src"] == "10.77.0.11"


def test_nic_route_fails_gloo_backend_when_the_host_name_resolves_to_loopback(facts):
    fact = facts("worker_two_nics")["nic_route"]
    assert fact["hostname_addresses"] == ["127.0.0.1"]  # as recorded: /etc/hosts maps the host name to loopback
    result = nic_route(nic_route=fact, profile=MULTI_GLOO.with_values("test", nnodes=3))
    assert result.status == Status.FAIL and "loopback" in result.summary


def test_nic_route_on_the_head_names_the_interface_holding_master_addr_not_lo(facts):
    fact = with_env(facts("head")["nic_route"], NCCL_SOCKET_IFNAME="eth0", GLOO_SOCKET_IFNAME="eth0")
    assert fact["route_type"] == "local" and fact["local"] is True
    result = nic_route(nic_route=fact, profile=MULTI.with_values("test", node_rank=0))
    assert result.status == Status.PASS and result.evidence["interface"] == "eth0"


def test_nic_route_fails_when_the_interface_is_down(facts):
    fact = with_env(facts("worker")["nic_route"], NCCL_SOCKET_IFNAME="eth0", GLOO_SOCKET_IFNAME="eth0")
    fact.update(operstate="down", up=False)
    result = nic_route(nic_route=fact, profile=MULTI)
    assert result.status == Status.FAIL and "is down" in result.summary
    assert "ip link set dev eth0 up" in result.remediation


def test_nic_route_fails_on_loopback_in_a_multi_node_profile(facts):
    fact = facts("worker")["nic_route"]
    fact.update(ifname="lo", loopback=True, operstate="unknown", target="127.0.0.1", master_addr="127.0.0.1")
    result = nic_route(nic_route=fact, profile=MULTI)
    assert result.status == Status.FAIL and "loopback" in result.summary
    # the fix is a new MASTER_ADDR, never "pin lo"
    assert "export MASTER_ADDR=" in result.remediation
    assert "IFNAME=lo" not in result.remediation and "pin lo" not in result.summary


def test_nic_route_fails_without_ipv4_when_nccl_socket_family_is_af_inet(facts):
    fact = with_env(facts("worker")["nic_route"], NCCL_SOCKET_FAMILY="AF_INET", NCCL_SOCKET_IFNAME="eth0",
                    GLOO_SOCKET_IFNAME="eth0")
    fact["ipv4"] = []
    result = nic_route(nic_route=fact, profile=MULTI)
    assert result.status == Status.FAIL and "AF_INET" in result.summary


def test_nic_route_fails_clearly_on_unresolvable_master_addr(facts):
    fact = facts("worker")["nic_route"]
    fact.update(resolved=False, resolve_error="Name or service not known (errno -2)", master_addr="head.invalid")
    result = nic_route(nic_route=fact, profile=MULTI)
    assert result.status == Status.FAIL and "does not resolve" in result.summary and "MASTER_ADDR" in result.remediation


def test_nic_route_fails_when_the_kernel_has_no_route(facts):
    fact = facts("worker")["nic_route"]
    fact.update(route_error="Network is unreachable", route_errno=101, target="10.99.0.1", ifname=None)
    result = nic_route(nic_route=fact, profile=MULTI)
    assert result.status == Status.FAIL and "no route" in result.summary and "ip route get 10.99.0.1" in result.remediation


def test_nic_route_single_node_loopback_is_green(facts):
    fact = facts("head")["nic_route"]
    fact.update(ifname="lo", loopback=True, operstate="unknown", up=True, target="127.0.0.1", master_addr="127.0.0.1")
    assert nic_route(nic_route=fact, profile=SINGLE).status == Status.PASS


def test_nic_route_single_node_accepts_any_existing_interface_but_not_an_empty_selection(facts):
    fact = facts("head")["nic_route"]
    fact.update(ifname="lo", loopback=True, operstate="unknown", up=True, target="127.0.0.1", master_addr="127.0.0.1")
    ok = nic_route(nic_route=with_env(copy.deepcopy(fact), NCCL_SOCKET_IFNAME="eth0", GLOO_SOCKET_IFNAME="eth0"), profile=SINGLE)
    assert ok.status == Status.PASS, ok.summary
    bad = nic_route(nic_route=with_env(fact, NCCL_SOCKET_IFNAME="ib", GLOO_SOCKET_IFNAME="eth0"), profile=SINGLE)
    assert bad.status == Status.FAIL and "selects no interface" in bad.summary


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
    result = nic_route(fact, MULTI)
    assert [f.rule for f in result.findings] == ["master_resolves", "nccl_selects_something", "gloo_names_exist"]
    assert result.cause == causes.MASTER_UNRESOLVABLE
    assert "reaches MASTER_ADDR" not in result.findings[1].message
    assert result.findings[1].fix == nic.PIN_UNKNOWN and paste_problems(nic.PIN_UNKNOWN) == []
    pinned = nic_route(route(lab, resolved=False, resolve_error="x", ifname=None, NCCL_SOCKET_IFNAME="eth0",
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
    result = nic_route(fact, MULTI_GLOO)    # what unset gives: the gloo backend on loopback fails
    assert [f.rule for f in result.findings] == ["gloo_backend_has_a_reachable_address", "gloo_value_honoured"]
    assert nic_route(fact, SINGLE).status is Status.WARN
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
    result = nic_route(fact, MULTI)
    assert [f.rule for f in result.findings] == ["interface_up", "nccl_includes_route_interface", "gloo_names_exist"]
    assert result.cause == causes.NIC_DOWN and result.actor is Actor.NODE  # the first failure leads
    assert "(+" not in result.summary
    assert result.remediation.splitlines()[0].startswith("ip link set dev eth0 up")
    assert result.remediation.count("export NCCL_SOCKET_IFNAME=eth0") == 1  # one fix shared by two findings
    assert paste_problems(result.remediation) == []


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
