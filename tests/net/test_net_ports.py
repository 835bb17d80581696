"""The kernel's port lists (ip_local_port_range, ip_local_reserved_ports) and MASTER_PORT in the ephemeral range,
read from files as /proc writes them and, end to end, a real port the kernel left in TIME-WAIT."""
import json
import socket
import subprocess

import pytest
from conftest import python_cli

from dsv3_preflight.net.ports import in_port_list, parse_port_range
from dsv3_preflight.net.probes.facts import ephemeral_ports


def test_port_range_and_port_lists_parse_as_the_kernel_writes_them():
    assert parse_port_range("32768\t60999\n") == [32768, 60999]
    for bad in ("", "32768", "60999 32768", "0 100", "a b"):
        with pytest.raises(ValueError):
            parse_port_range(bad)
    assert in_port_list(39500, "39500") and in_port_list(39500, "8080,39000-40000\n")
    assert not in_port_list(39500, "") and not in_port_list(39500, "\n") and not in_port_list(39500, "39501-39600")
    with pytest.raises(ValueError):
        in_port_list(39500, "x-y")


def test_ephemeral_ports_reads_the_proc_files(tmp_path):
    (tmp_path / "ip_local_port_range").write_text("32768\t60999\n")
    (tmp_path / "ip_local_reserved_ports").write_text("39500,40000-40010\n")
    assert ephemeral_ports(39500, str(tmp_path)) == {"ephemeral_range": [32768, 60999], "in_ephemeral_range": True,
                                                    "reserved": True, "reserved_ports": "39500,40000-40010"}
    assert ephemeral_ports(40011, str(tmp_path))["reserved"] is False
    assert ephemeral_ports(29500, str(tmp_path))["in_ephemeral_range"] is False
    (tmp_path / "ip_local_reserved_ports").unlink()   # an older kernel: the range is known, reservation is not
    assert ephemeral_ports(39500, str(tmp_path))["reserved"] is None
    assert ephemeral_ports(39500, str(tmp_path / "missing"))["ephemeral_range"] is None


def test_a_port_left_in_time_wait_by_an_outgoing_connection_is_explained_with_its_reservation(tmp_path, clean_env):
    """The field case seen in CI: MASTER_PORT inside the ephemeral range, taken by an outgoing connection that
    has closed (TIME-WAIT: no process holds it, yet the rendezvous cannot bind it for up to 60 s)."""
    with socket.socket() as probe_port:   # a port the kernel hands out: one in the ephemeral range
        probe_port.bind(("127.0.0.1", 0))
        port = probe_port.getsockname()[1]
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    client = socket.socket()          # as a connect() the kernel gave `port` to: no SO_REUSEADDR
    client.bind(("127.0.0.1", port))
    client.connect(server.getsockname())
    accepted, _ = server.accept()
    client.close()                    # the client closes first: its end of the connection stays in TIME-WAIT
    accepted.close()
    server.close()
    out = tmp_path / "r.json"
    proc = subprocess.run(python_cli("run", "--profile", "cpu", "--master-port", str(port), "--only", "net.port_free",
                                     "--json", str(out), "--no-report"), capture_output=True, text=True, timeout=120)
    [result] = json.loads(out.read_text())["results"]
    assert proc.returncode == 1 and result["status"] == "fail", proc.stdout
    with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
        lo, hi = parse_port_range(fh.read())
    assert f"it lies in the kernel's ephemeral range {lo}-{hi}" in result["summary"]
    assert f"net.ipv4.ip_local_reserved_ports={port}" in result["remediation"]
    assert result["evidence"]["in_ephemeral_range"] is True and result["evidence"]["holders"] == []


def test_a_port_in_use_for_a_moment_binds_on_a_retry_and_says_so(clean_env):
    """Another process holding MASTER_PORT for a moment (a second run's test bind, a rank shutting down) is not a
    held port: port_bind tries again for up to 2 s and records the first error; a holder that stays fails."""
    import threading
    import time

    from ports import free_port

    from dsv3_preflight.net.probes.facts import BIND_RETRY_S, port_bind
    from dsv3_preflight.profile import resolve_profile

    port = free_port()
    profile = resolve_profile(profile_name="cpu", cli={"master_port": port})
    route = {"role": "head", "role_reason": "single-node profile (nnodes=1)", "family": 4, "target": "127.0.0.1",
             "local": True}
    holder = socket.socket()
    holder.bind(("0.0.0.0", port))
    holder.listen()
    threading.Timer(0.5, holder.close).start()
    fact = port_bind.gather(profile=profile, nic_route=route)
    first = fact["attempts"][0]
    assert first["ok"] and first["tries"] > 1 and first["first_error"] == "EADDRINUSE", first
    assert fact["attempts"][1] == {"address": "127.0.0.1", "ok": True, "errno": None, "error": None, "tries": 1}
    from dsv3_preflight.checks.net_port_free import port_free
    result = port_free(port_bind=fact, port_holders={"holders": []}, profile=profile, nic_route=route)
    assert result.status.value == "pass" and f"(it was in use for a moment: bound on try {first['tries']})" in result.summary

    with socket.socket() as stays:
        stays.bind(("0.0.0.0", port))
        stays.listen()
        started = time.monotonic()
        fact = port_bind.gather(profile=profile, nic_route=route)
        took = time.monotonic() - started
    assert [a["ok"] for a in fact["attempts"]] == [False, False]
    assert fact["attempts"][0]["errno_name"] == "EADDRINUSE" and fact["attempts"][0]["tries"] > 1
    assert BIND_RETRY_S <= took < BIND_RETRY_S + 1.0   # one budget for both addresses, never one each
