"""The hardware boundary of the GPU domain: recorded machines stand in for NVML and the kernel log.

This machine (and CI) has no NVIDIA GPU. Tests and offline replays therefore answer the two hardware
sources the GPU probes read from recorded documents of real machines, and from nothing else. What to replay
is a property of the run: the engine fact ``replay`` (:class:`dsv3_preflight.facts.Replay`), which the probes
need like any fact and hand to these functions; no probe reads an environment variable.

- NVML: when the run's replay names a recorded NVML document (``replay.nvml``), :func:`load_nvml` returns
  :class:`NvmlReplay` instead of the real ``pynvml``. Only the NVML *calls* are replayed; constants,
  structures and ``NVMLError`` are the real pynvml's, so the probe's code path (its error handling
  included) is the one that runs on a GPU machine.
- The kernel log: when the run's replay names a recorded text file (``replay.kmsg``: ``/dev/kmsg`` records,
  ``dmesg`` or ``journalctl -k`` lines), :func:`kernel_log_replay` returns its lines and the kernel-log
  probe parses them as it parses the live log.

Nothing else is faked: the probes, the facts and every check run unchanged. The recorded documents
live under ``tests/data/gpu/`` with the address of the public output they were converted from.

NVML document (JSON): ``init_error`` (an NVML return code or null), ``driver_version``,
``cuda_driver_version`` (12020 for CUDA 12.2), ``nvml_version``, and ``devices``, per GPU:
``name``, ``uuid``, ``pci_bus_id``, ``memory_total``, ``memory_used``, ``persistence_mode`` (0/1),
``ecc_mode`` ([current, pending]), ``ecc_uncorrected_volatile``, ``ecc_uncorrected_aggregate``,
``retired_pages_dbe`` / ``retired_pages_sbe`` (lists of addresses), ``retired_pages_pending`` (0/1),
``remapped_rows`` ([corr, unc, pending, failure]), ``processes`` ([{pid, used_memory}]), ``fabric``
({state, status, clique_id, cluster_uuid, health_mask}), ``pcie`` ({gen_current, gen_max,
gen_device_max, width_current, width_max, replay_counter}), ``performance_state`` (0 = P0),
``utilization`` ({gpu, memory}), ``clocks_event_reasons`` (bit mask), ``temperature`` (C),
``mig_mode`` ([current, pending]), ``compute_mode``, ``nvlink`` (one entry per link:
{active, errors: {replay, recovery, crc_flit, crc_data}}), ``field_values`` ({"226": reset required,
"227": drain and reset, "230": recovery action}).

Any value may be ``{"nvml_error": CODE}``: the call raises ``NVMLError(CODE)`` (3 = Not Supported, as a
GPU without the feature answers). A key the document does not have was not recorded: the call raises
``NVMLError(13)`` (Function Not Found) and the probe reports the value as unknown, never as healthy.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dsv3_preflight.facts import LIVE, Replay

NOT_RECORDED = 13  # NVML_ERROR_FUNCTION_NOT_FOUND
NOT_SUPPORTED = 3  # NVML_ERROR_NOT_SUPPORTED
INVALID_ARGUMENT = 2  # NVML_ERROR_INVALID_ARGUMENT


def load_nvml(replay: Replay = LIVE) -> Any:
    """The NVML module the probe uses: a replay of the run's recorded NVML document, or the real pynvml."""
    if replay.nvml:
        return NvmlReplay.from_file(replay.nvml)
    import pynvml

    return pynvml


def kernel_log_replay(replay: Replay = LIVE) -> tuple[str, list[str]] | None:
    """(source, lines) of the run's recorded kernel log, or None (read the live log)."""
    if not replay.kmsg:
        return None
    return f"replay:{replay.kmsg}", Path(replay.kmsg).read_text(errors="replace").splitlines()


