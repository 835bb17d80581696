"""Record the network and host red scenarios of tests/data/scenarios/ (net_*.facts.json, host_*.facts.json)
from real setups: the netns lab of tests/netns_lab.py (three namespaced nodes on a bridge), a leftover
process, a bad NCCL_SOCKET_IFNAME, a firewall REJECT, a head whose /etc/hosts maps MASTER_ADDR to loopback.

Each is `dsv3-preflight run --facts-out F` in a clean environment (`env -i`), run inside the node's
namespace; the facts document gets a "provenance" line saying how it was made. Run as root from the
repository root:

    .venv/bin/python tests/data/net/record_scenarios.py            # all
    .venv/bin/python tests/data/net/record_scenarios.py net_firewall_reject_dsv3

Everything it starts (the lab's namespaces, the listener, the leftover) is stopped before it exits.
"""
from __future__ import annotations

import datetime
import json
import os
import select
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests"))

from netns_lab import NETNS_ETC, NetnsLab  # noqa: E402

OUT = REPO / "tests" / "data" / "scenarios"
PY = sys.executable
PORT = 39500
TOKEN = "scenario-token"
BASE_ENV = ["PATH=/usr/bin:/bin", "HOME=/root", "LC_CTYPE=C.UTF-8"]


def _listener(lab: NetnsLab) -> subprocess.Popen:
    proc = lab.popen(0, [PY, "-m", "dsv3_preflight", "listen", "--port", str(PORT), "--deadline", "120", "--token", TOKEN])
    ready, _, _ = select.select([proc.stdout], [], [], 20)
    if not ready or not proc.stdout.readline().startswith("listening on"):
        raise RuntimeError("the listener did not start")
    return proc


def _leftover(lab: NetnsLab) -> subprocess.Popen:
    proc = lab.popen(0, [PY, "-c", f"import socket,time; s=socket.socket(); s.bind(('0.0.0.0', {PORT})); s.listen(); "
                                   "print('held', flush=True); time.sleep(300)  # a train.py left over from the last run"])
    ready, _, _ = select.select([proc.stdout], [], [], 20)
    if not ready or proc.stdout.readline().strip() != "held":
        raise RuntimeError("the leftover did not start")
    return proc


def _record(lab: NetnsLab, node: int, name: str, env: dict[str, str], args: list[str], provenance: str) -> None:
    with tempfile.TemporaryDirectory(prefix="dsv3pf-record-") as tmp:
        facts = Path(tmp) / "facts.json"
        argv = ["env", "-i", *BASE_ENV, *(f"{k}={v}" for k, v in env.items()),
                PY, "-m", "dsv3_preflight", "run", *args, "--no-report", "-q", "--no-color", "--json", str(Path(tmp) / "r.json"),
                "--facts-out", str(facts)]
        proc = lab.exec(node, argv, timeout=180, clean_env=False)
        if proc.returncode != 1:
            raise RuntimeError(f"{name}: expected a red run (exit 1), got {proc.returncode}: {proc.stdout}{proc.stderr}")
        doc = json.loads(facts.read_text())
    shown = " ".join(f"{k}={v}" for k, v in env.items())
    doc = {"provenance": f"recorded {datetime.date.today()} with tests/data/net/record_scenarios.py on the project's "
                         f"GPU-less CI machine, in the netns lab (tests/netns_lab.py) node {node}: `env -i {shown} "
                         f"dsv3-preflight run {' '.join(args)} --facts-out F`: {provenance}", **doc}
    (OUT / f"{name}.facts.json").write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    print(f"wrote {OUT / f'{name}.facts.json'}")


def _launch_env(lab: NetnsLab, node: int, **extra: str) -> dict[str, str]:
    env = {"MASTER_ADDR": lab.addr(0), "MASTER_PORT": str(PORT), "NNODES": "3", "NODE_RANK": str(node),
           "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "OMP_NUM_THREADS": "8", "NCCL_SOCKET_IFNAME": "eth0",
           "GLOO_SOCKET_IFNAME": "eth0", "DSV3_PREFLIGHT_NODE_NAME": f"lab-node{node}", "DSV3_PREFLIGHT_REACH_TIMEOUT": "1.5"}
    env.update(extra)
    return {k: v for k, v in env.items() if v != ""}


def leftover_holds_port(lab: NetnsLab) -> None:
    _leftover(lab)
    _record(lab, 0, "net_leftover_holds_port_cpu", _launch_env(lab, 0), ["--profile", "cpu"],
            "the head (node_rank 0) while a process left over from the last run holds MASTER_PORT 39500")


def wrong_socket_ifname(lab: NetnsLab) -> None:
    _listener(lab)
    _record(lab, 1, "net_wrong_socket_ifname_cpu",
            _launch_env(lab, 1, NCCL_SOCKET_IFNAME="eth1", GLOO_SOCKET_IFNAME="docker0",
                        DSV3_PREFLIGHT_LISTENER_TOKEN=TOKEN), ["--profile", "cpu"],
            "a worker whose route to the head leaves through eth0 while NCCL_SOCKET_IFNAME names eth1 (its default "
            "route's NIC) and GLOO_SOCKET_IFNAME the docker0 bridge; the head's listener serves the port")


def firewall_reject(lab: NetnsLab) -> None:
    _listener(lab)
    lab.add_rule(0, ["-A", "INPUT", "-p", "tcp", "-s", lab.addr(1), "--dport", str(PORT), "-j", "REJECT",
                     "--reject-with", "tcp-reset"])
    _record(lab, 1, "net_firewall_reject_cpu", _launch_env(lab, 1, DSV3_PREFLIGHT_LISTENER_TOKEN=TOKEN), ["--profile", "cpu"],
            "a worker while `dsv3-preflight listen` serves MASTER_PORT on the head and the head's firewall has "
            "`iptables -A INPUT -p tcp -s 10.77.0.11 --dport 39500 -j REJECT --reject-with tcp-reset`")


def head_hosts_loopback(lab: NetnsLab) -> None:
    with open(os.path.join(NETNS_ETC, lab.ns(0), "hosts"), "a") as fh:
        fh.write("127.0.1.1\tlab-head\n")
    _record(lab, 0, "net_head_hosts_loopback_cpu", _launch_env(lab, 0, MASTER_ADDR="lab-head"), ["--profile", "cpu"],
            "the head (node_rank 0) with MASTER_ADDR lab-head, which its own /etc/hosts maps to 127.0.1.1 (Debian's "
            "default for the host's own name) while the workers map it to 10.77.0.10")


def shm_below_minimum(lab: NetnsLab) -> None:
    _record(lab, 0, "host_shm_below_minimum_cpu", _launch_env(lab, 0), ["--profile", "cpu", "--shm-min-gib", "64"],
            "the head with the profile asking for 64 GiB of /dev/shm on a machine that has 23.5 GiB")


SCENARIOS = {"net_leftover_holds_port_cpu": leftover_holds_port, "net_wrong_socket_ifname_cpu": wrong_socket_ifname,
             "net_firewall_reject_cpu": firewall_reject, "net_head_hosts_loopback_cpu": head_hosts_loopback,
             "host_shm_below_minimum_cpu": shm_below_minimum}


def main(names: list[str]) -> int:
    for name in names or list(SCENARIOS):
        with NetnsLab() as lab:  # a fresh lab per scenario; closed (processes, namespaces) even on failure
            SCENARIOS[name](lab)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
