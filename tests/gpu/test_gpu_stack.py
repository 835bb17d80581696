"""The GPU stack checks on recorded machines: real probes read the machine's boundary, real judges decide."""
from __future__ import annotations

import copy
import json

import pytest
from gpu_lab import compile_libcuda, cpu_profile, gather, profile, stand_up

from dsv3_preflight.checks.gpu_cuda_init import cuda_init as cuda_init_check
from dsv3_preflight.checks.gpu_fabric_manager import fabric_manager as fm_check
from dsv3_preflight.checks.gpu_inventory import inventory as inventory_check
from dsv3_preflight.result import Status


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory):
    return compile_libcuda(tmp_path_factory.mktemp("libcuda"))


@pytest.fixture
def machine(tmp_path, libcuda, monkeypatch):
    def build(name):
        return gather(stand_up(name, tmp_path, libcuda), monkeypatch)
    return build


def judge_all(facts, prof=None):
    prof = prof or profile()
    return {
        "cuda_init": cuda_init_check(cuda_init=facts["cuda_init"], nvml=facts["nvml"], fabric_manager=facts["fabric_manager"], profile=prof),
        "fabric_manager": fm_check(fabric_manager=facts["fabric_manager"], nvml=facts["nvml"], profile=prof),
        "inventory": inventory_check(nvml=facts["nvml"], profile=prof),
    }


# -- the probes read the recorded boundary as on the real machine ---------------------------------

def test_nvml_probe_reads_driver_gpus_and_a100_fabric_not_supported(machine):
    facts = machine("a100_nvswitch_fm_running")
    nvml = facts["nvml"]
    assert nvml["available"] and nvml["driver_version"] == "535.129.03" and nvml["cuda_driver_version_str"] == "12.2"
    assert [g["pci_bus_id"] for g in nvml["gpus"]][:2] == ["00000000:07:00.0", "00000000:0F:00.0"]
    assert nvml["gpus"][0]["fabric"]["supported"] is False and "Not Supported" in nvml["gpus"][0]["fabric"]["error"]
    assert nvml["gpus"][0]["retired_pages_dbe"] is None and nvml["gpus"][0]["remapped_rows"]["pending"] is False


def test_fabric_probe_finds_nvswitches_service_version_and_kernel_module(machine):
    fm = machine("a100_nvswitch_fm_running")["fabric_manager"]
    assert fm["nvswitch"]["detected"] and len(fm["nvswitch"]["pci"]) == 6
    assert fm["service"]["source"] == "systemd" and fm["service"]["active"] is True
    assert fm["version"] == "535.129.03" and fm["version_source"] == "nv-fabricmanager --version"
    assert fm["kernel_module_version"] == "535.129.03"


def test_driver_init_runs_cuinit_through_ctypes_in_a_child(machine):
    driver = machine("a100_nvswitch_fm_stopped")["cuda_init"]["driver"]
    assert driver["loaded"] and driver["cuInit"] == 802 and driver["code"] == 802
    assert driver["decoded"]["name"] == "CUDA_ERROR_SYSTEM_NOT_READY"
    assert driver["library_version"] == "535.129.03"  # read from the loaded file's name, like libcuda.so.535.129.03


def test_torch_802_warning_is_decoded_to_its_code(machine):
    runtime = machine("a100_nvswitch_fm_stopped")["cuda_init"]["runtime"]
    assert runtime["code"] == 802 and runtime["ok"] is False


# -- verdicts ---------------------------------------------------------------------------------

def test_healthy_a100_nvswitch_node_passes_every_gpu_check(machine):
    results = judge_all(machine("a100_nvswitch_fm_running"))
    assert {k: r.status for k, r in results.items()} == {k: Status.PASS for k in results}
    assert "Fabric Manager 535.129.03 active (running)" in results["fabric_manager"].summary
    assert "8 × NVIDIA A100-SXM4-80GB" in results["inventory"].summary


def test_802_with_fabric_manager_stopped_says_start_fabric_manager(machine):
    results = judge_all(machine("a100_nvswitch_fm_stopped"))
    r = results["cuda_init"]
    assert r.status is Status.FAIL and r.cause == "gpu.fm_stopped" and r.actor.value == "node"
    assert "802 CUDA_ERROR_SYSTEM_NOT_READY" in r.summary and "Fabric Manager is inactive (dead)" in r.summary
    assert "systemctl enable --now nvidia-fabricmanager" in r.remediation
    assert results["fabric_manager"].status is Status.FAIL
    assert "Fabric Manager is inactive (dead)" in results["fabric_manager"].summary


