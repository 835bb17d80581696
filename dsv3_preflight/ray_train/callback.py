"""``PreflightCallback``: the gate in Ray Train V2's own hooks.

- ``after_controller_start`` (ControllerCallback): keeps the run's context (storage_path, ScalingConfig, backend).
- ``before_worker_group_start`` (WorkerGroupCallback): the ScalingConfig against the live nodes, before Ray asks for
  the placement group: a worker group that cannot be placed is refused in seconds, with its numbers.
- ``before_init_train_context``: the worker actors exist, ``init_process_group`` has not run (the backend's
  ``on_start`` comes after, in ``after_worker_group_start``): storage_path, the suite's node checks on every node
  with the workers' runtime env, the cluster checks, the collective gang on Ray Train's own rendezvous (the rank-0
  worker's node IP, a free port picked there the way Ray Train picks MASTER_PORT, its backend), the rank→GPU map.

A red verdict raises :class:`~.gate.PreflightRefused` from the hook. Train's controller wraps it as a ControllerError
whose cause is not one of its retryable start-up errors (WorkerGroupStartupTimeoutError, WorkerGroupStartupFailedError),
so the failure policy raises at once, whatever ``controller_failure_limit`` says, and ``fit()`` raises it.
"""
from __future__ import annotations

import logging
from typing import Any

from ray.train.v2._internal.execution.callback import ControllerCallback, WorkerGroupCallback

from . import gate

logger = logging.getLogger(__name__)


class PreflightCallback(ControllerCallback, WorkerGroupCallback):
    """Run dsv3-preflight inside ``TorchTrainer.fit()`` before the process group exists.

    ``PreflightCallback()`` reads its settings from ``DSV3_PREFLIGHT_RAY_TRAIN_*`` (so ``RAY_TRAIN_CALLBACKS=
    dsv3_preflight.ray_train.PreflightCallback`` needs no code); keywords override them: ``profile``, ``config``
    (a preflight TOML), ``only``/``skip`` (check patterns), ``probe`` (the collective gang, default on), ``timeout``,
    ``reports_dir`` (default ./preflight-reports of the driver), ``min_free_gib``, ``strict`` (WARN refuses too).
    The callback is built in the driver and pickled to Train's controller: it holds only plain settings.
    """

    def __init__(self, *, profile: str | None = None, config: str | None = None, only: tuple[str, ...] | None = None,
                 skip: tuple[str, ...] | None = None, probe: bool | None = None, timeout: float | None = None,
                 reports_dir: str | None = None, min_free_gib: float | None = None, strict: bool | None = None) -> None:
        self.options = gate.GateOptions.from_env(
            profile_name=profile, config_path=config, only=tuple(only) if only is not None else None,
            skip=tuple(skip) if skip is not None else None, probe=probe, timeout=timeout, reports_dir=reports_dir,
            min_free_gib=min_free_gib, strict=strict)
        self._run_context: Any = None

    # -- ControllerCallback ----------------------------------------------------------------------------------
    def after_controller_start(self, train_run_context: Any) -> None:
        self._run_context = train_run_context

    # -- WorkerGroupCallback -----------------------------------------------------------------------------------
    def before_worker_group_start(self, worker_group_context: Any) -> None:
        import ray

        scaling = getattr(self._run_context, "scaling_config", None)
        fact = gate.scaling_fact(worker_group_context.num_workers, worker_group_context.resources_per_worker,
                                 worker_group_context.placement_strategy, getattr(scaling, "accelerator_type", None))
        gate.check_scaling(fact, ray.nodes(), self.options, self._run_name())

    def before_init_train_context(self, workers: list[Any]) -> dict[str, list[Any]]:
        if self._run_context is None:  # a Ray that never called after_controller_start: nothing to judge against
            logger.warning("dsv3-preflight: no run context; the gate did not run")
            return {}
        gate.before_training(workers, self._run_context, self.options)
        return {}

    def _run_name(self) -> str:
        return str(getattr(getattr(self._run_context, "run_config", None), "name", "") or "")
