"""The HTML report rendered from result documents the CLI gives when it replays the recorded scenarios
(tests/data/scenarios/, `run --facts-in`; the doctor's card from a real triage of a recorded log under
tests/data/doctor/), and the documents of tests/reports/conftest.py (report_lab.write_documents): a green node,
a recorded bandwidth sweep, a cluster run with a lost node and duplicate node ranks, two Ray nodes on one machine,
`pytest checks/` documents."""
from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
import subprocess
import sys

import pytest
from conftest import REPO
from report_lab import (  # noqa: F401 - documents and load are fixtures
    CLUSTER,
    COHOSTED,
    DOCUMENTS,
    GLOO,
    GREEN,
    RED,
    SWEEP,
    Page,
    documents,
    hostile_document,
    load,
)

from dsv3_preflight.reports.html import render_html

SCENARIOS = REPO / "tests" / "data" / "scenarios"
#: FAIL (gpu.cuda_init and gpu.fabric_manager: one cause), WARN (gpu.rank_mapping) and PASS results on node "vm"
FM_STOPPED = "gpu_a100_fm_stopped"
#: a port held by a leftover process (host.resources, net.port_free), on node "lab-node0"
PORT_HELD = "net_leftover_holds_port_cpu"
REPLAYED = [FM_STOPPED, PORT_HELD, "net_wrong_socket_ifname_cpu"]
#: a recorded log whose triage has a root cause, a consequence it explains, and an error line no signature knows
DOCTOR_LOG = REPO / "tests" / "data" / "doctor" / "rendezvous_timeout.log"


@pytest.fixture(scope="module")
def replayed(tmp_path_factory):
    """The document `dsv3-preflight run --facts-in SCENARIO` writes, replayed once per module (a fresh copy each)."""
    cache: dict[str, dict] = {}

    def document(name: str) -> dict:
        if name not in cache:
            out = tmp_path_factory.mktemp(name) / "doc.json"
            proc = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--facts-in",
                                   str(SCENARIOS / f"{name}.facts.json"), "--json", str(out), "--no-report",
                                   "--no-color", "-q"], capture_output=True, text=True, timeout=120, cwd=out.parent)
            assert proc.returncode == 1, proc.stderr   # every recorded scenario is red
            cache[name] = json.loads(out.read_text())
        return copy.deepcopy(cache[name])
    return document


def render_doc(doc: dict) -> tuple[str, Page]:
    html = render_html(doc)
    return html, Page(html)


def doctor_text(html: str) -> str:
    return Page(html[html.index('id="doctor"'):html.index('id="failures"')]).text


def test_green_report_says_go_and_shows_every_check_passed_or_skipped(load):
    doc = load(GREEN)
    html, page = render_doc(doc)
    assert page.by_class("big")[0][1]["data-verdict"] == "GO"
    assert "✔ GO" in page.text
    assert "Nothing failed or warned." in page.text
    assert f"all {len(doc['results'])} checks passed or were skipped with a reason" in page.text
    assert not page.by_class("st-border-fail")


def test_red_report_lists_failures_first_with_their_remediation_and_a_copy_button(replayed):
    doc = replayed(FM_STOPPED)
    html, page = render_doc(doc)
    failures = html[html.index('id="failures"'):html.index('id="matrix"')]
    order = re.findall(r"<code>([\w.]+)</code> on <b>vm</b>", failures)
    assert order == ["gpu.cuda_init", "gpu.rank_mapping"]  # the FAIL (one cause for two checks) before the WARN
    assert "systemctl enable --now nvidia-fabricmanager" in failures
    assert "export CUDA_DEVICE_ORDER=PCI_BUS_ID   # on every node, before torchrun" in failures
    assert failures.count('class="copy noprint"') == 2
    assert "✘ NO-GO" in page.text


def test_cluster_summary_takes_versions_and_nic_from_node_facts(load):
    doc = load(RED)   # the recorded A100: NVML, driver, fabric manager and CUDA versions
    facts = doc["nodes"][0]["facts"]
    _, page = render_doc(doc)
    summary_row = page.text[page.text.index("vm 0 replayed"):]
    versions = facts["versions"]
    assert summary_row.startswith(f"vm 0 replayed 8 {facts['nvml']['gpus'][0]['name']} {versions['driver']} "
                                  f"{versions['fabric_manager']} — (driver {versions['cuda_driver']}) {versions['torch']}")
    assert "8 (expected 8)" in page.text
    doc = load(GREEN)   # the recorded lab node: its route to MASTER_ADDR
    route, values = doc["nodes"][0]["facts"]["nic_route"], doc["profile"]["values"]
    _, page = render_doc(doc)
    for value in (f"{values['master_addr']}:{values['master_port']}",
                  f"{route['ifname']} · source {route['src']} · mtu {route['mtu']}"):
        assert value in page.text


