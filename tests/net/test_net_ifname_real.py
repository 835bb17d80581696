"""NCCL's and Gloo's interface rules against the real thing: interfaces that are down or without carrier in a
network namespace (what NCCL 2.28.3 and later skip), the address torch's Gloo really binds when
GLOO_SOCKET_IFNAME is unset (a namespace with its own /etc/hosts), and the GLOO_SOCKET_IFNAME values torch
accepts or refuses (real init_process_group on 127.0.0.1).

The namespaces (``ip netns exec`` bind-mounts ``/etc/netns/<ns>/hosts`` over ``/etc/hosts``)::

    dpif<sfx>n  "the worker", interfaces in index order:
                lo; eth2 (administratively down, 10.94.0.1/24); nocarr0 (up, its veth peer down: no carrier,
                10.96.0.1/24); eth0 (veth to dpif<sfx>p, 10.99.0.1/24, the route to MASTER_ADDR 10.99.0.2);
                eth01 (up, 10.98.1.1/24)
    dpif<sfx>p  "the head": eth0 10.99.0.2/24

Every namespace, process and /etc/netns directory is removed at the end.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys

import pytest
from harness_env import env_without
from netns_lab import NETNS_ETC, unavailable_reason
from ports import free_port

from dsv3_preflight.checks.net_nic_route import nic_route as judge_nic_route
from dsv3_preflight.net.probes.facts import nic_route as probe_nic_route
from dsv3_preflight.net.probes.facts import resolve_master
from dsv3_preflight.profile import resolve_profile

PY = sys.executable
MASTER = "10.99.0.2"
STORE_PORT = 29517  # inside the worker's own namespace: nothing else listens there
_DROPPED = ("MASTER_", "NCCL_", "GLOO_", "TORCH_NCCL", "DSV3_PREFLIGHT", "NNODES", "NODE_RANK", "WORLD_SIZE", "RANK",
            "LOCAL_RANK")

#: one rank of a one-rank gloo job: did init_process_group work, and which addresses does Gloo listen on
GLOO_CHILD = r"""
import datetime, json, sys
import psutil, torch.distributed as dist
port = int(sys.argv[1])
out = {}
try:
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=20))
    conns = psutil.Process().net_connections(kind="inet")
    out["listening"] = sorted({c.laddr.ip for c in conns if c.status == "LISTEN" and c.laddr.port != port})
    dist.destroy_process_group()
    out["ok"] = True
except Exception as exc:
    out["ok"] = False
    out["error"] = str(exc).strip().splitlines()[0][:500]
