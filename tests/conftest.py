"""Shared test configuration. Fixture modules live beside the tests (tests/*_lab.py) and are imported by the tests that use them."""
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def clean_env(monkeypatch):
    """An environment without the launch variables a developer's shell may carry."""
    for var in list(os.environ):
        if var.startswith(("MASTER_", "NCCL_", "GLOO_", "TORCH_NCCL", "CUDA_", "DSV3_PREFLIGHT")) or var in (
            "NNODES", "NPROC_PER_NODE", "NODE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "RANK", "LOCAL_RANK",
            "OMP_NUM_THREADS", "RAY_ADDRESS", "MODEL_PATH", "OUTPUT_DIR", "DEEPSPEED_CONFIG",
        ):
            monkeypatch.delenv(var, raising=False)
    return monkeypatch


def python_cli(*args: str) -> list[str]:
    """argv running the CLI with this interpreter (as a user's `dsv3-preflight ...`)."""
    return [sys.executable, "-m", "dsv3_preflight", *args]


def pytest_collection_modifyitems(config, items):
    """Real Ray clusters run one at a time, on one xdist worker (`-n 2 --dist loadgroup`): two at once on
    a 2-core machine starve each other, and the embedded-Ray test must see no other cluster (`auto` would
    rightly join it), which a Ray test on the other worker made it skip."""
    for item in items:
        if item.get_closest_marker("ray"):
            item.add_marker(pytest.mark.xdist_group("ray"))