def test_cluster_summary_shows_a_dash_for_facts_nobody_gathered(load):
    doc = load(RED)
    doc["nodes"][0]["facts"] = {}
    page = Page(render_html(doc))
    summary_row = page.text[page.text.index("vm 0 replayed"):]
    assert summary_row.startswith("vm 0 replayed — — — — — — — — —")
    assert "chosen NIC —" in page.text


def test_dead_node_is_named_with_its_error_in_the_verdict_summary_and_matrix(load):
    doc = load(CLUSTER)
    html, page = render_doc(doc)
    why = html[html.index('<ul class="why">'):html.index("</ul>", html.index('<ul class="why">'))]
    assert "‼ node lab-node3 is down (error): lab-node3 was lost during the node checks" in why
    assert "NODE ERROR" in page.text
    header = [a for t, a in page.elements if t == "th" and a.get("data-node") == "lab-node3"]
    assert header and header[0]["class"] == "dead"
    checks = {r["name"] for r in doc["results"]}
    assert {r["name"] for r in doc["results"] if r["node"] == "lab-node3"} == {"cluster.node_run"}
    assert html.count('class="cell none dead"') == len(checks) - 1  # every other check: no result from the dead node


def test_duplicate_node_ranks_and_ranks_sharing_a_gpu_are_shown(load):
    html, page = render_doc(load(CLUSTER))   # lab-node1 and lab-node2 both export NODE_RANK=1
    failures = html[html.index('id="failures"'):html.index('id="results"')]
    assert "2 nodes export NODE_RANK=1: lab-node1, lab-node2" in failures
    assert "export NODE_RANK=2   # on lab-node2" in failures
    doc = load(COHOSTED)   # gpu-a and gpu-b are one machine: ranks 8-15 land on the GPUs of ranks 0-7
    html, page = render_doc(doc)
    evidence = html[html.index('data-check="gpu.rank_mapping_cluster"', html.index('id="results"')):]
    table = evidence[evidence.index('<table class="ev', evidence.index(">duplicates<")):]
    table = table[:table.index("</table>")]
    assert table.count("<tr>") == 1 + 8   # the header, then one row per GPU two ranks share
    for rank in range(8):
        assert f"rank {rank + 8} and rank {rank} both on CUDA device" in table
    assert "ranks 8–15 → GPUs 0–7" in page.text


def test_ranks_sharing_the_cpu_are_not_flagged_as_duplicates(load):
    doc = load(GREEN)
    doc["results"][0]["evidence"] = {"rank_map": [{"rank": 0, "host": "vm", "device": "cpu"},
                                                  {"rank": 1, "host": "vm", "device": "cpu"}]}
    assert "✘ duplicate" not in render_html(doc)
    doc["results"][0]["evidence"]["rank_map"][1]["device"] = "cpu"
    doc["results"][0]["evidence"]["rank_map"][1]["rank"] = 0
    assert render_html(doc).count("✘ duplicate") == 2


def test_matrix_has_one_row_per_check_and_one_column_per_node_worst_first(load):
    _, page = render_doc(load(CLUSTER))
    rows = [a["data-check"] for t, a in page.elements if t == "tr" and "data-check" in a]
    assert rows[0] == "cluster.node_run"   # the lost node's ERROR, then the FAILs
    assert set(rows[1:4]) == {"cluster.node_count", "cluster.node_rank", "net.mtu"}
    assert set(rows) == {"cluster.node_run", "cluster.node_count", "cluster.node_rank", "net.mtu", "env.launch_vars",
                         "net.nic_route"} and len(rows) == len(set(rows))
    columns = [a["data-node"] for t, a in page.elements if t == "th" and "data-node" in a]
    assert columns == ["lab-node0", "lab-node1", "lab-node2", "lab-node3", "cluster"]


def test_every_matrix_cell_links_to_its_evidence(replayed):
    for name in REPLAYED:
        _, page = render_doc(replayed(name))
        targets = [a["data-target"] for t, a in page.elements if t == "a" and "data-target" in a]
        ids = {a["id"] for t, a in page.elements if t == "details" and "id" in a}
        assert targets and set(targets) <= ids, name


def test_status_is_readable_without_colour(replayed):
    _, page = render_doc(replayed(FM_STOPPED))
    for label in ("✘ FAIL", "! WARN", "✔ PASS"):
        assert label in page.text


