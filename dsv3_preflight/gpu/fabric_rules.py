"""Fabric Manager's rules, each a small pure function of the facts, and the root cause of CUDA error 802.

On NVSwitch systems (HGX/DGX A100, H100, H200) CUDA initialises only after Fabric Manager has configured
the NVSwitch fabric: FM must run, be exactly the driver's version, and (Hopper and newer) every GPU's
fabric registration must have completed with success. Each rule returns a :class:`Finding` (or None)
with its fix and the root-cause key it shares with ``gpu.cuda_init``, whose error 802 these same facts
explain (:func:`cause_of_802`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dsv3_preflight.result import Actor, Finding, failure, warning

from . import remedies
from .common import NO_DRIVER, no_nvml_summary, spans
from .facts import FabricManagerFact, NvmlFact

FM_MISMATCH = "gpu.fm_version_mismatch"
FM_MISSING = "gpu.fm_missing"
FM_STOPPED = "gpu.fm_stopped"
FABRIC_NOT_READY = "gpu.fabric_not_ready"
FABRIC_ERROR = "gpu.fabric_error"
FABRIC_COMPLETED = 3  # NVML_GPU_FABRIC_STATE_COMPLETED


@dataclass(frozen=True)
class FabricView:
    """What the rules need, read once from the ``fabric_manager`` and ``nvml`` facts."""

    switches: Mapping[str, Any]
    service: Mapping[str, Any]
    gpus: Sequence[Mapping[str, Any]]
    fabric_gpus: Sequence[Mapping[str, Any]]
    driver: str | None
    fm_version: str | None
    log_findings: Sequence[Mapping[str, Any]]
    pci_gpus: Sequence[Mapping[str, Any]]

    @classmethod
    def of(cls, fabric_manager: FabricManagerFact, nvml: NvmlFact) -> FabricView:
        gpus = nvml.get("gpus") or []
        return cls(
            switches=fabric_manager.get("nvswitch") or {},
            service=fabric_manager.get("service") or {},
            gpus=gpus,
            fabric_gpus=[g for g in gpus if (g.get("fabric") or {}).get("supported")],
            driver=nvml.get("driver_version") or fabric_manager.get("kernel_module_version"),
            fm_version=fabric_manager.get("version"),
            log_findings=(fabric_manager.get("log") or {}).get("findings", []),
            pci_gpus=fabric_manager.get("nvidia_pci_gpus") or [],
        )

    @property
    def nvswitch(self) -> bool:
        return bool(self.switches.get("detected")) or bool(self.fabric_gpus)

    @property
    def what(self) -> str:
        n = len(self.switches.get("pci") or []) or len(
            [d for d in self.switches.get("dev_nodes", []) if d != "nvidia-nvswitchctl"])
        return f"NVSwitch system ({n} NVSwitches)" if n else "NVSwitch system"

    def mismatch(self) -> tuple[str, str] | None:
        """(FM version, driver version) when they differ: the versions seen, else FM's own log line."""
        if self.fm_version and self.driver and self.fm_version != self.driver:
            return self.fm_version, self.driver
        for found in reversed(self.log_findings):
            if found.get("kind") == "version_mismatch":
                return found["fm"], found["driver"]
        return None

    def not_completed(self) -> list[Mapping[str, Any]]:
        return [g for g in self.fabric_gpus if g["fabric"].get("state") != FABRIC_COMPLETED]

    def completed_with_error(self) -> list[Mapping[str, Any]]:
        return [g for g in self.fabric_gpus if g["fabric"].get("state") == FABRIC_COMPLETED and g["fabric"].get("status")]


def fm_fix_for_mismatch(fm: str, driver: str) -> str:
    return remedies.fm_install(driver)


# -- the rules ---------------------------------------------------------------------------------------------

def rule_gpus_present(view: FabricView, nvml: NvmlFact) -> Finding | None:
    """No GPU in NVML nor on the PCI bus: whether FM is needed cannot be told (the no-driver cause)."""
    if view.nvswitch or view.gpus or view.pci_gpus:
        return None
    return failure(f"no NVIDIA GPU on this node (no NVIDIA PCI device; {no_nvml_summary(nvml)}): "
                   "cannot tell whether Fabric Manager is needed",
                   remedies.install_driver(nvml), actor=Actor.NODE, cause=NO_DRIVER)


