"""The net.* judges on facts recorded in the netns lab (tests/data/net/lab_*.json), varied per row."""
import copy
import json

import pytest

from dsv3_preflight.checks.net_mtu import mtu
from dsv3_preflight.checks.net_nic_route import nic_route
from dsv3_preflight.checks.net_port_free import port_free
from dsv3_preflight.checks.net_port_reach import port_reach
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Status

MULTI = resolve_profile(environ={"NNODES": "3", "MASTER_ADDR": "10.77.0.10", "NODE_RANK": "1"})
MULTI_GLOO = resolve_profile(environ={"NNODES": "3", "MASTER_ADDR": "10.77.0.10", "NODE_RANK": "1"}, profile_name="cpu")
SINGLE = resolve_profile(profile_name="cpu")


@pytest.fixture
def facts(data_dir):
    def load(name):
        return copy.deepcopy(json.loads((data_dir / "net" / f"lab_{name}.json").read_text())["facts"])
    return load


def with_env(fact, **env):
    fact["env"].update(env)
    return fact


# -- net.nic_route -------------------------------------------------------------------------------
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


# -- net.port_free -------------------------------------------------------------------------------
def test_port_free_passes_when_only_our_listener_holds_the_port(facts):
    f = facts("head")
    result = port_free(port_bind=f["port_bind"], port_holders=f["port_holders"], profile=MULTI)
    assert result.status == Status.PASS and "dsv3-preflight listener" in result.summary


def test_port_free_names_the_holding_pid_and_gives_a_cleanup_command(facts):
    f = facts("head")
    holder = f["port_holders"]["holders"][0]["process"]
    holder["cmdline"] = "python train.py --deepspeed ds_zero3.json"
    result = port_free(port_bind=f["port_bind"], port_holders=f["port_holders"], profile=MULTI)
    assert result.status == Status.FAIL
    assert f"pid {holder['pid']}" in result.summary and "train.py" in result.summary
    assert result.remediation.startswith(f"kill {holder['pid']}")


def test_port_free_passes_when_the_port_binds(facts):
    f = facts("head")
    for attempt in f["port_bind"]["attempts"]:
        attempt.update(ok=True, errno=None, error=None)
    f["port_holders"]["holders"] = []
    result = port_free(port_bind=f["port_bind"], port_holders=f["port_holders"], profile=MULTI)
    assert result.status == Status.PASS and "0.0.0.0, 10.77.0.10" in result.summary


def test_port_free_says_nothing_of_nccl_port_range_which_nccl_does_not_have(facts):
    """Issue 46.8: NCCL has no NCCL_PORT_RANGE (NVIDIA/nccl#388); a port held elsewhere is not NCCL's business."""
    f = facts("head")
    for attempt in f["port_bind"]["attempts"]:
        attempt.update(ok=True, errno=None, error=None)
    f["port_holders"]["holders"] = []
    result = port_free(port_bind=f["port_bind"], port_holders=f["port_holders"], profile=MULTI)
    assert result.status == Status.PASS and "NCCL_PORT_RANGE" not in json.dumps(result.to_dict())


def test_port_free_is_skipped_on_a_worker(facts):
    f = facts("worker")
    result = port_free(port_bind=f["port_bind"], port_holders=f["port_holders"], profile=MULTI)
    assert result.status == Status.SKIP and "not the head" in result.summary


def test_port_free_fails_when_rank0_does_not_hold_master_addr(facts):
    f = facts("worker")
    f["port_bind"].update(role="head", rank0_without_master_addr=True, attempts=[])
    result = port_free(port_bind=f["port_bind"], port_holders=f["port_holders"], profile=MULTI)
    assert result.status == Status.FAIL and "node_rank 0" in result.summary


def test_port_free_explains_a_privileged_port(facts):
    f = facts("head")
    f["port_bind"]["attempts"] = [{"address": "0.0.0.0", "ok": False, "errno": 13, "error": "Permission denied", "errno_name": "EACCES"}]
    result = port_free(port_bind=f["port_bind"], port_holders={"holders": []}, profile=MULTI)
    assert result.status == Status.FAIL and "below 1024" in result.summary


# -- net.port_reach -------------------------------------------------------------------------------
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


# -- net.mtu ---------------------------------------------------------------------------------------
def test_mtu_mismatch_between_nodes_fails_and_names_the_odd_node(facts):
    routes = {f"lab-node{i}": facts(n)["nic_route"] for i, n in enumerate(("head", "worker_two_nics", "worker"))}
    assert routes["lab-node2"]["mtu"] == 1400  # recorded after `ip link set dev eth0 mtu 1400` on node 2
    result = mtu(nic_route=routes, node_states={}, profile=MULTI)
    assert result.status == Status.FAIL and "lab-node2 eth0=1400" in result.summary
    assert result.remediation.startswith("ip link set dev eth0 mtu 1500   # on lab-node2:")


def test_mtu_equal_on_all_nodes_passes(facts):
    routes = {f"lab-node{i}": facts(n)["nic_route"] for i, n in enumerate(("head", "worker_two_nics", "worker"))}
    routes["lab-node2"]["mtu"] = 1500
    assert mtu(nic_route=routes, node_states={}, profile=MULTI).status == Status.PASS


def test_mtu_warns_when_a_node_did_not_report(facts):
    routes = {"lab-node0": facts("head")["nic_route"], "lab-node1": facts("worker_two_nics")["nic_route"]}
    result = mtu(nic_route=routes, node_states={}, profile=MULTI)
    assert result.status == Status.WARN and "1 of 3" in result.summary


def test_nic_route_single_node_accepts_any_existing_interface_but_not_an_empty_selection(facts):
    fact = facts("head")["nic_route"]
    fact.update(ifname="lo", loopback=True, operstate="unknown", up=True, target="127.0.0.1", master_addr="127.0.0.1")
    ok = nic_route(nic_route=with_env(copy.deepcopy(fact), NCCL_SOCKET_IFNAME="eth0", GLOO_SOCKET_IFNAME="eth0"), profile=SINGLE)
    assert ok.status == Status.PASS, ok.summary
    bad = nic_route(nic_route=with_env(fact, NCCL_SOCKET_IFNAME="ib", GLOO_SOCKET_IFNAME="eth0"), profile=SINGLE)
    assert bad.status == Status.FAIL and "selects no interface" in bad.summary


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


def test_port_free_fix_keeps_a_multi_line_command_line_inside_the_comment(facts):
    # `python -c "<script>"` holders have newlines in their command line; pasted after `# …` they would run.
    f = facts("head")
    holder = f["port_holders"]["holders"][0]["process"]
    holder["cmdline"] = "python3 -c \nimport socket\nrm -rf /tmp/x\n"
    result = port_free(port_bind=f["port_bind"], port_holders=f["port_holders"], profile=MULTI)
    assert result.status == Status.FAIL and "\n" not in result.summary
    lines = result.remediation.splitlines()
    assert lines == [f"kill {holder['pid']}   # after checking it is a leftover of the previous run: "
                     "python3 -c import socket rm -rf /tmp/x",
                     f"sleep 2; kill -0 {holder['pid']} 2>/dev/null && kill -9 {holder['pid']}"], lines
