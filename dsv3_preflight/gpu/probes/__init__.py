"""Probes of the GPU domain: NVML (or its replay, ``replay.py``, the hardware boundary tests and
``--facts-in`` use), the CUDA driver/runtime init children, Fabric Manager and the version inventory."""
