"""kuberay.nccl_ifname: GPU pods tell NCCL which interface to use (NCCL_SOCKET_IFNAME)."""
from dsv3_preflight import check
from dsv3_preflight.kuberay.job import judge_nccl_ifname
from dsv3_preflight.kuberay.verdict import result


@check("kuberay.nccl_ifname", needs=["kuberay_manifest"], tags=["kuberay"], timeout=10)
def nccl_ifname(kuberay_manifest):
    """NCCL_SOCKET_IFNAME is set in the runtime env or in every GPU group's Ray container (Ray Train no longer
    sets it)."""
    return result(kuberay_manifest, judge_nccl_ifname)
