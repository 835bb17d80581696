"""kuberay.deadline: a RayJob has an activeDeadlineSeconds (Ray Train retries its start without limit)."""
from dsv3_preflight import check
from dsv3_preflight.kuberay.job import judge_deadline
from dsv3_preflight.kuberay.verdict import result


@check("kuberay.deadline", needs=["kuberay_manifest"], tags=["kuberay"], timeout=10)
def deadline(kuberay_manifest):
    """Every RayJob sets activeDeadlineSeconds, so a start-up Ray Train retries forever ends."""
    return result(kuberay_manifest, judge_deadline)
