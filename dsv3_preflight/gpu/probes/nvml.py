"""Facts about the GPUs: NVML's view (driver, GPUs, ECC, processes, fabric) and CUDA initialisation.

Hardware boundaries, each replaceable by a recorded machine for tests and offline replays through the run's
``replay`` (the engine fact :class:`dsv3_preflight.facts.Replay`, never an environment variable read here):
NVML through ``dsv3_preflight.gpu.probes.replay.load_nvml`` (``replay.nvml``), libcuda (``replay.libcuda``,
default ``libcuda.so.1``), and files under ``replay.sysroot`` (default ``/``).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from dsv3_preflight import signals
from dsv3_preflight.facts import LIVE, Replay
from dsv3_preflight.gpu.cuda_errors import decode, parse_torch_cuda_error
from dsv3_preflight.registry import probe

from .health import health_fields
from .replay import load_nvml

LIBCUDA = "libcuda.so.1"
DRIVER_INIT_TIMEOUT = 20.0
TORCH_INIT_TIMEOUT = 90.0


def _text(value: Any) -> Any:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _nvml_error(exc: BaseException) -> dict[str, Any]:
    return {"error": str(exc) or type(exc).__name__, "error_code": getattr(exc, "value", None)}


def _try(nvml: Any, func: Any, *args: Any) -> tuple[Any, dict[str, Any] | None]:
    """(value, None) or (None, {error, error_code}) for one NVML call."""
    try:
        return func(*args), None
    except nvml.NVMLError as exc:
        return None, _nvml_error(exc)


def _fabric(nvml: Any, handle: Any) -> dict[str, Any]:
    """Fabric state and status (Hopper and newer); A100 and older answer Not Supported."""
    names = {0: "Not Supported", 1: "Not Started", 2: "In Progress", 3: "Completed"}
    attempts = []
    for func_name, struct_name in (("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
                                   ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t")):
        func, struct = getattr(nvml, func_name, None), getattr(nvml, struct_name, None)
        if func is None or struct is None:
            attempts.append(f"{func_name}: not in this nvidia-ml-py")
            continue
        info = struct()
        try:
            func(handle, info)
        except nvml.NVMLError as exc:
            attempts.append(f"{func_name}: {exc}")
            if getattr(exc, "value", None) == getattr(nvml, "NVML_ERROR_FUNCTION_NOT_FOUND", 13):
                continue  # an older driver without the V entry point: try the first version
            return {"supported": False, "api": func_name, "error": str(exc), "attempts": attempts}
        state = int(info.state)
        status = int(info.status)
        try:
            status_name = nvml.nvmlErrorString(status) if status else "Success"
        except Exception:  # noqa: BLE001 - a name is a nicety
            status_name = f"NVML return {status}"
        return {
            "supported": state != 0,
            "api": func_name,
            "state": state,
            "state_name": names.get(state, f"state {state}"),
            "status": status,
            "status_name": _text(status_name),
            "clique_id": int(info.cliqueId),
            "cluster_uuid": bytes(info.clusterUuid).hex(),
            "health_mask": int(getattr(info, "healthMask", 0)),
        }
    return {"supported": False, "api": None, "error": "; ".join(attempts), "attempts": attempts}


def nvml_facts(nvml: Any) -> dict[str, Any]:
    """Everything the GPU checks need from NVML, given a pynvml-compatible module."""
    facts: dict[str, Any] = {"available": False, "error": None, "error_code": None, "driver_version": None,
                             "cuda_driver_version": None, "cuda_driver_version_str": None, "nvml_version": None,
                             "gpus": []}
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        facts.update(_nvml_error(exc))
        return facts
    try:
        facts["available"] = True
        facts["driver_version"] = _text(nvml.nvmlSystemGetDriverVersion())
        cuda, err = _try(nvml, nvml.nvmlSystemGetCudaDriverVersion)
        facts["cuda_driver_version"] = cuda
        if cuda:
            facts["cuda_driver_version_str"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
        facts["nvml_version"] = _text(_try(nvml, nvml.nvmlSystemGetNVMLVersion)[0])
        count = nvml.nvmlDeviceGetCount()
        for index in range(count):
            facts["gpus"].append(_gpu(nvml, index))
    except nvml.NVMLError as exc:
        facts["error"], facts["error_code"] = _nvml_error(exc)["error"], getattr(exc, "value", None)
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
    return facts


def _gpu(nvml: Any, index: int) -> dict[str, Any]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    gpu: dict[str, Any] = {"index": index, "errors": {}}

    def get(key: str, func: Any, *args: Any) -> Any:
        value, err = _try(nvml, func, handle, *args)
        if err:
            gpu["errors"][key] = err["error"]
        return value

    gpu["name"] = _text(get("name", nvml.nvmlDeviceGetName))
    gpu["uuid"] = _text(get("uuid", nvml.nvmlDeviceGetUUID))
    pci = get("pci", nvml.nvmlDeviceGetPciInfo)
    gpu["pci_bus_id"] = _text(pci.busId) if pci is not None else None
    mem = get("memory", nvml.nvmlDeviceGetMemoryInfo)
    gpu["memory_total_bytes"] = int(mem.total) if mem is not None else None
    gpu["memory_used_bytes"] = int(mem.used) if mem is not None else None
    pm = get("persistence_mode", nvml.nvmlDeviceGetPersistenceMode)
    gpu["persistence_mode"] = None if pm is None else bool(pm)
    ecc = get("ecc_mode", nvml.nvmlDeviceGetEccMode)
    gpu["ecc_enabled"] = None if ecc is None else bool(ecc[0])
    gpu["ecc_pending"] = None if ecc is None else bool(ecc[1])
    unc = nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    gpu["ecc_uncorrected_volatile"] = get("ecc_uncorrected_volatile", nvml.nvmlDeviceGetTotalEccErrors, unc, nvml.NVML_VOLATILE_ECC)
    gpu["ecc_uncorrected_aggregate"] = get("ecc_uncorrected_aggregate", nvml.nvmlDeviceGetTotalEccErrors, unc, nvml.NVML_AGGREGATE_ECC)
    rows, err = _try(nvml, nvml.nvmlDeviceGetRemappedRows, handle)
    gpu["remapped_rows"] = None if rows is None else {"correctable": rows[0], "uncorrectable": rows[1],
                                                       "pending": bool(rows[2]), "failure": bool(rows[3])}
    pages, err = _try(nvml, nvml.nvmlDeviceGetRetiredPages, handle,
                      getattr(nvml, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1))
    gpu["retired_pages_dbe"] = None if pages is None else len(pages)
    procs = get("processes", nvml.nvmlDeviceGetComputeRunningProcesses)
    gpu["processes"] = [{"pid": int(p.pid), "used_memory_bytes": getattr(p, "usedGpuMemory", None)} for p in procs or []]
    gpu["fabric"] = _fabric(nvml, handle)
    gpu.update(health_fields(nvml, handle, lambda key, exc: gpu["errors"].__setitem__(key, str(exc) or type(exc).__name__)))
    return gpu


@probe("nvml", needs=["replay"], timeout=20)
def nvml(replay: Replay = LIVE) -> dict[str, Any]:
    """NVML: driver and CUDA driver versions, and per GPU identity, memory, ECC, processes, fabric state and health
    (remapped rows and retired pages, PCIe link, NVLink, clock event reasons, MIG and compute mode, reset status)."""
    try:
        module = load_nvml(replay)
    except ImportError as exc:
        return {"available": False, "error": f"nvidia-ml-py (pynvml) is not installed: {exc}", "error_code": None,
                "driver_version": None, "cuda_driver_version": None, "cuda_driver_version_str": None,
                "nvml_version": None, "gpus": []}
    return nvml_facts(module)


# -- CUDA initialisation ---------------------------------------------------------------

_DRIVER_CHILD = r"""
import ctypes, json, os, re, sys
path = sys.argv[1]
out = {"library": path, "loaded": False}
try:
    lib = ctypes.CDLL(path)
