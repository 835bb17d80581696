"""Helpers for the report tests: the result documents they render, written by the real CLI from recorded
scenarios (:func:`write_documents`), and the rendered HTML parsed with the stdlib parser (:class:`Page`)."""
from __future__ import annotations

import copy
import json
import socket
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from harness_env import LAUNCH_PREFIXES, SHELL_VARS, env_without

from dsv3_preflight.document import build_document
from dsv3_preflight.result import Result

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
REPORT_DATA = TESTS / "data" / "report"
SCENARIOS = TESTS / "data" / "scenarios"
#: a real 3-node `run --all-nodes` recorded in the netns Ray lab: node facts, ranks and states per scenario
NETNS_CLUSTER = TESTS / "data" / "cluster" / "netns_three_nodes.json"

#: the document name → how it is made (every one by the real CLI, or the real cluster engine, from a recording)
GREEN = "green.json"          # a node whose every selected check passes or skips: the port-held scenario without
                              # the two checks that judge the held port (env.launch_vars, net.nic_route pass)
RED = "red.json"              # the FM-stopped A100: two FAIL (one cause), a WARN, PASS rows, on node "vm"
SWEEP = "sweep.json"          # a recorded all_reduce gang with its bandwidth sweep, below min_busbw_gbps 150
GLOO = "gloo.json"            # a collective whose ranks died (GLOO_SOCKET_IFNAME names no interface): log tails
CLUSTER = "cluster.json"      # 3 recorded lab nodes, two export NODE_RANK=1, and a fourth node Ray lost
COHOSTED = "cohosted.json"    # two Ray nodes on one recorded A100 machine: ranks 0-7 and 8-15 on the same 8 GPUs
PYTEST_A, PYTEST_B = "pytest_gpu-a.json", "pytest_gpu-b.json"   # `pytest checks/ --preflight-json`, two nodes
DOCUMENTS = [GREEN, RED, SWEEP, GLOO, CLUSTER, COHOSTED, PYTEST_A, PYTEST_B]


def clean_environ(**more: str) -> dict[str, str]:
    """This environment without the launch variables a developer's shell may carry (as conftest's clean_env)."""
    env = env_without(LAUNCH_PREFIXES, SHELL_VARS)
    return {**env, **more}