def test_sweep_becomes_an_inline_svg_chart_and_log_tail_a_monospace_block(load):
    doc = load(SWEEP)   # the recorded all_reduce sweep (rows of size_bytes, as the collective worker writes them)
    sweep = doc["results"][0]["evidence"]["sweep"]
    assert max(sweep, key=lambda row: row["busbw_gbps"])["size_bytes"] == 1 << 20   # as recorded: 1.494 GB/s at 1 MiB
    html, _ = render_doc(doc)
    page = Page(html[html.index('id="results"'):html.index('id="nodes"')])   # the result's evidence, not the facts
    assert len(page.tags("svg")) == 1 and len(page.tags("polyline")) == 2
    assert "peak bus bandwidth 1.5 GB/s at 1M" in page.text
    assert "required bus bandwidth 150 GB/s" in page.text  # the profile's min_busbw_gbps, drawn as a line
    assert f"sweep table ({len(sweep)} sizes)" in page.text
    doc = load(GLOO)    # ranks that died: their log tails, by rank
    tails = doc["results"][0]["evidence"]["log_tail"]
    tails["0"].append("gpu-a:41234:41290 [0] NCCL INFO NET/Socket : Using ens3:172.17.0.2<0> (fallback)")
    html, page = render_doc(doc)
    logs = [a for t, a in page.by_class("log") if t == "pre"]
    assert logs
    assert "Unable to find address for: ethX9" in page.text and "── 1 ──" in page.text
    assert "NET/Socket : Using ens3:172.17.0.2&lt;0&gt; (fallback)" in html


def test_secrets_in_environment_and_command_line_never_reach_the_page(replayed, load):
    # a real document, given tokens in its node's environment, in evidence and on its command line
    for name, doc in [(n, replayed(n)) for n in REPLAYED] + [(n, load(n)) for n in DOCUMENTS]:
        doc["nodes"][0]["facts"].setdefault("env", {}).update(HF_TOKEN="hf_live_secret_value", WANDB_API_KEY="0123456789abcdef")
        doc["results"][0]["evidence"]["variables"] = {"HF_TOKEN": "hf_should_be_masked"}
        doc["command"] += ["--hf-token=hf_cli_secret"]
        html = render_html(doc)
        for secret in ("hf_live_secret_value", "0123456789abcdef", "hf_cli_secret", "hf_should_be_masked"):
            assert secret not in html, (name, secret)


def test_render_masks_secrets_of_a_document_that_skipped_masking(load):
    doc = load(GREEN)
    doc["nodes"][0]["facts"]["env"]["NCCL_IB_PASSWORD"] = "hunter2-plain"
    doc["results"][0]["evidence"]["log"] = "connecting with --api-key sk-plain-123"
    html = render_html(doc)
    assert "hunter2-plain" not in html and "sk-plain-123" not in html


def test_markup_in_hostnames_evidence_and_file_names_renders_inert():
    html = render_html(hostile_document())
    page = Page(html)
    assert len(page.tags("script")) == 1  # ours, at the end
    assert "__pwned" not in page.script_bodies[0]
    assert not page.tags("img")
    assert not [a for _, attrs in page.elements for a in attrs if a.startswith("on")]
    assert "gpu-a<script>window.__pwned=1</script>" in page.text  # shown as text, not lost
    assert "/nfs/x<script>" in page.text and "/var/log/<script>" in page.text


