"""A recorded GPU machine, stood up at the hardware boundary only, for the real GPU probes to read.

From a machine file under tests/data/gpu/machines/ it builds:
- NVML: the recorded document, served by dsv3_preflight.gpu.probes.replay ($DSV3_PREFLIGHT_NVML_REPLAY);
- libcuda: a real shared library compiled with gcc, whose cuInit/cuDeviceGetCount return the recorded
  codes ($DSV3_PREFLIGHT_LIBCUDA; its file name carries the recorded driver version as libcuda.so.X does);
- a sysroot with sysfs PCI functions, /dev nodes, /proc/driver/nvidia/version and the FM log
  ($DSV3_PREFLIGHT_SYSROOT);
- PATH holding only the recorded commands (systemctl, nv-fabricmanager) as scripts printing their output.
The probes then run unchanged: ctypes, the child process and its timeout, file reading, subprocesses.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data" / "gpu"
MACHINES = DATA / "machines"
#: recorded NVML documents of real machines' health (nvidia-smi -q and friends, converted; see each "provenance")
HEALTH = DATA / "health"
#: recorded kernel logs with Xid lines (each file's first lines say where it was published)
KMSG = DATA / "kmsg"

FAKE_LIBCUDA_C = r"""
#include <stdlib.h>
#include <unistd.h>
static int env_int(const char *name, int dflt) { const char *v = getenv(name); return v ? atoi(v) : dflt; }
int cuDriverGetVersion(int *v) { *v = env_int("FAKE_CUDA_DRIVER_VERSION", 12020); return 0; }
int cuInit(unsigned int flags) {
    int hang = env_int("FAKE_CUINIT_SLEEP_S", 0);
    if (hang) sleep(hang);
    return env_int("FAKE_CUINIT_RC", 0);
}
int cuDeviceGetCount(int *count) { *count = env_int("FAKE_CUDA_DEVICE_COUNT", 0); return 0; }
"""


def compile_libcuda(directory: Path) -> Path:
    """gcc -shared a libcuda whose answers come from FAKE_* environment variables (the child inherits them)."""
    if shutil.which("gcc") is None:
        import pytest

        pytest.skip("gcc is not installed: cannot build the stand-in libcuda")
    directory.mkdir(parents=True, exist_ok=True)
    src = directory / "fake_libcuda.c"
    src.write_text(FAKE_LIBCUDA_C)
    out = directory / "libcuda.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O0", "-o", str(out), str(src)], check=True, timeout=60,
                   capture_output=True)
    return out


def load_machine(name: str) -> dict[str, Any]:
    return json.loads((MACHINES / f"{name}.json").read_text())


@dataclass
class Machine:
    name: str
    doc: dict[str, Any]
    root: Path
    env: dict[str, str]


def stand_up(name: str, tmp: Path, libcuda: Path) -> Machine:
    """Build the recorded machine's boundary under tmp; returns the environment the probes need."""
    doc = load_machine(name)
    root = tmp / "root"
    for dev in doc.get("sysfs_pci", []):
        d = root / "sys/bus/pci/devices" / dev["address"]
        d.mkdir(parents=True)
        for key in ("vendor", "device", "class"):
            (d / key).write_text(dev[key] + "\n")
    (root / "dev").mkdir(parents=True, exist_ok=True)
    for node in doc.get("dev_nodes", []):
        (root / "dev" / node).write_text("")
    if doc.get("proc_driver_version"):
        p = root / "proc/driver/nvidia/version"
        p.parent.mkdir(parents=True)
        p.write_text(doc["proc_driver_version"])
    if doc.get("fm_log"):
        p = root / "var/log/fabricmanager.log"
        p.parent.mkdir(parents=True)
        p.write_text("\n".join(doc["fm_log"]) + "\n")
    bindir = tmp / "bin"
    bindir.mkdir()
    for cmd, output in (doc.get("commands") or {}).items():
        out = bindir / f"{cmd}.out"
        out.write_text(output)
        script = bindir / cmd
        script.write_text(f"#!/bin/sh\n/bin/cat '{out}'\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    replay = tmp / "nvml.json"
    replay.write_text(json.dumps(doc["nvml"]))
    env = {"DSV3_PREFLIGHT_NVML_REPLAY": str(replay), "DSV3_PREFLIGHT_SYSROOT": str(root), "PATH": str(bindir)}
    if doc.get("kernel_log"):
        env["DSV3_PREFLIGHT_KMSG_REPLAY"] = str(KMSG / doc["kernel_log"])
    lib = doc.get("libcuda")
    if lib:
        named = tmp / "lib" / f"libcuda.so.{lib['file_version']}"
        named.parent.mkdir()
        shutil.copy2(libcuda, named)
        env.update(DSV3_PREFLIGHT_LIBCUDA=str(named), FAKE_CUINIT_RC=str(lib["cuInit"]),
                   FAKE_CUDA_DEVICE_COUNT=str(lib["device_count"]), FAKE_CUDA_DRIVER_VERSION=str(lib["cuda_version"]))
    else:
        env["DSV3_PREFLIGHT_LIBCUDA"] = str(tmp / "lib" / "libcuda.so.1")  # absent, as on a host without the driver
    return Machine(name, doc, root, env)


def gather(machine: Machine, monkeypatch) -> dict[str, Any]:
    """Run the real probes against the stood-up machine; the torch runtime answer is the recorded one
    (this machine's torch is a CPU build), interpreted by the probe's own code."""
    from dsv3_preflight.gpu.probes import fabric as gpu_fabric
    from dsv3_preflight.gpu.probes import nvml as gpu

    for key, value in machine.env.items():
        monkeypatch.setenv(key, value)
    nvml = gpu.nvml.gather()
    fm = gpu_fabric.fabric_manager.gather()
    cuda_init = {
        "driver": gpu.driver_api_init(timeout=15),
        "runtime": gpu.interpret_torch_child(machine.doc["torch_child"]),
        "kernel_module_version": gpu.kernel_module_version(),
        "env": {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"), "CUDA_DEVICE_ORDER": os.environ.get("CUDA_DEVICE_ORDER"),
                "LD_LIBRARY_PATH": os.environ.get("LD_LIBRARY_PATH")},
    }
    return {"nvml": nvml, "fabric_manager": fm, "cuda_init": cuda_init}


def profile(**changes: Any):
    """The job's default profile (3 × 8 GPUs), with changes."""
    from dsv3_preflight.profile import resolve_profile

    p = resolve_profile(environ={})
    return p.with_values("test", **changes) if changes else p


def cpu_profile():
    from dsv3_preflight.profile import resolve_profile

    return resolve_profile(environ={}, profile_name="cpu")


# -- recorded health documents (NVML only) and kernel logs ------------------------------------------

def health_doc(name: str) -> dict[str, Any]:
    return json.loads((HEALTH / f"{name}.json").read_text())


def gather_nvml(name: str, **device_changes: Any) -> dict[str, Any]:
    """The nvml fact the real probe builds from a recorded health document (NVML replayed), with changes to
    devices of the *document* (``g3={"compute_mode": 3}``) for variants of a recorded machine."""
    from dsv3_preflight.gpu.probes.nvml import nvml_facts
    from dsv3_preflight.gpu.probes.replay import NvmlReplay

    doc = health_doc(name)["nvml"]
    for key, changes in device_changes.items():
        doc["devices"][int(key[1:])].update(changes)
    return nvml_facts(NvmlReplay(doc))


def gather_kernel_log(name: str, monkeypatch) -> dict[str, Any]:
    """The kernel_xid fact the real probe builds from a recorded kernel log ($DSV3_PREFLIGHT_KMSG_REPLAY)."""
    from dsv3_preflight.gpu.probes.kernel_log import kernel_xid
    from dsv3_preflight.gpu.probes.replay import KMSG_REPLAY_ENV

    monkeypatch.setenv(KMSG_REPLAY_ENV, str(KMSG / f"{name}.log"))
    return kernel_xid.gather()


# -- red scenarios for tests/reports/test_remediations_paste.py, recorded by the CLI ----------------------------

HEALTH_CHECKS = ("gpu.memory_errors", "gpu.pcie_link", "gpu.nvlink", "gpu.clocks", "gpu.modes", "gpu.reset_pending")

#: scenario name → (lab machine, or a health document's NVML; its kernel log; the checks run; what it is)
SCENARIOS: dict[str, dict[str, Any]] = {
    "gpu_h100_fabric_in_progress": {
        "machine": "h100_fabric_in_progress", "only": ["gpu.*"], "skip": ["gpu.xid"],
        "what": "an 8x H100 NVSwitch node whose fabric is still registering (Fabric State In Progress; cuInit returns 802), "
                "the H100 of issue 16's red runs"},
    "gpu_a100_fm_stopped": {
        "machine": "a100_nvswitch_fm_stopped", "only": ["gpu.*"], "skip": ["gpu.xid"],
        "what": "an 8x A100 NVSwitch node with Fabric Manager inactive (dead): CUDA error 802"},
    "gpu_a100_fm_version_off": {
        "machine": "a100_nvswitch_fm_version_off", "only": ["gpu.*"], "skip": ["gpu.xid"],
        "what": "an 8x A100 NVSwitch node whose Fabric Manager is one patch off the driver and exits: CUDA error 802"},
    "gpu_a100_driver_mismatch_803": {
        "machine": "a100_driver_mismatch_803", "only": ["gpu.*"], "skip": ["gpu.xid"],
        "what": "an 8x A100 node after a driver upgrade without reboot: kernel module and libcuda differ, CUDA error 803"},
    "gpu_a10g_pcie_x8": {
        "nvml": "a10g_pcie_x8", "only": list(HEALTH_CHECKS),
        "what": "an A10G whose PCIe link trained at x8 of x16 (NVIDIA/DCGM#232), the GPU health checks"},
    "gpu_a100_mig_enabled": {
        "nvml": "a100_mig_enabled", "only": list(HEALTH_CHECKS),
        "what": "an A100-SXM4-80GB with MIG enabled (influxdata/telegraf#5812), the GPU health checks"},
    "gpu_h100_xid119": {
        "nvml": "h100_sxm_healthy", "kernel_log": "xe9680_h100_xid119.log", "only": list(HEALTH_CHECKS) + ["gpu.xid"],
        "what": "a healthy 8x H100 node's NVML (thamada) with the kernel log of another 8x H100 node (a Dell XE9680, "
                "leptonai/gpud) holding an Xid 119 GSP RPC timeout on a bus NVML does not list here"},
}


def record_scenario(name: str, out: Path, workdir: Path, libcuda: Path | None = None) -> dict[str, Any]:
    """Stand the scenario's recorded machine up and run the CLI against it with --facts-out, as a user records a
    node: ``dsv3-preflight run --profile dsv3 [--only/--skip …] --facts-out F`` under a clean environment. The
    facts document gets a "provenance" saying what the machine is, where its records come from, and the command."""
    import sys

    recipe = SCENARIOS[name]
    if recipe.get("machine"):
        machine = stand_up(recipe["machine"], workdir, libcuda or compile_libcuda(workdir / "cc"))
        env, sources = dict(machine.env), [machine.doc["source"]]
    else:
        doc = health_doc(recipe["nvml"])
        replay = workdir / "nvml.json"
        replay.parent.mkdir(parents=True, exist_ok=True)
        replay.write_text(json.dumps(doc["nvml"]))
        (workdir / "root").mkdir(exist_ok=True)
        (workdir / "bin").mkdir(exist_ok=True)
        env = {"DSV3_PREFLIGHT_NVML_REPLAY": str(replay), "DSV3_PREFLIGHT_SYSROOT": str(workdir / "root"),
               "PATH": str(workdir / "bin")}
        sources = [f"{doc['source']} ({', '.join(doc['provenance'])})"]
    if recipe.get("kernel_log"):
        env["DSV3_PREFLIGHT_KMSG_REPLAY"] = str(KMSG / recipe["kernel_log"])
        sources.append(f"kernel log {recipe['kernel_log']}: " + (KMSG / recipe["kernel_log"]).read_text().splitlines()[1].lstrip("# "))
    env["HOME"] = str(workdir)
    argv = [sys.executable, "-m", "dsv3_preflight", "run", "--profile", "dsv3", "--no-report", "--no-color", "-q",
            "--facts-out", str(out)]
    for check in recipe.get("only", []):
        argv += ["--only", check]
    for check in recipe.get("skip", []):
        argv += ["--skip", check]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, cwd=workdir)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"recording {name} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    facts = json.loads(out.read_text())
    shown = " ".join(a if a != str(out) else f"{name}.facts.json" for a in argv[3:])
    facts = {"provenance": (f"recorded with tests/gpu_lab.py record_scenario('{name}'): `dsv3-preflight {shown}` under a clean "
                            f"environment against a recorded machine stood up at the hardware boundary only: {recipe['what']}. "
                            "Machine records: " + " | ".join(sources) + ". The torch runtime facts are the recording host's "
                            "(a CPU build), not the machine's."),
             **facts}
    out.write_text(json.dumps(facts, indent=1) + "\n")
    return facts


if __name__ == "__main__":  # python tests/gpu_lab.py record [NAME …]: (re)record the GPU red scenarios
    import sys
    import tempfile

    names = sys.argv[2:] or list(SCENARIOS)
    scenarios = Path(__file__).resolve().parent / "data" / "scenarios"
    for scenario in names:
        with tempfile.TemporaryDirectory() as tmp:
            record_scenario(scenario, scenarios / f"{scenario}.facts.json", Path(tmp))
        print("recorded", scenario)
