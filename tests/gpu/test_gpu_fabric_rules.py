"""Fabric Manager's rules one by one, on facts the real probes gathered from recorded machines (tests/gpu_lab.py),
and the root cause of CUDA error 802 they share with gpu.cuda_init."""
from __future__ import annotations

import copy

import pytest
from gpu_lab import compile_libcuda, gather, stand_up
from paste_lint import paste_problems

from dsv3_preflight.gpu import fabric_rules as fr
from dsv3_preflight.result import Actor, Status

MACHINES = ("a100_nvswitch_fm_running", "a100_nvswitch_fm_stopped", "a100_nvswitch_fm_version_off",
            "h100_fabric_completed", "h100_fabric_in_progress", "h100_fabric_completed_error", "pcie_a100_no_nvswitch",
            "no_driver")


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    libcuda = compile_libcuda(tmp_path_factory.mktemp("libcuda"))
    out = {}
    for name in MACHINES:
        mp = pytest.MonkeyPatch()
        try:
            out[name] = gather(stand_up(name, tmp_path_factory.mktemp(name), libcuda), mp)
        finally:
            mp.undo()
    return out


def view(facts, name, **fm_changes):
    fm = copy.deepcopy(facts[name]["fabric_manager"])
    fm.update(fm_changes)
    return fr.FabricView.of(fm, facts[name]["nvml"])


def test_every_rule_is_silent_on_a_healthy_nvswitch_node(facts):
    for name in ("a100_nvswitch_fm_running", "h100_fabric_completed"):
        v = view(facts, name)
        assert v.nvswitch
        assert [r.__name__ for r in fr.NVSWITCH_RULES if r(v)] == []


def test_rule_gpus_present_names_the_missing_driver_as_the_shared_cause(facts):
    found = fr.rule_gpus_present(view(facts, "no_driver"), facts["no_driver"]["nvml"])
    assert found.status is Status.FAIL and found.cause == "gpu.no_driver" and found.actor is Actor.NODE
    assert "NVML Shared Library Not Found" in found.message and paste_problems(found.fix) == []
    assert fr.rule_gpus_present(view(facts, "pcie_a100_no_nvswitch"), facts["pcie_a100_no_nvswitch"]["nvml"]) is None


def test_rule_version_matches_driver_names_both_versions_and_installs_the_drivers(facts):
    found = fr.rule_version_matches_driver(view(facts, "a100_nvswitch_fm_version_off"))
    assert found.message.startswith("Fabric Manager 535.183.01 does not match driver 535.183.06")
    assert found.cause == "gpu.fm_version_mismatch"
    assert "apt-get install -y --allow-downgrades nvidia-fabricmanager-535=535.183.06-1" in found.fix
    assert paste_problems(found.fix) == []


def test_rule_version_matches_driver_reads_fms_log_when_the_version_is_unknown(facts):
    found = fr.rule_version_matches_driver(view(facts, "a100_nvswitch_fm_version_off", version=None))
    assert found.message.startswith("Fabric Manager 535.183.01 does not match driver 535.183.06 (Fabric Manager's log)")


def test_rule_version_known_warns_when_no_version_can_be_found(facts):
    found = fr.rule_version_known(view(facts, "a100_nvswitch_fm_running", version=None))
    assert found.status is Status.WARN and "version is unknown" in found.message
    assert fr.rule_version_known(view(facts, "a100_nvswitch_fm_running")) is None


def test_rule_service_installed_gives_the_exact_package_of_the_driver(facts):
    fm = facts["a100_nvswitch_fm_running"]["fabric_manager"]
    found = fr.rule_service_installed(view(facts, "a100_nvswitch_fm_running",
                                           service=dict(fm["service"], installed=False, active=False)))
    assert found.cause == "gpu.fm_missing" and "nvidia-fabricmanager-535=535.129.03-1" in found.fix


def test_rule_service_running_says_start_it(facts):
    found = fr.rule_service_running(view(facts, "a100_nvswitch_fm_stopped"))
    assert found.message == "NVSwitch system (6 NVSwitches) but Fabric Manager is inactive (dead)"
    assert found.cause == "gpu.fm_stopped" and found.fix.startswith("systemctl enable --now nvidia-fabricmanager")


def test_rule_service_running_blames_the_version_mismatch_under_its_cause(facts):
    found = fr.rule_service_running(view(facts, "a100_nvswitch_fm_version_off"))
    assert found.message.endswith("(it exits on the version mismatch)") and found.cause == "gpu.fm_version_mismatch"


def test_rule_service_visible_warns_inside_a_container_without_systemd(facts):
    found = fr.rule_service_visible(view(facts, "a100_nvswitch_fm_running",
                                         service={"source": "process", "active": None, "state": "no process seen"}))
    assert found.status is Status.WARN and "cannot be seen from here (no process seen" in found.message
    assert "on the host" in found.fix


def test_rule_service_visible_trusts_the_hopper_fabric_state(facts):
    assert fr.rule_service_visible(view(facts, "h100_fabric_completed",
                                        service={"source": "process", "active": None, "state": "no process seen"})) is None


def test_rule_fabric_completed_names_the_gpus_still_registering(facts):
    found = fr.rule_fabric_completed(view(facts, "h100_fabric_in_progress"))
    assert "not completed on GPUs 0–7 (state In Progress)" in found.message and found.cause == "gpu.fabric_not_ready"


def test_rule_fabric_status_names_the_failed_gpu_once(facts):
    found = fr.rule_fabric_status(view(facts, "h100_fabric_completed_error"))
    assert found.message == "GPU fabric registration completed with error status on GPUs 5 (NVML return 999)"
    assert found.cause == "gpu.fabric_error"


def test_rule_log_findings_warns_on_known_failure_lines_but_not_the_mismatch(facts):
    log = {"tail": [], "findings": [{"kind": "training_failed", "line": "NVLink training failed on link 3",
                                     "meaning": "NVLink training failed: a link or a board problem"},
                                    {"kind": "version_mismatch", "line": "x", "meaning": "y", "fm": "1", "driver": "2"}]}
    found = fr.rule_log_findings(view(facts, "a100_nvswitch_fm_running", log=log))
    assert [f.message for f in found] == ["Fabric Manager log: NVLink training failed: a link or a board problem: "
                                          "NVLink training failed on link 3"]


@pytest.mark.parametrize("name, key, words", [
    ("a100_nvswitch_fm_stopped", "gpu.fm_stopped", "Fabric Manager is inactive (dead)"),
    ("a100_nvswitch_fm_version_off", "gpu.fm_version_mismatch", "Fabric Manager 535.183.01 does not match driver 535.183.06"),
    ("h100_fabric_in_progress", "gpu.fabric_not_ready", "registration not completed on GPUs 0–7"),
    ("h100_fabric_completed_error", "gpu.fabric_error", "registration failed on GPUs 5"),
    ("pcie_a100_no_nvswitch", "gpu.driver_not_ready", "no NVSwitch found"),
])
def test_cause_of_802_shares_the_fabric_managers_cause_and_fix(facts, name, key, words):
    cause = fr.cause_of_802(view(facts, name))
    assert cause.key == key and words in cause.why and paste_problems(cause.fix) == []
    if name == "pcie_a100_no_nvswitch":
        return
    v = view(facts, name)
    findings = [f for rule in fr.NVSWITCH_RULES for f in (lambda out: out if isinstance(out, list) else [out])(rule(v)) if f]
    assert {f.fix for f in findings if f.cause == key} == {cause.fix}  # one cause, one fix, whichever check leads
