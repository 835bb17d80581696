"""The GPU domain. ``probes/`` touches the system: NVML (or its recorded replay, ``probes/replay.py``, the
hardware boundary tests use), the kernel log's Xid lines, the CUDA init children, Fabric Manager. The other
modules are pure helpers of the gpu.* checks: the fixes they print (``remedies``), Fabric Manager's rules and
the root cause of CUDA error 802 (``fabric_rules``), CUDA error causes (``cuda_causes``, ``cuda_errors``), FM's
log lines (``fm_log``), the rank-to-GPU mapping (``rankmap``), and the health rules: ``memory`` (ECC, row
remapping, page retirement), ``links`` (PCIe and NVLink), ``clocks``, ``modes`` (MIG, compute mode),
``recovery`` (the driver's reset status), ``xid`` (NVIDIA's Xid catalogue and log lines) and ``xid_rules``."""