def test_802_with_fabric_manager_one_patch_off_says_install_the_drivers_exact_version(machine):
    results = judge_all(machine("a100_nvswitch_fm_version_off"))
    r = results["cuda_init"]
    assert r.status is Status.FAIL and r.cause == "gpu.fm_version_mismatch"
    assert "Fabric Manager 535.183.01 does not match driver 535.183.06" in r.summary
    assert "nvidia-fabricmanager-535=535.183.06-1" in r.remediation
    fm = results["fabric_manager"]
    assert fm.status is Status.FAIL and "535.183.01 does not match driver 535.183.06" in fm.summary
    assert fm.evidence["log_findings"][0]["kind"] == "version_mismatch"
    assert "systemctl enable --now" in fm.remediation and "nvidia-fabricmanager-535=535.183.06-1" in fm.remediation


def test_803_names_kernel_module_and_libcuda_versions_and_says_reboot(machine):
    r = judge_all(machine("a100_driver_mismatch_803"))["cuda_init"]
    assert r.status is Status.FAIL and r.cause == "gpu.driver_mismatch"
    assert "kernel module 535.129.03, user-space libcuda 535.154.05" in r.summary
    assert r.remediation.startswith("reboot")


def test_h100_fabric_completed_passes(machine):
    results = judge_all(machine("h100_fabric_completed"))
    assert results["fabric_manager"].status is Status.PASS
    assert "fabric Completed/Success on 8 GPUs" in results["fabric_manager"].summary
    assert results["cuda_init"].status is Status.PASS and results["inventory"].status is Status.PASS


def test_h100_fabric_in_progress_fails_fabric_and_explains_802(machine):
    results = judge_all(machine("h100_fabric_in_progress"))
    fm = results["fabric_manager"]
    assert fm.status is Status.FAIL and "not completed on GPUs 0–7 (state In Progress)" in fm.summary
    assert results["cuda_init"].status is Status.FAIL and results["cuda_init"].cause == "gpu.fabric_not_ready"
    assert fm.cause == "gpu.fabric_not_ready" and fm.remediation == results["cuda_init"].remediation  # one cause, one fix


def test_h100_fabric_completed_with_error_status_names_the_gpu(machine):
    fm = judge_all(machine("h100_fabric_completed_error"))["fabric_manager"]
    assert fm.status is Status.FAIL
    assert "completed with error status on GPUs 5 (NVML return 999)" in fm.summary  # said once, not "(NVML return 999, NVML return 999)"


def test_pcie_box_without_nvswitch_passes_fabric_manager_as_not_needed(machine):
    results = judge_all(machine("pcie_a100_no_nvswitch"))
    assert results["fabric_manager"].status is Status.PASS and "not needed" in results["fabric_manager"].summary
    assert results["fabric_manager"].evidence["service"]["installed"] is False
    assert results["inventory"].status is Status.PASS and results["cuda_init"].status is Status.PASS


def test_no_driver_fails_honestly_under_the_job_profile(machine):
    facts = machine("no_driver")
    assert facts["nvml"]["error"] == "NVML Shared Library Not Found" and facts["nvml"]["error_code"] == 12
    results = judge_all(facts)
    assert all(r.status is Status.FAIL for r in results.values())
    assert results["inventory"].summary == "no NVIDIA driver/NVML: NVML Shared Library Not Found"
    assert results["cuda_init"].summary.startswith("no NVIDIA driver: cannot load")


def test_no_driver_is_skipped_under_the_cpu_profile(machine):
    results = judge_all(machine("no_driver"), cpu_profile())
    assert all(r.status is Status.SKIP and r.summary.startswith("profile expects no GPUs") for r in results.values())


# -- inventory variations on a recorded healthy node --------------------------------------------

@pytest.fixture(scope="module")
def healthy_nvml(tmp_path_factory, libcuda):
    mp = pytest.MonkeyPatch()
    try:
        return gather(stand_up("a100_nvswitch_fm_running", tmp_path_factory.mktemp("m"), libcuda), mp)["nvml"]
    finally:
        mp.undo()


