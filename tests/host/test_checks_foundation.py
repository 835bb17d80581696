"""env.launch_vars and host.resources: judged on tables of facts, and on real processes and sockets."""
import json
import socket
import subprocess
import sys

import pytest
from conftest import python_cli
from paste_lint import paste_problems
from ports import free_port

from dsv3_preflight import Status
from dsv3_preflight.checks import env_launch_vars as env_rules
from dsv3_preflight.checks import host_resources as host_rules
from dsv3_preflight.checks.env_launch_vars import launch_vars
from dsv3_preflight.checks.host_resources import resources
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


GIB = 1 << 30
SHM_OK = {"path": "/dev/shm", "exists": True, "total_bytes": 16 * GIB, "free_bytes": 16 * GIB}
NO_OUTPUT_DIR = {"configured": False}
NO_HOLDERS = {"port": 39500, "holders": []}
NO_GPU_HOLDERS = {"device_files": [], "holders": []}
PROC = {"pid": 4242, "user": "ubuntu", "cmdline": "python src/train.py --deepspeed ds.json", "name": "python", "started": "2026-11-21T23:10:00+0000"}


@pytest.mark.parametrize("facts, status, text, fix", [
    ({}, Status.PASS, "/dev/shm 16.0 GiB", None),
    ({"shm": {**SHM_OK, "total_bytes": 64 << 20}}, Status.FAIL, "/dev/shm is 0.1 GiB, below 16 GiB", "--shm-size=16g"),
    ({"shm": {"path": "/dev/shm", "exists": False}}, Status.FAIL, "/dev/shm does not exist", "--shm-size=16g"),
    ({"output_dir": {"configured": True, "path": "/ckpt", "setting": "checkpoint_dir", "exists": True, "writable": True,
                     "free_bytes": 3 * GIB, "mount": {"device": "/dev/sda", "mountpoint": "/", "fstype": "ext4"}}},
     Status.WARN, "checkpoint_dir /ckpt has only 3.0 GiB free", "df -h /ckpt"),
    ({"port_holders": {"port": 39500, "holders": [{"port": 39500, "address": "0.0.0.0", "status": "LISTEN", "type": "tcp", "process": PROC}]}},
     Status.FAIL, "port 39500 is held by pid 4242 (python src/train.py", "kill 4242"),
    ({"port_holders": {"port": 39500, "holders": [{"port": 39500, "address": "0.0.0.0", "status": "LISTEN", "type": "tcp", "process": None}]}},
     Status.FAIL, "port 39500 is held by a process this user cannot see", "ss -ltnp 'sport = :39500'"),
    ({"gpu_holders": {"device_files": ["nvidia0"], "holders": [dict(PROC, devices=["/dev/nvidia0"])]}},
     Status.FAIL, "/dev/nvidia0 held by pid 4242", "kill 4242"),
    ({"gpu_holders": {"device_files": ["nvidia0"], "holders": [dict(PROC, pid=7, name="nvidia-persistenced", devices=["/dev/nvidia0"])]}},
     Status.PASS, "not held", None),
])
def test_resources_verdicts(facts, status, text, fix):
    args = {"shm": SHM_OK, "output_dir": NO_OUTPUT_DIR, "port_holders": NO_HOLDERS, "gpu_holders": NO_GPU_HOLDERS, "profile": GPU, **facts}
    result = resources(**args)
    assert result.status is status, result
    assert text in result.summary
    if fix:
        assert fix in result.remediation
        assert "pkill" not in result.remediation and "killall" not in result.remediation
    assert paste_problems(result.remediation) == [], result.remediation
    assert all(f.actor is not None for f in result.findings), result.findings


