"""Probes of the GPU domain: NVML with the GPUs' health readings (``nvml``, ``health``), the kernel log's Xid
events (``kernel_log``), the CUDA driver/runtime init children, Fabric Manager and the version inventory.
``replay.py`` is the hardware boundary: recorded NVML documents and kernel logs of real machines stand in for
the hardware in tests and offline replays."""
