"""The GPU domain. ``probes/`` touches the system (NVML or its recorded replay, the CUDA init children,
Fabric Manager); the other modules are pure helpers of the gpu.* checks: CUDA error decoding
(``cuda_errors``), Fabric Manager log reading (``fm_log``), the rank-to-GPU mapping (``rankmap``)."""
