"""gpu.fabric_manager: on NVSwitch systems Fabric Manager runs, matches the driver exactly, and the fabric is up."""
from __future__ import annotations

from typing import Any

from dsv3_preflight import Result, check
from dsv3_preflight.checks.gpu_cuda_init import FM_UNIT, fm_install_commands
from dsv3_preflight.gpu.common import NOT_EXPECTED, join_problems, no_nvml_summary, spans


@check("gpu.fabric_manager", needs=["fabric_manager", "nvml", "profile"], tags=["gpu"], timeout=30)
def fabric_manager(fabric_manager, nvml, profile):
    """NVSwitch system → Fabric Manager active, same version as the driver, Hopper fabric Completed/Success; PCIe-only → not needed."""
    switches = fabric_manager.get("nvswitch") or {}
    service = fabric_manager.get("service") or {}
    gpus = nvml.get("gpus") or []
    fabric_gpus = [g for g in gpus if (g.get("fabric") or {}).get("supported")]
    driver = nvml.get("driver_version") or fabric_manager.get("kernel_module_version")
    fm_version = fabric_manager.get("version")
    evidence: dict[str, Any] = {
        "nvswitch": switches,
        "service": {k: service.get(k) for k in ("source", "active", "state", "enabled", "installed", "processes")},
        "fm_version": fm_version, "fm_version_source": fabric_manager.get("version_source"),
        "driver_version": driver,
        "fabric": {g["index"]: {k: g["fabric"].get(k) for k in ("state_name", "status", "status_name")} for g in fabric_gpus},
        "log_findings": (fabric_manager.get("log") or {}).get("findings", []),
        "log_tail": (fabric_manager.get("log") or {}).get("tail", [])[-15:],
    }
    if not profile.expects_gpus:
        return Result.skipped(NOT_EXPECTED, evidence)
    nvswitch = bool(switches.get("detected")) or bool(fabric_gpus)
    if not nvswitch:
        if gpus or fabric_manager.get("nvidia_pci_gpus"):
            n = len(gpus) or len(fabric_manager.get("nvidia_pci_gpus") or [])
            return Result.passed(f"no NVSwitch on this node ({n} GPUs on PCIe): Fabric Manager not needed", evidence)
        return Result.failed(
            f"no NVIDIA GPU on this node (no NVIDIA PCI device; {no_nvml_summary(nvml)}): cannot tell whether Fabric Manager is needed",
            evidence, "run on a GPU node; install the NVIDIA driver (and on NVSwitch systems the Fabric Manager of the same version)")

    n_switch = len(switches.get("pci") or []) or len([d for d in switches.get("dev_nodes", []) if d != "nvidia-nvswitchctl"])
    what = f"NVSwitch system ({n_switch} NVSwitches)" if n_switch else "NVSwitch system"
    fails: list[str] = []
    warns: list[str] = []
    fixes: list[str] = []
    mismatch_lines = [f for f in evidence["log_findings"] if f.get("kind") == "version_mismatch"]

    if fm_version and driver and fm_version != driver:
        fails.append(f"Fabric Manager {fm_version} does not match driver {driver} (they must be identical)")
        fixes.append(fm_install_commands(driver))
    elif mismatch_lines:
        line = mismatch_lines[-1]
        fails.append(f"Fabric Manager log: FM {line['fm']} does not match driver {line['driver']}")
        fixes.append(fm_install_commands(line["driver"]))
    elif not fm_version:
        warns.append("Fabric Manager version unknown (no nv-fabricmanager --version, no package found)")
    version_bad = bool(fails)

    if service.get("active") is False:
        if service.get("installed") is False:
            fails.append(f"{what} but Fabric Manager is not installed")
            fixes.append(fm_install_commands(driver) if driver else "install nvidia-fabricmanager of exactly the driver's version")
        else:
            because = " (it exits on the version mismatch)" if version_bad else ""
            fails.append(f"{what} but Fabric Manager is {service.get('state') or 'not running'}{because}")
            if not version_bad:
                fixes.append(f"systemctl enable --now {FM_UNIT}\njournalctl -u {FM_UNIT} -n 50 --no-pager   # if it stops again")
    elif service.get("active") is None and not fabric_gpus:
        warns.append(f"{what}: Fabric Manager's state cannot be seen from here ({service.get('state')}; no systemd — in a container?)")
        fixes.append(f"systemctl status {FM_UNIT}   # on the host")

    not_done = [g["index"] for g in fabric_gpus if g["fabric"].get("state") != 3]
    bad_status = [g for g in fabric_gpus if g["fabric"].get("state") == 3 and g["fabric"].get("status")]
    if not_done:
        states = sorted({gpus[i]["fabric"].get("state_name") for i in not_done if i < len(gpus)})
        fails.append(f"GPU fabric registration not completed on GPUs {spans(not_done)} (state {', '.join(states)}): CUDA init will fail with 802")
        fixes.append(f"systemctl restart {FM_UNIT}\njournalctl -u {FM_UNIT} -n 50 --no-pager\nnvidia-smi -q | grep -i -A2 Fabric")
    if bad_status:
        idx = [g["index"] for g in bad_status]
        name, code = bad_status[0]["fabric"].get("status_name"), bad_status[0]["fabric"].get("status")
        shown = name if name and str(code) in str(name) else f"{name}, NVML return {code}" if name else f"NVML return {code}"
        fails.append(f"GPU fabric registration completed with error status on GPUs {spans(idx)} ({shown})")
        fixes.append(f"journalctl -u {FM_UNIT} -n 100 --no-pager   # the failing GPU/link\nsystemctl restart {FM_UNIT}   # or reboot the node")

    for finding in evidence["log_findings"]:
        if finding.get("kind") != "version_mismatch":
            warns.append(f"Fabric Manager log: {finding['meaning']}: {finding['line'][:160]}")

    remediation = "\n".join(dict.fromkeys(fixes)) or None
    evidence["problems"], evidence["warnings"] = fails, warns
    if fails:
        return Result.failed(join_problems(fails), evidence, remediation)
    if warns:
        return Result.warned(join_problems(warns), evidence, remediation)
    done = f"; fabric Completed/Success on {len(fabric_gpus)} GPUs" if fabric_gpus else ""
    seen = f"Fabric Manager {fm_version} {service.get('state') or 'running'}" if service.get("active") else \
        f"Fabric Manager {fm_version} (service not visible here; the GPUs' fabric state shows it ran)"
    return Result.passed(f"{what}: {seen}, same version as the driver{done}", evidence)
