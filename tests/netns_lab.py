"""A small real network in Linux network namespaces, for tests: three "nodes" on a bridge.

Usage::

    from netns_lab import netns_lab            # the pytest fixture (function scope)
    # or: from netns_lab import NetnsLab       # the context manager

    @pytest.mark.netns
    def test_worker_reaches_head(netns_lab):
        lab = netns_lab
        head = lab.popen(0, [sys.executable, "-m", "dsv3_preflight", "listen", "--deadline", "20"])
        lab.add_rule(0, ["-A", "INPUT", "-p", "tcp", "--dport", "39500", "-j", "DROP"])
        proc = lab.exec(1, ["python3", "-c", "..."], timeout=10,
                        env={"MASTER_ADDR": lab.addr(0), "NNODES": "3", "NODE_RANK": "1"})
        assert proc.returncode == 0, proc.stderr

    with NetnsLab() as lab:                    # outside pytest
        print(lab.addr(0), lab.namespaces)

Topology (every name carries a per-run suffix, so parallel runs never collide; nothing is created
in the host's own network namespace, so no host route, bridge or firewall rule is touched)::

    namespace dp<sfx>sw  ("switch", also a router, ip_forward=1)
        br0 10.77.0.1/24   ── v0, v1, v2   (veth peers of each node's eth0)
        br1 10.77.1.1/24   ── w1           (veth peer of node 1's eth1)
    namespace dp<sfx>n0  node 0, the head: eth0 10.77.0.10/24, default via 10.77.0.1
    namespace dp<sfx>n1  node 1:           eth0 10.77.0.11/24
                                           eth1 10.77.1.11/24, default via 10.77.1.1 (so a "default
                                                route" heuristic picks eth1 while the kernel reaches
                                                the head through eth0)
                                           docker0 172.17.0.1/16 (an empty bridge, as Docker makes)
    namespace dp<sfx>n2  node 2:           eth0 10.77.0.12/24, default via 10.77.0.1

Name resolution inside the nodes is the lab's own (``ip netns exec`` bind-mounts ``/etc/netns/<ns>/``):
``hosts`` maps ``lab-node0..2`` to the eth0 addresses, and ``resolv.conf`` points at 127.0.0.1 inside
the namespace, where nothing answers, so an unknown name fails at once instead of waiting for DNS.

Helpers: ``exec(node, argv, timeout, env)`` → CompletedProcess (text), ``popen(node, argv, env)`` (tracked,
killed at teardown), ``addr(node)``, ``add_rule(node, iptables_args)``, ``set_mtu(node, ifname, mtu)``,
``set_link(node, ifname, up)``, ``set_switch_port(node, up)`` (carrier loss), ``map_host(name, addr)`` (a
hosts-file line on every node), ``ns(node)``, ``PRIMARY_IF`` / ``SECOND_IF`` / ``DOCKER_IF``. ``env`` is laid over a
copy of this process's environment from which the launch variables (MASTER_*, NCCL_*, GLOO_*, NODE_RANK, …) are
removed, so a developer's shell cannot leak into a scenario; pass ``clean_env=False`` to keep them.

Teardown always runs (context exit, fixture finaliser, and atexit as a last resort): tracked
processes are terminated then killed, then every namespace is deleted (which removes its veths,
bridges and firewall rules with it). The fixture skips, with the precise reason, only when
namespaces cannot be created: not root, no CAP_NET_ADMIN, or ``ip`` (iproute2) missing;
``add_rule`` skips when neither ``iptables`` nor ``nft`` is installed.
"""
from __future__ import annotations

import atexit
import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence

from harness_env import LAUNCH_PREFIXES, LAUNCH_VARS, env_without

PRIMARY_IF = "eth0"
SECOND_IF = "eth1"
DOCKER_IF = "docker0"
SUBNET = "10.77.0"
SECOND_SUBNET = "10.77.1"
NODES = 3
NETNS_ETC = "/etc/netns"
_CMD_TIMEOUT = 10.0


class LabUnavailable(Exception):
    """Namespaces cannot be created here; the message says exactly why."""


def unavailable_reason() -> str | None:
    """Why this machine cannot build the lab (None when it can)."""
    if sys.platform != "linux":
        return f"network namespaces need Linux (this is {sys.platform})"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed: apt-get install -y iproute2"
    if os.geteuid() != 0:
        return f"creating network namespaces needs root (euid {os.geteuid()})"
    name = f"dpchk{secrets.token_hex(3)}"
    try:
        proc = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True, timeout=_CMD_TIMEOUT)
    except subprocess.TimeoutExpired:
        return "`ip netns add` did not finish within 10 s"
    if proc.returncode != 0:
        return f"`ip netns add` failed (no CAP_NET_ADMIN / CAP_SYS_ADMIN in this container?): {proc.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=_CMD_TIMEOUT)
    return None


def _clean_environ() -> dict[str, str]:
    return env_without(LAUNCH_PREFIXES, (*LAUNCH_VARS, "RAY_ADDRESS"))


