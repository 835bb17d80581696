"""``version_drift``: versions that do not fit together (driver vs CUDA build, NCCL or torch across nodes, the Python stack).

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from .record import Decode, S, Signature
from .shared import DRIVER_FIX, VERSIONS_FIX

SIGNATURES: tuple[Signature, ...] = (
    S(id="nccl.version_mismatch", cls="version_drift", kind="cause", needles=(b"Mismatched NCCL version", b"NCCL version mismatch"),
      pattern=r"Mismatched NCCL version detected ?: rank (?P<rank_a>\d+) version (?P<va>\d+) rank (?P<rank_b>\d+) version (?P<vb>\d+)"
      r"|NCCL version mismatch with remote peer (?P<peer>\S+) \(local: (?P<va2>[^;,]+)[;,] remote:? (?P<vb2>[^)]+)\)",
      title="NCCL versions differ between ranks[[ ({va} vs {vb})]]",
      root_cause="Ranks loaded different NCCL libraries (a different torch/NCCL/container on some nodes); NCCL refuses to "
      "build the communicator.", fix=VERSIONS_FIX, check="gpu.versions", tier=0,
      example="node1:1234:1290 [0] init.cc:1043 NCCL WARN Mismatched NCCL version detected : rank 8 version 22105 rank 0 version 21903",
      source="NCCL src/init.cc (initTransportsRank) and src/ras/ras.cc format strings"),
    S(id="nccl.library_too_old", cls="version_drift", kind="cause", needles=(b"This application was compiled with NCCL version",
                                                                             b"compiled with too old version of NCCL"),
      pattern=r"(?:NCCL library is too old|NCCL library is not backwards compatible|The application was compiled with too old "
      r"version of NCCL)\. (?:This application|It) was compiled with NCCL version (?P<va>\S+?),? but is running with NCCL "
      r"(?:library )?version (?P<vb>[\d.]+)",
      title="The program was built for NCCL {va} but loads NCCL {vb}",
      root_cause="The NCCL library found at run time (LD_LIBRARY_PATH, a pip nvidia-nccl wheel, the system's libnccl) is not the "
      "one the program (torch) was built against, and NCCL refuses the mismatch.",
      fix="python -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'    # the NCCL torch loads\n"
      "pip list 2>/dev/null | grep -i nccl; ldconfig -p | grep libnccl; echo \"$LD_LIBRARY_PATH\"\n" + VERSIONS_FIX,
      check="gpu.versions", tier=0,
      example="gpu-a:4101:4101 [0] dev_runtime.cc:1428 NCCL WARN NCCL library is too old. This application was compiled with NCCL "
      "version 2.30.7, but is running with NCCL library version 2.27.3.",
      source="NCCL 2.30.7 src/dev_runtime.cc:1428 (format string)"),
    S(id="nccl.cuda_graph_unsupported", cls="version_drift", kind="cause", needles=(b"minimum version (R465)", b"for CUDA graph feature"),
      pattern=r"installed CUDA driver is older than the minimum version \(R465\)|NCCL does not support this CUDA version for CUDA graph feature",
      title="NCCL's CUDA-graph support needs a newer driver or CUDA build",
      root_cause="The program captures NCCL calls in a CUDA graph, which NCCL supports only with driver R465+ (CUDA 11.3) and an "
      "NCCL built with CUDA 11.3+: the driver or the CUDA build is older.",
      fix=VERSIONS_FIX, check="gpu.versions", tier=0,
      example="gpu-node07:24817:24901 [3] misc/strongstream.cc:27 NCCL WARN The installed CUDA driver is older than the minimum "
      "version (R465) required for NCCL's CUDA Graphs support",
      source="NCCL 2.9-2.14 src/misc/strongstream.cc, src/enqueue.cc (format strings)"),
    S(id="ompi.version_mismatch", cls="version_drift", kind="cause", needles=(b"detected a mismatch in versions between two processes",),
      pattern=r"Open MPI detected a mismatch in versions between two processes",
      title="Open MPI differs between nodes",
      root_cause="mpirun on one node met a daemon or process of another Open MPI version: the nodes' PATH or installs differ.",
      fix="mpirun --version; ssh \"${NODE:?another node}\" 'which orted; mpirun --version'    # the same everywhere\n"
      + VERSIONS_FIX, check="gpu.versions", tier=0,
      example="Open MPI detected a mismatch in versions between two processes.  This",
      source="Open MPI orte/mca/oob/tcp/help-oob-tcp.txt [version mismatch] (v4.1.8)"),
    S(id="torch.driver_too_old", cls="version_drift", kind="cause", needles=(b"driver on your system is too old",),
      pattern=r"NVIDIA driver on your system is too old(?: \(found version (?P<found>\d+)\))?",
      title="The NVIDIA driver is too old for this build[[ (the driver supports CUDA {found})]]",
      root_cause="The installed torch (or container) was built for a newer CUDA than the host driver supports.",
      fix=DRIVER_FIX, check="gpu.cuda_init", tier=0,
      example="RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver "
      "by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx",
      source="https://github.com/lllyasviel/Fooocus/issues/1313 (torch/cuda/__init__.py)"),
    # the training's Python lacks a library of the stack, or has one another library of it cannot import from (the
    # versions do not go together): the environment torchrun runs is not the one that was set up (or checked)
    S(id="python.stack_module_missing", cls="version_drift", kind="cause", needles=(b"No module named",),
      pattern=r"(?:ModuleNotFoundError|ImportError): No module named '(?P<module>(?:torch|deepspeed|transformers|peft|accelerate"
      r"|safetensors)(?:\.[\w.]+)?)'",
      title="The Python that ran this has no {module}",
      root_cause="The interpreter torchrun (or the job's command) started lacks a library of the training stack: another "
      "environment than the one set up and checked (a conda env or venv not activated on this node, a torchrun of "
      "another Python first on PATH, a container image without it), or an install that failed on this node.",
      fix="dsv3-preflight run --only env.torchrun_python --torchrun \"${TORCHRUN:?the torchrun command of the job}\"    # the "
      "Python it runs, against the one checked\n" + VERSIONS_FIX, check="env.torchrun_python", tier=0,
      example="ModuleNotFoundError: No module named 'torch'",
      source="CPython's import system (ModuleNotFoundError); produced here by `from torch.distributed.run import main` in a "
      "Python without torch (tests/test_torchrun_python.py's system Python)",
      # the rank's Python has no torch (or a torch that fails to import): no deadline was involved
      decode=(Decode(kind="torch_missing",
                     pattern=r"(?:ModuleNotFoundError|ImportError): (?P<what>No module named '?torch[\w.]*'?|.*\btorch\b.*)",
                     cause=lambda m: f"torch cannot be imported in the Python that runs the probe ({m['what'][:200]}): install it in the "
                                     "environment the training runs in",
                     remediation=lambda m: "python -c 'import sys, torch; print(sys.executable, torch.__version__)'   # in the training "
                                           "environment: the one the preflight must run in",
                     actor="job", cause_id="gpu.torch_missing"),)),
    S(id="python.stack_import_mismatch", cls="version_drift", kind="cause", needles=(b"cannot import name",),
      pattern=r"ImportError: cannot import name '(?P<name>\w+)' from '(?P<module>(?:torch|deepspeed|transformers|peft|accelerate"
      r"|safetensors)(?:\.[\w.]+)?)'",
      title="{module} has no {name}: the stack's libraries are of versions that do not go together",
      root_cause="One library of the training stack imports a name another one does not have in the installed version (peft "
      "newer or older than the transformers it was released with, a DeepSpeed built for another torch): the "
      "environment was assembled from versions never tested together, or differs from the one checked.",
      fix="python -m pip check    # with the Python torchrun runs: the requirements its packages do not meet\n"
      "dsv3-preflight run --only env.torchrun_python --torchrun \"${TORCHRUN:?the torchrun command of the job}\"\n"
      + VERSIONS_FIX, check="env.torchrun_python", tier=0,
      example="ImportError: cannot import name 'EncoderDecoderCache' from 'transformers' (/opt/conda/lib/python3.10/"
      "site-packages/transformers/__init__.py)",
      source="CPython's import system (ImportError 'cannot import name X from Y (path)', produced here); the example's name "
      "is one peft/peft_model.py imports from transformers"),
    S(id="torch.cpu_build", cls="version_drift", kind="cause", needles=(b"Torch not compiled with CUDA enabled", b"_cuda_", b"NCCL built in",
                                                                       b"NCCL support is not compiled"),
      pattern=r"Torch not compiled with CUDA enabled|module 'torch\._C' has no attribute '_cuda_\w+'"
      r"|Distributed package doesn't have NCCL built in|NCCL support is not compiled",
      title="The installed torch is a CPU-only build",
      root_cause="pip installed torch's CPU wheel (the default on some indexes, or a dependency pulled it in over the CUDA "
      "build): it has no CUDA and no NCCL, so the GPUs and the nccl backend are unusable.",
      fix="python -c 'import torch; print(torch.__version__, torch.version.cuda)'    # None: a CPU build\n"
      "pip install --force-reinstall \"torch==${TORCH_VERSION:?the torch version the other nodes run}\" "
      "--index-url \"https://download.pytorch.org/whl/${CUDA_TAG:?CUDA tag the driver supports, e.g. cu124}\"\n"
      "dsv3-preflight run --only gpu.cuda_init",
      check="gpu.cuda_init", tier=0,
      example="AssertionError: Torch not compiled with CUDA enabled",
      source="torch/cuda/__init__.py (_lazy_init); torch/distributed/distributed_c10d.py; produced here by torch 2.13.0+cpu "
      "under torchrun with the nccl backend"),
    S(id="cuda.insufficient_driver", cls="version_drift", kind="cause", needles=(b"driver version is insufficient", b"InsufficientDriver",
                                                                                b"INSUFFICIENT_DRIVER"),
      pattern=r"CUDA driver version is insufficient for CUDA runtime version|cudaErrorInsufficientDriver|CUDA_ERROR_INSUFFICIENT_DRIVER",
      title="CUDA driver version is insufficient for the CUDA runtime",
      root_cause="The program's CUDA runtime is newer than the host driver supports (CUDA error 35).",
      fix=DRIVER_FIX, check="gpu.cuda_init", tier=0,
      example="ERROR: cudaGetDeviceCount CUDA driver version is insufficient for CUDA runtime version",
      source="https://github.com/uzh-rpg/rpg_open_remode/issues/9 (cudaGetErrorString(35))"),
    S(id="container.no_gpu_runtime", cls="cuda_fabric", kind="cause", needles=(b"could not select device driver",),
      pattern=r"could not select device driver \"[^\"]*\" with capabilities: \[\[gpu\]\]",
      title="The container runtime on this node cannot give containers GPUs (no NVIDIA container toolkit)",
      root_cause="Docker was asked for GPUs (--gpus) and has no device driver for them: the NVIDIA container toolkit is not "
      "installed on the node, or Docker was not restarted after it was.",
      fix="nvidia-ctk --version; docker info --format '{{json .Runtimes}}'    # on that node: the toolkit and Docker's runtimes\n"
      "# install nvidia-container-toolkit, then: nvidia-ctk runtime configure --runtime=docker && systemctl restart docker\n"
      "dsv3-preflight run --only gpu.cuda_init    # inside the job's container, on that node",
      check="gpu.cuda_init", tier=0,
      example="docker: Error response from daemon: could not select device driver \"\" with capabilities: [[gpu]].",
      source="Docker's daemon (daemon/devices.go: 'could not select device driver %q with capabilities: %v'); NVIDIA "
      "container toolkit install guide"),
    S(id="container.nvml_lost", cls="cuda_fabric", kind="cause", needles=(b"Failed to initialize NVML: Unknown Error",),
      pattern=r"Failed to initialize NVML: Unknown Error",
      title="NVML cannot reach the GPUs from inside the container (Failed to initialize NVML: Unknown Error)",
      root_cause="A running container lost its GPUs: with systemd managing the container's cgroups, a reload of systemd's units "
      "(systemctl daemon-reload, often a package upgrade's) drops the GPU device rules, and recent runc needs "
      "/dev/char symlinks to restore them (NVIDIA/nvidia-docker#1730). The host still sees the GPUs; the container "
      "must be recreated.",
      fix="nvidia-smi -L    # on the host: the GPUs are there\n"
      "# recreate the job's containers (a restart of the pod or container gives the GPUs back); so it does not recur:\n"
      "nvidia-ctk system create-dev-char-symlinks --create-all    # or run Docker with native.cgroupdriver=cgroupfs\n"
      "dsv3-preflight run --only gpu.cuda_init    # inside the job's container, on that node",
      check="gpu.cuda_init", tier=0,
      example="Failed to initialize NVML: Unknown Error",
      source="NVML's wording; NVIDIA/nvidia-docker#1730 (containers losing access to GPUs after a systemd reload)"),
    S(id="container.cuda_requirement", cls="version_drift", kind="cause", needles=(b"unsatisfied condition: cuda",),
      pattern=r"requirement error: unsatisfied condition: (?P<cond>cuda\s*[<>=]+\s*[\d.]+)",
      title="The container needs {cond}, more than the host's driver supports",
      root_cause="The NVIDIA container hook compares the image's CUDA requirement (NVIDIA_REQUIRE_CUDA, set by the CUDA base "
      "image) with the host driver and refuses to start the container: the image was built for a newer CUDA than "
      "the node's driver supports.",
      fix="nvidia-smi | head -4    # the driver's CUDA version on this node\n"
      "docker inspect --format '{{range .Config.Env}}{{println .}}{{end}}' \"${IMAGE:?the image}\" | grep NVIDIA_REQUIRE_CUDA\n"
      "# upgrade the node's driver, or use an image built for the driver's CUDA (an earlier tag)\n"
      "dsv3-preflight run --only gpu.versions",
      check="gpu.versions", tier=0,
      example="nvidia-container-cli: requirement error: unsatisfied condition: cuda>=12.4, please update your driver to a newer "
      "version, or use an earlier cuda container: unknown.",
      source="https://github.com/vllm-project/vllm/issues/5635 (NVIDIA/libnvidia-container src/cli/common.c, "
      "'unsatisfied condition: %s, please update your driver to a newer version, or use an earlier cuda container')"),
    S(id="cuda.unsupported_ptx", cls="version_drift", kind="cause", needles=(b"unsupported toolchain", b"UnsupportedPtxVersion", b"UNSUPPORTED_PTX_VERSION"),
      pattern=r"PTX was compiled with an unsupported toolchain|cudaErrorUnsupportedPtxVersion|CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
      title="PTX compiled by a newer CUDA than the driver supports",
      root_cause="Kernels were built with a CUDA toolkit newer than the host driver (CUDA error 222).",
      fix=DRIVER_FIX, check="gpu.cuda_init", tier=0,
      example="CUDA Runtime error cudaEventCreate(&begin_) # the provided PTX was compiled with an unsupported toolchain., code = cudaErrorUnsupportedPtxVersion [ 222 ]",
      source="https://github.com/NVIDIA-AI-IOT/Lidar_AI_Solution/issues/289"),
    S(id="cuda.no_kernel_image", cls="version_drift", kind="cause", needles=(b"no kernel image is available", b"NoKernelImageForDevice",
                                                                            b"is not compatible with the current PyTorch installation"),
      pattern=r"no kernel image is available for execution on the device|cudaErrorNoKernelImageForDevice"
      r"|with CUDA capability (?P<sm>sm_\d+) is not compatible with the current PyTorch installation",
      title="This build has no kernels for the GPU's architecture[[ {sm}]]",
      root_cause="torch or an extension was compiled for other GPU architectures (TORCH_CUDA_ARCH_LIST) or an older CUDA "
      "that does not know this GPU.",
      fix="python -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_arch_list())'\n"
      "# install a build that includes this GPU's sm_XX, or rebuild the extension with TORCH_CUDA_ARCH_LIST set for it",
      check="gpu.versions", tier=0,
      example="RuntimeError: CUDA error: no kernel image is available for execution on the device",
      source="torch c10 CUDA error text (cudaGetErrorString(209)); torch/cuda/__init__.py capability warning"),
    S(id="nvml.driver_library_mismatch", cls="version_drift", kind="cause", needles=(b"Driver/library version mismatch", b"LIB_RM_VERSION_MISMATCH"),
      pattern=r"Driver/library version mismatch|NVML_ERROR_LIB_RM_VERSION_MISMATCH",
      title="NVML: the loaded kernel driver and the user-space driver libraries differ",
      root_cause="The driver was upgraded without reloading the kernel module (or the container carries other driver "
      "libraries than the host).",
      fix="cat /proc/driver/nvidia/version; nvidia-smi\n# reboot the node (or unload and reload the nvidia modules) after a driver upgrade",
      check="gpu.versions", tier=0,
      example="Failed to initialize NVML: Driver/library version mismatch",
      source="NVML nvmlErrorString(NVML_ERROR_LIB_RM_VERSION_MISMATCH)"),
    S(id="deepspeed.torch_mismatch", cls="version_drift", kind="cause", needles=(b"DeepSpeed ops were compiled", b"does not match the version torch was compiled with",
                                                                                b"mismatches the version that was used to compile PyTorch",
                                                                                b"compiled with different CUDA major versions"),
      pattern=r"DeepSpeed ops were compiled and installed with a different version|Installed CUDA version (?P<have>\S+) does not match the version torch was compiled with (?P<want>\S+?),?"
      r"|The detected CUDA version \((?P<have2>[^)]+)\) mismatches the version that was used to compile\s+PyTorch \((?P<want2>[^)]+)\)"
      r"|compiled with different CUDA major versions",
      title="A compiled extension does not match the installed torch / CUDA",
      root_cause="DeepSpeed ops (or another extension) were built against another torch or CUDA than the one running.",
      fix="python -c 'import torch; print(torch.__version__, torch.version.cuda)'; ds_report | head -30\n"
      "pip install --force-reinstall --no-cache-dir deepspeed    # rebuild against the installed torch",
      check="gpu.versions", tier=0,
      example="RuntimeError: PyTorch version mismatch! DeepSpeed ops were compiled and installed with a different version than what is being used at runtime.",
      source="https://github.com/S95Sedan/Deepspeed-Windows/issues/4 (deepspeed/ops/op_builder/builder.py)"),
    S(id="python.undefined_symbol", cls="version_drift", kind="cause", needles=(b"undefined symbol",),
      pattern=r"(?P<lib>[\w.+-]+\.so(?:\.\d+)*): undefined symbol: (?P<sym>\S+)|undefined symbol: (?P<sym2>nccl\w+|cuda\w+|_ZN\S+)",
      title="A compiled library does not match what it is loaded with[[ (undefined symbol {sym})]]",
      root_cause="A binary extension or libnccl/libcudart was built against a different version of torch, NCCL or CUDA "
      "than the one installed.", fix=VERSIONS_FIX, check="gpu.versions", tier=0,
      example="ImportError: /usr/local/lib/python3.10/dist-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclCommRegister",
      source="glibc dynamic loader message; torch + system NCCL mismatch"),
)
