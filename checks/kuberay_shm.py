"""kuberay.shm: GPU pods get a tmpfs at /dev/shm, not the container's 64 MiB default."""
from dsv3_preflight import check
from dsv3_preflight.kuberay.pods import judge_shm
from dsv3_preflight.kuberay.verdict import result


@check("kuberay.shm", needs=["kuberay_manifest"], tags=["kuberay"], timeout=10)
def shm(kuberay_manifest):
    """Every group that asks for GPUs mounts an emptyDir of medium Memory at /dev/shm (NCCL within a pod,
    DataLoader workers)."""
    return result(kuberay_manifest, judge_shm)