def test_resources_names_the_pid_of_a_real_process_holding_the_rendezvous_port(tmp_path, clean_env):
    port = free_port()
    # a multi-line `python -c` script, as crashed runs leave them: its newlines must not reach the pasted fix
    holder = subprocess.Popen([sys.executable, "-c",
                               f"import socket,time\ns=socket.socket()\ns.bind(('0.0.0.0',{port}))\ns.listen()\n"
                               "print('up',flush=True)\ntime.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "up"
        out = tmp_path / "r.json"
        proc = subprocess.run(python_cli("run", "--profile", "cpu", "--master-port", str(port), "--only", "host.resources",
                                         "--json", str(out), "--no-report"), capture_output=True, text=True, timeout=120)
        [result] = json.loads(out.read_text())["results"]
        assert proc.returncode == 1
        assert result["status"] == "fail"
        assert f"port {port} is held by pid {holder.pid}" in result["summary"]
        [kill_line] = [line for line in result["remediation"].splitlines() if f"kill {holder.pid}" in line]
        assert "import socket,time s=socket.socket()" in kill_line  # the whole command line, on the comment line
        assert "\ns.listen()" not in result["remediation"] and "\n" not in result["summary"]
    finally:
        holder.kill()
        holder.wait(timeout=10)


def test_port_holders_leaves_out_this_process_own_sockets(clean_env):
    # port_bind's test listener lives in the preflight's own process; run beside it, port_holders named the
    # preflight itself as the leftover to kill (README command 1 went NO-GO on its own Ray worker)
    from dsv3_preflight.host.probes.resources import port_holders

    port = free_port()
    with socket.socket() as own:
        own.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        own.bind(("0.0.0.0", port))
        own.listen()
        fact = port_holders.gather(profile=resolve_profile(profile_name="cpu", cli={"master_port": port}), env={})
    assert fact["port"] == port and fact["holders"] == []


def test_the_port_checks_and_the_collective_probe_run_together_without_reporting_each_other(tmp_path, clean_env):
    # the collective probe listens on MASTER_PORT: it runs after the probes that inspect the port
    out = tmp_path / "r.json"
    proc = subprocess.run(python_cli("run", "--profile", "cpu", "--master-port", str(free_port()),
                                     "--only", "host.resources", "--only", "net.port_free", "--only", "dist.allreduce",
                                     "--json", str(out), "--no-report"), capture_output=True, text=True, timeout=180)
    results = {r["name"]: r for r in json.loads(out.read_text())["results"]}
    assert {n: r["status"] for n, r in results.items()} == {
        "host.resources": "pass", "net.port_free": "pass", "dist.allreduce": "pass"}, proc.stdout
    assert results["host.resources"]["evidence"]["port_holders"] == []
    assert proc.returncode == 0


def test_resources_checks_the_room_in_a_real_checkpoint_dir(tmp_path, clean_env):
    out = tmp_path / "r.json"
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    proc = subprocess.run(python_cli("run", "--profile", "cpu", "--only", "host.resources", "--checkpoint-dir", str(ckpt),
                                     "--json", str(out), "--no-report"), capture_output=True, text=True, timeout=120)
    [result] = json.loads(out.read_text())["results"]
    assert result["evidence"]["output_dir"]["writable"] is True
    assert f"checkpoint_dir {ckpt}: " in result["summary"] and "GiB free" in result["summary"]
    assert proc.returncode == 0, proc.stdout
    assert result["status"] == "pass"


# -- each rule of env.launch_vars and host.resources on its own ---------------------------------------------
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


def test_each_resources_rule():
    small = host_rules.shm_big_enough({**SHM_OK, "total_bytes": 1 << 30}, GPU)
    assert small.cause == "host.shm_small" and small.actor is Actor.NODE and "remount,size=16G" in small.fix
    assert host_rules.shm_big_enough(SHM_OK, GPU) is None
    room = {"configured": True, "path": "/ckpt", "setting": "checkpoint_dir", "writable": True, "free_bytes": GIB}
    assert "checkpoint_dir /ckpt has only 1.0 GiB" in host_rules.output_dir_has_room(room).message
    assert host_rules.output_dir_has_room({**room, "writable": False}) is None  # lora.output_dir says why
    held = {"port": 39500, "holders": [{"port": 39500, "process": PROC}, {"port": 39501, "process": PROC}]}
    [port] = host_rules.rendezvous_port_not_held(held)
    assert port.cause == "net.port_held" and port.fix.startswith("kill 4242")
    gpu = {"holders": [dict(PROC, devices=["/dev/nvidia0"]), dict(PROC, pid=7, name="nv-hostengine", devices=["/dev/nvidia1"])]}
    [leftover] = host_rules.gpus_not_held(gpu)
    assert leftover.cause == "host.gpu_held" and "/dev/nvidia0" in leftover.message
    for f in (small, port, leftover):
        assert paste_problems(f.fix) == []


def test_an_actor_is_read_back_from_its_label_or_value_and_nothing_else_is_one():
    for actor in Actor:
        assert Actor.from_text(actor.label) is actor and Actor.from_text(f"  {actor.value}\n") is actor
    assert Actor.from_text(None) is None and Actor.from_text("") is None
    assert Actor.from_text("the job") is None   # a label cut short names nobody: the doctor then leaves it unsaid
