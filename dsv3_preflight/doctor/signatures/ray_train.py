"""``ray_train`` (not a corpus class): Ray Train could not start its worker group or persist to its storage path.

Ray Train V2 (the default since Ray 2.51) retries a worker group that cannot start without limit
(``FailureConfig.controller_failure_limit`` is -1): a ScalingConfig the cluster cannot place waits forever, printing
the same timeout each round. A ``storage_path`` that only the head sees fails at the first checkpoint. Every example is
Ray's own text (Ray 2.60's source, and the older V2 controller's for the retry line); tests/data/doctor holds two
recorded runs (``ray_train_startup_retry.log``, ``ray_train_storage_head_local.log``).

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from .classes import RAY_TRAIN_CLASS
from .record import S, Signature

SCALING_FIX = (
    "ray status    # on the head: what the nodes hold beside the pending demand\n"
    "# make ScalingConfig(num_workers=..., resources_per_worker=...) fit the nodes (a worker never spans two nodes), or add nodes;\n"
    "# and bound the retries: RunConfig(failure_config=FailureConfig(controller_failure_limit=3))\n"
    "dsv3-preflight lint \"${MANIFEST:?the RayJob or RayCluster YAML, on KubeRay}\"    # kuberay.gpu_limits: GPUs per pod vs the ScalingConfig")
STORAGE_FIX = (
    "# storage_path must be one place every node reads and writes: a bucket URI or a shared file system on every node\n"
    "# RunConfig(storage_path=\"s3://BUCKET/PATH\") or RunConfig(storage_path=\"/mnt/cluster_storage/RUN_NAME\")\n"
    "dsv3-preflight lint \"${MANIFEST:?the RayJob or RayCluster YAML, on KubeRay}\"    # kuberay.storage: where the path lives in the pods")

SIGNATURES: tuple[Signature, ...] = (
    S(id="raytrain.worker_group_startup_timeout", cls=RAY_TRAIN_CLASS, kind="cause",
      needles=(b"worker group startup timed out",),
      pattern=r"The worker group startup timed out after (?P<timeout>[\d.]+) seconds waiting for (?P<workers>\d+) workers",
      title="Ray Train could not place its {workers} workers within {timeout} s: the ScalingConfig waits for resources",
      root_cause="Ray Train's placement group for num_workers × resources_per_worker stayed pending: the nodes do not hold "
      "that many workers (GPUs, CPUs, memory or accelerator_type per worker; a worker never spans two nodes), or a node "
      "left. Ray Train V2 retries the start without limit (controller_failure_limit -1), so the run waits forever "
      "unless an autoscaler adds nodes.",
      fix=SCALING_FIX, check="kuberay.gpu_limits", tier=1, transient=True,
      example="ray.train.v2._internal.exceptions.WorkerGroupStartupTimeoutError: The worker group startup timed out after "
      "60.0 seconds waiting for 8 workers. Potential causes include: (1) temporary insufficient cluster resources while "
      "waiting for autoscaling (ignore this warning in this case), (2) infeasible resource request where the provided "
      "`ScalingConfig` cannot be satisfied), and (3) transient network issues. Set the "
      "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S environment variable to increase the timeout.",
      source="Ray 2.60 ray/train/v2/_internal/exceptions.py (WorkerGroupStartupTimeoutError); recorded in "
      "tests/data/doctor/ray_train_startup_retry.log"),
    S(id="raytrain.placement_group_timeout", cls=RAY_TRAIN_CLASS, kind="cause",
      needles=(b"Placement group creation timed out",),
      pattern=r"Placement group creation timed out\. Make sure your cluster either has enough resources",
      title="Ray Train's placement group timed out: the cluster does not hold the ScalingConfig",
      root_cause="Ray Train (V1) waited TRAIN_PLACEMENT_GROUP_TIMEOUT_S for the placement group of num_workers × "
      "resources_per_worker and the cluster never had room for it: more workers, GPUs or CPUs per worker than the nodes hold.",
      fix=SCALING_FIX, check="kuberay.gpu_limits", tier=1,
      example="TimeoutError: Placement group creation timed out. Make sure your cluster either has enough resources or use "
      "an autoscaling cluster. If you are running on a cluster, make sure you specify an address in `ray.init()`, for "
      "example, `ray.init(\"auto\")`. You can also increase the timeout by setting the TRAIN_PLACEMENT_GROUP_TIMEOUT_S "
      "environment variable. Current resources available: {'CPU': 2.0}, resources requested by the placement group: "
      "[{'CPU': 2, 'GPU': 1}, {'CPU': 2, 'GPU': 1}]",
      source="Ray 2.60 ray/train/_internal/backend_executor.py (Train V1's placement group wait)"),
    S(id="raytrain.placement_group_infeasible", cls=RAY_TRAIN_CLASS, kind="cause",
      needles=(b"fulfill placement group requests",),
      pattern=r"No available node types can fulfill placement group requests \(detail=[^)]*\): (?P<demand>\{[^}]*\}\*\d+)",
      title="No node type of the autoscaler can hold the placement group {demand}",
      root_cause="The Ray autoscaler has no node type with room for a bundle of this placement group (Ray Train's is "
      "one bundle per worker: resources_per_worker), so it never adds a node for it and the placement group stays "
      "pending: Ray Train retries its start without limit.",
      fix=SCALING_FIX, check="kuberay.gpu_limits", tier=1,
      example="No available node types can fulfill placement group requests (detail=): {'GPU': 8.0, 'CPU': 1.0}*2. Add "
      "suitable node types to this cluster to resolve this issue.",
      source="Ray 2.60 ray/autoscaler/v2/event_logger.py (infeasible gang requests)"),
    S(id="raytrain.storage_unreachable", cls=RAY_TRAIN_CLASS, kind="cause",
      needles=(b"Unable to set up cluster storage",),
      pattern=r"Unable to set up cluster storage with the following settings",
      title="A Ray Train worker cannot see the storage path: the first checkpoint fails",
      root_cause="Ray Train's controller writes a marker under storage_path and each worker looks for it when it first "
      "persists a checkpoint: this worker did not find it, so its node does not see the controller's storage_path. A "
      "path local to the head (the default ~/ray_results, a disk or an emptyDir of the head pod) is not shared "
      "(ray-project/ray#37177, #41641).",
      fix=STORAGE_FIX, check="kuberay.storage", tier=1,
      example="RuntimeError: Unable to set up cluster storage with the following settings:",
      source="Ray 2.60 ray/train/v2/_internal/execution/storage.py (StorageContext._check_validation_file); recorded in "
      "tests/data/doctor/ray_train_storage_head_local.log"),
    S(id="raytrain.worker_group_start_retry", cls=RAY_TRAIN_CLASS, kind="cause",
      needles=(b"Retrying the launch of the training worker group", b"FailureDecision.RETRY, Error source: controller"),
      pattern=r"Retrying the launch of the training worker group"
      r"|\[FailurePolicy\] Decision: FailureDecision\.RETRY, Error source: controller",
      title="Ray Train retries the start of its worker group",
      root_cause="Ray Train could not start its worker group and tries again, without limit by default: the failure it "
      "retries is on the next lines (a ScalingConfig the cluster cannot place, a runtime env that does not install).",
      fix=SCALING_FIX, check="kuberay.gpu_limits", tier=2,
      consequence_of=("raytrain.worker_group_startup_timeout", "raytrain.placement_group_infeasible",
                      "raytrain.storage_unreachable"),
      example="Retrying the launch of the training worker group. The previous launch attempt encountered the following "
      "failure:",
      source="Ray Train V2's controller (ray/train/v2/_internal/execution/controller.py before Ray 2.50); Ray 2.5x's "
      "'[FailurePolicy] Decision: FailureDecision.RETRY, Error source: controller' (ray-project/ray#60376)"),
)
