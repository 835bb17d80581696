"""The HTML report rendered from stored result documents (tests/data/report/, see make_documents.py)."""
from __future__ import annotations

import base64
import copy
import hashlib
import re

import pytest
from report_lab import Page, hostile_document, load

from dsv3_preflight.reports.html import render_html

STORED = ["green_single_node.json", "red_single_node.json", "cluster_dead_node_duplicate_rank.json",
          "pytest_gpu-a.json", "pytest_gpu-b.json"]


def render(name: str) -> tuple[str, Page]:
    html = render_html(load(name))
    return html, Page(html)


def test_green_report_says_go_and_shows_every_check_passed_or_skipped():
    html, page = render("green_single_node.json")
    assert page.by_class("big")[0][1]["data-verdict"] == "GO"
    assert "✔ GO" in page.text
    assert "Nothing failed or warned." in page.text
    assert "all 5 checks passed or were skipped with a reason" in page.text
    assert not page.by_class("st-border-fail")


def test_red_report_lists_failures_first_with_their_remediation_and_a_copy_button():
    html, page = render("red_single_node.json")
    failures = html[html.index('id="failures"'):html.index('id="matrix"')]
    order = re.findall(r"<code>([\w.]+)</code> on <b>gpu-a</b>", failures)
    assert order == ["env.launch_vars", "host.resources", "lora.safetensors", "nccl.allreduce"]  # FAILs before the WARN
    assert "kill 4242   # after checking it is a leftover of the previous run" in failures
    assert failures.count('class="copy noprint"') == 4
    assert "✘ NO-GO" in page.text


def test_cluster_summary_takes_versions_and_nic_from_node_facts():
    _, page = render("green_single_node.json")
    for value in ("550.90.07", "12.1 (driver 12.4)", "2.3.1+cu121", "2.20.5", "NVIDIA H100 80GB HBM3", "10.10.0.11:39500",
                  "ens9f0np0 · source 10.10.0.11 · mtu 9000", "8 (expected 8)"):
        assert value in page.text


def test_cluster_summary_shows_a_dash_for_facts_nobody_gathered():
    doc = load("green_single_node.json")
    doc["nodes"][0]["facts"] = {}
    page = Page(render_html(doc))
    summary_row = page.text[page.text.index("gpu-a 0 ok"):]
    assert summary_row.startswith("gpu-a 0 ok — — — — — — — — —")
    assert "chosen NIC —" in page.text


def test_dead_node_is_named_with_its_error_in_the_verdict_summary_and_matrix():
    html, page = render("cluster_dead_node_duplicate_rank.json")
    why = html[html.index('<ul class="why">'):html.index("</ul>", html.index('<ul class="why">'))]
    assert "‼ node gpu-c is down (error): Ray task on gpu-c died" in why
    assert "NODE ERROR" in page.text
    header = [a for t, a in page.elements if t == "th" and a.get("data-node") == "gpu-c"]
    assert header and header[0]["class"] == "dead"
    assert html.count('class="cell none dead"') == 5  # every other check: no result from the dead node


def test_duplicate_ranks_are_flagged_in_the_rank_mapping_table():
    html, _ = render("cluster_dead_node_duplicate_rank.json")
    table = html[html.index('<table class="ev ranks">', html.index('data-check="cluster.rank_mapping"')):]
    table = table[:table.index("</table>")]
    assert table.count('<tr class="dup"') == 16  # ranks 0-7 on gpu-a and on gpu-b
    assert "✘ duplicate" in table


def test_ranks_sharing_the_cpu_are_not_flagged_as_duplicates():
    doc = load("green_single_node.json")
    doc["results"][0]["evidence"] = {"rank_map": [{"rank": 0, "host": "vm", "device": "cpu"},
                                                  {"rank": 1, "host": "vm", "device": "cpu"}]}
    assert "✘ duplicate" not in render_html(doc)
    doc["results"][0]["evidence"]["rank_map"][1]["device"] = "cpu"
    doc["results"][0]["evidence"]["rank_map"][1]["rank"] = 0
    assert render_html(doc).count("✘ duplicate") == 2


def test_matrix_has_one_row_per_check_and_one_column_per_node_worst_first():
    _, page = render("cluster_dead_node_duplicate_rank.json")
    rows = [a["data-check"] for t, a in page.elements if t == "tr" and "data-check" in a]
    assert rows[:2] == ["cluster.nodes_alive", "cluster.rank_mapping"]
    assert set(rows) == {"cluster.nodes_alive", "cluster.rank_mapping", "nccl.allreduce", "env.launch_vars",
                         "gpu.inventory", "net.route"}
    columns = [a["data-node"] for t, a in page.elements if t == "th" and "data-node" in a]
    assert columns == ["gpu-a", "gpu-b", "gpu-c", "cluster"]


def test_every_matrix_cell_links_to_its_evidence():
    _, page = render("red_single_node.json")
    targets = [a["data-target"] for t, a in page.elements if t == "a" and "data-target" in a]
    ids = {a["id"] for t, a in page.elements if t == "details" and "id" in a}
    assert targets and set(targets) <= ids


def test_status_is_readable_without_colour():
    _, page = render("red_single_node.json")
    for label in ("✘ FAIL", "! WARN", "✔ PASS"):
        assert label in page.text


def test_sweep_becomes_an_inline_svg_chart_and_log_tail_a_monospace_block():
    html, page = render("red_single_node.json")
    assert len(page.tags("svg")) == 1 and len(page.tags("polyline")) == 2
    assert "peak bus bandwidth 52.3 GB/s at 1G" in page.text
    assert "required bus bandwidth 150 GB/s" in page.text  # the profile's min_busbw_gbps, drawn as a line
    logs = [a for t, a in page.by_class("log") if t == "pre"]
    assert logs
    assert "NET/Socket : Using ens3:172.17.0.2&lt;0&gt; (fallback)" in html


