"""Lines that look like errors and are not (NCCL without libibverbs, a graph search falling back, torch trying IPv6 first): tried before any cause, so a cause never takes them.

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from .record import S, Signature

SIGNATURES: tuple[Signature, ...] = (
    S(id="nccl.no_libibverbs", cls=None, kind="benign", needles=(b"Failed to open libibverbs",), pattern=r"Failed to open libibverbs",
      title="NCCL: no libibverbs (no InfiniBand on this machine; NCCL uses sockets)",
      example="v100-gpu-1:14926:14926 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]",
      source="https://github.com/NVIDIA/nccl-tests/issues/82"),
    S(id="nccl.no_path_for_pattern", cls=None, kind="benign", needles=(b"Could not find a path for pattern",),
      pattern=r"Could not find a path for pattern \d+, falling back",
      title="NCCL graph search fell back to a simpler order (performance, not an error)",
      example="Meowth:8756:8772 [1] graph/search.cc:890 NCCL WARN Could not find a path for pattern 4, falling back to simple order",
      source="https://github.com/NVIDIA/nccl-tests/issues/131"),
    S(id="nccl.plugin_not_found", cls=None, kind="benign", needles=(b"NET/Plugin",),
      pattern=r"NET/Plugin ?: ?(?:Plugin load \(libnccl-net\.so\) returned|No plugin found|Could not find: libnccl-net|Failed to find ncclNetPlugin)",
      title="NCCL found no network plugin and uses its own transports (normal without one installed)",
      example="node1:97:97 [0] NCCL WARN NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open shared object file: No such file or directory",
      source="NCCL src/plugin/net.cc (older versions print it at WARN)"),
    # torch's socket.cpp tries every address of a listen or connect in turn (IPv6 [::] first, then IPv4) and warns
    # for each whose socket() fails: errno 97 on a host with IPv6 disabled, after which IPv4 is used. Only the final
    # "has failed to listen on any local network address" / "failed to connect to any network address" fails
    S(id="c10d.ipv6_socket_unsupported", cls=None, kind="benign", needles=(b"socket cannot be initialized",),
      pattern=r"The (?:server|client) socket cannot be initialized (?:on|to connect to) \S+ \(errno: 97 - Address family not "
      r"supported by protocol\)",
      title="torch could not open an IPv6 socket (IPv6 is disabled here) and used IPv4",
      example="[W1226 15:35:11.626067741 socket.cpp:752] [c10d] The client socket cannot be initialized to connect to "
              "[sws-8h100grid-05.mpi-sws.org]:8000 (errno: 97 - Address family not supported by protocol).",
      source="https://github.com/sgl-project/sglang/issues/2561 (torch/csrc/distributed/c10d/socket.cpp: tryListen / "
             "tryConnect's recordError 'cannot be initialized' after ::socket() fails; EAFNOSUPPORT)"),
    # DeepSpeed's op builder accepts a CUDA toolkit whose minor version differs from torch's (same major), or any with
    # DS_SKIP_CUDA_CHECK=1, and says so; only "unable to compile cuda/cpp extensions without a matching cuda version"
    # stops it (deepspeed.torch_mismatch)
    S(id="deepspeed.cuda_minor_mismatch_accepted", cls=None, kind="benign", needles=(b"this combination",),
      pattern=r"does not match the version torch was compiled with \S+? ?(?:but since the APIs are compatible, accepting this "
      r"combination|.*Allowing this combination)",
      title="DeepSpeed accepted a CUDA toolkit of another minor version than torch's (same major)",
      example="Installed CUDA version 12.1 does not match the version torch was compiled with 12.4 but since the APIs are "
              "compatible, accepting this combination",
      source="deepspeed/ops/op_builder/builder.py (assert_no_cuda_mismatch: cuda_minor_mismatch_ok, DS_SKIP_CUDA_CHECK)"),
    # other tools' errors that their tool goes on after: pytorch/cpuinfo probing ARM's SVE or a container's missing
    # /sys/devices/system/cpu lists (torch imports it), wandb's system monitor missing a GPU metric NVML does not
    # support, the dynamic loader skipping an LD_PRELOAD library it cannot open ("ignored")
    S(id="tools.error_they_go_on_after", cls=None, kind="benign", needles=(b"Error in cpuinfo", b"Failed to sample metric", b"cannot be preloaded"),
      pattern=r"Error in cpuinfo: (?:prctl\(PR_SVE_GET_VL\) failed|failed to parse (?:the list of (?:possible|present) "
      r"processors|both lists of possible and present processors))|wandb: ERROR Failed to sample metric"
      r"|ERROR: ld\.so: object '[^']*' from LD_PRELOAD cannot be preloaded \([^)]*\): ignored",
      title="a tool reported an error it goes on after (cpuinfo, wandb's system monitor, the loader's LD_PRELOAD)",
      example="Error in cpuinfo: prctl(PR_SVE_GET_VL) failed",
      source="pytorch/cpuinfo (src/arm/linux, src/linux/processors.c: logged, initialisation goes on); wandb "
             "sdk/internal/system/assets (termerror 'Failed to sample metric: ...', repeat=False); glibc elf/rtld.c "
             "('cannot be preloaded ...: ignored.')"),
    # NCCL goes on after each of these (CollNet falls back to the network; CUDA replaces NVML; ncclCudaLibraryInit's
    # result is ignored in init.cc): NCCL 2.6-2.17 printed them at WARN
    S(id="nccl.fallback_warn", cls=None, kind="benign", needles=(b"Cannot initialize CollNet", b"CollNet currently only supports",
                                                                 b"No NVML, trying to use CUDA", b"Failed to find CUDA library"),
      pattern=r"Cannot initialize CollNet, using \S+ instead|CollNet currently only supports up to \d+ GPUs per node"
      r"|No NVML, trying to use CUDA instead|Failed to find CUDA library",
      title="NCCL fell back to another path (CollNet, NVML or libcuda missing): not an error",
      example="gpu-node07:24817:24901 [3] misc/cudawrap.cc:90 NCCL WARN Failed to find CUDA library in  (NCCL_CUDA_PATH=)",
      source="NCCL 2.6-2.17 src/init.cc, src/graph/xml.cc, src/misc/cudawrap.cc (format strings)"),
    S(id="text.not_an_error", cls=None, kind="benign", needles=(b"This is not an error", b"This is not an error"),
      pattern=r"This is not an error", title="a library says the line is not an error",
      example="UserWarning: Grad strides do not match bucket view strides. This may indicate grad was not created "
              "according to the gradient layout contract, or that the param's strides changed since DDP was "
              "constructed.  This is not an error, but may impair performance.",
      source="torch/csrc/distributed/c10d/reducer.cpp"),
    S(id="text.null_error", cls=None, kind="benign", needles=(b'"raw_error": null', b"'raw_error': None", b"exitcode: 0", b"exit code: 0",
                                                               b"return code = 0", b"Out of bounds values : 0"),
      pattern=r"\"raw_error\": null|'raw_error': None|exit ?code:? 0\b|return code = 0\b|Out of bounds values : 0 OK",
      title="an exit status or error field that says success",
      example='{"name": "torchelastic.worker.status.SUCCEEDED", "source": "WORKER", "raw_error": null}',
      source="torch/distributed/elastic/events (torchelastic worker status events)"),
)
