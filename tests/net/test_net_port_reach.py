"""net.port_reach (checks/net_port_reach.py): the check and each of its rules (dsv3_preflight/net/reach_rules.py),
as tables over facts recorded in the netns lab (tests/data/net/lab_*.json), varied per row."""
import pytest
from net_facts_lab import MULTI, assert_finding, facts, lab, route  # noqa: F401 (pytest fixtures)
from paste_lint import paste_problems

from dsv3_preflight.checks.net_port_reach import port_reach
from dsv3_preflight.net import causes
from dsv3_preflight.net import reach_rules as reach
from dsv3_preflight.net import route_rules as nic
from dsv3_preflight.net.master import (
    unresolvable_fix,
)
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Actor, Status


# -- net.port_reach: the check on recorded facts --------------------------------------------------------------------
@pytest.mark.parametrize("change, status, summary_word, fix_word", [
    ({}, Status.PASS, "reached the dsv3-preflight listener", None),
    ({"token_match": False, "token": "other"}, Status.WARN, "not the expected", "DSV3_PREFLIGHT_LISTENER_TOKEN"),
    ({"listener": "other", "token": None, "banner": "SSH-2.0-OpenSSH_9.2"}, Status.FAIL, "something other", "ss -ltnp"),
    ({"outcome": "refused", "listener": None, "latency_ms": None, "errno": 111, "error": "Connection refused"}, Status.FAIL, "refused", "dsv3-preflight listen"),
    ({"outcome": "filtered", "listener": None, "latency_ms": None, "error": "no answer within 3 s"}, Status.FAIL, "no answer", "--dport 39500 -j ACCEPT"),
    ({"outcome": "unreachable", "listener": None, "latency_ms": None, "errno": 113, "error": "No route to host"}, Status.FAIL, "unreachable", "ip route get"),
    ({"outcome": "name_resolution", "listener": None, "latency_ms": None, "errno": -2, "error": "Name or service not known"}, Status.FAIL, "does not resolve", "/etc/hosts"),
])
def test_port_reach_classifies_each_outcome_with_its_own_remediation(facts, change, status, summary_word, fix_word):
    fact = facts("worker")["port_reach"]
    fact.update(change)
    result = port_reach(port_reach=fact, profile=MULTI)
    assert result.status == status, result.summary
    assert summary_word in result.summary
    if fix_word:
        assert fix_word in result.remediation


def test_port_reach_is_skipped_on_the_head_with_the_reason(facts):
    result = port_reach(port_reach=facts("head")["port_reach"], profile=MULTI)
    assert result.status == Status.SKIP and "head" in result.summary


def test_port_reach_token_mismatch_fix_survives_secret_masking(facts):
    # The document masks the value after a `--token` flag: the fix used to reach users as `--token ***`.
    from dsv3_preflight.secrets import mask

    fact = facts("worker")["port_reach"]
    fact.update({"token_match": False, "token": "other"})
    result = port_reach(port_reach=fact, profile=MULTI)
    assert result.status == Status.WARN
    assert mask(result.remediation) == result.remediation
    assert "***" not in mask(result.remediation)
    assert "dsv3-preflight listen --port 39500" in result.remediation


# -- net.port_reach: rule by rule -----------------------------------------------------------------------------------
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
    from dsv3_preflight.net.launch_vars import master_resolves as env_rule

    name = "head.invalid"
    profile = resolve_profile(environ={"NNODES": "3", "MASTER_ADDR": name, "NODE_RANK": "1"})
    fixes = {
        env_rule(profile, {"name": name, "ok": False, "error": "Name or service not known", "addresses": []}).fix,
        nic.master_resolves(route(lab, resolved=False, master_addr=name, resolve_error="x")).fix,
        reach.name_resolution(worker_reach(lab, outcome="name_resolution", host=name, error="x")).fix,
    }
    assert fixes == {unresolvable_fix(name)}
