"""When `launch --all-nodes` sees a node fail, it runs the doctor on what every node printed and puts the root cause,
who acts and the fix above its closing line (launch/ray_launch.py ``doctor_block``). The nodes' output here is what
a real three-node torchrun job printed in the netns lab (examples/doctor/gloo_host_on_127_0_1_1, see docs/doctor.md);
tests/launch/test_launch_ray.py runs the whole launch through Ray."""
from __future__ import annotations

import subprocess
from pathlib import Path

from dsv3_preflight.doctor import triage
from dsv3_preflight.launch.ray_launch import DOCTOR_HEAD, doctor_block

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "doctor" / "gloo_host_on_127_0_1_1"


def _outputs() -> dict[str, list[str]]:
    return {p.stem: p.read_text().splitlines() for p in sorted(EXAMPLE.glob("node*.log"))}


def test_the_block_names_the_root_cause_who_acts_and_a_fix_that_pastes():
    block = doctor_block(_outputs(), "/runs/lora 7/logs")
    assert block.pop(2) == (DOCTOR_HEAD + "all of it (the error lines, the consequences): dsv3-preflight doctor "
                            "'/runs/lora 7/logs'    # each node writes its log there, on its own machine")
    assert block[0].startswith(DOCTOR_HEAD + "root cause: A Gloo peer published the loopback address 127.0.1.1"), block
    assert "(node node1); 4 consequence(s) in the output of 3 node(s), 123 lines" in block[0]
    assert block[1] == (DOCTOR_HEAD + "who acts: the job's configuration (paste the fix); "
                        "caught before launch by: dsv3-preflight run --only net.nic_route")
    assert block[2] == "   fix: (paste as is)"
    fix = "\n".join(block[3:])
    assert 'getent hosts "$(hostname)"' in fix and "GLOO_SOCKET_IFNAME" in fix
    p = subprocess.run(["bash", "-n"], input=fix, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr


def test_the_doctor_reading_the_launch_console_back_does_not_take_its_own_block_for_the_runs_lines(tmp_path):
    outputs = _outputs()
    console = [f"[node {r} {name}] {line}" for r, (name, lines) in enumerate(outputs.items()) for line in lines]
    closing = "dsv3-preflight launch: [node 1 node1] failed first (torchrun exited with 1); stopped the others; exit 11"
    (tmp_path / "console.log").write_text("\n".join(console + doctor_block(outputs) + [closing]) + "\n")
    (tmp_path / "plain.log").write_text("\n".join(console + [closing]) + "\n")
    with_block, plain = (triage([str(tmp_path / n)]) for n in ("console.log", "plain.log"))
    assert with_block["summary"].split(" in 1 file(s)")[0] == plain["summary"].split(" in 1 file(s)")[0]
    assert [(f["id"], f["count"]) for f in with_block["findings"]] == [(f["id"], f["count"]) for f in plain["findings"]]
    assert with_block["error_lines"] == plain["error_lines"]
    assert with_block["findings"][0]["node"] == "node1"


def test_a_launch_whose_output_shows_no_failure_gets_no_block_and_a_doctor_error_never_raises(tmp_path):
    assert doctor_block({"a": ["rank 0 all_reduce sum 3", "{'loss': 0.5}"], "b": []}) == []
    assert doctor_block({"a": [], "b": []}) == []   # a node that could not start: nothing printed, nothing to read
    block = doctor_block({"a": ["RuntimeError: something nobody has seen before"]}, "logs")
    assert len(block) == 2 and block[0].startswith(DOCTOR_HEAD) and "not recognised" in block[0], block
    assert block[1].startswith(DOCTOR_HEAD + "all of it (the error lines, the consequences): dsv3-preflight doctor logs")


def test_a_node_to_repair_is_named_in_who_acts():
    kmsg = Path(__file__).resolve().parents[1] / "data" / "gpu" / "kmsg" / "ogkm1151_xid79.log"   # a real node's kernel log
    node2 = ["[rank11]: RuntimeError: CUDA error: unspecified launch failure",
             *(line for line in kmsg.read_text().splitlines() if not line.startswith("#"))]
    block = doctor_block({"gpu-node-1": ["rank 3 all_reduce sum 3"], "gpu-node-2": node2})
    assert block[0].startswith(DOCTOR_HEAD + "root cause: GPU fault: Xid 79"), block
    assert block[1].startswith(DOCTOR_HEAD + "who acts: the node's administrator (repair or drain the node) — on gpu-node-2")
