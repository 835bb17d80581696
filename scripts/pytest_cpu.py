"""A pytest plugin for finding where the suite's CPU goes: each test's wall time and the whole machine's busy CPU
seconds (/proc/stat: every process the test started, Ray's daemons and the kernel's work included) over its setup,
call and teardown, one JSON line per test.

    PYTHONPATH=scripts .venv/bin/python -m pytest -n 0 -p pytest_cpu tests/collective/ -q
    PYTHONPATH=scripts PYTEST_CPU_OUT=/tmp/cpu.jsonl .venv/bin/python -m pytest -n 0 -p pytest_cpu tests/ -q

Run it serially (-n 0) on an otherwise idle machine: the figure is the machine's, not the test's own. Under xdist
(-n 4) the rows still give each test's start (epoch seconds), wall time and worker: the run's timeline, to see which
worker ends last and what runs alone at the end (``cpu`` then counts the other workers' tests too). A module's
module-scoped fixtures count in its first test, and their teardown in its last. Sum by module with
``python3 -c "import json,collections; c=collections.Counter(); [c.update({json.loads(l)['id'].split('::')[0]:
json.loads(l)['cpu']}) for l in open('/tmp/cpu.jsonl')]; print(c.most_common(20))"``.
"""
from __future__ import annotations

import json
import os
import time

import pytest

OUT = os.environ.get("PYTEST_CPU_OUT", "pytest-cpu.jsonl")


def _busy_s() -> float:
    with open("/proc/stat") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...: busy is all but idle, iowait and steal
    return (sum(fields[:8]) - fields[3] - fields[4] - fields[7]) / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start, wall, busy = time.time(), time.monotonic(), _busy_s()
    yield
    row = {"id": item.nodeid, "wall": round(time.monotonic() - wall, 2), "cpu": round(_busy_s() - busy, 2),
           "start": round(start, 2), "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}
    with open(OUT, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")
