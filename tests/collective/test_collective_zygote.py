"""The collective probe's ranks are forked from one zygote per process (dsv3_preflight/collective/probes/zygote.py)
that imported torch once, not exec'd each as a fresh interpreter that imports it again; a zygote that cannot serve
never costs the probe its answer: the ranks are exec'd, and the outcome says why."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import live_pids
from ports import free_port

from dsv3_preflight.collective import probe_node


def _probe(tmp_path: Path, name: str, **kw):
    log_dir = tmp_path / name
    outcome = probe_node(master_addr="127.0.0.1", master_port=free_port(), world_size=kw.pop("world_size", 2),
                         node_rank=0, nproc_per_node=kw.pop("nproc_per_node", 2), backend="gloo",
                         timeout_s=kw.pop("timeout_s", 30.0), log_dir=str(log_dir), **kw)
    return outcome, log_dir


def _started(log_dir: Path) -> list[dict]:
    """Each rank's "started" event: its pid and its parent's."""
    events = []
    for status in sorted(log_dir.glob("rank*.status.jsonl")):
        events += [e for e in map(json.loads, status.read_text().splitlines()) if e.get("phase") == "started"]
    return events


def test_the_ranks_of_successive_probes_are_forks_of_one_zygote_that_imported_torch_once(tmp_path, clean_env):
    first, first_dir = _probe(tmp_path, "first")
    second, second_dir = _probe(tmp_path, "second")
    for outcome in (first, second):
        assert outcome["ok"], [r["findings"] for r in outcome["ranks"]]
        assert outcome["spawn"]["mode"] == "zygote" and "fallback" not in outcome["spawn"]
        assert all(r["exit_code"] == 0 for r in outcome["ranks"])
    zygote = first["spawn"]["zygote_pid"]
    assert second["spawn"]["zygote_pid"] == zygote
    assert first["spawn"]["zygote_import_s"] > 0
    started = _started(first_dir) + _started(second_dir)
    assert len(started) == 4 and {e["ppid"] for e in started} == {zygote}
    assert len({e["pid"] for e in started}) == 4
    # the fork has torch already: no rank spent the import a fresh interpreter spends (over a second on this CPU)
    assert max(r["timings"]["import_s"] for r in second["ranks"]) < 0.5, second["ranks"]


def test_a_call_with_another_import_time_environment_gets_a_zygote_of_its_own(tmp_path, clean_env):
    """A fork keeps what was read when torch was imported (PYTHONPATH, LD_*, OMP_*): a call that sets them differently
    gets a zygote started with them, and the variables read later (Gloo's interface) reach the ranks either way."""
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "dsv3_zygote_marker.py").write_text("")
    plain, _ = _probe(tmp_path, "plain")
    other, other_dir = _probe(tmp_path, "other", env={"PYTHONPATH": str(extra), "GLOO_SOCKET_IFNAME": "lo"})
    assert plain["ok"] and other["ok"]
    assert other["spawn"]["mode"] == "zygote" and other["spawn"]["zygote_pid"] != plain["spawn"]["zygote_pid"]
    assert {e["ppid"] for e in _started(other_dir)} == {other["spawn"]["zygote_pid"]}
    assert other["env"]["GLOO_SOCKET_IFNAME"] == "lo"
    # the variable Gloo reads at process-group creation reached the forked ranks: an interface that does not exist
    # fails them, naming it (they fail at once; the deadline only bounds the new zygote's torch import, which took
    # more than 10 s in a loaded fresh-clone run and fell back to exec)
    bad, _ = _probe(tmp_path, "bad", env={"GLOO_SOCKET_IFNAME": "nosuch0"}, timeout_s=30.0)
    assert not bad["ok"] and bad["spawn"]["mode"] == "zygote"
    assert any("nosuch0" in json.dumps(r["findings"]) + json.dumps(r["error"]) for r in bad["ranks"]), bad["ranks"]


def test_exec_mode_starts_each_rank_as_a_fresh_interpreter(tmp_path, clean_env):
    clean_env.setenv("DSV3_PREFLIGHT_RANK_SPAWN", "exec")
    outcome, log_dir = _probe(tmp_path, "exec")
    assert outcome["ok"] and outcome["spawn"] == {"mode": "exec"}
    assert {e["ppid"] for e in _started(log_dir)} == {os.getpid()}


