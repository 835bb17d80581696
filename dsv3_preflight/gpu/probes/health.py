"""NVML's health readings of one GPU, added to the ``nvml`` fact per GPU (no probe of its own).

Every value is what NVML answered, or ``None`` when it could not answer (the reason is kept in the GPU's
``errors``): a check reads ``None`` as unknown, never as healthy. Features a GPU does not have are said
so explicitly (``{"supported": False}`` for NVLink and MIG), which is different from unknown.

Keys per GPU: ``retired_pages_sbe``, ``retired_pages_pending``; ``pcie`` {gen_current, gen_max (GPU and
host together), gen_device_max, width_current, width_max, replay_counter}; ``performance_state`` (0 = P0);
``utilization_gpu`` (%); ``clocks_event_reasons`` (NVML's bit mask); ``temperature_c``; ``mig``
{supported, current, pending}; ``compute_mode`` (NVML_COMPUTEMODE_*); ``nvlink`` {supported, links:
[{link, active, replay, recovery, crc_flit, crc_data}]}; ``reset`` {reset_required, drain_and_reset,
recovery_action} from NVML's field values (drivers that lack a field answer Not Supported → None).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: NVML field ids (nvml.h): GPU reset status, drain-and-reset status, recovery action
FIELD_RESET_REQUIRED = 226
FIELD_DRAIN_AND_RESET = 227
FIELD_RECOVERY_ACTION = 230
NVLINK_COUNTERS = (("replay", 0), ("recovery", 1), ("crc_flit", 2), ("crc_data", 3))  # NVML_NVLINK_ERROR_DL_*
MAX_LINKS = 36  # NVML_NVLINK_MAX_LINKS


def health_fields(nvml: Any, handle: Any, record_error: Callable[[str, BaseException], None]) -> dict[str, Any]:
    """The health readings of the GPU behind ``handle`` (see the module docstring)."""

    def ask(key: str, func: Any, *args: Any) -> Any:
        try:
            return func(handle, *args)
        except nvml.NVMLError as exc:
            record_error(key, exc)
            return None

    sbe = ask("retired_pages_sbe", nvml.nvmlDeviceGetRetiredPages, nvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS)
    pending = ask("retired_pages_pending", nvml.nvmlDeviceGetRetiredPagesPendingStatus)
    reasons = _clock_reasons(nvml, handle, record_error)
    utilization = ask("utilization", nvml.nvmlDeviceGetUtilizationRates)
    return {
        "retired_pages_sbe": None if sbe is None else len(sbe),
        "retired_pages_pending": None if pending is None else bool(pending),
        "pcie": _pcie(nvml, ask),
        "performance_state": ask("performance_state", nvml.nvmlDeviceGetPerformanceState),
        "utilization_gpu": None if utilization is None else int(utilization.gpu),
        "clocks_event_reasons": None if reasons is None else int(reasons),
        "temperature_c": ask("temperature", nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU),
        "mig": _mig(nvml, handle, record_error),
        "compute_mode": ask("compute_mode", nvml.nvmlDeviceGetComputeMode),
        "nvlink": _nvlink(nvml, handle, record_error),
        "reset": _reset(nvml, handle, record_error),
    }


def _clock_reasons(nvml: Any, handle: Any, record_error: Callable[[str, BaseException], None]) -> int | None:
    """The clock event reasons; drivers before the "event" name (R535) answer the same mask as "throttle" reasons."""
    error: BaseException | None = None
    for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
        func = getattr(nvml, name, None)
        if func is None:
            continue
        try:
            return func(handle)
        except nvml.NVMLError as exc:
            error = exc
            if getattr(exc, "value", None) != nvml.NVML_ERROR_FUNCTION_NOT_FOUND:
                break
    if error is not None:
        record_error("clocks_event_reasons", error)
    return None


def _pcie(nvml: Any, ask: Callable[..., Any]) -> dict[str, Any] | None:
    pcie = {
        "gen_current": ask("pcie_gen_current", nvml.nvmlDeviceGetCurrPcieLinkGeneration),
        "gen_max": ask("pcie_gen_max", nvml.nvmlDeviceGetMaxPcieLinkGeneration),
        "gen_device_max": ask("pcie_gen_device_max", nvml.nvmlDeviceGetGpuMaxPcieLinkGeneration),
        "width_current": ask("pcie_width_current", nvml.nvmlDeviceGetCurrPcieLinkWidth),
        "width_max": ask("pcie_width_max", nvml.nvmlDeviceGetMaxPcieLinkWidth),
        "replay_counter": ask("pcie_replay_counter", nvml.nvmlDeviceGetPcieReplayCounter),
    }
    return None if all(v is None for v in pcie.values()) else pcie


def _mig(nvml: Any, handle: Any, record_error: Callable[[str, BaseException], None]) -> dict[str, Any] | None:
    try:
        current, pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError as exc:
        if getattr(exc, "value", None) == nvml.NVML_ERROR_NOT_SUPPORTED:
            return {"supported": False}
        record_error("mig", exc)
        return None
    return {"supported": True, "current": int(current), "pending": int(pending)}


def _nvlink(nvml: Any, handle: Any, record_error: Callable[[str, BaseException], None]) -> dict[str, Any] | None:
    """Every link NVML knows: state and the data-link error counters. Link 0 Not Supported: a GPU without NVLink."""
    links = []
    for link in range(MAX_LINKS):
        try:
            active = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except nvml.NVMLError as exc:
            code = getattr(exc, "value", None)
            if link == 0 and code == nvml.NVML_ERROR_NOT_SUPPORTED:
                return {"supported": False, "links": []}
            if link == 0:
                record_error("nvlink", exc)
                return None
            break  # past the GPU's last link: Invalid Argument (or Not Supported)
        entry: dict[str, Any] = {"link": link, "active": bool(active)}
        for key, counter in NVLINK_COUNTERS:
            try:
                entry[key] = int(nvml.nvmlDeviceGetNvLinkErrorCounter(handle, link, counter))
            except nvml.NVMLError:
                entry[key] = None  # Hopper and newer report these through field values instead
        links.append(entry)
    return {"supported": True, "links": links}


def _reset(nvml: Any, handle: Any, record_error: Callable[[str, BaseException], None]) -> dict[str, Any] | None:
    ids = {"reset_required": FIELD_RESET_REQUIRED, "drain_and_reset": FIELD_DRAIN_AND_RESET,
           "recovery_action": FIELD_RECOVERY_ACTION}
    try:
        values = nvml.nvmlDeviceGetFieldValues(handle, list(ids.values()))
    except nvml.NVMLError as exc:
        record_error("reset", exc)
        return None
    out: dict[str, Any] = {}
    for key, value in zip(ids, values):
        out[key] = _field_value(nvml, value) if int(value.nvmlReturn) == 0 else None
    return out


def _field_value(nvml: Any, value: Any) -> int | float | None:
    kinds = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
    attr = kinds.get(int(value.valueType))
    return None if attr is None else getattr(value.value, attr)
