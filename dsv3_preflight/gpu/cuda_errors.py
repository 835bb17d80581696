"""CUDA error codes the GPU checks decode, with the driver API name, the runtime name and message.

Numbers and names from the CUDA driver API (``CUresult``) and runtime API (``cudaError_t``)
references; the messages are what ``cudaGetErrorString`` returns (and torch prints after "Error N:").
"""
from __future__ import annotations

import re
from typing import Any

#: code -> (driver API name, runtime API name, runtime message, what it usually means here)
CUDA_ERRORS: dict[int, tuple[str, str, str, str]] = {
    0: ("CUDA_SUCCESS", "cudaSuccess", "no error", "initialised"),
    3: ("CUDA_ERROR_NOT_INITIALIZED", "cudaErrorInitializationError", "initialization error",
        "the driver could not be initialised (often after a failed cuInit in a forked process)"),
    34: ("CUDA_ERROR_STUB_LIBRARY", "cudaErrorStubLibrary", "CUDA driver is a stub library",
         "the libcuda.so found is the toolkit's stub, not the driver's library: fix LD_LIBRARY_PATH"),
    35: ("CUDA_ERROR_INSUFFICIENT_DRIVER", "cudaErrorInsufficientDriver",
         "CUDA driver version is insufficient for CUDA runtime version",
         "the driver is older than the CUDA runtime torch was built with"),
    46: ("CUDA_ERROR_DEVICE_UNAVAILABLE", "cudaErrorDevicesUnavailable",
         "CUDA-capable device(s) is/are busy or unavailable",
         "GPUs in exclusive-process compute mode held by another process, or fenced off"),
    100: ("CUDA_ERROR_NO_DEVICE", "cudaErrorNoDevice", "no CUDA-capable device is detected",
          "no GPU visible to this process: CUDA_VISIBLE_DEVICES empty/invalid, or a container started without --gpus"),
    101: ("CUDA_ERROR_INVALID_DEVICE", "cudaErrorInvalidDevice", "invalid device ordinal",
          "a device index beyond the visible GPUs"),
    304: ("CUDA_ERROR_OPERATING_SYSTEM", "cudaErrorOperatingSystem", "OS call failed or operation not supported on this OS",
          "an OS call failed (often /dev/nvidia* permissions or cgroup device rules)"),
    801: ("CUDA_ERROR_NOT_SUPPORTED", "cudaErrorNotSupported", "operation not supported", "operation not supported"),
    802: ("CUDA_ERROR_SYSTEM_NOT_READY", "cudaErrorSystemNotReady", "system not yet initialized",
          "the system is not ready: on NVSwitch machines, Fabric Manager has not (successfully) configured the fabric"),
    803: ("CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", "cudaErrorSystemDriverMismatch",
          "system has unsupported display driver / cuda driver combination",
          "the loaded kernel module and the user-space driver library (libcuda) are different versions"),
    804: ("CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE", "cudaErrorCompatNotSupportedOnDevice",
          "forward compatibility was attempted on non supported HW",
          "a cuda-compat (forward compatibility) libcuda was loaded on a GPU that does not support it"),
    999: ("CUDA_ERROR_UNKNOWN", "cudaErrorUnknown", "unknown error",
          "an unknown driver error: often a GPU fallen off the bus (Xid 79) or a driver needing a reset"),
}


def decode(code: int | None) -> dict[str, Any]:
    """``{"code", "name", "runtime_name", "message", "meaning"}`` of a CUDA error code."""
    if code is None:
        return {"code": None, "name": None, "runtime_name": None, "message": None, "meaning": None}
    known = CUDA_ERRORS.get(int(code))
    if known is None:
        return {"code": int(code), "name": f"CUDA error {code}", "runtime_name": None, "message": None,
                "meaning": "an error code this tool does not decode"}
    name, runtime, message, meaning = known
    return {"code": int(code), "name": name, "runtime_name": runtime, "message": message, "meaning": meaning}


_TORCH_ERROR = re.compile(r"Error (\d+): ([^(\n]+?)\s*(?:\(Triggered|$)", re.M)


def parse_torch_cuda_error(text: str | None) -> dict[str, Any] | None:
    """The code and message inside torch's CUDA init warning/exception, or None.

    torch prints, for example: "CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did
    you run some cuda functions before calling NumCudaDevices() that might have already set an error?
    Error 802: system not yet initialized (Triggered internally at ...)".
    """
    if not text:
        return None
    m = _TORCH_ERROR.search(text)
    if m:
        return {"code": int(m.group(1)), "message": m.group(2).strip()}
    for code, (_, _, message, _) in CUDA_ERRORS.items():
        if code and message in text:
            return {"code": code, "message": message}
    return None
