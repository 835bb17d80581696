"""Test-only plugin for tests/test_cluster_ray.py (loaded with --checks-dir on every node).

A node is told how to misbehave through its own environment (Cluster.add_node(env_vars=...)), the
way a real node differs from the others: DSV3_TEST_HANG_ON_LOAD makes loading this plugin hang
(the whole node task hangs, as on a node with a stuck NFS mount); DSV3_TEST_SLOW_S makes the probe
sleep after writing DSV3_TEST_MARKER, so a test can kill the node while it is mid-run.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from dsv3_preflight import Result, check, probe

if os.environ.get("DSV3_TEST_HANG_ON_LOAD"):
    time.sleep(3600)


@probe("test_slow", timeout=120)
def test_slow() -> dict:
    """Sleeps DSV3_TEST_SLOW_S seconds after writing the marker file DSV3_TEST_MARKER (if set)."""
    delay = float(os.environ.get("DSV3_TEST_SLOW_S") or 0)
    marker = os.environ.get("DSV3_TEST_MARKER")
    if marker:
        Path(marker).write_text(str(os.getpid()))
    time.sleep(delay)
    return {"slept_s": delay}


@check("testhook.slow_probe", needs=["test_slow"], tags=["test"], timeout=120)
def slow_probe(test_slow):
    """Passes once the test probe has returned."""
    return Result.passed(f"slept {test_slow['slept_s']:g} s")
