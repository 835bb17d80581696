"""The Ray Train gate: the suite before ``TorchTrainer.fit()`` builds its process group.

Enable it without touching the training script::

    RAY_TRAIN_CALLBACKS=dsv3_preflight.ray_train.PreflightCallback python train.py

or in code: ``RunConfig(callbacks=[PreflightCallback()])``. See docs/ray-train.md.

Layout (one concept per module): :mod:`.facts` (the typed facts), :mod:`.rules` (pure judges: storage, the
ScalingConfig against the live nodes, the rank→GPU map Ray Train will make, Ray's node IP against the NIC),
:mod:`.checks` (the gate's checks, declared like any other), :mod:`.probes` (what runs on the workers' nodes),
:mod:`.gate` (the runner: gathers, judges through the engine, writes the report), :mod:`.callback` (Ray's hooks).
Importing this package does not import Ray; ``PreflightCallback`` is loaded on first use.
"""
from __future__ import annotations

from typing import Any

__all__ = ["PreflightCallback", "PreflightRefused"]


def __getattr__(name: str) -> Any:
    if name == "PreflightCallback":
        from .callback import PreflightCallback

        return PreflightCallback
    if name == "PreflightRefused":
        from .gate import PreflightRefused

        return PreflightRefused
    raise AttributeError(name)
