"""The net.* checks and `dsv3-preflight listen` from the command line, as a user runs them."""
import json
import os
import select
import socket
import subprocess
import threading

import pytest
from conftest import python_cli
from harness_env import env_without
from ports import free_port

from dsv3_preflight.net.probes.reach import tcp_reach


def run_net(tmp_path, env, only="net.*", profile="cpu"):
    out = tmp_path / "result.json"
    full = env_without(("MASTER_", "NCCL_", "GLOO_", "DSV3_PREFLIGHT", "NNODES", "NODE_RANK"), ())
    full.update(env)
    proc = subprocess.run(python_cli("run", "--profile", profile, "--only", only, "--no-report", "--no-color", "-q",
                                     "--json", str(out)), capture_output=True, text=True, timeout=90, env=full)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    results = {r["name"]: r for r in json.loads(out.read_text())["results"]} if out.exists() else {}
    return proc, results


def test_cpu_profile_is_green_on_a_healthy_machine(tmp_path):
    proc, results = run_net(tmp_path, {"MASTER_PORT": str(free_port())})
    assert proc.returncode == 0, proc.stdout
    assert {n: r["status"] for n, r in results.items()} == {
        "net.nic_route": "pass", "net.port_free": "pass", "net.mtu": "pass", "net.port_reach": "skip"}
    assert "single-node" in results["net.port_reach"]["summary"]


def test_unresolvable_master_addr_fails_clearly(tmp_path):
    proc, results = run_net(tmp_path, {"MASTER_ADDR": "no-such-head.invalid", "MASTER_PORT": str(free_port())})
    assert proc.returncode == 1
    assert results["net.nic_route"]["status"] == "fail" and "does not resolve" in results["net.nic_route"]["summary"]


def test_ipv6_literal_master_addr_is_routed_and_bound(tmp_path):
    if not socket.has_ipv6 or not os.path.exists("/proc/net/if_inet6") or "00000000000000000000000000000001" not in open("/proc/net/if_inet6").read():
        pytest.skip("IPv6 loopback ::1 is not configured on this host")
    proc, results = run_net(tmp_path, {"MASTER_ADDR": "::1", "MASTER_PORT": str(free_port())})
    assert proc.returncode == 0, proc.stdout
    assert results["net.nic_route"]["evidence"]["interface"] == "lo"
    assert [a["address"] for a in results["net.port_free"]["evidence"]["attempts"]] == ["::", "::1"]


def test_link_local_ipv6_master_addr_on_a_worker_says_it_needs_a_scope(tmp_path):
    # connect() to fe80::… without a scope id fails with EINVAL in the kernel (no packet is sent); it read as
    # "TCP connect failed: Invalid argument (errno 22)" with the fix `ip route get fe80::1`.
    if not socket.has_ipv6 or not os.path.exists("/proc/net/if_inet6"):
        pytest.skip("IPv6 is not available on this host")
    assert tcp_reach("fe80::1", 39500, timeout=1.0)["outcome"] == "invalid"
    proc, results = run_net(tmp_path, {"MASTER_ADDR": "fe80::1", "NNODES": "3", "NODE_RANK": "1"},
                            only="net.port_reach", profile="dsv3")
    reach = results["net.port_reach"]
    assert reach["status"] == "fail" and "link-local" in reach["summary"], reach["summary"]
    assert reach["remediation"].startswith("export MASTER_ADDR="), reach["remediation"]


def test_port_out_of_range_is_a_usage_error_not_a_traceback(tmp_path):
    proc, _ = run_net(tmp_path, {"MASTER_PORT": "70000"})
    assert proc.returncode == 4 and "master_port" in proc.stderr + proc.stdout


def test_interface_name_with_odd_characters_fails_clearly(tmp_path):
    proc, results = run_net(tmp_path, {"MASTER_PORT": str(free_port()), "NCCL_SOCKET_IFNAME": "eth0;rm -rf /"},
                            only="net.nic_route")
    assert proc.returncode == 1
    assert "cannot be interface names" in results["net.nic_route"]["summary"]