class NvmlReplay:
    """Answers the pynvml calls the GPU probe makes from a recorded document."""

    def __init__(self, doc: dict[str, Any]) -> None:
        import pynvml

        self._pynvml = pynvml
        self._doc = doc
        self._initialised = False

    @classmethod
    def from_file(cls, path: str | Path) -> NvmlReplay:
        doc = json.loads(Path(path).read_text())
        return cls(doc.get("nvml", doc))

    def __getattr__(self, name: str) -> Any:  # constants, structures, NVMLError
        return getattr(self._pynvml, name)

    def _raise(self, code: int) -> Any:
        raise self._pynvml.NVMLError(int(code))

    def _value(self, value: Any) -> Any:
        if isinstance(value, dict) and "nvml_error" in value:
            self._raise(value["nvml_error"])
        return value

    def _get(self, h: int, key: str) -> Any:
        """A recorded device value; a key the document lacks was not recorded (Function Not Found)."""
        device = self._dev(h)
        if key not in device:
            self._raise(NOT_RECORDED)
        return self._value(device[key])

    def _dev(self, handle: int) -> dict[str, Any]:
        if not self._initialised:
            self._raise(self._pynvml.NVML_ERROR_UNINITIALIZED)
        return self._doc["devices"][handle]

    # -- system --------------------------------------------------------------------
    def nvmlInit(self) -> None:
        code = self._doc.get("init_error")
        if code:
            self._raise(code)
        self._initialised = True

    def nvmlShutdown(self) -> None:
        self._initialised = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return self._value(self._doc["driver_version"])

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self._value(self._doc["cuda_driver_version"])

    def nvmlSystemGetNVMLVersion(self) -> str:
        return self._value(self._doc.get("nvml_version", {"nvml_error": NOT_SUPPORTED}))

    def nvmlDeviceGetCount(self) -> int:
        if not self._initialised:
            self._raise(self._pynvml.NVML_ERROR_UNINITIALIZED)
        return len(self._doc["devices"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._dev(index)
        return index

    # -- identity, memory, ECC, processes ------------------------------------------
    def nvmlDeviceGetName(self, h: int) -> str:
        return self._get(h, "name")

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._get(h, "uuid")

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return SimpleNamespace(busId=self._get(h, "pci_bus_id"))

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        total, used = self._get(h, "memory_total"), self._get(h, "memory_used")
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return self._get(h, "persistence_mode")

    def nvmlDeviceGetEccMode(self, h: int) -> list[int]:
        return list(self._get(h, "ecc_mode"))

    def nvmlDeviceGetTotalEccErrors(self, h: int, error_type: int, counter_type: int) -> int:
        if error_type != self._pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
            self._raise(NOT_SUPPORTED)
        key = "ecc_uncorrected_volatile" if counter_type == self._pynvml.NVML_VOLATILE_ECC else "ecc_uncorrected_aggregate"
        return self._get(h, key)

    def nvmlDeviceGetRetiredPages(self, h: int, source: int) -> list[int]:
        single = source == self._pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
        return list(self._get(h, "retired_pages_sbe" if single else "retired_pages_dbe"))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, h: int) -> int:
        return int(self._get(h, "retired_pages_pending"))

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:
        return tuple(self._get(h, "remapped_rows"))  # type: ignore[return-value]

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        procs = self._value(self._dev(h).get("processes", []))
        return [SimpleNamespace(pid=p["pid"], usedGpuMemory=p.get("used_memory")) for p in procs]

    # -- fabric ----------------------------------------------------------------------
    def _fill_fabric(self, h: int, info: Any, versioned: bool) -> int:
        fabric = self._dev(h).get("fabric", {"nvml_error": NOT_SUPPORTED})
        if versioned and "nvml_error_v" in fabric:
            self._raise(fabric["nvml_error_v"])
        fabric = self._value(fabric)
        info.state = int(fabric["state"])
        info.status = int(fabric.get("status", 0))
        info.cliqueId = int(fabric.get("clique_id", 0))
        uuid = bytes.fromhex(fabric.get("cluster_uuid", "00" * 16).replace("-", ""))
        for i, b in enumerate(uuid[:16]):
            info.clusterUuid[i] = b
        if hasattr(info, "healthMask"):
            info.healthMask = int(fabric.get("health_mask", 0))
        return self._pynvml.NVML_SUCCESS

    def nvmlDeviceGetGpuFabricInfoV(self, h: int, info: Any) -> int:
        return self._fill_fabric(h, info, versioned=True)

    def nvmlDeviceGetGpuFabricInfo(self, h: int, info: Any) -> int:
        return self._fill_fabric(h, info, versioned=False)

    # -- PCIe link -------------------------------------------------------------------
    def _pcie(self, h: int, key: str) -> int:
        pcie = self._get(h, "pcie")
        if key not in pcie:
            self._raise(NOT_RECORDED)
        return int(self._value(pcie[key]))

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int:
        return self._pcie(h, "gen_current")

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int:
        return self._pcie(h, "gen_max")

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, h: int) -> int:
        return self._pcie(h, "gen_device_max")

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int:
        return self._pcie(h, "width_current")

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int:
        return self._pcie(h, "width_max")

    def nvmlDeviceGetPcieReplayCounter(self, h: int) -> int:
        return self._pcie(h, "replay_counter")

    # -- performance, clocks, temperature -------------------------------------------
    def nvmlDeviceGetPerformanceState(self, h: int) -> int:
        return int(self._get(h, "performance_state"))

    def nvmlDeviceGetUtilizationRates(self, h: int) -> Any:
        u = self._get(h, "utilization")
        return SimpleNamespace(gpu=int(u["gpu"]), memory=int(u.get("memory", 0)))

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return int(self._get(h, "clocks_event_reasons"))

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: int) -> int:
        return self.nvmlDeviceGetCurrentClocksEventReasons(h)

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        return int(self._get(h, "temperature"))

    # -- modes -----------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, h: int) -> list[int]:
        return [int(v) for v in self._get(h, "mig_mode")]

    def nvmlDeviceGetComputeMode(self, h: int) -> int:
        return int(self._get(h, "compute_mode"))

    # -- NVLink ----------------------------------------------------------------------
    def _link(self, h: int, link: int) -> dict[str, Any]:
        links = self._get(h, "nvlink")
        if link >= len(links):
            self._raise(INVALID_ARGUMENT)  # past the GPU's last link, as the driver answers
        return links[link]

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        return int(self._value(self._link(h, link)["active"]))

    def nvmlDeviceGetNvLinkErrorCounter(self, h: int, link: int, counter: int) -> int:
        names = {0: "replay", 1: "recovery", 2: "crc_flit", 3: "crc_data"}
        errors = self._value(self._link(h, link).get("errors", {"nvml_error": NOT_RECORDED}))
        if names.get(counter) not in errors:
            self._raise(NOT_RECORDED)
        return int(self._value(errors[names[counter]]))

    # -- field values (reset status, recovery action) -------------------------------
    def nvmlDeviceGetFieldValues(self, h: int, field_ids: list[int]) -> list[Any]:
        recorded = self._get(h, "field_values")
        out = []
        for field_id in field_ids:
            value = recorded.get(str(field_id), {"nvml_error": NOT_SUPPORTED})
            code = int(value["nvml_error"]) if isinstance(value, dict) else 0
            out.append(SimpleNamespace(fieldId=field_id, nvmlReturn=code, valueType=self._pynvml.NVML_VALUE_TYPE_UNSIGNED_INT,
                                       value=SimpleNamespace(uiVal=0 if code else int(value))))
        return out
