"""The GPU probes' own behaviour at their boundaries: a hung cuInit, a missing libcuda, torch's real answer,
CUDA error decoding, Fabric Manager log parsing, and the whole CLI on a recorded machine."""
from __future__ import annotations

import json
import subprocess
import time

import pytest
from conftest import python_cli
from gpu_lab import compile_libcuda, stand_up
from harness_env import env_without

from dsv3_preflight.gpu.cuda_errors import decode, parse_torch_cuda_error
from dsv3_preflight.gpu.fm_log import findings, parse_version
from dsv3_preflight.gpu.probes.nvml import driver_api_init, torch_runtime_init


@pytest.fixture(scope="module")
def libcuda(tmp_path_factory):
    return compile_libcuda(tmp_path_factory.mktemp("libcuda"))


def test_a_hung_cuinit_is_a_timeout_finding_not_a_hang(libcuda, monkeypatch):
    monkeypatch.setenv("FAKE_CUINIT_SLEEP_S", "30")
    started = time.monotonic()
    out = driver_api_init(str(libcuda), timeout=2)
    assert time.monotonic() - started < 10
    assert out["timed_out"] is True and out["ok"] is False
    assert out["error"] == "cuInit did not return within 2 s"  # the child got past loading libcuda, then hung


def test_missing_libcuda_says_the_loader_error(tmp_path):
    out = driver_api_init(str(tmp_path / "libcuda.so.1"), timeout=10)
    assert out["loaded"] is False and "cannot open shared object file" in out["error"]


@pytest.mark.parametrize("code, name", [(802, "CUDA_ERROR_SYSTEM_NOT_READY"), (803, "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"),
                                        (804, "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE"), (100, "CUDA_ERROR_NO_DEVICE"),
                                        (999, "CUDA_ERROR_UNKNOWN")])
def test_cuinit_codes_are_recorded_with_their_names(libcuda, monkeypatch, code, name):
    monkeypatch.setenv("FAKE_CUINIT_RC", str(code))
    out = driver_api_init(str(libcuda), timeout=10)
    assert out["cuInit"] == code and out["decoded"]["name"] == name and out["ok"] is False


def test_torch_runtime_probe_reports_this_machines_cpu_build():
    out = torch_runtime_init(timeout=120)
    import importlib.metadata as md
    assert out["installed"] is True and out["torch_version"] == md.version("torch")
    assert out["cuda_built"] is None and out["ok"] is False  # a CPU-only torch cannot use GPUs


@pytest.mark.parametrize("text, code", [
    ("CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
     "NumCudaDevices() that might have already set an error? Error 802: system not yet initialized (Triggered internally "
     "at /pytorch/c10/cuda/CUDAFunctions.cpp:109.)", 802),
    ("RuntimeError: Unexpected error from cudaGetDeviceCount(). ... Error 804: forward compatibility was attempted on non supported HW", 804),
    ("RuntimeError: CUDA error: system has unsupported display driver / cuda driver combination", 803),
    ("RuntimeError: Found no NVIDIA driver on your system.", None),
])
def test_torch_error_text_is_decoded_to_the_cuda_code(text, code):
    parsed = parse_torch_cuda_error(text)
    assert (parsed or {}).get("code") == code


def test_decode_explains_802_as_fabric_manager():
    assert "Fabric Manager" in decode(802)["meaning"] and decode(802)["message"] == "system not yet initialized"


def test_fm_log_mismatch_line_is_found_in_both_spellings():
    lines = [
        "Nov 05 13:55:26 node1 nv-fabricmanager[104230]: fabric manager NVIDIA GPU driver interface version 550.127.05 don't match with driver version 550.120. Please update with matching NVIDIA driver package.",
        "[May 16 2025 15:10:21] [INFO] [tid 30042] GPU probe request received from node Id 0",
        "fabric manager NVIDIA GPU driver interface version 550.127.05 doesn't match with driver version 550.120. Please update with the matching NVIDIA driver package.",
    ]
    found = findings(lines)
    assert [(f["kind"], f["fm"], f["driver"]) for f in found] == [("version_mismatch", "550.127.05", "550.120")] * 2