def replay(facts: Path, out: Path, *extra: str, expect_rc: int = 1) -> dict:
    """`dsv3-preflight run --facts-in FACTS --json OUT`, as a user runs it; the document it wrote."""
    proc = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--facts-in", str(facts), "--json", str(out),
                           "--no-report", "--no-color", "-q", *extra], capture_output=True, text=True, timeout=180,
                          cwd=out.parent, env=clean_environ())
    assert proc.returncode == expect_rc, (facts.name, proc.stdout[-2000:], proc.stderr[-2000:])
    return json.loads(out.read_text())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pytest_checks(out: Path, node: str, *extra: str, expect_rc: int) -> dict:
    """`pytest checks/ --preflight-json OUT` on this machine as node ``node`` (three cheap checks, a free port)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "checks/", "-q", "-p", "no:cacheprovider", "-k",
                           "env_launch_vars or host_resources or net_nic_route", "--preflight-profile", "cpu",
                           "--master-port", str(_free_port()), f"--preflight-json={out}", *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=240,
                          env=clean_environ(DSV3_PREFLIGHT_NODE_NAME=node))
    assert proc.returncode == expect_rc, proc.stdout[-3000:]
    return json.loads(out.read_text())


def cluster_document() -> dict:
    """A cluster run's document from the recorded lab nodes (two exporting NODE_RANK=1, one MTU 9000) and a fourth
    node Ray reported dead: each node's checks run by the runner on its recorded facts (what a node task does),
    the cluster checks by the engine on all of them, the lost node's entry and ERROR row by the cluster driver's
    own functions, the document by build_document. (No recording of a lost node exists: Ray on one machine cannot
    lose a raylet cheaply; tests/cluster/test_cluster_ray.py does that live.)"""
    from dsv3_preflight.cluster.dispatch import lost_text
    from dsv3_preflight.cluster.driver import _error_entry
    from dsv3_preflight.cluster.fixes import node_error_row
    from dsv3_preflight.cluster.liveness import Lost
    from dsv3_preflight.cluster.nodes import NodeInfo
    from dsv3_preflight.engine import run_cluster_checks
    from dsv3_preflight.profile import resolve_profile
    from dsv3_preflight.registry import load_registry
    from dsv3_preflight.runner import run_this_node

    scenario = json.loads(NETNS_CLUSTER.read_text())["scenarios"]["duplicate_rank_and_mtu"]
    registry = load_registry()
    profile = resolve_profile({**scenario["profile"], "nnodes": 4}, {})
    ranks = {**scenario["node_ranks"], "lab-node3": 3}
    node_checks = [registry.checks[n] for n in ("env.launch_vars", "net.nic_route")]
    results, entries, node_facts = [], [], {}
    for name, facts in scenario["facts"].items():
        outcome = run_this_node(registry, node_checks, profile.with_values("node rank", node_rank=ranks[name]),
                                node=name, facts_doc={"node": name, "facts": facts}, replay_source=NETNS_CLUSTER.name,
                                timeout=60, cluster_checks_here=False)
        results += outcome.results
        entries.append({**outcome.entry, "state": "ok"})
        node_facts[name] = outcome.entry
    lost_node = NodeInfo(node_id="5c0ffee0" * 7, ip="10.77.0.13", hostname="lab-node3", name="lab-node3", node_rank=3)
    lost = Lost(node_id=lost_node.node_id, phase="during the node checks", at="2026-11-23T11:52:31+00:00", after_s=4.2,
                reason="The node's raylet stopped sending heartbeats (health check failed)")
    error = lost_text(lost_node, lost)
    entries.append(_error_entry(lost_node, error))
    states = {**scenario["node_states"], "lab-node3": {"state": "dead", "node_id": lost_node.node_id, "ip": lost_node.ip,
                                                        "node_rank": 3, "phase": lost.phase}}
    cluster = [registry.checks[n] for n in ("cluster.node_rank", "cluster.node_count", "net.mtu")]
    results += run_cluster_checks(cluster, profile, node_facts, ranks, node_states=states)
    results.append(node_error_row(lost_node, None, lost, error, "10.77.0.10:6390"))
    return build_document(mode="cluster", profile=profile.to_dict(), nodes=entries, results=results,
                          command=["dsv3-preflight", "run", "--all-nodes", "--profile", "cpu", "--nnodes", "4"],
                          extra={"cluster": {"node_ranks": ranks, "node_states": states}})


def cohosted_document() -> dict:
    """A cluster run where two Ray nodes (gpu-a, gpu-b) are one machine: the recorded FM-stopped A100 (host "vm")
    answers for both; each node's checks run by the runner on its facts, gpu.rank_mapping_cluster by the engine."""
    from dsv3_preflight.engine import run_cluster_checks
    from dsv3_preflight.profile import Profile
    from dsv3_preflight.registry import load_registry
    from dsv3_preflight.runner import run_this_node

    facts_path = SCENARIOS / "gpu_a100_fm_stopped.facts.json"
    recorded = json.loads(facts_path.read_text())
    registry = load_registry()
    profile = Profile.from_dict(recorded["profile"]).with_values("--nnodes", nnodes=2)
    ranks = {"gpu-a": 0, "gpu-b": 1}
    cluster = [registry.checks["gpu.rank_mapping_cluster"]]
    results, entries, node_facts = [], [], {}
    for name, rank in ranks.items():   # a node task gathers the cluster checks' facts too, the driver judges them
        outcome = run_this_node(registry, [registry.checks["gpu.inventory"], *cluster],
                                profile.with_values("node rank", node_rank=rank), node=name,
                                facts_doc={**recorded, "node": name}, replay_source=facts_path.name, timeout=60,
                                cluster_checks_here=False)
        results += [r for r in outcome.results if r.name != "gpu.rank_mapping_cluster"]
        entries.append({**outcome.entry, "state": "ok"})
        node_facts[name] = outcome.entry
    results += run_cluster_checks(cluster, profile, node_facts, ranks)
    return build_document(mode="cluster", profile=profile.to_dict(), nodes=entries, results=results,
                          command=["dsv3-preflight", "run", "--all-nodes", "--nnodes", "2"],
                          extra={"cluster": {"node_ranks": ranks}})


