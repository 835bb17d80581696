"""The callback as Ray Train 2.6x sees it, without a cluster: RAY_TRAIN_CALLBACKS loads it through Ray's own loader,
it survives the trip to Train's controller (pickle), its settings come from the driver's environment, and a refusal
is one Train's failure policy raises at once instead of retrying (controller_failure_limit -1 retries only its
start-up errors)."""
from __future__ import annotations

import pickle

import pytest

pytest.importorskip("ray.train")
from ray.train.v2._internal.callbacks.env_callback import _initialize_env_callbacks  # noqa: E402
from ray.train.v2._internal.exceptions import WorkerGroupStartupTimeoutError  # noqa: E402
from ray.train.v2._internal.execution.callback import ControllerCallback, WorkerGroupCallback  # noqa: E402
from ray.train.v2._internal.execution.failure_handling import FailureDecision  # noqa: E402
from ray.train.v2._internal.execution.failure_handling.default import DefaultFailurePolicy  # noqa: E402
from ray.train.v2.api.config import FailureConfig  # noqa: E402
from ray.train.v2.api.exceptions import ControllerError  # noqa: E402

from dsv3_preflight.ray_train import PreflightCallback, PreflightRefused  # noqa: E402
from dsv3_preflight.ray_train.gate import DEFAULT_ONLY, GateOptions, choose_backend  # noqa: E402


def test_ray_train_callbacks_loads_the_gate_with_no_code_change(monkeypatch):
    monkeypatch.setenv("RAY_TRAIN_CALLBACKS", "dsv3_preflight.ray_train.PreflightCallback")
    [callback] = _initialize_env_callbacks()
    assert isinstance(callback, PreflightCallback)
    assert isinstance(callback, ControllerCallback) and isinstance(callback, WorkerGroupCallback)


def test_the_callback_travels_to_the_controller_with_its_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("DSV3_PREFLIGHT_RAY_TRAIN_ONLY", "net.*, host.*")
    monkeypatch.setenv("DSV3_PREFLIGHT_RAY_TRAIN_PROBE", "0")
    monkeypatch.setenv("DSV3_PREFLIGHT_RAY_TRAIN_REPORTS_DIR", str(tmp_path))
    callback = pickle.loads(pickle.dumps(PreflightCallback(timeout=42)))
    assert callback.options.only == ("net.*", "host.*")
    assert callback.options.probe is False
    assert callback.options.timeout == 42.0
    assert callback.options.reports_dir == str(tmp_path)


def test_defaults_without_environment():
    options = GateOptions.from_env({})
    assert options.only == DEFAULT_ONLY and options.probe is True and options.strict is False


@pytest.mark.parametrize("failure_config", [FailureConfig(), FailureConfig(controller_failure_limit=-1, max_failures=-1)])
def test_a_refusal_is_raised_at_once_while_a_startup_timeout_is_retried_forever(failure_config):
    policy = DefaultFailurePolicy(failure_config)
    refused = ControllerError(PreflightRefused("dsv3-preflight refused this Ray Train run"))
    assert policy.make_decision(refused) is FailureDecision.RAISE
    timeout = ControllerError(WorkerGroupStartupTimeoutError(num_workers=3))
    assert [policy.make_decision(timeout) for _ in range(5)] == [FailureDecision.RETRY] * 5


def test_a_refusal_pickles_with_its_message():
    error = pickle.loads(pickle.dumps(ControllerError(PreflightRefused("refused: storage_path"))))
    assert "refused: storage_path" in str(error)
    assert isinstance(error.controller_failure, PreflightRefused)


@pytest.mark.parametrize("configured, gpus, backend", [
    (None, 0, "gloo"), (None, 1, "nccl"), ("gloo", 1, "gloo"), ("cpu:gloo,cuda:nccl", 1, "nccl"),
    ("cpu:gloo,cuda:nccl", 0, "gloo"), ("nccl", 0, "nccl"),
])
def test_the_backend_is_the_one_ray_train_picks(configured, gpus, backend):
    assert choose_backend(configured, gpus) == backend
