"""The gate's decision and its words, on result documents as `run --json` writes them (pure)."""
from pathlib import Path

import pytest

from dsv3_preflight.launch.command import build_command, derive_env
from dsv3_preflight.launch.gate import is_go, launch_log_text, red_line
from dsv3_preflight.profile import resolve_profile


def doc(verdict="GO", strict=False, deselected=None, **counts):
    base = {"pass": 0, "warn": 0, "fail": 0, "skip": 0, "error": 0}
    return {"verdict": verdict, "strict": strict, "counts": {**base, **counts}, "deselected": deselected or {}}


@pytest.mark.parametrize("document, code, go", [
    (doc(**{"pass": 3}), 0, True),
    (doc(**{"pass": 3, "warn": 1}), 0, True),          # WARN does not block unless --strict
    (doc("NO-GO", strict=True, **{"warn": 1}), 1, False),
    (doc("NO-GO", **{"fail": 1}), 1, False),
    (doc("NO-GO", **{"error": 2}), 1, False),
    (doc("NO-GO"), 5, False),                          # nothing selected
])
def test_only_exit_code_zero_opens_the_gate(document, code, go):
    assert is_go(document, code) is go


@pytest.mark.parametrize("document, code, why", [
    (doc("NO-GO", **{"fail": 2, "error": 1}), 1, "2 FAIL, 1 ERROR"),
    (doc("NO-GO", strict=True, **{"warn": 1}), 1, "WARN under --strict"),
    (doc("NO-GO"), 5, "nothing selected"),
])
def test_red_line_says_why_and_where_the_report_is(document, code, why):
    assert red_line(document, code, [Path("r/p.json"), Path("r/p.html")]) == (
        f"dsv3-preflight launch: NO-GO ({why}): torchrun not started; report: r/p.json")


def test_red_line_without_a_report_says_so():
    assert red_line(doc("NO-GO", **{"fail": 1}), 1, []).endswith("report: not written (--no-report); the results are above")


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