def _variant(nvml, **per_gpu):
    nvml = copy.deepcopy(nvml)
    for index, changes in per_gpu.items():
        nvml["gpus"][int(index[1:])].update(changes)
    return nvml


@pytest.mark.parametrize("changes, status, text", [
    ({"g0": {"persistence_mode": False}, "g1": {"persistence_mode": False}}, Status.WARN, "persistence mode is off on GPUs 0–1"),
    ({"g2": {"processes": [{"pid": 4242, "used_memory_bytes": 1536 << 20}]}}, Status.FAIL, "pid 4242 on GPU 2 (1536 MiB)"),
    ({"g5": {"name": "NVIDIA A10"}}, Status.FAIL, "GPUs 5 are NVIDIA A10, not one of"),
])
def test_inventory_flags_unhealthy_or_busy_gpus(healthy_nvml, changes, status, text):
    r = inventory_check(nvml=_variant(healthy_nvml, **changes), profile=profile())
    assert r.status is status and text in r.summary, r.summary


def test_inventory_names_the_pid_to_kill(healthy_nvml):
    r = inventory_check(nvml=_variant(healthy_nvml, g2={"processes": [{"pid": 4242, "used_memory_bytes": None}]}), profile=profile())
    assert "kill 4242" in r.remediation


def test_inventory_fails_when_a_gpu_is_missing(healthy_nvml):
    nvml = copy.deepcopy(healthy_nvml)
    del nvml["gpus"][7]
    r = inventory_check(nvml=nvml, profile=profile())
    assert r.status is Status.FAIL and r.summary.startswith("7 GPUs on this node, the profile expects 8")


def test_recorded_machine_files_say_where_their_format_comes_from():
    from gpu_lab import DATA, MACHINES
    files = list(MACHINES.glob("*.json")) + list(DATA.glob("*.json"))
    assert len(files) >= 10
    for f in files:
        assert "source" in json.loads(f.read_text()), f


# -- root causes of the other CUDA codes, judged on the recorded healthy node with one fact changed ----

@pytest.fixture(scope="module")
def healthy_facts(tmp_path_factory, libcuda):
    mp = pytest.MonkeyPatch()
    try:
        return gather(stand_up("a100_nvswitch_fm_running", tmp_path_factory.mktemp("h"), libcuda), mp)
    finally:
        mp.undo()


@pytest.mark.parametrize("code, env, cause, summary, fix", [
    (804, {"LD_LIBRARY_PATH": "/usr/local/cuda/compat:/usr/lib"}, "gpu.cuda_compat",
     "(LD_LIBRARY_PATH has /usr/local/cuda/compat)", "grep -v compat"),
    (100, {"CUDA_VISIBLE_DEVICES": ""}, "gpu.visible_devices", "CUDA_VISIBLE_DEVICES='' hides every GPU",
     "export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7"),
    (999, {}, "gpu.unknown_error", "unknown error", "Xid"),
    (35, {}, "gpu.driver_too_old", "older than torch's CUDA runtime", "download.pytorch.org"),
])
def test_other_cuda_codes_get_their_own_verdict(healthy_facts, code, env, cause, summary, fix):
    facts = copy.deepcopy(healthy_facts)
    facts["cuda_init"]["driver"].update(code=code, cuInit=code)
    facts["cuda_init"]["env"].update(env)
    r = judge_all(facts)["cuda_init"]
    assert r.status is Status.FAIL and r.cause == cause
    assert summary in r.summary and fix in r.remediation


def test_cpu_only_torch_is_told_to_install_a_cuda_build_of_the_same_version(healthy_facts):
    """Unpinned, `pip install torch --index-url .../cu121` silently swaps torch for the newest that index holds."""
    facts = copy.deepcopy(healthy_facts)
    facts["cuda_init"]["runtime"].update(torch_version="2.4.0+cpu", cuda_built=None, device_count=0)
    r = judge_all(facts)["cuda_init"]
    assert r.status is Status.FAIL and "torch 2.4.0+cpu is a CPU-only build" in r.summary
    assert r.remediation.startswith(
        "pip install --force-reinstall torch==2.4.0 --index-url https://download.pytorch.org/whl/cu121   # a CUDA build of the same torch; "
        "the driver supports CUDA 12.2")