print("RESULT " + json.dumps(out))
"""


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = env_without(_DROPPED, ())
    env.update(extra)
    return env


def gloo_rank(env: dict[str, str], port: int, netns: str | None = None) -> dict:
    """Run :data:`GLOO_CHILD` (in ``netns`` when given) and return what it printed."""
    argv = ([] if netns is None else ["ip", "netns", "exec", netns]) + [PY, "-c", GLOO_CHILD, str(port)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=_env(env))
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, proc.stdout + proc.stderr
    return json.loads(line[len("RESULT "):])


class TwoNodes:
    def __init__(self) -> None:
        sfx = secrets.token_hex(3)
        self.node, self.peer = f"dpif{sfx}n", f"dpif{sfx}p"
        self.created: list[str] = []

    def ip(self, *args: str) -> None:
        proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
        assert proc.returncode == 0, f"ip {' '.join(args)}: {proc.stderr}"

    def build(self) -> TwoNodes:
        n, p = self.node, self.peer
        for ns in (n, p):
            self.ip("netns", "add", ns)
            self.created.append(ns)
            self.ip("-n", ns, "link", "set", "lo", "up")
            os.makedirs(os.path.join(NETNS_ETC, ns), exist_ok=True)
            with open(os.path.join(NETNS_ETC, ns, "resolv.conf"), "w") as fh:
                fh.write("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")  # nothing answers: no DNS wait
            self.write_hosts(ns, [])
        self.ip("-n", n, "link", "add", "eth2", "type", "veth", "peer", "name", "x2")
        self.ip("-n", n, "addr", "add", "10.94.0.1/24", "dev", "eth2")                 # left down
        self.ip("-n", n, "link", "add", "nocarr0", "type", "veth", "peer", "name", "y0")
        self.ip("-n", n, "addr", "add", "10.96.0.1/24", "dev", "nocarr0")
        self.ip("-n", n, "link", "set", "nocarr0", "up")                               # its peer y0 stays down
        self.ip("-n", n, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", p)
        self.ip("-n", n, "addr", "add", "10.99.0.1/24", "dev", "eth0")
        self.ip("-n", p, "addr", "add", f"{MASTER}/24", "dev", "eth0")
        self.ip("-n", n, "link", "add", "eth01", "type", "veth", "peer", "name", "z01")
        self.ip("-n", n, "addr", "add", "10.98.1.1/24", "dev", "eth01")
        for ns, dev in ((n, "eth0"), (p, "eth0"), (n, "eth01"), (n, "z01")):
            self.ip("-n", ns, "link", "set", dev, "up")
        return self

    def write_hosts(self, ns: str, lines: list[str]) -> None:
        with open(os.path.join(NETNS_ETC, ns, "hosts"), "w") as fh:
            fh.write("127.0.0.1 localhost\n" + "".join(f"{line}\n" for line in lines))

    def run(self, argv: list[str], env: dict[str, str], timeout: float = 90) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", self.node, *argv], capture_output=True, text=True,
                              timeout=timeout, env=_env(env))

    def check(self, tmp_path, **env: str) -> dict:
        """`dsv3-preflight run --only net.nic_route` on the worker (2 nodes); its result."""
        out = tmp_path / "result.json"
        base = {"MASTER_ADDR": MASTER, "MASTER_PORT": "39500", "NNODES": "2", "NODE_RANK": "1"}
        proc = self.run([PY, "-m", "dsv3_preflight", "run", "--only", "net.nic_route", "--no-report", "-q",
                         "--no-color", "--json", str(out)] + (["--profile", env.pop("profile")] if "profile" in env
                                                               else []), dict(base, **env))
        assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
        return next(r for r in json.loads(out.read_text())["results"] if r["name"] == "net.nic_route")

    def close(self) -> None:
        for ns in reversed(self.created):
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=10)
            for pid in pids.stdout.split():
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
            shutil.rmtree(os.path.join(NETNS_ETC, ns), ignore_errors=True)
        self.created.clear()


@pytest.fixture
def two_nodes():
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"network namespaces unavailable: {reason}")
    lab = TwoNodes()
    try:
        yield lab.build()
    finally:
        lab.close()


# -- NCCL: interfaces that are not RUNNING ------------------------------------------------------------------------
@pytest.mark.netns
@pytest.mark.slow
def test_the_probe_reads_running_as_the_kernel_reports_it_to_getifaddrs(two_nodes):
    code = ("import json; from dsv3_preflight.net.probes.route import interfaces; "
            "print(json.dumps({i['name']: [i['up'], i['running']] for i in interfaces()}))")
    proc = two_nodes.run([PY, "-c", code], {}, timeout=30)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert {k: got[k] for k in ("lo", "eth2", "nocarr0", "eth0", "eth01")} == {
        "lo": [True, True], "eth2": [False, False], "nocarr0": [True, False], "eth0": [True, True], "eth01": [True, True]}
    ip = two_nodes.run(["ip", "-o", "link", "show", "nocarr0"], {}, timeout=10).stdout
    assert "NO-CARRIER" in ip and "LOWER_UP" not in ip


@pytest.mark.netns
@pytest.mark.slow
def test_a_prefix_matching_a_down_interface_before_the_route_is_judged_as_nccl_selects_it(two_nodes, tmp_path):
    # eth2 (down) comes first by index: NCCL 2.29.7 skips it and bootstraps on eth0; we used to FAIL "bootstraps on eth2"
    result = two_nodes.check(tmp_path, NCCL_SOCKET_IFNAME="eth", GLOO_SOCKET_IFNAME="eth0")
    ev = result["evidence"]
    assert (ev["nccl_selects"], ev["nccl_bootstrap_interface"], ev["nccl_not_running"]) == (["eth0", "eth01"], "eth0",
                                                                                           ["eth2"])
    assert result["status"] == "warn" and "also selects eth01" in result["summary"]
    assert ev["nccl_version"] == "2.29.7" and ev["nccl_version_assumed"] is True  # torch here is a CPU build: no NCCL


@pytest.mark.netns
@pytest.mark.slow
def test_a_value_naming_only_interfaces_that_are_not_running_fails_as_nccl_finds_nothing(two_nodes, tmp_path):
    result = two_nodes.check(tmp_path, NCCL_SOCKET_IFNAME="eth2,nocarr0", GLOO_SOCKET_IFNAME="eth0")
    assert result["status"] == "fail"
    assert result["summary"].startswith("NCCL_SOCKET_IFNAME='eth2,nocarr0' matches only eth2, nocarr0, not RUNNING "
                                        "(down or no carrier): NCCL 2.29.7 (assumed: this node's is unknown) skips "
                                        "them, selects nothing and fails at init")
    assert "export NCCL_SOCKET_IFNAME==eth0" in result["remediation"]   # eth01 is here: a bare eth0 takes it too


# -- Gloo: the address it binds with GLOO_SOCKET_IFNAME unset ---------------------------------------------------
@pytest.mark.netns
@pytest.mark.slow
@pytest.mark.parametrize("hosts, binds, says", [
    # glibc's getaddrinfo puts a loopback address first whatever the line order (RFC 3484 rule 8: smaller scope)
    (["10.99.0.1 {h}", "127.0.1.1 {h}"], "127.0.1.1",
     "Gloo binds 127.0.1.1, the first address the host name '{h}' resolves to (/etc/hosts line 3: 127.0.1.1 {h})"),
    (["127.0.1.1 {h}", "10.99.0.1 {h}"], "127.0.1.1",
     "Gloo binds 127.0.1.1, the first address the host name '{h}' resolves to (/etc/hosts line 2: 127.0.1.1 {h})"),
    (["10.99.0.1 {h}"], "10.99.0.1", None),
    (["10.5.5.5 {h}"], "127.0.0.1",                 # not this node's address: torch falls back to loopback
     "the host name '{h}' resolves to 10.5.5.5, no address of this node, so torch falls back to 127.0.0.1"),
])
def test_gloo_binds_the_address_we_predict_and_loopback_fails_naming_the_hosts_line(two_nodes, tmp_path, hosts, binds,
                                                                                  says):
    host = socket.gethostname()  # ip netns exec keeps the host's UTS namespace
    two_nodes.write_hosts(two_nodes.node, [entry.format(h=host) for entry in hosts])  # after "127.0.0.1 localhost"
    torch_side = gloo_rank({}, STORE_PORT, two_nodes.node)
    assert torch_side["ok"] and torch_side["listening"] == [binds], torch_side
    result = two_nodes.check(tmp_path, profile="cpu", NCCL_SOCKET_IFNAME="=eth0")   # the cpu profile's backend: gloo
    assert result["evidence"]["gloo_binds"] == binds
    if says is None:   # reachable: only the warning that asks to pin the interface
        assert (result["status"], result["summary"]) == ("warn", (
            f"GLOO_SOCKET_IFNAME unset: Gloo binds {binds}, the first address the host name '{host}' resolves to "
            f"(/etc/hosts line 2: {binds} {host}); pin eth0, the interface toward MASTER_ADDR {MASTER}"))
        return
    assert result["status"] == "fail"
    assert result["summary"] == says.format(h=host) + ": a loopback address, unreachable from the other nodes"
    assert result["remediation"].startswith("export NCCL_SOCKET_IFNAME==eth0\nexport GLOO_SOCKET_IFNAME=eth0")


# -- GLOO_SOCKET_IFNAME values torch accepts or refuses -----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("value, torch_error", [
    ("l", None),          # one character: torch ignores it
    ("", None),
    ("lo,", None),        # a trailing comma: dropped by torch's split
    ("lo,lo,", None),
    (",lo", "GlooDeviceFactory::makeTCPDevice(): interface or hostname can't be empty"),
    ("lo,,lo", "GlooDeviceFactory::makeTCPDevice(): interface or hostname can't be empty"),
])
def test_gloo_socket_ifname_fails_our_check_exactly_when_torch_refuses_it(value, torch_error):
    torch_side = gloo_rank({"GLOO_SOCKET_IFNAME": value}, free_port())
    assert torch_side.get("error") == torch_error, torch_side
    profile = resolve_profile(environ={"MASTER_ADDR": "127.0.0.1"}, profile_name="cpu")   # one node, over lo
    env = {"GLOO_SOCKET_IFNAME": value, "NCCL_SOCKET_IFNAME": None, "NCCL_SOCKET_FAMILY": None, "NCCL_COMM_ID": None}
    fact = probe_nic_route.gather(profile=profile, env=env, resolve_master=resolve_master.gather(profile=profile))
    result = judge_nic_route(nic_route=fact, profile=profile)
    assert (result.status.value == "fail") is (torch_error is not None), result
    if torch_error:
        assert torch_error in result.summary
