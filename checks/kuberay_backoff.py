"""kuberay.backoff: a RayJob's backoffLimit is 0 (each retry builds a new RayCluster)."""
from dsv3_preflight import check
from dsv3_preflight.kuberay.job import judge_backoff
from dsv3_preflight.kuberay.verdict import result


@check("kuberay.backoff", needs=["kuberay_manifest"], tags=["kuberay"], timeout=10)
def backoff(kuberay_manifest):
    """No RayJob retries by rebuilding its cluster (backoffLimit > 0)."""
    return result(kuberay_manifest, judge_backoff)