class NetnsLab:
    """Three namespaced nodes on a bridge (see the module docstring). A context manager."""

    PRIMARY_IF = PRIMARY_IF
    SECOND_IF = SECOND_IF
    DOCKER_IF = DOCKER_IF

    def __init__(self, nodes: int = NODES) -> None:
        if not 2 <= nodes <= 16:   # 16: benchmarks/bench_scale.py's largest real run
            raise ValueError("the lab has 2..16 nodes")
        self.nodes = nodes
        self.suffix = secrets.token_hex(3)
        self.switch = f"dp{self.suffix}sw"
        self.namespaces = [f"dp{self.suffix}n{i}" for i in range(nodes)]
        self._created: list[str] = []
        self._procs: list[subprocess.Popen] = []
        self._rule_tool: str | None = None
        self._up = False

    # -- addresses and names -----------------------------------------------------------
    def ns(self, node: int) -> str:
        return self.namespaces[node]

    def addr(self, node: int, ifname: str = PRIMARY_IF) -> str:
        """The IPv4 address of a node (on eth0 unless ifname names eth1 of node 1 or docker0)."""
        if ifname == PRIMARY_IF:
            return f"{SUBNET}.{10 + node}"
        if ifname == SECOND_IF and node == 1:
            return f"{SECOND_SUBNET}.11"
        if ifname == DOCKER_IF and node == 1:
            return "172.17.0.1"
        raise KeyError(f"node {node} has no interface {ifname}")

    # -- building ------------------------------------------------------------------------
    def _ip(self, *args: str) -> None:
        proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=_CMD_TIMEOUT)
        if proc.returncode != 0:
            raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")

    def _add_ns(self, name: str) -> None:
        self._ip("netns", "add", name)
        self._created.append(name)
        self._ip("-n", name, "link", "set", "lo", "up")
        etc = os.path.join(NETNS_ETC, name)
        os.makedirs(etc, exist_ok=True)
        hosts = "127.0.0.1 localhost\n" + "".join(f"{self.addr(i)} lab-node{i}\n" for i in range(self.nodes))
        with open(os.path.join(etc, "hosts"), "w") as fh:
            fh.write(hosts)
        with open(os.path.join(etc, "resolv.conf"), "w") as fh:
            fh.write("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")

    def start(self) -> NetnsLab:
        reason = unavailable_reason()
        if reason:
            raise LabUnavailable(reason)
        _LIVE.add(self)
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        self._up = True
        return self

    def _build(self) -> None:
        sw = self.switch
        self._add_ns(sw)
        for br, net in (("br0", SUBNET), ("br1", SECOND_SUBNET)):
            self._ip("-n", sw, "link", "add", br, "type", "bridge")
            self._ip("-n", sw, "addr", "add", f"{net}.1/24", "dev", br)
            self._ip("-n", sw, "link", "set", br, "up")
        self.exec_ns(sw, ["sysctl", "-qw", "net.ipv4.ip_forward=1"], check=True)
        for i, ns in enumerate(self.namespaces):
            self._add_ns(ns)
            self._ip("-n", sw, "link", "add", f"v{i}", "type", "veth", "peer", "name", PRIMARY_IF, "netns", ns)
            self._ip("-n", sw, "link", "set", f"v{i}", "master", "br0", "up")
            self._ip("-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", PRIMARY_IF)
            self._ip("-n", ns, "link", "set", PRIMARY_IF, "up")
            if i == 1:
                self._ip("-n", sw, "link", "add", "w1", "type", "veth", "peer", "name", SECOND_IF, "netns", ns)
                self._ip("-n", sw, "link", "set", "w1", "master", "br1", "up")
                self._ip("-n", ns, "addr", "add", f"{self.addr(1, SECOND_IF)}/24", "dev", SECOND_IF)
                self._ip("-n", ns, "link", "set", SECOND_IF, "up")
                self._ip("-n", ns, "route", "add", "default", "via", f"{SECOND_SUBNET}.1", "dev", SECOND_IF)
                self._ip("-n", ns, "link", "add", DOCKER_IF, "type", "bridge")
                self._ip("-n", ns, "addr", "add", "172.17.0.1/16", "dev", DOCKER_IF)
                self._ip("-n", ns, "link", "set", DOCKER_IF, "up")
            else:
                self._ip("-n", ns, "route", "add", "default", "via", f"{SUBNET}.1", "dev", PRIMARY_IF)

    def map_host(self, name: str, addr: str) -> None:
        """Add ``addr name`` to every node's hosts file, as an /etc/hosts line would (Debian's installer writes
        ``127.0.1.1 <hostname>``)."""
        for ns in self._created:
            with open(os.path.join(NETNS_ETC, ns, "hosts"), "a") as fh:
                fh.write(f"{addr} {name}\n")

    def map_own_host(self, name: str) -> None:
        """Add ``<the node's own address> name`` to each node's hosts file: every node resolves ``name`` to itself,
        as a cluster's nodes resolve their own host name (the lab's nodes share this host's name: no UTS namespace)."""
        for i, ns in enumerate(self.namespaces):
            with open(os.path.join(NETNS_ETC, ns, "hosts"), "a") as fh:
                fh.write(f"{self.addr(i)} {name}\n")

    # -- running things in a node ----------------------------------------------------------
    def _env(self, env: Mapping[str, str] | None, clean_env: bool) -> dict[str, str]:
        base = _clean_environ() if clean_env else dict(os.environ)
        base.update(env or {})
        return base

    def exec_ns(self, ns: str, argv: Sequence[str], timeout: float = _CMD_TIMEOUT,
                env: Mapping[str, str] | None = None, clean_env: bool = True,
                check: bool = False) -> subprocess.CompletedProcess:
        proc = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True,
                              timeout=timeout, env=self._env(env, clean_env))
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} in {ns}: rc {proc.returncode}: {proc.stderr.strip()}")
        return proc

    def exec(self, node: int, argv: Sequence[str], timeout: float = _CMD_TIMEOUT,
             env: Mapping[str, str] | None = None, clean_env: bool = True,
             check: bool = False) -> subprocess.CompletedProcess:
        """Run argv inside node's namespace and wait (at most timeout s; TimeoutExpired past it)."""
        return self.exec_ns(self.ns(node), argv, timeout=timeout, env=env, clean_env=clean_env, check=check)

    def popen(self, node: int, argv: Sequence[str], env: Mapping[str, str] | None = None,
              clean_env: bool = True, **kwargs) -> subprocess.Popen:
        """Start argv inside node's namespace (stdout/stderr piped, text); killed at teardown."""
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        kwargs.setdefault("text", True)
        proc = subprocess.Popen(["ip", "netns", "exec", self.ns(node), *argv], env=self._env(env, clean_env),
                                start_new_session=True, **kwargs)
        self._procs.append(proc)
        return proc

    def add_rule(self, node: int, iptables_args: Sequence[str]) -> None:
        """Add a firewall rule in node's namespace, iptables syntax: ["-A", "INPUT", "-p", "tcp", ...]."""
        tool = self._rule_tool or shutil.which("iptables")
        if tool is None:
            import pytest

            pytest.skip("neither iptables nor nft is installed: apt-get install -y iptables nftables")
        self._rule_tool = tool
        self.exec(node, [tool, *iptables_args], check=True)

    def set_mtu(self, node: int, ifname: str, mtu: int) -> None:
        self._ip("-n", self.ns(node), "link", "set", "dev", ifname, "mtu", str(int(mtu)))

    def set_link(self, node: int, ifname: str, up: bool) -> None:
        """Set a node's interface administratively up or down (down also removes its routes)."""
        self._ip("-n", self.ns(node), "link", "set", "dev", ifname, "up" if up else "down")

    def set_switch_port(self, node: int, up: bool) -> None:
        """Unplug (or plug back) node's eth0 at the switch: the node keeps its routes but loses carrier."""
        self._ip("-n", self.switch, "link", "set", "dev", f"v{node}", "up" if up else "down")

    # -- teardown ----------------------------------------------------------------------------
    def close(self) -> None:
        for proc in self._procs:  # every group at once, then each gets its grace
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except (ProcessLookupError, PermissionError):
                    pass
        for proc in self._procs:
            stop_group(proc, grace=3.0)
        self._procs.clear()
        for ns in reversed(self._created):
            # Processes started by hand with `ip netns exec` outside popen() would keep it alive; kill them.
            pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True, timeout=_CMD_TIMEOUT)
            for pid in pids.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=_CMD_TIMEOUT)
            shutil.rmtree(os.path.join(NETNS_ETC, ns), ignore_errors=True)
        self._created.clear()
        self._up = False
        _LIVE.discard(self)
        # what the killed processes made (a collective probe's dir whose parent and ranks died at once), as the
        # next real run would remove it
        from dsv3_preflight.signals import reap_orphaned_tempdirs

        reap_orphaned_tempdirs()

    def __enter__(self) -> NetnsLab:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


_LIVE: set[NetnsLab] = set()


def stop_group(proc: subprocess.Popen | None, grace: float) -> None:
    """SIGTERM the process group we started, SIGKILL it after ``grace`` seconds (and whatever the leader left
    in its group), close the pipes; by its id, never by name."""
    if proc is None:
        return
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # what the leader left behind in its group
    except (ProcessLookupError, PermissionError):
        pass
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


@atexit.register
def _close_leftovers() -> None:
    for lab in list(_LIVE):
        lab.close()


try:
    import pytest

    @pytest.fixture
    def netns_lab():
        """A fresh NetnsLab per test, always torn down; skips with the precise reason when impossible."""
        try:
            lab = NetnsLab().start()
        except LabUnavailable as exc:
            pytest.skip(f"netns lab unavailable: {exc}")
        try:
            yield lab
        finally:
            lab.close()
except ImportError:  # pragma: no cover - usable without pytest as a plain context manager
    pass
