"""A pynvml stand-in that answers from a recorded NVML document (a machine we do not have here).

The GPU probe takes its NVML module from :func:`load_nvml`: the real ``pynvml`` normally, this
replay when ``DSV3_PREFLIGHT_NVML_REPLAY`` names a recorded document. Only the NVML calls are
replayed; constants, structures and ``NVMLError`` are the real pynvml's, so the probe's code path
(including its error handling) is the one that runs on a GPU machine.

Document (JSON): ``init_error`` (an NVML return code or null), ``driver_version``,
``cuda_driver_version`` (12020 for CUDA 12.2), ``nvml_version``, and ``devices``: per GPU ``name``,
``uuid``, ``pci_bus_id``, ``memory_total``, ``memory_used``, ``persistence_mode`` (0/1),
``ecc_mode`` ([current, pending]), ``ecc_uncorrected_volatile``, ``ecc_uncorrected_aggregate``,
``retired_pages_dbe`` (list of addresses), ``remapped_rows`` ([corr, unc, pending, failure]),
``processes`` ([{pid, used_memory}]), ``fabric`` ({state, status, clique_id, cluster_uuid,
health_mask}). Any value may be ``{"nvml_error": CODE}``: the call raises ``NVMLError(CODE)``
(3 = Not Supported, 13 = Function Not Found).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPLAY_ENV = "DSV3_PREFLIGHT_NVML_REPLAY"


def load_nvml() -> Any:
    """The NVML module the probe uses: a replay of ``$DSV3_PREFLIGHT_NVML_REPLAY`` or the real pynvml."""
    path = os.environ.get(REPLAY_ENV)
    if path:
        return NvmlReplay.from_file(path)
    import pynvml

    return pynvml


class NvmlReplay:
    """Answers the pynvml calls the GPU probe makes from a recorded document."""

    def __init__(self, doc: dict[str, Any]) -> None:
        import pynvml

        self._pynvml = pynvml
        self._doc = doc
        self._initialised = False

    @classmethod
    def from_file(cls, path: str | Path) -> "NvmlReplay":
        doc = json.loads(Path(path).read_text())
        return cls(doc.get("nvml", doc))

    def __getattr__(self, name: str) -> Any:  # constants, structures, NVMLError
        return getattr(self._pynvml, name)

    def _value(self, value: Any) -> Any:
        if isinstance(value, dict) and "nvml_error" in value:
            raise self._pynvml.NVMLError(int(value["nvml_error"]))
        return value

    def _dev(self, handle: int) -> dict[str, Any]:
        if not self._initialised:
            raise self._pynvml.NVMLError(self._pynvml.NVML_ERROR_UNINITIALIZED)
        return self._doc["devices"][handle]

    # -- system --------------------------------------------------------------------
    def nvmlInit(self) -> None:
        code = self._doc.get("init_error")
        if code:
            raise self._pynvml.NVMLError(int(code))
        self._initialised = True

    def nvmlShutdown(self) -> None:
        self._initialised = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return self._value(self._doc["driver_version"])

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self._value(self._doc["cuda_driver_version"])

    def nvmlSystemGetNVMLVersion(self) -> str:
        return self._value(self._doc.get("nvml_version", {"nvml_error": 3}))

    def nvmlDeviceGetCount(self) -> int:
        if not self._initialised:
            raise self._pynvml.NVMLError(self._pynvml.NVML_ERROR_UNINITIALIZED)
        return len(self._doc["devices"])

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._dev(index)
        return index

    # -- device --------------------------------------------------------------------
    def nvmlDeviceGetName(self, h: int) -> str:
        return self._value(self._dev(h)["name"])

    def nvmlDeviceGetUUID(self, h: int) -> str:
        return self._value(self._dev(h)["uuid"])

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return SimpleNamespace(busId=self._value(self._dev(h)["pci_bus_id"]))

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        d = self._dev(h)
        total, used = self._value(d["memory_total"]), self._value(d["memory_used"])
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetPersistenceMode(self, h: int) -> int:
        return self._value(self._dev(h)["persistence_mode"])

    def nvmlDeviceGetEccMode(self, h: int) -> list[int]:
        return list(self._value(self._dev(h)["ecc_mode"]))

    def nvmlDeviceGetTotalEccErrors(self, h: int, error_type: int, counter_type: int) -> int:
        d = self._dev(h)
        if error_type != self._pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED:
            raise self._pynvml.NVMLError(self._pynvml.NVML_ERROR_NOT_SUPPORTED)
        key = "ecc_uncorrected_volatile" if counter_type == self._pynvml.NVML_VOLATILE_ECC else "ecc_uncorrected_aggregate"
        return self._value(d[key])

    def nvmlDeviceGetRetiredPages(self, h: int, source: int) -> list[int]:
        return list(self._value(self._dev(h).get("retired_pages_dbe", {"nvml_error": 3})))

    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]:
        return tuple(self._value(self._dev(h).get("remapped_rows", {"nvml_error": 3})))  # type: ignore[return-value]

    def nvmlDeviceGetComputeRunningProcesses(self, h: int) -> list[Any]:
        procs = self._value(self._dev(h).get("processes", []))
        return [SimpleNamespace(pid=p["pid"], usedGpuMemory=p.get("used_memory")) for p in procs]

    def _fill_fabric(self, h: int, info: Any, versioned: bool) -> int:
        fabric = self._dev(h).get("fabric", {"nvml_error": 3})
        if versioned and "nvml_error_v" in fabric:
            raise self._pynvml.NVMLError(int(fabric["nvml_error_v"]))
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
