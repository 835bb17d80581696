"""``cuda_fabric``: CUDA cannot initialise (the driver, Fabric Manager, NVSwitch).

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from .record import S, Signature
from .shared import FM_FIX

SIGNATURES: tuple[Signature, ...] = (
    S(id="fabricmanager.version_mismatch", cls="cuda_fabric", kind="cause", needles=(b"fabric manager NVIDIA GPU driver interface version",),
      pattern=r"fabric manager NVIDIA GPU driver interface version (?P<fm>\S+) do(?:n['’]t|esn['’]t) match with driver version (?P<driver>\d+(?:\.\d+)+)",
      title="Fabric Manager {fm} does not match the driver {driver}",
      root_cause="nv-fabricmanager refuses to start when its version differs from the kernel driver's; without it the NVSwitch "
      "fabric is never configured and CUDA fails with error 802 (system not yet initialized).",
      fix=FM_FIX, check="gpu.fabric_manager", tier=0,
      example="nv-fabricmanager[3228]: fabric manager NVIDIA GPU driver interface version 530.30.02 don't match with driver "
      "version 530.41.03. Please update with matching NVIDIA driver package.",
      source="https://github.com/NVIDIA/gpu-operator/issues/544"),
    S(id="fabricmanager.service_failed", cls="cuda_fabric", kind="cause", needles=(b"fabricmanager", b"fabric manager", b"Fabric Manager", b"FabricManager"),
      pattern=r"nvidia-fabricmanager(?:\.service)?: (?:Main|Control) process exited|Failed to start (?:NVIDIA )?[Ff]abric ?[Mm]anager"
      r"|(?:[Ff]abric ?[Mm]anager|fabricmanager)\S*.{0,80}?(?:failed|error|not running|inactive|timed out)",
      title="nvidia-fabricmanager is not running",
      root_cause="The Fabric Manager service failed or is stopped, so the NVSwitch fabric is not configured and CUDA init fails "
      "with error 802 on every GPU of the node.", fix=FM_FIX, check="gpu.fabric_manager", tier=0,
      example="Nov 05 13:55:26 node1 systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited, status=1/FAILURE",
      source="systemd unit failure format; https://github.com/akash-network/website/pull/632",
      consequence_of=("fabricmanager.version_mismatch",)),
    S(id="cuda.error_802", cls="cuda_fabric", kind="cause",
      needles=(b"system not yet initialized", b"SystemNotReady", b"SYSTEM_NOT_READY", b"returned 802", b"error 802", b"Error 802", b"(802)"),
      pattern=r"system not yet initialized|cudaErrorSystemNotReady|CUDA_ERROR_SYSTEM_NOT_READY|returned 802\b|[Ee]rror 802\b|\(802\)",
      title="CUDA error 802: system not yet initialized",
      root_cause="On NVSwitch systems (HGX A100/H100) CUDA cannot initialise until nv-fabricmanager has configured the fabric: "
      "the service is missing, stopped, or its version differs from the driver's.", fix=FM_FIX, check="gpu.cuda_init", tier=0,
      example="CUDA error at bandwidthTest.cu:256 code=802(cudaErrorSystemNotReady) \"cudaSetDevice(currentDevice)\"",
      source="https://github.com/pytorch/pytorch/issues/35710",
      consequence_of=("fabricmanager.version_mismatch", "fabricmanager.service_failed")),
    S(id="cuda.error_803", cls="cuda_fabric", kind="cause", needles=(b"unsupported display driver / cuda driver combination", b"SystemDriverMismatch",
                                                                   b"SYSTEM_DRIVER_MISMATCH", b"803 vs"),
      pattern=r"unsupported display driver / cuda driver combination|cudaErrorSystemDriverMismatch|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH|\(803 vs\.? 0\)",
      title="CUDA error 803: the CUDA user-space driver does not match the kernel driver",
      root_cause="libcuda.so (often a cuda-compat copy inside the container, or a driver upgraded without a reboot) is a "
      "different version from the loaded kernel module.",
      fix="cat /proc/driver/nvidia/version; ldconfig -p | grep libcuda.so\n"
      "# use the host's libcuda (nvidia-container-toolkit), drop a cuda-compat directory from LD_LIBRARY_PATH, or reboot after a driver upgrade",
      check="gpu.cuda_init", tier=0,
      example="Error: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() "
      "that might have already set an error? Error 803: system has unsupported display driver / cuda driver combination",
      source="https://github.com/pytorch/pytorch/issues (torch c10/cuda/CUDAFunctions.cpp with cudaGetErrorString(803))"),
    S(id="cuda.error_804", cls="cuda_fabric", kind="cause", needles=(b"forward compatibility was attempted", b"CompatNotSupportedOnDevice",
                                                                   b"COMPAT_NOT_SUPPORTED_ON_DEVICE"),
      pattern=r"forward compatibility was attempted on non supported HW|cudaErrorCompatNotSupportedOnDevice|CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
      title="CUDA error 804: forward compatibility was attempted on non supported HW",
      root_cause="The container's CUDA forward-compatibility libraries (cuda-compat) need a driver branch or a data-center "
      "GPU this host does not have.",
      fix="nvidia-smi | head -4\n"
      "# upgrade the host driver to the container's CUDA branch, or remove /usr/local/cuda/compat from LD_LIBRARY_PATH:\n"
      "export LD_LIBRARY_PATH=$(printf %s \"$LD_LIBRARY_PATH\" | tr : '\\n' | grep -v cuda/compat | paste -sd:)",
      check="gpu.cuda_init", tier=0,
      example="RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
      "NumCudaDevices() that might have already set an error? Error 804: forward compatibility was attempted on non supported HW",
      source="https://github.com/gpustack/gpustack/issues/1254"),
    S(id="nccl.nvls_failure", cls="cuda_fabric", kind="cause", needles=(b"nvls.cc", b"NVLS", b"NVLink SHARP", b"Multicast", b"IMEX"),
      pattern=r"nvls\.cc:\d+ NCCL WARN Cuda failure|NVLink SHARP \(NVLS\)|cuMulticast\w* failed|Multicast memory.*(?:fail|error)"
      r"|IMEX.{0,60}(?:fail|error|not found|missing)",
      title="NVLink SHARP (NVLS) multicast setup failed",
      root_cause="NCCL's NVLS needs the NVSwitch fabric configured by nv-fabricmanager (and IMEX channels on multi-node NVLink); "
      "Fabric Manager is not running, or was restarted while processes held the GPUs.",
      fix=FM_FIX + "\nexport NCCL_NVLS_ENABLE=0    # to run meanwhile without NVLS", check="gpu.fabric_manager", tier=0,
      example="node23:12098:12141 [2] transport/nvls.cc:244 NCCL WARN Cuda failure 1 'invalid argument'",
      source="https://github.com/NVIDIA/nccl/issues/1488 (NCCL src/transport/nvls.cc)"),
    S(id="cuda.no_driver", cls="cuda_fabric", kind="cause", needles=(b"Found no NVIDIA driver", b"NVIDIA driver is not loaded", b"driver initialization failed",
                                                                   b"nvml error: driver not loaded",
                                                                   b"NVIDIA-SMI has failed because it couldn't communicate", b"failed: Driver Not Loaded"),
      pattern=r"Found no NVIDIA driver on your system|CUDA driver initialization failed|NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
      r"|nvmlInit\w*\(\) failed: Driver Not Loaded"  # NCCL <= 2.17 misc/nvmlwrap.cc
      r"|nvml error: driver not loaded",  # libnvidia-container's hook starting a container on a node without the driver
      title="No usable NVIDIA driver",
      root_cause="The kernel driver is not loaded (or not visible in the container): CUDA cannot initialise.",
      fix="nvidia-smi; lsmod | grep nvidia; dmesg | grep -i nvrm | tail\n"
      "# in a container: run with the NVIDIA runtime (--gpus all / nvidia-container-toolkit)",
      check="gpu.cuda_init", tier=0,
      example="RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx",
      source="torch/cuda/__init__.py (_check_driver)"),
    S(id="cuda.no_device_visible", cls="cuda_fabric", kind="cause", needles=(b"No CUDA GPUs are available", b"no GPUs found",
                                                                            b"no CUDA-capable device is detected", b"cudaErrorNoDevice",
                                                                            b"CUDA_ERROR_NO_DEVICE"),
      pattern=r"No CUDA GPUs are available|ProcessGroupNCCL is only supported with GPUs, no GPUs found"
      r"|no CUDA-capable device is detected|cudaErrorNoDevice|CUDA_ERROR_NO_DEVICE",
      title="This process sees no GPU",
      root_cause="CUDA found no device in this process: CUDA_VISIBLE_DEVICES is empty or names GPUs the node does not have (Ray "
      "sets it to what a task requested: a task or actor without num_gpus gets none), the container was started "
      "without GPUs (no /dev/nvidia* inside), or the job landed on a node without GPUs (a login node).",
      fix="echo \"CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}\"; nvidia-smi -L; ls /dev/nvidia*    # where the rank runs\n"
      "# Ray: request the GPUs (@ray.remote(num_gpus=1), ScalingConfig(use_gpu=True)); containers: --gpus all "
      "(Kubernetes: nvidia.com/gpu limits)\n"
      "dsv3-preflight run --only gpu.cuda_init    # on each node, in the job's environment",
      check="gpu.cuda_init", tier=0,
      example="ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!",
      source="torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (TORCH_CHECK at::cuda::getNumGPUs() != 0); torch/cuda "
      "_lazy_init ('No CUDA GPUs are available'); cudaGetErrorString(100)"),
)