def rule_version_matches_driver(view: FabricView) -> Finding | None:
    """FM and the driver must be the very same version; FM refuses to start otherwise."""
    pair = view.mismatch()
    if pair is None:
        return None
    fm, driver = pair
    where = "" if view.fm_version == fm and view.driver == driver else " (Fabric Manager's log)"
    return failure(f"Fabric Manager {fm} does not match driver {driver}{where}: they must be identical",
                   fm_fix_for_mismatch(fm, driver), actor=Actor.NODE, cause=FM_MISMATCH)


def rule_version_known(view: FabricView) -> Finding | None:
    if view.fm_version or view.mismatch():
        return None
    return warning("Fabric Manager's version is unknown (no nv-fabricmanager --version, no package found)",
                   "nv-fabricmanager --version\ndpkg -l 'nvidia-fabricmanager*'   # or: rpm -qa 'nvidia-fabric*manager*'",
                   actor=Actor.NODE)


def rule_service_installed(view: FabricView) -> Finding | None:
    if view.service.get("installed") is not False:
        return None
    return failure(f"{view.what} but Fabric Manager is not installed", _install_fix(view), actor=Actor.NODE,
                   cause=FM_MISSING)


def _install_fix(view: FabricView) -> str:
    return remedies.fm_install(view.driver) if view.driver else remedies.fm_install_unknown_driver()


def rule_service_running(view: FabricView) -> Finding | None:
    """The FM service must be active; when the versions differ, that is why it stopped (same cause, same fix)."""
    if view.service.get("active") is not False or view.service.get("installed") is False:
        return None
    state = view.service.get("state") or "not running"
    pair = view.mismatch()
    if pair:
        return failure(f"{view.what} but Fabric Manager is {state} (it exits on the version mismatch)",
                       fm_fix_for_mismatch(*pair), actor=Actor.NODE, cause=FM_MISMATCH)
    return failure(f"{view.what} but Fabric Manager is {state}", remedies.fm_start(), actor=Actor.NODE, cause=FM_STOPPED)


def rule_service_visible(view: FabricView) -> Finding | None:
    """In a container without systemd the service cannot be seen; the Hopper fabric state still shows it ran."""
    if view.service.get("active") is not None or view.fabric_gpus:
        return None
    return warning(f"{view.what}: Fabric Manager's state cannot be seen from here "
                   f"({view.service.get('state')}; no systemd: a container?)", remedies.fm_status_on_host(),
                   actor=Actor.NODE)


def rule_fabric_completed(view: FabricView) -> Finding | None:
    """Hopper and newer: every GPU's fabric registration reached Completed; CUDA init fails with 802 before."""
    pending = view.not_completed()
    if not pending:
        return None
    states = sorted({str(g["fabric"].get("state_name")) for g in pending})
    return failure(f"GPU fabric registration not completed on GPUs {spans([g['index'] for g in pending])} "
                   f"(state {', '.join(states)}): CUDA init fails with 802 until it does",
                   remedies.fm_restart_for_fabric(), actor=Actor.NODE, cause=FABRIC_NOT_READY)


def rule_fabric_status(view: FabricView) -> Finding | None:
    bad = view.completed_with_error()
    if not bad:
        return None
    name, code = bad[0]["fabric"].get("status_name"), bad[0]["fabric"].get("status")
    shown = name if name and str(code) in str(name) else f"{name}, NVML return {code}" if name else f"NVML return {code}"
    return failure(f"GPU fabric registration completed with error status on GPUs {spans([g['index'] for g in bad])} ({shown})",
                   remedies.fm_fabric_error(), actor=Actor.NODE, cause=FABRIC_ERROR)


