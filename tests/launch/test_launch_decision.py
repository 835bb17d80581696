"""The gate's decision and its words, on result documents as `run --json` writes them (pure)."""
from pathlib import Path

import pytest

from dsv3_preflight.document import build_document
from dsv3_preflight.launch.command import build_command, derive_env
from dsv3_preflight.launch.gate import is_go, launch_log_text, red_line
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.result import Result


def doc(strict=False, deselected=None, **counts):
    """A result document as `run` builds it, with that many results of each status."""
    make = {"pass": lambda: Result.passed("ok"), "warn": lambda: Result.warned("meh"), "fail": lambda: Result.failed("bad"),
            "skip": lambda: Result.skipped("n/a"), "error": lambda: Result._engine_error("boom")}
    results = [make[status]().stamped(name=f"x.{status}{i}", node="n", duration_s=0.0)
               for status, n in counts.items() for i in range(n)]
    return build_document(mode="node", profile={"name": "cpu", "values": {}, "sources": {}}, nodes=[],
                          results=results, deselected=deselected, strict=strict)


@pytest.mark.parametrize("document, go", [
    (doc(**{"pass": 3}), True),
    (doc(**{"pass": 3, "warn": 1}), True),          # WARN does not block unless --strict
    (doc(strict=True, **{"warn": 1}), False),
    (doc(**{"fail": 1}), False),
    (doc(**{"error": 2}), False),
    (doc(), False),                                  # nothing selected
])
def test_only_a_go_verdict_with_exit_code_zero_opens_the_gate(document, go):
    assert document["exit_code"] == (0 if go else 5 if not document["results"] else 1)
    assert is_go(document, document["exit_code"]) is go


def test_a_document_edited_to_say_go_over_red_results_keeps_the_gate_closed():
    red = doc(**{"pass": 1, "fail": 1})
    assert not is_go({**red, "verdict": "GO", "exit_code": 0}, 0)


def test_a_green_document_with_a_nonzero_exit_keeps_the_gate_closed():
    assert not is_go(doc(**{"pass": 1}), 3)


@pytest.mark.parametrize("document, code, why", [
    (doc(**{"fail": 2, "error": 1}), 1, "2 FAIL, 1 ERROR"),
    (doc(strict=True, **{"warn": 1}), 1, "1 WARN under --strict"),
    (doc(), 5, "no check was selected"),
])
def test_red_line_says_why_and_where_the_report_is(document, code, why):
    assert red_line(document, code, [Path("r/p.json"), Path("r/p.html")]) == (
        f"dsv3-preflight launch: NO-GO ({why}): torchrun not started; report: r/p.json")


def test_red_line_without_a_report_says_so():
    assert red_line(doc(**{"fail": 1}), 1, []).endswith("report: not written (--no-report); the results are above")


def test_launch_log_records_skips_warnings_exports_and_the_command():
    profile = resolve_profile(environ={"MASTER_ADDR": "10.0.0.1"}, profile_name="dsv3")
    route = {"nic_route": {"ifname": "eth0", "target": "10.0.0.1",
                           "interfaces": [{"name": "eth0", "index": 2, "ipv4": ["10.0.0.5"]}]}}
    derived, notes = derive_env(profile, route)
    command = build_command(profile, ["train.py"], environ={"GLOO_SOCKET_IFNAME": "ib0"}, derived=derived,
                            torchrun=["torchrun"], notes=notes)
    text = launch_log_text(doc(deselected={"gpu.fabric_manager": "deselected by --skip gpu.fabric_manager"}, **{"pass": 5}),
                           0, [Path("r.json")], command, "GO: exec torchrun (pid 1)")
    lines = text.splitlines()
    assert lines[1] == "# preflight: GO (exit 0; 5 pass)"
    assert lines[2] == "# report: r.json"
    assert lines[3] == "# skipped by request: gpu.fabric_manager: deselected by --skip gpu.fabric_manager"
    assert lines[4].startswith("# warning: GLOO_SOCKET_IFNAME=ib0 is yours and is kept")
    assert lines[5:] == [
        "export NCCL_SOCKET_IFNAME=eth0",
        "export CUDA_DEVICE_ORDER=PCI_BUS_ID",
        "# GLOO_SOCKET_IFNAME=ib0 kept from your environment (derived: eth0)",
        "torchrun --nnodes=3 --nproc_per_node=8 --node_rank=0 --master_addr=10.0.0.1 --master_port=39500 --max_restarts=0 train.py",
        "# GO: exec torchrun (pid 1)",
    ]
