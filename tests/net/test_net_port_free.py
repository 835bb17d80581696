"""net.port_free (checks/net_port_free.py): the check and each of its rules (dsv3_preflight/net/port_rules.py), as
tables over facts recorded in the netns lab (tests/data/net/lab_*.json), varied per row."""
import json

import pytest
from net_facts_lab import MULTI, assert_finding, facts, lab, route  # noqa: F401 (pytest fixtures)
from paste_lint import paste_problems

from dsv3_preflight.checks.net_port_free import port_free
from dsv3_preflight.net import causes
from dsv3_preflight.net import port_rules as free
from dsv3_preflight.result import Actor, Status


# -- net.port_free: the check on recorded facts ---------------------------------------------------------------------
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


# -- net.port_free: rule by rule ------------------------------------------------------------------------------------
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
    from dsv3_preflight.net.launch_vars import nccl_port_range_ignored

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