def test_secrets_in_environment_and_command_line_never_reach_the_page():
    for name in STORED:
        html = render_html(load(name))
        for secret in ("hf_live_secret_value", "0123456789abcdef", "hf_cli_secret", "hf_should_be_masked"):
            assert secret not in html, (name, secret)


def test_render_masks_secrets_of_a_document_that_skipped_masking():
    doc = load("green_single_node.json")
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


def test_page_is_self_contained_and_its_script_is_pinned_by_the_content_security_policy():
    html, page = render("cluster_dead_node_duplicate_rank.json")
    assert not page.tags("link") and not page.tags("iframe") and not page.tags("img")
    assert not re.search(r"(src|href)=\"(https?:)?//", html)
    assert "@import" not in html and "url(" not in html
    csp = [a["content"] for a in page.tags("meta") if a.get("http-equiv") == "Content-Security-Policy"][0]
    digest = base64.b64encode(hashlib.sha256(page.script_bodies[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp and "default-src 'none'" in csp


def test_run_metadata_shows_command_line_tool_version_and_the_source_of_each_profile_value():
    _, page = render("green_single_node.json")
    assert "dsv3-preflight run --profile dsv3" in page.text
    assert f"dsv3-preflight {load('green_single_node.json')['tool']['version']} (result schema 1)" in page.text
    assert "started 2026-11-21T23:40:12+00:00" in page.text
    assert "master_addr 10.10.0.11 env MASTER_ADDR" in page.text
    assert "deepspeed_config /nfs/runs/lora-7/ds_zero3.json preflight.toml" in page.text


def test_stylesheet_is_inlined_verbatim():
    html, page = render("green_single_node.json")
    assert 'font-family: -apple-system, "Segoe UI"' in html and "table.kv > tbody > tr > th" in html


def test_print_stylesheet_hides_controls_and_unclips_long_blocks():
    html, _ = render("red_single_node.json")
    css = html[html.index("@media print"):]
    assert ".noprint" in css and "max-height: none" in css and "break-inside: avoid" in css


@pytest.mark.parametrize("name", STORED)
def test_every_stored_document_renders_without_touching_the_input(name):
    doc = load(name)
    before = copy.deepcopy(doc)
    html = render_html(doc)
    assert doc == before
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")


def test_doctor_findings_show_root_cause_before_consequences_with_the_fix_and_log_lines():
    html, page = render("cluster_dead_node_duplicate_rank.json")
    doctor = Page(html[html.index('id="doctor"'):html.index('id="failures"')]).text
    assert "Doctor (log triage): failure" in doctor
    assert doctor.index("✘ ROOT CAUSE Two nodes claim node rank 0") < doctor.index("→ CONSEQUENCE Watchdog caught")
    assert "Explained by rendezvous.duplicate_node_rank" in doctor
    assert "export NODE_RANK=1 # on gpu-b" in doctor
    assert "/nfs/runs/lora-7/logs/gpu-b.log:12: torch.distributed.elastic" in doctor
    assert "Error lines no signature knows (1)" in doctor


def test_doctor_warnings_are_labelled_suspect_or_teardown_noise_not_consequence(tmp_path):
    from dsv3_preflight.doctor import triage

    log = tmp_path / "run.log"
    log.write_text("gpu-a:1:1 [0] graph/xml.cc:420 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:00\n"
                   "gpu-a:1:1 [0] NCCL INFO NET/Socket : Using [0]lo:127.0.0.1<0> [1]eth0:10.0.0.5<0>\n"
                   "{'loss': 1.23, 'epoch': 0.5}\n{'train_runtime': 12.5, 'train_loss': 1.1, 'epoch': 1.0}\n"
                   "gpu-a:1:2 [0] proxy.cc:1521 NCCL WARN [Proxy Service 0] Failed to execute operation Close from rank 0, retcode 3\n")
    found = triage([str(log)])
    assert {w["role"] for w in found["warnings"]} == {"warning", "teardown", "went_on"}
    doc = copy.deepcopy(load("cluster_dead_node_duplicate_rank.json"))
    doc["doctor"]["warnings"] = found["warnings"]
    html = render_html(doc)
    doctor = Page(html[html.index('id="doctor"'):html.index('id="failures"')]).text
    assert "Warnings (suspects, lines the run went past or survived, teardown noise)" in doctor
    assert "SUSPECT NCCL" in doctor and "TEARDOWN NOISE NCCL's proxy service lost a local rank while closing" in doctor
    assert "NOT A FAILURE NCCL warned, and the run went on: Could not find real path" in doctor
    assert doctor.count("→ CONSEQUENCE") == sum(f["role"] == "consequence" for f in doc["doctor"]["findings"])


def test_the_doctors_root_cause_says_who_acts_and_on_which_node(tmp_path):
    from dsv3_preflight.doctor import triage

    log = tmp_path / "node2.log"
    log.write_text("node2: [rank9]: RuntimeError: CUDA error: system not yet initialized\n")
    doc = copy.deepcopy(load("cluster_dead_node_duplicate_rank.json"))
    doc["doctor"] = triage([str(log)])
    html = render_html(doc)
    doctor = Page(html[html.index('id="doctor"'):html.index('id="failures"')]).text
    # worded as the text report words it (reports/doctor_text.py who_acts): one rule, one wording
    assert "who acts: the node's administrator (repair or drain the node) — on node2" in doctor
    old = render_html(load("cluster_dead_node_duplicate_rank.json"))   # a document from before actors: nothing said
    assert "who acts" not in old[old.index('id="doctor"'):old.index('id="failures"')]
