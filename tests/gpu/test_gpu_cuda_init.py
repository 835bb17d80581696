"""gpu.cuda_init (checks/gpu_cuda_init.py): the root causes of the CUDA codes, judged on recorded machines and on
the recorded healthy node with one fact changed."""
from __future__ import annotations

import copy

import pytest
from gpu_lab import gather, stand_up
from gpu_stack_lab import judge_all, libcuda, machine  # noqa: F401 (pytest fixtures)

from dsv3_preflight.result import Status


def test_803_names_kernel_module_and_libcuda_versions_and_says_reboot(machine):
    r = judge_all(machine("a100_driver_mismatch_803"))["cuda_init"]
    assert r.status is Status.FAIL and r.cause == "gpu.driver_mismatch"
    assert "kernel module 535.129.03, user-space libcuda 535.154.05" in r.summary
    assert r.remediation.startswith("reboot")


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