@pytest.fixture(scope="session")
def documents(tmp_path_factory) -> Path:
    """The folder holding every document of :data:`DOCUMENTS`, written once per test session (a test module
    imports this fixture, and :func:`load`, by name)."""
    return write_documents(tmp_path_factory.mktemp("report-documents"))


@pytest.fixture(scope="session")
def load(documents):
    """``load(name)``: a fresh copy of one of those documents."""
    cache: dict[str, dict] = {}

    def read(name: str) -> dict:
        if name not in cache:
            cache[name] = json.loads((documents / name).read_text())
        return copy.deepcopy(cache[name])
    return read


def write_documents(directory: Path) -> Path:
    """Every document of :data:`DOCUMENTS`, written into ``directory`` (about a second each)."""
    replay(SCENARIOS / "net_leftover_holds_port_cpu.facts.json", directory / GREEN,
           "--skip", "host.resources,net.port_free", expect_rc=0)
    replay(SCENARIOS / "gpu_a100_fm_stopped.facts.json", directory / RED)
    replay(REPORT_DATA / "allreduce_sweep_cpu.facts.json", directory / SWEEP, "--only", "dist.allreduce")
    replay(SCENARIOS / "collective_wrong_gloo_ifname.facts.json", directory / GLOO, "--only", "dist.allreduce")
    (directory / CLUSTER).write_text(json.dumps(cluster_document(), indent=1))
    (directory / COHOSTED).write_text(json.dumps(cohosted_document(), indent=1))
    pytest_checks(directory / PYTEST_A, "gpu-a", expect_rc=0)
    pytest_checks(directory / PYTEST_B, "gpu-b", "--shm-min-gib", "100000", expect_rc=1)
    return directory


class Page(HTMLParser):
    """Every element (tag, attributes) and the page's visible text, as a browser's parser sees them."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self._text: list[str] = []
        self._in: list[str] = []
        self.script_bodies: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._in.append(tag)
            if tag == "script":
                self.script_bodies.append("")

    def handle_endtag(self, tag):
        if self._in and self._in[-1] == tag:
            self._in.pop()

    def handle_data(self, data):
        if self._in and self._in[-1] == "script":
            self.script_bodies[-1] += data
        elif not self._in:
            self._text.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self._text).split())

    def tags(self, name: str) -> list[dict[str, str | None]]:
        return [a for t, a in self.elements if t == name]

    def by_class(self, cls: str) -> list[tuple[str, dict]]:
        return [(t, a) for t, a in self.elements if cls in (a.get("class") or "").split()]


HOSTILE = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'


def hostile_document() -> dict:
    node = {"node": "gpu-a" + HOSTILE, "node_rank": 0, "state": "error", "error": "died: " + HOSTILE,
            "facts": {"nic_route": {"interface": "eth0" + HOSTILE}}, "fact_errors": {"nvml" + HOSTILE: HOSTILE}}
    result = Result.failed("summary " + HOSTILE, {
        "findings": [{"file": "/nfs/x" + HOSTILE + ".safetensors", "problem": HOSTILE}],
        "log_tail": ["NCCL WARN " + HOSTILE], "sweep": [{"bytes": 1024, "busbw_gbps": 1.0, "algbw_gbps": 1.0, "note": HOSTILE}],
        HOSTILE: {"nested" + HOSTILE: [HOSTILE]}}, remediation="echo " + HOSTILE)
    doc = build_document(mode="node", profile={"name": "p" + HOSTILE, "values": {"master_addr": HOSTILE},
                                               "sources": {"master_addr": "env " + HOSTILE}},
                         nodes=[node], results=[result.stamped(name="x.check" + HOSTILE, node=node["node"], duration_s=0.1)],
                         command=["dsv3-preflight", HOSTILE])
    doc["doctor"] = {"verdict": HOSTILE, "findings": [{"class": HOSTILE, "title": HOSTILE, "root_cause": HOSTILE,
                                                       "fix": HOSTILE, "check": HOSTILE, "node": HOSTILE, "rank": 0,
                                                       "evidence": [{"file": "/var/log/" + HOSTILE, "line": 3, "text": HOSTILE}]}]}
    return doc
