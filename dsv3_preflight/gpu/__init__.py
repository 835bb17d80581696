"""Helpers of the GPU stack checks: CUDA error decoding, Fabric Manager log reading, NVML replay."""