def test_page_is_self_contained_and_its_script_is_pinned_by_the_content_security_policy(replayed):
    html, page = render_doc(replayed(PORT_HELD))
    assert not page.tags("link") and not page.tags("iframe") and not page.tags("img")
    assert not re.search(r"(src|href)=\"(https?:)?//", html)
    assert "@import" not in html and "url(" not in html
    csp = [a["content"] for a in page.tags("meta") if a.get("http-equiv") == "Content-Security-Policy"][0]
    digest = base64.b64encode(hashlib.sha256(page.script_bodies[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp and "default-src 'none'" in csp


def test_run_metadata_shows_command_line_tool_version_and_the_source_of_each_profile_value(load):
    doc = load(GREEN)
    _, page = render_doc(doc)
    assert " ".join(doc["command"]) in page.text and doc["command"][:3] == ["dsv3-preflight", "run", "--facts-in"]
    assert f"dsv3-preflight {doc['tool']['version']} (result schema 1)" in page.text
    assert f"started {doc['created']}" in page.text
    values, sources = doc["profile"]["values"], doc["profile"]["sources"]
    assert (sources["master_addr"], sources["nnodes"]) == ("env MASTER_ADDR", "env NNODES")   # as recorded
    assert f"master_addr {values['master_addr']} env MASTER_ADDR" in page.text
    assert f"nnodes {values['nnodes']} env NNODES" in page.text


def test_stylesheet_is_inlined_verbatim(load):
    html, page = render_doc(load(GREEN))
    assert 'font-family: -apple-system, "Segoe UI"' in html and "table.kv > tbody > tr > th" in html


def test_print_stylesheet_hides_controls_and_unclips_long_blocks(replayed):
    html, _ = render_doc(replayed(FM_STOPPED))
    css = html[html.index("@media print"):]
    assert ".noprint" in css and "max-height: none" in css and "break-inside: avoid" in css


@pytest.mark.parametrize("name", DOCUMENTS)
def test_every_written_document_renders_without_touching_the_input(name, load):
    doc = load(name)
    before = copy.deepcopy(doc)
    html = render_html(doc)
    assert doc == before
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")


@pytest.mark.parametrize("name", REPLAYED)
def test_every_replayed_document_renders_without_touching_the_input(name, replayed):
    doc = replayed(name)
    before = copy.deepcopy(doc)
    html = render_html(doc)
    assert doc == before
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")


def test_doctor_findings_show_root_cause_before_consequences_with_the_fix_and_log_lines(replayed):
    from dsv3_preflight.doctor import triage

    doc = replayed(PORT_HELD)
    doc["doctor"] = triage([str(DOCTOR_LOG)])
    head, consequence = doc["doctor"]["findings"]
    assert (head["role"], consequence["role"]) == ("root_cause", "consequence")
    doctor = doctor_text(render_html(doc))
    assert "Doctor (log triage): failure" in doctor
    assert doctor.index(f"✘ ROOT CAUSE {head['title']}") < doctor.index(f"→ CONSEQUENCE {consequence['title']}")
    assert f"Explained by {head['id']}" in doctor
    assert " ".join(head["fix"].splitlines()[0].split()) in doctor
    first = head["evidence"][0]
    assert f"{first['file']}:{first['line']}: {first['text'][:40]}" in doctor
    assert "Error lines no signature knows (1)" in doctor


def test_doctor_warnings_are_labelled_suspect_or_teardown_noise_not_consequence(tmp_path, replayed):
    from dsv3_preflight.doctor import triage

    log = tmp_path / "run.log"
    log.write_text("gpu-a:1:1 [0] graph/xml.cc:420 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:00\n"
                   "gpu-a:1:1 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0> [1]eth0:10.0.0.5<0>\n"
                   "{'loss': 1.23, 'epoch': 0.5}\n{'train_runtime': 12.5, 'train_loss': 1.1, 'epoch': 1.0}\n"
                   "gpu-a:1:2 [0] proxy.cc:1521 NCCL WARN [Proxy Service 0] Failed to execute operation Close from rank 0, retcode 3\n")
    found = triage([str(log)])
    assert {w["role"] for w in found["warnings"]} == {"warning", "teardown", "went_on"}
    doc = replayed(PORT_HELD)
    doc["doctor"] = triage([str(DOCTOR_LOG)])
    doc["doctor"]["warnings"] = found["warnings"]
    doctor = doctor_text(render_html(doc))
    assert "Warnings (suspects, lines the run went past or survived, teardown noise)" in doctor
    assert "SUSPECT NCCL" in doctor and "TEARDOWN NOISE NCCL's proxy service lost a local rank while closing" in doctor
    assert "NOT A FAILURE NCCL warned, and the run went on: Could not find real path" in doctor
    assert doctor.count("→ CONSEQUENCE") == sum(f["role"] == "consequence" for f in doc["doctor"]["findings"])


def test_the_doctors_root_cause_says_who_acts_and_on_which_node(tmp_path, replayed):
    from dsv3_preflight.doctor import triage

    log = tmp_path / "node2.log"
    log.write_text("node2: [rank9]: RuntimeError: CUDA error: system not yet initialized\n")
    doc = replayed(PORT_HELD)
    doc["doctor"] = triage([str(log)])
    doctor = doctor_text(render_html(doc))
    # worded as the text report words it (reports/doctor_text.py who_acts): one rule, one wording
    assert "who acts: the node's administrator (repair or drain the node) — on node2" in doctor
    for finding in doc["doctor"]["findings"]:   # a document from before actors: nothing said
        finding.pop("actor", None)
        finding.pop("actor_label", None)
    old = render_html(doc)
    assert "who acts" not in old[old.index('id="doctor"'):old.index('id="failures"')]


def test_every_check_a_rendered_document_names_is_registered(load):
    """No document the report tests render names a check that does not exist (the stored ones did: issue 43)."""
    from report_lab import REPORT_DATA

    from dsv3_preflight.cluster.node_side import NODE_RUN_CHECK
    from dsv3_preflight.registry import load_registry

    registered = set(load_registry().checks) | {NODE_RUN_CHECK}   # the cluster driver's row for a node that could not run
    stored = [json.loads(p.read_text()) for p in sorted(REPORT_DATA.glob("*.json"))]
    for doc in [load(name) for name in DOCUMENTS] + [d for d in stored if "results" in d]:
        names = {r["name"] for r in doc["results"]} | set(doc.get("deselected") or {})
        assert names and names <= registered, names - registered
