"""Test-only plugin for the cluster tests (loaded with --checks-dir on every node).

A node is told how to misbehave through a control file, ``$DSV3_TEST_CONTROL/<its node name>.json``
(tests/cluster_lab.py ``RayLab.control``), so a test changes one node without restarting its Ray:

- ``{"hang_on_load": true}``: loading this plugin hangs (the whole node task hangs, as on a node with a
  stuck NFS mount);
- ``{"slow_s": S}``: the node-checks probe writes the marker ``<name>.checks.started`` and sleeps S seconds;
- ``{"reach_slow_s": S}``: the probe of the port-reach wave (it needs ``port_reach``, so it runs while node 0
  holds the listener) writes ``<name>.reach.started`` and sleeps S seconds.

Nodes without a control file behave and pass at once.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from dsv3_preflight import Result, check, probe


def _control() -> dict:
    where = os.environ.get("DSV3_TEST_CONTROL")
    name = os.environ.get("DSV3_PREFLIGHT_NODE_NAME", "")
    if not where or not name:
        return {}
    try:
        return json.loads(Path(where, f"{name}.json").read_text())
    except (OSError, ValueError):
        return {}


def _marker(what: str) -> None:
    where = os.environ.get("DSV3_TEST_CONTROL")
    if where:
        Path(where, f"{os.environ.get('DSV3_PREFLIGHT_NODE_NAME', '')}.{what}.started").write_text(str(os.getpid()))


if _control().get("hang_on_load"):
    time.sleep(3600)


@probe("test_slow", timeout=120)
def test_slow() -> dict:
    """Sleeps the control file's slow_s seconds after writing the marker."""
    delay = float(_control().get("slow_s") or 0)
    _marker("checks")
    time.sleep(delay)
    return {"slept_s": delay}


@probe("test_slow_reach", needs=["port_reach"], timeout=120)
def test_slow_reach(port_reach) -> dict:
    """In the port-reach wave: sleeps the control file's reach_slow_s seconds after writing the marker."""
    delay = float(_control().get("reach_slow_s") or 0)
    _marker("reach")
    time.sleep(delay)
    return {"slept_s": delay, "reach_attempted": bool(port_reach.get("attempted"))}


@check("testhook.slow_probe", needs=["test_slow"], tags=["test"], timeout=120)
def slow_probe(test_slow):
    """Passes once the test probe has returned."""
    return Result.passed(f"slept {test_slow['slept_s']:g} s")


@check("testhook.slow_reach", needs=["test_slow_reach"], tags=["test"], timeout=120)
def slow_reach(test_slow_reach):
    """Passes once the port-reach wave's test probe has returned."""
    return Result.passed(f"slept {test_slow_reach['slept_s']:g} s in the port-reach wave")
