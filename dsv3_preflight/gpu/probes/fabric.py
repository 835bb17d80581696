"""Facts about NVIDIA Fabric Manager and the versions that must agree across nodes.

System boundaries: files under the run's ``replay.sysroot`` (default ``/``) (sysfs PCI devices, /dev, /proc, the FM
log) and the commands ``systemctl``, ``journalctl``, ``nv-fabricmanager``, ``dpkg-query``, ``rpm``
found on ``PATH``; all run as argument lists under a timeout.
"""
from __future__ import annotations

import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

from dsv3_preflight import signals
from dsv3_preflight.facts import LIVE, Replay
from dsv3_preflight.gpu.fm_log import findings, parse_version

# the readers env.torchrun_python's report of another interpreter uses too (standard library only, no torch import)
from dsv3_preflight.host.probes.pyenv_report import dist_version, nccl_wheel
from dsv3_preflight.host.probes.pyenv_report import torch_cuda as torch_cuda_version
from dsv3_preflight.registry import probe

from .nvml import kernel_module_version

NVIDIA_VENDOR = "0x10de"
FM_UNIT = "nvidia-fabricmanager.service"
FM_LOG = "var/log/fabricmanager.log"
LOG_TAIL_LINES = 60
CMD_TIMEOUT = 5.0


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _run(argv: list[str], timeout: float = CMD_TIMEOUT) -> dict[str, Any]:
    """Run a command found on PATH; {found, rc, stdout, stderr} (a timeout is a finding)."""
    exe = shutil.which(argv[0])
    if exe is None:
        return {"found": False, "argv": argv}
    try:
        proc = signals.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"found": True, "argv": argv, "timed_out": True, "rc": None, "stdout": "", "stderr": f"timed out after {timeout:g} s"}
    except OSError as exc:
        return {"found": True, "argv": argv, "rc": None, "stdout": "", "stderr": str(exc)}
    return {"found": True, "argv": argv, "rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr.strip()}


def pci_devices(root: Path) -> list[dict[str, Any]]:
    """NVIDIA PCI functions from sysfs: address, device id, class, and whether it is an NVSwitch (bridge class 0x0680)."""
    devices = []
    base = root / "sys/bus/pci/devices"
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return devices
    for entry in entries:
        if _read(entry / "vendor") != NVIDIA_VENDOR:
            continue
        cls = _read(entry / "class") or ""
        devices.append({
            "address": entry.name,
            "device": _read(entry / "device"),
            "class": cls,
            "kind": "nvswitch" if cls.startswith("0x0680") else "gpu" if cls.startswith("0x03") else "other",
        })
    return devices


def fm_service() -> dict[str, Any]:
    """nvidia-fabricmanager's state from systemd, or (no systemd) whether an nv-fabricmanager process runs."""
    res = _run(["systemctl", "show", FM_UNIT, "--no-pager",
                "--property=LoadState,ActiveState,SubState,UnitFileState,ExecMainStatus,ExecMainPID"])
    service: dict[str, Any] = {"source": None, "active": None}
    if res.get("found") and res.get("rc") == 0:
        props = dict(line.split("=", 1) for line in res["stdout"].splitlines() if "=" in line)
        if props.get("LoadState") and props.get("LoadState") != "not-found":
            service.update(source="systemd", properties=props, active=props.get("ActiveState") == "active",
                           installed=True, state=f"{props.get('ActiveState')} ({props.get('SubState')})",
                           enabled=props.get("UnitFileState"))
            return service
        service.update(source="systemd", installed=False, active=False, state="unit not found", properties=props)
    elif res.get("found"):
        service["systemd_error"] = (res.get("stderr") or "").splitlines()[:2]
    try:
        import psutil

        procs = [p.info for p in psutil.process_iter(["pid", "name", "cmdline"])
                 if (p.info.get("name") or "").startswith("nv-fabricmanage")]
    except Exception as exc:  # noqa: BLE001 - process listing is best effort
        procs, service["process_error"] = [], str(exc)
    if service["source"] is None:
        service.update(source="process", active=bool(procs) or None, state="running" if procs else "no process seen")
    service["processes"] = [{"pid": p["pid"], "cmdline": " ".join(p.get("cmdline") or [])} for p in procs]
    if procs:
        service["active"] = True
    return service


def fm_version() -> dict[str, Any]:
    """FM's version from ``nv-fabricmanager --version``, else from the package manager."""
    res = _run(["nv-fabricmanager", "--version"])
    if res.get("found") and parse_version(res.get("stdout", "") + res.get("stderr", "")):
        return {"version": parse_version(res["stdout"] + res["stderr"]), "source": "nv-fabricmanager --version",
                "output": (res["stdout"] or res["stderr"]).strip()[:300]}
    res = _run(["dpkg-query", "-W", "-f", "${Package} ${Version} ${db:Status-Status}\n", "nvidia-fabricmanager*"])
    if res.get("found") and res.get("rc") == 0:
        for line in res["stdout"].splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "installed" and parse_version(parts[1]):
                return {"version": parse_version(parts[1]), "source": f"dpkg {parts[0]}", "output": line}
    res = _run(["rpm", "-qa", "nvidia-fabric*manager*"])
    if res.get("found") and res.get("rc") == 0 and res["stdout"].strip():
        line = res["stdout"].strip().splitlines()[0]
        return {"version": parse_version(line), "source": "rpm", "output": line}
    return {"version": None, "source": None}


def fm_log(root: Path) -> dict[str, Any]:
    """The tail of FM's log (the file, else the journal) and the known failure lines in it."""
    path = root / FM_LOG
    lines: list[str] | None = None
    source = None
    try:
        lines = path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        source = str(path)
    except OSError as exc:
        error = f"{path}: {exc.strerror or exc}"
        res = _run(["journalctl", "-u", FM_UNIT, "-n", str(LOG_TAIL_LINES), "--no-pager", "-o", "short"])
        if res.get("found") and res.get("rc") == 0 and "-- No entries --" not in res["stdout"]:
            lines, source = res["stdout"].splitlines()[-LOG_TAIL_LINES:], "journalctl -u " + FM_UNIT
        else:
            return {"source": None, "error": error, "tail": [], "findings": []}
    return {"source": source, "tail": lines, "findings": findings(lines)}


@probe("fabric_manager", needs=["replay"], timeout=20)
def fabric_manager(replay: Replay = LIVE) -> dict[str, Any]:
    """NVSwitch presence (sysfs, /dev, /proc), the Fabric Manager service, its version and its log's failures."""
    root = replay.root
    pci = pci_devices(root)
    dev_nodes = sorted(p.name for p in (root / "dev").glob("nvidia-nvswitch*"))
    proc_switches = sorted(p.name for p in (root / "proc/driver/nvidia-nvswitch/devices").glob("*"))
    switches = [d for d in pci if d["kind"] == "nvswitch"]
    detected = bool(switches) or any(n != "nvidia-nvswitchctl" for n in dev_nodes) or bool(proc_switches)
    facts: dict[str, Any] = {
        "nvswitch": {"detected": detected, "pci": switches, "dev_nodes": dev_nodes, "proc_devices": proc_switches},
        "nvidia_pci_gpus": [d for d in pci if d["kind"] == "gpu"],
        "kernel_module_version": kernel_module_version(root),
        "service": fm_service(),
        "log": fm_log(root),
    }
    version = fm_version()
    facts["version"] = version.get("version")
    facts["version_source"] = version.get("source")
    facts["version_output"] = version.get("output")
    return facts


# -- versions -------------------------------------------------------------------------

PACKAGES = ("torch", "deepspeed", "transformers", "peft", "accelerate", "ray")
@probe("versions", needs=["nvml", "fabric_manager"], timeout=15)
def versions(nvml, fabric_manager) -> dict[str, Any]:
    """Versions that must be identical on every node: driver, FM, CUDA, torch and its NCCL, DeepSpeed, …"""
    nccl, nccl_source = nccl_wheel()
    return {
        "driver": nvml.get("driver_version"),
        "kernel_module": fabric_manager.get("kernel_module_version"),
        "fabric_manager": fabric_manager.get("version"),
        "cuda_driver": nvml.get("cuda_driver_version_str"),
        "cuda_runtime": torch_cuda_version(),
        "nccl": nccl,
        "nccl_source": nccl_source,
        "python": platform.python_version(),
        **{pkg: dist_version(pkg) for pkg in PACKAGES},
    }
