"""The doctor reads Ray's own failure messages as a real Ray prints them, not as typed from a thread.

Ray's memory monitor is provoked for real: a one-node Ray inside a network namespace of the lab (so it listens
only on the namespace's address), with RAY_memory_usage_threshold far below what the machine already uses, kills
the worker of a task; the driver's output (ray.exceptions.OutOfMemoryError, the raylet's kill summary) is a
user's log. Host memory, not the GPU's: the CUDA out-of-memory rule must not take it.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import textwrap

import pytest
from netns_lab import netns_lab  # noqa: F401 - the lab's fixture

from dsv3_preflight.doctor import triage

pytestmark = [pytest.mark.slow, pytest.mark.netns, pytest.mark.ray]

DRIVER = textwrap.dedent(r'''
    import sys, time, traceback
    import ray
    ray.init(address="local", _node_ip_address=sys.argv[1], include_dashboard=False, num_cpus=1,
             log_to_driver=True)

    @ray.remote(max_retries=0)
    def hold_memory():
        block = bytearray(64 * 1024 * 1024)
        time.sleep(30)
        return len(block)

    try:
        ray.get(hold_memory.remote(), timeout=90)
    except Exception:
        traceback.print_exc()
    time.sleep(2.5)   # the raylet's kill summary (printed every RAY_event_stats_print_interval_ms) reaches the driver
    ray.shutdown()
''')


def test_rays_memory_monitor_kill_is_host_memory_not_the_gpus(netns_lab):
    tmp = tempfile.mkdtemp(prefix="d3ray-")   # short: Ray's socket paths live under RAY_TMPDIR
    try:
        env = {"RAY_TMPDIR": tmp, "RAY_DISABLE_USAGE_STATS": "1", "RAY_AUTH_MODE": "disabled",
               "RAY_memory_usage_threshold": "0.01", "RAY_memory_monitor_refresh_ms": "100",
               "RAY_task_oom_retries": "0", "RAY_event_stats_print_interval_ms": "1000"}
        addr = netns_lab.addr(0)
        proc = netns_lab.exec(0, [sys.executable, "-c", DRIVER, addr], timeout=150, env=env)
        text = proc.stdout + proc.stderr
        assert "OutOfMemoryError" in text and "running low on memory" in text, text[-3000:]
        log = os.path.join(tmp, "driver.log")
        with open(log, "w") as f:
            f.write(text)
        doc = triage([log])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    top = doc["findings"][0]
    assert (doc["exit_code"], doc["cause_class"], top["id"]) == (1, "host_resources", "ray.memory_monitor_kill"), \
        (doc["summary"], [f["id"] for f in doc["findings"]])
    assert "cuda.out_of_memory" not in {f["id"] for f in doc["findings"]}
    assert addr in top["title"] + top["fix"]   # the node Ray names, from its own message