def rule_log_findings(view: FabricView) -> list[Finding]:
    """Known failure lines of FM's log other than the version mismatch (which its own rule reports)."""
    return [warning(f"Fabric Manager log: {f['meaning']}: {f['line'][:160]}",
                    f"journalctl -u {remedies.FM_UNIT} -n 100 --no-pager", actor=Actor.NODE)
            for f in view.log_findings if f.get("kind") != "version_mismatch"]


#: the rules of gpu.fabric_manager on an NVSwitch system, in the order their findings read best
NVSWITCH_RULES = (rule_version_matches_driver, rule_version_known, rule_service_installed, rule_service_running,
                  rule_service_visible, rule_fabric_completed, rule_fabric_status, rule_log_findings)


# -- CUDA error 802 ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Cause:
    """Why CUDA init failed, as gpu.cuda_init reports it: the words after the error, the fix, the key."""

    why: str
    fix: str
    key: str
    actor: Actor = Actor.NODE


def cause_of_802(view: FabricView) -> Cause:
    """802 (system not yet initialised) explained by Fabric Manager's facts, with the same cause keys and
    fixes as gpu.fabric_manager's rules, so both collapse under one root cause."""
    if view.nvswitch:
        pair = view.mismatch()
        if pair:
            fm, driver = pair
            return Cause(f"Fabric Manager {fm} does not match driver {driver}, so FM refuses to start and the "
                         "NVSwitch fabric stays unconfigured", fm_fix_for_mismatch(fm, driver), FM_MISMATCH)
        if view.service.get("installed") is False:
            return Cause("NVSwitch system and Fabric Manager is not installed", _install_fix(view), FM_MISSING)
        if view.service.get("active") is False:
            return Cause(f"NVSwitch system and Fabric Manager is {view.service.get('state') or 'not running'}",
                         remedies.fm_start(), FM_STOPPED)
        pending = view.not_completed()
        if pending:
            return Cause(f"GPU fabric registration not completed on GPUs {spans([g['index'] for g in pending])} "
                         "(Fabric Manager has not finished)", remedies.fm_restart_for_fabric(), FABRIC_NOT_READY)
        bad = view.completed_with_error()
        if bad:
            return Cause(f"GPU fabric registration failed on GPUs {spans([g['index'] for g in bad])}",
                         remedies.fm_fabric_error(), FABRIC_ERROR)
        return Cause(f"NVSwitch system; Fabric Manager state {view.service.get('state') or 'unknown'}",
                     "\n".join([f"systemctl status {remedies.FM_UNIT} --no-pager",
                                f"journalctl -u {remedies.FM_UNIT} -n 50 --no-pager",
                                f"systemctl restart {remedies.FM_UNIT}"]), "gpu.fm_unknown")
    return Cause("no NVSwitch found, so not Fabric Manager; the driver is not ready",
                 "nvidia-smi -q | head -40\n" + remedies.kernel_xid_log() + "\nreboot   # if the driver stays not ready",
                 "gpu.driver_not_ready")


def fm_evidence(fabric_manager: FabricManagerFact, view: FabricView) -> dict[str, Any]:
    """What gpu.fabric_manager shows: the switches, the service, the versions, each GPU's fabric state, the log."""
    service = view.service
    return {
        "nvswitch": dict(view.switches),
        "service": {k: service.get(k) for k in ("source", "active", "state", "enabled", "installed", "processes")},
        "fm_version": view.fm_version, "fm_version_source": fabric_manager.get("version_source"),
        "driver_version": view.driver,
        "fabric": {g["index"]: {k: g["fabric"].get(k) for k in ("state_name", "status", "status_name")}
                   for g in view.fabric_gpus},
        "log_findings": list(view.log_findings),
        "log_tail": (fabric_manager.get("log") or {}).get("tail", [])[-15:],
    }


def fabric_cause(fabric_manager: FabricManagerFact, nvml: NvmlFact) -> Cause | None:
    """Fabric Manager's root cause when it is what keeps the NVSwitch fabric (and so every link) down, else None."""
    view = FabricView.of(fabric_manager, nvml)
    cause = cause_of_802(view) if view.nvswitch else None
    return cause if cause and cause.key in (FM_MISMATCH, FM_MISSING, FM_STOPPED) else None