def test_driver_older_than_torchs_cuda_gets_a_pasteable_pinned_command(healthy_facts):
    facts = copy.deepcopy(healthy_facts)
    facts["cuda_init"]["driver"].update(code=35, cuInit=35)
    facts["cuda_init"]["runtime"].update(torch_version="2.7.0+cu128", cuda_built="12.8")
    r = judge_all(facts)["cuda_init"]
    assert r.cause == "gpu.driver_too_old" and "(CUDA 12.2) is older than torch's CUDA runtime (12.8)" in r.summary
    command = r.remediation.splitlines()[0].split("#")[0]
    assert command.split() == ["pip", "install", "--force-reinstall", "torch==2.7.0", "--index-url",
                               "https://download.pytorch.org/whl/cu121"]  # no '<placeholder>' for the shell to read as a redirect


def test_a_hung_driver_init_fails_with_the_wedged_driver_verdict(healthy_facts):
    facts = copy.deepcopy(healthy_facts)
    facts["cuda_init"]["driver"].update(timed_out=True, error="cuInit did not return within 20 s")
    r = judge_all(facts)["cuda_init"]
    assert r.status is Status.FAIL and r.summary.startswith("CUDA driver init hung: cuInit did not return within 20 s")


def test_h100_on_a_driver_without_the_v_fabric_call_falls_back_to_the_first_version():
    from gpu_lab import load_machine

    from dsv3_preflight.gpu.probes.nvml import nvml_facts
    from dsv3_preflight.gpu.probes.replay import NvmlReplay

    doc = load_machine("h100_fabric_completed")["nvml"]
    for d in doc["devices"]:
        d["fabric"]["nvml_error_v"] = 13  # NVML_ERROR_FUNCTION_NOT_FOUND: nvmlDeviceGetGpuFabricInfoV is new in R550
    fabric = nvml_facts(NvmlReplay(doc))["gpus"][0]["fabric"]
    assert fabric["api"] == "nvmlDeviceGetGpuFabricInfo" and fabric["state_name"] == "Completed" and fabric["status_name"] == "Success"


def test_one_missing_driver_is_one_root_cause_with_one_fix_on_all_four_gpu_cards(machine):
    """Four red GPU cards for one missing driver were four alarms; one cause key lets the report collapse them."""
    from paste_lint import paste_problems

    from dsv3_preflight.checks.gpu_rank_mapping import rank_mapping
    from dsv3_preflight.result import Actor

    facts = machine("no_driver")
    results = judge_all(facts)
    results["rank_mapping"] = rank_mapping(nvml=facts["nvml"], env={}, host={"hostname": "gpu-a"}, profile=profile())
    assert {k: (r.status, r.cause, r.actor) for k, r in results.items()} == {
        k: (Status.FAIL, "gpu.no_driver", Actor.NODE) for k in results}
    (fix,) = {r.remediation for r in results.values()}
    assert "NVML Shared Library Not Found" in fix and paste_problems(fix) == []


LAB_MACHINES = ("a100_nvswitch_fm_running", "a100_nvswitch_fm_stopped", "a100_nvswitch_fm_version_off", "a100_driver_mismatch_803",
                "h100_fabric_completed", "h100_fabric_in_progress", "h100_fabric_completed_error", "pcie_a100_no_nvswitch", "no_driver")


@pytest.mark.parametrize("name", LAB_MACHINES)
def test_every_gpu_fix_on_a_recorded_machine_pastes_and_every_problem_says_who_acts(machine, name):
    from paste_lint import paste_problems

    from dsv3_preflight.checks.gpu_rank_mapping import rank_mapping

    facts = machine(name)
    results = judge_all(facts)
    results["rank_mapping"] = rank_mapping(nvml=facts["nvml"], env={"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,6"},
                                           host={"hostname": "gpu-a"}, profile=profile(nproc_per_node=9))
    for key, r in results.items():
        for text in [r.remediation] + [f.fix for f in r.findings]:
            assert paste_problems(text) == [], (key, text)
        if r.status in (Status.FAIL, Status.WARN):
            assert r.actor is not None and all(f.actor for f in r.findings), key