def test_fm_version_is_parsed_from_command_and_package_output():
    assert parse_version("Fabric Manager version is : 535.129.03") == "535.129.03"
    assert parse_version("nvidia-fabricmanager-535 535.129.03-1 installed") == "535.129.03"
    assert parse_version("535.129.03-1") == "535.129.03"


def test_cli_on_a_recorded_fm_stopped_machine_reports_the_802_root_cause(tmp_path, libcuda, clean_env):
    machine = stand_up("a100_nvswitch_fm_stopped", tmp_path, libcuda)
    env = env_without(("DSV3_PREFLIGHT", "FAKE_"), ())
    env.update(machine.env)
    env["PATH"] = machine.env["PATH"]
    facts = tmp_path / "facts.json"
    proc = subprocess.run(python_cli("run", "--only", "gpu.fabric_manager", "--only", "gpu.inventory", "--no-report",
                                     "--facts-out", str(facts)),
                          env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Fabric Manager is inactive (dead)" in proc.stdout
    recorded = json.loads(facts.read_text())["facts"]
    assert recorded["fabric_manager"]["nvswitch"]["detected"] is True
    assert recorded["nvml"]["driver_version"] == "535.129.03"


# ------------------------------------------------------------------ the replay is the run's (issue 43.6)
def _store(replay=None):
    from dsv3_preflight.facts import FactStore
    from dsv3_preflight.profile import resolve_profile
    from dsv3_preflight.registry import load_registry

    profile = resolve_profile(environ={}, profile_name="cpu")
    return FactStore(load_registry(entry_points=False), {"profile": profile}, **({"replay": replay} if replay else {}))


def test_the_gpu_probes_read_the_recording_the_runs_fact_store_holds_not_an_environment_switch(monkeypatch):
    """A recorded machine is injected through the run's fact store (the engine fact `replay`): the probes read it,
    and an environment variable set in the process steers no probe."""
    from gpu_lab import HEALTH, KMSG

    from dsv3_preflight.facts import Replay

    monkeypatch.setenv("DSV3_PREFLIGHT_NVML_REPLAY", str(HEALTH / "a10g_pcie_x8.json"))
    monkeypatch.setenv("DSV3_PREFLIGHT_KMSG_REPLAY", str(KMSG / "gpud_xid13_109.log"))
    store = _store(Replay(nvml=str(HEALTH / "h100_sxm_healthy.json"), kmsg=str(KMSG / "akash_h100_xid_43_31_94.log")))
    store.start(["nvml", "kernel_xid"])
    nvml, xid = store.get("nvml"), store.get("kernel_xid")
    recorded = json.loads((HEALTH / "h100_sxm_healthy.json").read_text())["nvml"]
    assert nvml["driver_version"] == recorded["driver_version"]
    assert [g["name"] for g in nvml["gpus"]] == [d["name"] for d in recorded["devices"]]
    assert xid["source"] == f"replay:{KMSG / 'akash_h100_xid_43_31_94.log'}"


def test_a_cli_run_sets_its_replay_up_from_the_environment_once_when_it_starts(monkeypatch):
    """The CLI's run (run_this_node) reads $DSV3_PREFLIGHT_*_REPLAY into the run's Replay when it starts; what its
    probes read is that Replay."""
    from gpu_lab import HEALTH

    from dsv3_preflight.facts import Replay
    from dsv3_preflight.profile import resolve_profile
    from dsv3_preflight.registry import load_registry
    from dsv3_preflight.runner import run_this_node

    doc = HEALTH / "a10g_pcie_x8.json"
    assert Replay.from_environ({"DSV3_PREFLIGHT_NVML_REPLAY": str(doc)}) == Replay(nvml=str(doc))
    assert Replay(nvml=str(doc)).as_environ() == {"DSV3_PREFLIGHT_NVML_REPLAY": str(doc)}
    monkeypatch.setenv("DSV3_PREFLIGHT_NVML_REPLAY", str(doc))
    registry = load_registry(entry_points=False)
    outcome = run_this_node(registry, [registry.checks["gpu.pcie_link"]], resolve_profile(environ={}, profile_name="cpu"),
                            node="n0", timeout=60)
    recorded = json.loads(doc.read_text())["nvml"]
    assert outcome.entry["facts"]["nvml"]["driver_version"] == recorded["driver_version"]
    assert outcome.results[0].name == "gpu.pcie_link"