def test_a_zygote_whose_torch_import_fails_falls_back_to_exec_and_says_why(tmp_path, clean_env):
    broken = tmp_path / "broken"
    (broken / "torch").mkdir(parents=True)
    (broken / "torch" / "__init__.py").write_text("raise RuntimeError('this torch is broken on purpose')\n")
    outcome, _ = _probe(tmp_path, "broken", env={"PYTHONPATH": str(broken)}, timeout_s=20.0)
    assert outcome["spawn"]["mode"] == "exec"
    assert "this torch is broken on purpose" in outcome["spawn"]["fallback"]
    assert not outcome["ok"]
    # the exec'd ranks then report the same import failure as their own error
    assert all("this torch is broken on purpose" in (r["error"] or {}).get("message", "") for r in outcome["ranks"])


def test_a_zygote_slower_than_the_deadline_is_a_bounded_timeout_not_a_hang(tmp_path, clean_env):
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text("import time\ntime.sleep(6)\n")   # every interpreter start, the zygote's too
    started = time.monotonic()
    outcome, _ = _probe(tmp_path, "slow", env={"PYTHONPATH": str(slow)}, timeout_s=2.0)
    assert time.monotonic() - started < 2.0 + 10.0
    assert not outcome["ok"] and outcome["spawn"]["mode"] == "exec"
    assert "outlasted the deadline" in outcome["spawn"]["fallback"]
    assert all(r["killed"] for r in outcome["ranks"]), outcome["ranks"]


def test_a_zygote_killed_while_its_ranks_run_ends_the_probe_within_its_deadline(tmp_path, clean_env):
    """World 3 with 2 local ranks: they wait for a rank that never comes. The zygote is SIGKILLed meanwhile: its
    ranks see their parent gone and exit; the probe ends by its deadline and is not ok."""
    result = {}
    thread = threading.Thread(target=lambda: result.update(out=_probe(tmp_path, "killed", world_size=3,
                                                                       timeout_s=8.0)))
    begun = time.monotonic()
    thread.start()
    log_dir = tmp_path / "killed"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(_started(log_dir) if log_dir.exists() else []) < 2:
        time.sleep(0.05)
    zygote = {e["ppid"] for e in _started(log_dir)}
    assert len(zygote) == 1
    (pid,) = zygote
    assert "zygote" in " ".join(psutil.Process(pid).cmdline())
    os.kill(pid, 9)
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert time.monotonic() - begun < 8.0 + 10.0
    outcome, _ = result["out"]
    assert not outcome["ok"]
    ranks = [e["pid"] for e in _started(log_dir)]
    gone = time.monotonic() + 10
    while time.monotonic() < gone and live_pids(ranks):
        time.sleep(0.05)
    assert live_pids(ranks) == []


def test_a_zygote_whose_owner_ends_while_it_imports_torch_exits_at_once(tmp_path):
    """A command stopped by a signal exits (os._exit) while its probe thread may still be starting the zygote, after
    its clean-up looked for its children: the zygote, still importing torch, sees its stdin hang up and exits then,
    not when the import is done (a torch here that takes 60 s to import)."""
    fake, mark = tmp_path / "fake", tmp_path / "importing"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text(f"import time\nopen({str(mark)!r}, 'w').close()\ntime.sleep(60)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), str(Path(__file__).resolve().parents[2])])}
    proc = subprocess.Popen([sys.executable, "-m", "dsv3_preflight.collective.probes.zygote", str(os.getpid())],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not mark.exists() and proc.poll() is None:
            time.sleep(0.05)
        assert mark.exists(), "the zygote never began to import torch"
        assert proc.poll() is None
        proc.stdin.close()   # what the owner's exit does
        ended = time.monotonic()
        assert proc.wait(timeout=10) == 0
        assert time.monotonic() - ended < 3.0
        assert proc.stdout.read() == b""   # never said ready
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture(autouse=True)
def _no_zygote_left(request):
    """End this process's zygote after each test, as the process's exit does."""
    yield
    from dsv3_preflight.collective.probes import zygote

    zygote.shutdown()
