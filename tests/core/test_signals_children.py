"""Probe children run in their own process group and die whole at the probe's timeout; cleanup ends what a
command started (by ancestry and by cookie) and removes its temp dirs, and never touches what it did not start."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dsv3_preflight import signals
from dsv3_preflight.gpu.probes.fabric import fm_version

#: a command that starts a child which never exits, then never exits itself (a wedged tool)
WEDGED = "sleep 300 & echo child=$!; exec sleep 300"


def _gone(pid: int, deadline_s: float = 3.0) -> bool:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in (b"Z", b"X"):
            return True
        time.sleep(0.02)
    return False


def test_run_kills_the_whole_group_at_the_timeout_and_keeps_the_output_so_far():
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as info:
        signals.run(["sh", "-c", WEDGED], timeout=0.5, capture_output=True, text=True)
    assert time.monotonic() - started < 4.0
    child = int(info.value.output.split("child=")[1].split()[0])
    assert _gone(child), f"the wedged tool's own child {child} outlived the timeout"


def test_run_returns_like_subprocess_run():
    done = signals.run([sys.executable, "-c", "import sys; print('out'); sys.exit(3)"], timeout=30,
                       capture_output=True, text=True)
    assert (done.returncode, done.stdout) == (3, "out\n")


def test_a_probe_whose_tool_never_exits_returns_at_its_timeout_and_leaves_no_process(tmp_path, monkeypatch):
    """nv-fabricmanager --version hanging (a wedged driver), with a child of its own: the FM probe moves on."""
    fake = tmp_path / "bin" / "nv-fabricmanager"
    fake.parent.mkdir()
    pidfile = tmp_path / "child.pid"
    fake.write_text(f"#!/bin/sh\nsleep 300 &\necho $! > {pidfile}\nexec sleep 300\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    started = time.monotonic()
    found = fm_version()
    assert time.monotonic() - started < 15.0
    assert found["source"] != "nv-fabricmanager --version"
    assert _gone(int(pidfile.read_text())), "the hung tool's child is still running"


def test_cleanup_ends_descendants_started_after_install_and_removes_temp_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    before = subprocess.Popen(["sleep", "300"])  # started before install: not the command's to end
    try:
        signals.install()
        try:
            grandparent = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!; wait"], stdout=subprocess.PIPE, text=True)
            orphan_child = int(grandparent.stdout.readline())
            spawned = signals.spawn(["sleep", "300"])
            work = signals.mkdtemp("unit")
            assert Path(work).name.startswith("dsv3pf-unit-")
            done = signals.cleanup(grace=1.0)
            assert {grandparent.pid, orphan_child} <= set(done["processes"]) and spawned.pid in done["groups"]
            assert _gone(orphan_child) and _gone(spawned.pid) and grandparent.wait(5) is not None
            assert not Path(work).exists()
        finally:
            signals.uninstall()
        assert before.poll() is None, "cleanup ended a process the command did not start"
        assert signals.COOKIE_VAR not in os.environ
    finally:
        before.kill()
        before.wait()


def test_a_stop_signal_is_held_while_deferred_and_raised_after():
    signals.install()
    try:
        with pytest.raises(signals.Interrupted) as info:
            with signals.deferred():
                os.kill(os.getpid(), signal.SIGTERM)  # delivered to ourselves before kill() returns
                reached = signals.received() == signal.SIGTERM  # the handler ran and did not raise in the block
        assert reached and info.value.signum == signal.SIGTERM
    finally:
        signals.uninstall()


MAKE_DIR = """
import sys
from dsv3_preflight import signals
print(signals.mkdtemp("reaptest", tagged=False), flush=True)
sys.stdin.read()
"""


def test_a_temp_dir_whose_owner_was_sigkilled_is_removed_by_the_next_run_and_a_live_owners_is_kept():
    owners = [subprocess.Popen([sys.executable, "-c", MAKE_DIR], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
              for _ in range(2)]
    killed, alive = owners
    dead_dir, live_dir = (Path(p.stdout.readline().strip()) for p in owners)
    foreign = Path(signals.tempfile.mkdtemp(prefix=signals.TEMP_PREFIX + "reaptest-foreign-"))  # no owner file
    try:
        assert dead_dir.is_dir() and live_dir.is_dir()
        killed.kill()  # SIGKILL: its own cleanup never runs (a Ray worker killed with its ranks)
        killed.wait(timeout=10)
        assert dead_dir.is_dir()
        removed = signals.reap_orphaned_tempdirs()
        assert str(dead_dir) in removed and not dead_dir.exists()
        assert live_dir.is_dir() and foreign.is_dir()  # a live owner's and a dir without an owner file stay
    finally:
        alive.stdin.close()
        alive.wait(timeout=30)
        killed.stdout.close()
        alive.stdout.close()
        for path in (live_dir, foreign):
            signals.shutil.rmtree(path, ignore_errors=True)