def test_listen_serves_workers_and_reports_them():
    port = free_port()
    proc = subprocess.Popen(python_cli("listen", "--host", "127.0.0.1", "--port", str(port), "--deadline", "3",
                                       "--token", "cli-token"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(30, proc.kill)  # the listener exits at its 3 s deadline; never wait forever
    watchdog.start()
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 20)
        assert ready and proc.stdout.readline().startswith(f"listening on 127.0.0.1:{port}")
        hint = proc.stdout.readline()
        reach = tcp_reach("127.0.0.1", port, expected_token="cli-token")
        out = "".join(proc.stdout)  # read through the buffered reader (communicate() would bypass its buffer)
        proc.wait(timeout=20)
        err = proc.stderr.read()
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=5)
    assert reach["listener"] == "ours" and reach["token_match"] is True
    assert proc.returncode == 0, err
    assert "export DSV3_PREFLIGHT_LISTENER_TOKEN=cli-token" in hint
    assert "served 127.0.0.1:" in out and "served 1 connection(s) from 127.0.0.1" in out


def test_listen_on_a_taken_port_names_the_holder():
    with socket.socket() as holder:
        holder.bind(("0.0.0.0", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        proc = subprocess.run(python_cli("listen", "--port", str(port), "--deadline", "1"),
                              capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "EADDRINUSE" in proc.stdout and f"pid {os.getpid()}" in proc.stdout
    assert f"kill {os.getpid()}" in proc.stdout  # the holder's pid, not a `kill <pid>` to fill in


@pytest.mark.parametrize("args, word", [(["--port", "70000"], "--port"), (["--port", "abc"], "--port"),
                                        (["--deadline", "0"], "--deadline"), (["--host", "bad host!"], "--host")])
def test_listen_bad_input_is_a_usage_error(args, word):
    proc = subprocess.run(python_cli("listen", *args), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 4 and word in proc.stderr and "Traceback" not in proc.stderr


def test_nccl_settings_in_nccl_conf_file_are_read_as_nccl_reads_them(tmp_path):
    """NCCL reads NCCL_* settings from $NCCL_CONF_FILE (else ~/.nccl.conf) and /etc/nccl.conf, the environment
    winning: a value there that selects nothing failed NCCL's init while the check said NCCL_SOCKET_IFNAME was unset."""
    conf = tmp_path / "nccl.conf"
    conf.write_text("# the site's file\nNCCL_SOCKET_IFNAME=nosuch0\nNCCL_COMM_ID=127.0.0.1:29999\n")
    env = {"MASTER_PORT": str(free_port()), "NCCL_CONF_FILE": str(conf)}
    proc, results = run_net(tmp_path, env, only="net.nic_route")
    r = results["net.nic_route"]
    assert proc.returncode == 1 and r["status"] == "fail", r
    assert "NCCL_SOCKET_IFNAME='nosuch0' selects no interface here (NCCL fails at init)" in r["summary"]
    assert f"(from {conf}: an export overrides it)" in r["summary"]
    assert r["evidence"]["nccl_conf"] == {"NCCL_SOCKET_IFNAME": str(conf), "NCCL_COMM_ID": str(conf)}
    messages = [f["message"] for f in r["findings"]]
    assert any("NCCL_COMM_ID='127.0.0.1:29999' is set" in m for m in messages), messages
    # the export the fix gives overrides the file; the NCCL_COMM_ID warning stays until the line is deleted
    proc, results = run_net(tmp_path, {**env, "NCCL_SOCKET_IFNAME": "lo"}, only="net.nic_route")
    assert proc.returncode == 0 and results["net.nic_route"]["status"] == "warn", results["net.nic_route"]
    fix = results["net.nic_route"]["findings"][0]["fix"]
    subprocess.run(["bash", "-c", fix.splitlines()[-1]], check=True, timeout=10)   # the sed line, pasted
    assert conf.read_text() == "# the site's file\nNCCL_SOCKET_IFNAME=nosuch0\n"
    proc, results = run_net(tmp_path, {**env, "NCCL_SOCKET_IFNAME": "lo"}, only="net.nic_route")
    assert proc.returncode == 0 and results["net.nic_route"]["status"] == "pass", results["net.nic_route"]
