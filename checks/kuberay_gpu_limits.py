"""kuberay.gpu_limits: the worker groups' nvidia.com/gpu × replicas hold the ScalingConfig the entrypoint states."""
from dsv3_preflight import check
from dsv3_preflight.kuberay.pods import judge_gpus
from dsv3_preflight.kuberay.verdict import result


@check("kuberay.gpu_limits", needs=["kuberay_manifest"], tags=["kuberay"], timeout=10)
def gpu_limits(kuberay_manifest):
    """num_workers × GPUs per worker, as the entrypoint or its environment states them, fit the pods' GPU limits
    (a worker in one pod); SKIP with what could not be inferred when the script sets them."""
    return result(kuberay_manifest, judge_gpus)