except OSError as exc:
    out["load_error"] = str(exc)
    print(json.dumps(out)); sys.exit(0)
out["loaded"] = True
try:
    for line in open("/proc/self/maps"):
        if "libcuda" in line and "/" in line:
            out["library_file"] = os.path.realpath(line.split(None, 5)[-1].strip()); break
except OSError:
    pass
v = ctypes.c_int(0)
try:
    out["driver_get_version_rc"] = lib.cuDriverGetVersion(ctypes.byref(v))
    out["cuda_driver_version"] = v.value
except AttributeError:
    pass
print(json.dumps(dict(out, stage="cuInit")), flush=True)
rc = lib.cuInit(0)
out["cuInit"] = rc
if rc == 0:
    n = ctypes.c_int(-1)
    out["cuDeviceGetCount"] = lib.cuDeviceGetCount(ctypes.byref(n))
    out["device_count"] = n.value
try:
    name = ctypes.c_char_p()
    lib.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    if lib.cuGetErrorName(rc, ctypes.byref(name)) == 0 and name.value:
        out["error_name_from_driver"] = name.value.decode()
except AttributeError:
    pass
print(json.dumps(out), flush=True)
"""


def _last_json(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def kernel_module_version(root: Path = LIVE.root) -> str | None:
    """The loaded NVIDIA kernel module's version, from /proc/driver/nvidia/version under ``root``."""
    try:
        text = (root / "proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else None


def driver_api_init(library: str | None = None, timeout: float = DRIVER_INIT_TIMEOUT) -> dict[str, Any]:
    """``cuInit(0)`` and ``cuDeviceGetCount`` of ``library`` (default libcuda.so.1) through ctypes, in a child process
    under ``timeout``: the library's path is the child's argument, never its environment's."""
    library = library or LIBCUDA
    argv = [sys.executable, "-c", _DRIVER_CHILD, library]
    try:
        proc = signals.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        partial = _last_json(exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")) or {}
        return dict(partial, library=library, timed_out=True, timeout_s=timeout, ok=False, code=None,
                    error=f"{partial.get('stage', 'loading libcuda')} did not return within {timeout:g} s")
    out = _last_json(proc.stdout) or {}
    out.setdefault("library", library)
    out["timed_out"] = False
    if proc.returncode != 0:
        out.update(ok=False, code=None, error=f"the child died (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
        return out
    if not out.get("loaded"):
        out.update(ok=False, code=None, error=f"cannot load {library}: {out.get('load_error')}")
        return out
    code = out.get("cuInit")
    if code == 0 and out.get("cuDeviceGetCount", 0) != 0:
        code = out["cuDeviceGetCount"]
    m = re.search(r"libcuda\.so\.(\d+\.\d+(?:\.\d+)?)$", out.get("library_file") or "")
    out["library_version"] = m.group(1) if m else None
    out.update(ok=code == 0, code=code, decoded=decode(code), error=None if code == 0 else
               f"{'cuInit' if out.get('cuInit') else 'cuDeviceGetCount'} returned {code} ({decode(code)['name']})")
    return out


_TORCH_CHILD = r"""
import json, sys, warnings
out = {"installed": False}
try:
    import torch
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
    print(json.dumps(out)); sys.exit(0)
out.update(installed=True, torch_version=torch.__version__, cuda_built=torch.version.cuda, error=None, nccl_version=None)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out["device_count"] = torch.cuda.device_count()
out["warnings"] = [str(w.message) for w in caught]
if torch.version.cuda:
    try:
        torch.cuda.init()
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    try:
        out["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:
        pass
print(json.dumps(out))
"""


def torch_runtime_init(timeout: float = TORCH_INIT_TIMEOUT, python: str | None = None) -> dict[str, Any]:
    """What the CUDA runtime torch will use says: ``torch.cuda.device_count()`` and the error it raised."""
    argv = [python or sys.executable, "-c", _TORCH_CHILD]
    try:
        proc = signals.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {"installed": None, "timed_out": True, "timeout_s": timeout, "ok": False, "code": None,
                "error": f"importing torch and counting CUDA devices did not finish within {timeout:g} s"}
    out = _last_json(proc.stdout)
    if out is None:
        return {"installed": None, "timed_out": False, "ok": False, "code": None,
                "error": f"the child died (exit {proc.returncode}): {proc.stderr.strip()[-500:]}"}
    return interpret_torch_child(out)


def interpret_torch_child(out: dict[str, Any]) -> dict[str, Any]:
    """Add ``code``/``decoded``/``ok`` to what the torch child printed (error code parsed from torch's text)."""
    out = dict(out)
    out["timed_out"] = False
    parsed = None
    for text in [out.get("error")] + list(out.get("warnings") or []):
        parsed = parse_torch_cuda_error(text)
        if parsed:
            break
    out["code"] = parsed["code"] if parsed else None
    out["decoded"] = decode(out["code"])
    problem = out.get("error") or (out.get("warnings") or [None])[0]
    out["ok"] = bool(out.get("installed")) and bool(out.get("cuda_built")) and not problem and out.get("device_count", 0) > 0
    if problem and not out.get("error"):
        out["error"] = problem
    return out


@probe("cuda_init", needs=["profile", "replay"], timeout=TORCH_INIT_TIMEOUT + DRIVER_INIT_TIMEOUT + 10)
def cuda_init(profile: Any, replay: Replay = LIVE) -> dict[str, Any]:
    """CUDA initialisation, each in a child process with a timeout: the driver API (cuInit) and torch's runtime.

    Under a profile that expects no GPUs the (slow) torch import is not attempted; the driver API still is.
    """
    runtime = torch_runtime_init() if profile.expects_gpus else {
        "skipped": "profile expects no GPUs", "installed": None, "ok": False, "code": None, "timed_out": False}
    return {
        "driver": driver_api_init(replay.libcuda),
        "runtime": runtime,
        "kernel_module_version": kernel_module_version(replay.root),
        "env": {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "LD_LIBRARY_PATH")},
    }
