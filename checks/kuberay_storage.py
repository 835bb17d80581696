"""kuberay.storage: a RayJob's Ray Train storage path outlives the pods and every pod sees it."""
from dsv3_preflight import check
from dsv3_preflight.kuberay.storage import judge_storage
from dsv3_preflight.kuberay.verdict import result


@check("kuberay.storage", needs=["kuberay_manifest"], tags=["kuberay"], timeout=10)
def storage(kuberay_manifest):
    """The storage path the entrypoint states (or Ray Train's default ~/ray_results) is on a volume that outlives
    the pods (shutdownAfterJobFinishes deletes them) and that every pod mounts."""
    return result(kuberay_manifest, judge_storage)
