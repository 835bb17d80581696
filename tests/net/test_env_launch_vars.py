"""env.launch_vars (checks/env_launch_vars.py, its rules in dsv3_preflight/net/launch_vars.py): the check and each
rule on its own, judged on tables of facts. (Moved from tests/host/test_checks_foundation.py: the rules live in the net
domain.)"""
import pytest
from paste_lint import paste_problems

from dsv3_preflight import Status
from dsv3_preflight.checks.env_launch_vars import launch_vars
from dsv3_preflight.net import launch_vars as env_rules
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Actor

GPU = resolve_profile(environ={"MASTER_ADDR": "10.0.0.1"})
GPU_1NODE = resolve_profile(cli={"nnodes": 1})
CPU = resolve_profile(profile_name="cpu")
RESOLVED = {"name": "x", "ok": True, "error": None, "addresses": ["10.0.0.1"]}
GOOD_ENV = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "OMP_NUM_THREADS": "8", "TORCH_NCCL_BLOCKING_WAIT": "1",
            "NCCL_TIMEOUT_MS": "5400000", "NCCL_IB_TIMEOUT": "22"}


@pytest.mark.parametrize("env, profile, resolve, status, text, export", [
    (GOOD_ENV, GPU, RESOLVED, Status.PASS, "world size 24", None),
    ({**GOOD_ENV, "CUDA_DEVICE_ORDER": "FASTEST_FIRST"}, GPU, RESOLVED, Status.FAIL, "CUDA_DEVICE_ORDER is 'FASTEST_FIRST'", "export CUDA_DEVICE_ORDER=PCI_BUS_ID"),
    ({k: v for k, v in GOOD_ENV.items() if k != "CUDA_DEVICE_ORDER"}, GPU, RESOLVED, Status.FAIL, "CUDA_DEVICE_ORDER is unset", "export CUDA_DEVICE_ORDER=PCI_BUS_ID"),
    (GOOD_ENV, resolve_profile(environ={"MASTER_ADDR": "10.0.0.1", "WORLD_SIZE": "16"}), RESOLVED, Status.FAIL,
     "WORLD_SIZE=16 (env WORLD_SIZE) but NNODES × NPROC_PER_NODE = 3 × 8 = 24", "export WORLD_SIZE=24"),
    (GOOD_ENV, GPU, {"name": "head", "ok": False, "error": "Name or service not known (errno -2)", "addresses": []}, Status.FAIL,
     "does not resolve: Name or service not known", None),
    (GOOD_ENV, resolve_profile(), {**RESOLVED, "addresses": ["127.0.0.1"]}, Status.FAIL, "loopback address but the profile has 3 nodes", "export MASTER_ADDR="),
    ({k: v for k, v in GOOD_ENV.items() if k != "OMP_NUM_THREADS"}, GPU, RESOLVED, Status.WARN, "OMP_NUM_THREADS is not set", "export OMP_NUM_THREADS=8"),
    ({**GOOD_ENV, "OMP_NUM_THREADS": "eight"}, GPU, RESOLVED, Status.FAIL, "OMP_NUM_THREADS='eight' is not a positive integer", None),
    ({**GOOD_ENV, "NCCL_TIMEOUT_MS": "90m"}, GPU, RESOLVED, Status.FAIL, "NCCL_TIMEOUT_MS='90m' is not a non-negative number", None),
    ({**GOOD_ENV, "TORCH_NCCL_TIMEOUT_MS": "5000"}, GPU, RESOLVED, Status.WARN, "is 5 s: shorter than a first collective", None),
    ({**GOOD_ENV, "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "259200"}, GPU, RESOLVED, Status.WARN, "is 72 h", None),
    ({**GOOD_ENV, "NCCL_IB_TIMEOUT": "600"}, GPU, RESOLVED, Status.FAIL, "NCCL_IB_TIMEOUT='600' must be an integer 1..31", None),
    ({**GOOD_ENV, "TORCH_NCCL_BLOCKING_WAIT": "yes"}, GPU, RESOLVED, Status.FAIL, "TORCH_NCCL_BLOCKING_WAIT='yes' must be 0 or 1", None),
    ({}, CPU, {**RESOLVED, "addresses": ["127.0.0.1"]}, Status.PASS, "world size 2, rendezvous 127.0.0.1:39500", None),
])
def test_launch_vars_verdicts(env, profile, resolve, status, text, export):
    result = launch_vars(env=env, profile=profile, resolve_master=resolve)
    assert result.status is status, result
    assert text in result.summary and (status is Status.PASS or any(text in f.message for f in result.findings))
    if export:
        assert export in result.remediation
    assert paste_problems(result.remediation) == [], result.remediation
    assert all(f.actor is not None and f.fix for f in result.findings), result.findings


# -- each rule of env.launch_vars on its own ----------------------------------------------------------------------
HEAD3 = resolve_profile(environ={"MASTER_ADDR": "head", "NNODES": "3", "NODE_RANK": "0"})
NIC_ROUTE = {"interfaces": [{"name": "lo", "index": 1, "ipv4": ["127.0.0.1"], "loopback": True, "up": True},
                            {"name": "eth0", "index": 2, "ipv4": ["10.0.0.1"], "loopback": False, "up": True}]}
HOSTS_LOOP = {"name": "head", "ok": True, "error": None, "addresses": ["127.0.1.1"],
              "hosts_entries": [{"line": 2, "address": "127.0.1.1", "names": ["vm", "head"], "text": "127.0.1.1 vm head"}]}


@pytest.mark.parametrize("rule, args, status, cause, words", [
    (env_rules.cuda_device_order, ({}, GPU), Status.FAIL, "env.cuda_device_order", ["unset"]),
    (env_rules.cuda_device_order, ({}, CPU), None, None, []),
    (env_rules.cuda_device_order, ({"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, GPU), None, None, []),
    (env_rules.world_size, (resolve_profile(environ={"MASTER_ADDR": "10.0.0.1", "WORLD_SIZE": "16"}),), Status.FAIL,
     "env.world_size", ["3 × 8 = 24"]),
    (env_rules.world_size, (GPU,), None, None, []),
    (env_rules.master_resolves, (GPU, {"ok": False, "error": "Name or service not known"}), Status.FAIL,
     "net.master_unresolvable", ["does not resolve"]),
    (env_rules.master_resolves, (GPU, RESOLVED), None, None, []),
    (env_rules.master_not_loopback, (HEAD3, HOSTS_LOOP, NIC_ROUTE), Status.FAIL, "net.master_loopback",
     ["resolves to loopback 127.0.1.1"]),
    (env_rules.master_not_loopback, (CPU, {**RESOLVED, "addresses": ["127.0.0.1"]}), None, None, []),  # one node
    (env_rules.master_port_unprivileged, (resolve_profile(environ={"MASTER_PORT": "80"}),), Status.WARN,
     "net.port_privileged", ["privileged"]),
    (env_rules.omp_threads, ({}, GPU), Status.WARN, None, ["not set"]),
    (env_rules.omp_threads, ({}, CPU), None, None, []),
    (env_rules.omp_threads, ({"OMP_NUM_THREADS": "0"}, GPU), Status.FAIL, None, ["positive integer"]),
])
def test_each_launch_vars_rule(rule, args, status, cause, words):
    found = rule(*args)
    if status is None:
        assert found is None
        return
    assert found.status is status and found.cause == cause and found.actor is Actor.JOB, found
    assert all(w in found.message for w in words), found.message
    assert found.fix and paste_problems(found.fix) == [], found.fix


def test_master_not_loopback_names_the_hosts_line_and_this_heads_address():
    fix = env_rules.master_not_loopback(HEAD3, HOSTS_LOOP, NIC_ROUTE).fix
    assert "# /etc/hosts line 2 maps head to loopback: 127.0.1.1 vm head" in fix
    assert 'echo "10.0.0.1 head" >> "$new_hosts" &&' in fix


@pytest.mark.parametrize("env, messages", [
    ({"NCCL_IB_TIMEOUT": "22", "TORCH_NCCL_BLOCKING_WAIT": "1", "NCCL_TIMEOUT_MS": "1800000"}, []),
    ({"NCCL_IB_TIMEOUT": "0"}, ["must be an integer 1..31"]),
    ({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "true", "NCCL_DEBUG": "INFO"}, ["must be 0 or 1"]),
    ({"TORCH_NCCL_TIMEOUT_SEC": "10", "NCCL_TIMEOUT_MS": "x"}, ["is not a non-negative number", "is 10 s"]),
    ({"TORCH_DIST_TIMEOUT": "abc"}, ["is not a number"]),
])
def test_nccl_variables_each_wrong_value_is_its_own_finding(env, messages):
    found = env_rules.nccl_variables(env)
    assert len(found) == len(messages)
    for f, word in zip(found, messages):
        assert word in f.message and f.actor is Actor.JOB and paste_problems(f.fix) == []
