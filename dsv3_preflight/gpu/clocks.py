"""Clock event ("throttle") reasons: what is holding a GPU's clocks down right now.

NVML's bit mask (nvmlClocksEventReason*, nvml.h): 0x1 GPU idle, 0x2 applications clocks setting, 0x4 SW
power cap, 0x8 HW slowdown (clocks cut by half or more: temperature too high, an external power brake,
or power draw too high), 0x10 sync boost, 0x20 SW thermal slowdown, 0x40 HW thermal slowdown, 0x80 HW
power brake slowdown (the system, e.g. its power supply or BMC, asserted the brake), 0x100 display
clock setting. Idle, application clocks, sync boost, display and the SW power cap are normal operation
(the power cap engages under load by design); the hardware slowdowns are a node fault: a training job on
a GPU that cannot hold its clocks runs every rank at that GPU's pace.
"""
from __future__ import annotations

from collections.abc import Sequence

from dsv3_preflight.result import Actor, Finding, failure, warning

from .common import gpu_label, gpu_target
from .facts import Gpu

IDLE, APP_CLOCKS, SW_POWER_CAP, HW_SLOWDOWN, SYNC_BOOST = 0x1, 0x2, 0x4, 0x8, 0x10
SW_THERMAL, HW_THERMAL, HW_POWER_BRAKE, DISPLAY = 0x20, 0x40, 0x80, 0x100
NAMES = {IDLE: "idle", APP_CLOCKS: "applications clocks setting", SW_POWER_CAP: "SW power cap",
         HW_SLOWDOWN: "HW slowdown", SYNC_BOOST: "sync boost", SW_THERMAL: "SW thermal slowdown",
         HW_THERMAL: "HW thermal slowdown", HW_POWER_BRAKE: "HW power brake slowdown", DISPLAY: "display clock setting"}
HARDWARE = HW_SLOWDOWN | HW_THERMAL | HW_POWER_BRAKE

Gpus = Sequence[Gpu]


def reasons(mask: int | None) -> list[str]:
    """0x88 → ['HW slowdown', 'HW power brake slowdown']."""
    return [name for bit, name in NAMES.items() if mask and mask & bit]


def _fix(g: Gpu, mask: int) -> str:
    lines = [f"nvidia-smi -q -i {gpu_target(g)} -d PERFORMANCE,POWER,TEMPERATURE   # {gpu_label(g)}: reasons, power, temperature"]
    if mask & HW_POWER_BRAKE:
        lines.append("ipmitool sdr type 'Power Supply'   # the BMC or a power supply asserts the brake: PSU state and redundancy")
    if mask & (HW_THERMAL | SW_THERMAL):
        lines.append("ipmitool sdr type Fan   # airflow: fans, blanking panels, inlet temperature")
    lines.append("# drain the node until the GPU holds its clocks: every rank waits for the slowest GPU")
    return "\n".join(lines)


def rule_hardware_slowdown(gpus: Gpus) -> list[Finding]:
    found = []
    for g in gpus:
        mask = g.get("clocks_event_reasons")
        if mask and mask & HARDWARE:
            temp = f" at {g['temperature_c']} C" if g.get("temperature_c") is not None else ""
            found.append(failure(f"{gpu_label(g)}: clocks held down by {', '.join(reasons(mask & HARDWARE))}{temp}",
                                 _fix(g, mask), actor=Actor.NODE, cause=f"gpu.hw_slowdown:{gpu_target(g)}"))
    return found


def rule_software_thermal(gpus: Gpus) -> list[Finding]:
    found = []
    for g in gpus:
        mask = g.get("clocks_event_reasons")
        if mask and mask & SW_THERMAL and not mask & HARDWARE:
            temp = f" at {g['temperature_c']} C" if g.get("temperature_c") is not None else ""
            found.append(warning(f"{gpu_label(g)}: the driver lowers its clocks to cool it (SW thermal slowdown{temp})",
                                 _fix(g, mask), actor=Actor.NODE))
    return found
