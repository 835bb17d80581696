"""Shared test configuration. The tests sit in one folder per area of the code (tests/<area>/test_*.py: gpu, net,
lora, collective, host, cluster, doctor, launch, reports, core); the fixture modules they share (tests/*_lab.py,
paste_lint.py, ports.py, this conftest), tests/data/ and tests/envs/ stay here, at the top, and are imported by
module name from every area (this folder is on sys.path below). Test module basenames are unique across the
areas: pytest imports them by basename (its default import mode, no __init__.py)."""
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
#: the shared fixture modules (cluster_lab, netns_lab, ports, conftest, ...) import by name from tests/<area>/
if str(DATA.parent) not in sys.path:
    sys.path.insert(0, str(DATA.parent))

from harness_env import FACT_CACHE_VAR, LAUNCH_PREFIXES, SHELL_VARS, dropped, user_fact_cache, user_fact_cache_entries  # noqa: E402


def pytest_configure(config):
    """The fact cache (dsv3_preflight/factcache.py) of this pytest run: its own directory, made by the first pytest
    (the xdist controller; its workers, and every CLI and nested pytest the tests start, inherit it) and removed when
    it ends. So the suite computes every answer it asserts at least once in each run, repeats of the same question
    (the same DeepSeek-V3 config and targets in dozens of CLI runs) are answered from it, and the user's own cache in
    ~/.cache is neither read nor written."""
    if os.environ.get(FACT_CACHE_VAR):
        return
    import shutil
    import tempfile

    made = tempfile.mkdtemp(prefix="dsv3pf-test-factcache-")
    os.environ[FACT_CACHE_VAR] = made

    def remove() -> None:
        shutil.rmtree(made, ignore_errors=True)
        os.environ.pop(FACT_CACHE_VAR, None)

    config.add_cleanup(remove)


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def clean_env(monkeypatch):
    """An environment without the launch variables a developer's shell may carry."""
    for var in list(os.environ):
        if dropped(var, LAUNCH_PREFIXES, SHELL_VARS):   # the run's own fact cache (pytest_configure) is kept
            monkeypatch.delenv(var, raising=False)
    return monkeypatch


def live_pids(pids) -> list[int]:
    """Those of ``pids`` still running: neither gone nor a zombie waiting for its parent to reap it."""
    import psutil

    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def python_cli(*args: str) -> list[str]:
    """argv running the CLI with this interpreter (as a user's `dsv3-preflight ...`)."""
    return [sys.executable, "-m", "dsv3_preflight", *args]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """How `-n 4 --dist loadgroup --no-loadscope-reorder` (scripts/test.sh) shares the suite between the workers.

    - Real Ray clusters run one at a time, on one worker (the group ``ray``): two at once on a 2-core machine
      starve each other, and the embedded-Ray test must see no other cluster (``auto`` would rightly join it).
    - Every other module is one unit of work (a group named after it), so its module- and session-scoped
      fixtures (tiny models, full preflight runs, Flight Recorder dumps, sealed environments) are built once, not
      once on each worker.
    - The Ray group goes first, then the modules with the most slow tests: the longest units start early and
      the run does not end on one worker finishing a long module while the other idles.

    tryfirst: xdist's worker reads the xdist_group marks in its own pytest_collection_modifyitems (it suffixes the
    node ids with ``@group``), which pluggy called before this one; so the marks came too late, the Ray tests ran on
    both workers at once, and the module-scoped Ray labs of test_pairs_netns were built twice. pytest 9.2 broke the
    grouping too (pyproject.toml pins pytest<9.2); tests/core/test_xdist_grouping.py fails when either comes back."""
    slow: dict[str, int] = {}
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        module = item.nodeid.split("::", 1)[0]
        first.setdefault(module, index)
        ray = item.get_closest_marker("ray") is not None
        item.add_marker(pytest.mark.xdist_group("ray" if ray else module.replace("/", ".")))
        if item.get_closest_marker("slow") and not ray:
            slow[module] = slow.get(module, 0) + 1

    def order(pair):
        index, item = pair
        module = item.nodeid.split("::", 1)[0]
        return (item.get_closest_marker("ray") is None, -slow.get(module, 0), first[module], index)

    items[:] = [item for _, item in sorted(enumerate(items), key=order)]


#: the nice value (0-19) of an xdist worker while it runs a test outside the Ray group; 0 leaves it as it is.
#: scripts/test.sh sets 5: the Ray group is one worker's serial run and the suite's critical path (586 s alone,
#: 810-850 s beside three busy workers), while the machine's two cores are saturated (2-3 % idle over a run). The
#: other tests' processes (torchrun, the CLI) inherit it unless they start a session of their own; the Ray labs'
#: raylets and ranks, started from the Ray group's tests, keep the worker's own priority.
OTHERS_NICE = int(os.environ.get("DSV3_TEST_OTHERS_NICE", "0") or 0)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if not OTHERS_NICE or not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    want = 0 if item.get_closest_marker("ray") is not None else OTHERS_NICE
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) != want:
            os.setpriority(os.PRIO_PROCESS, 0, want)   # back to 0 needs root (CAP_SYS_NICE): left niced otherwise
    except OSError:
        pass


@pytest.hookimpl(trylast=True)   # after pytest's own teardown: the modules' fixtures on the lab are finalized first
def pytest_runtest_teardown(item, nextitem):
    """The shared Ray lab (three raylets, a GCS and their agents: CPU every second while idle) is closed after the
    last test in a row that uses it, not at the session's end: the rest of the run no longer shares the two cores
    with it. A later module that asks for it again gets a new one (tests/cluster_lab.py shared_lab)."""
    if item.get_closest_marker("shared_ray_lab") is None:
        return
    if nextitem is None or nextitem.get_closest_marker("shared_ray_lab") is None:
        from cluster_lab import close_shared

        close_shared()


# -- nothing left behind (issue 16.10) ----------------------------------------------------------------------
#: what the tool and its tests may create in /tmp: Ray temp dirs of the cluster labs, the tool's own temp dirs,
#: torchrun's log dirs (made when it gets no --log-dir, never removed), multiprocessing's pymp-* dirs (left when a
#: worker is SIGKILLed). Not torch's compile cache /tmp/torchinductor_$USER: importing transformers or peft makes
#: it, and torch keeps it across runs on purpose
LEFTOVER_PATTERNS = ("d3*", "dsv3pf-*", "dsv3-*", "ray/session_2*", "torchelastic_*", "pymp-*")
#: our processes: the tool, its rank workers, Ray's daemons started by the tests
LEFTOVER_COMMANDS = ("dsv3_preflight", "dsv3-preflight", "raylet", "gcs_server", "ray::", "default_worker.py")


def _tmp_entries() -> set[str]:
    return {str(p) for pattern in LEFTOVER_PATTERNS for p in Path("/tmp").glob(pattern)}


def _our_processes(since: float) -> dict[int, str]:
    import psutil

    mine = {os.getpid(), *(p.pid for p in psutil.Process().children(recursive=True))}
    found = {}
    for proc in psutil.process_iter(["pid", "cmdline", "create_time"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            if proc.info["pid"] in mine or proc.info["create_time"] < since or "pytest" in cmdline:
                continue
            if any(word in cmdline for word in LEFTOVER_COMMANDS):
                found[proc.info["pid"]] = cmdline[:200]
        except (psutil.Error, TypeError):
            continue
    return found


def pytest_sessionstart(session):
    if not hasattr(session.config, "workerinput"):  # the controller (or a run without xdist)
        import time

        session.config._dsv3_before = (time.time(), _tmp_entries(), user_fact_cache_entries())


def pytest_sessionfinish(session, exitstatus):
    before = getattr(session.config, "_dsv3_before", None)
    if before is None or not (os.environ.get("CI") or os.environ.get("DSV3_PREFLIGHT_CHECK_LEFTOVERS")):
        return
    import time

    started, entries, cached = before
    deadline = time.monotonic() + 10.0  # processes asked to stop get a moment to exit
    while True:
        new_entries = sorted(_tmp_entries() - entries)
        processes = _our_processes(started)
        if not processes and not new_entries or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    # a process started with an environment that lost the run's fact-cache variable (tests/harness_env.py) wrote here
    written = sorted(user_fact_cache_entries() - cached)
    if new_entries or processes or written:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = ([f"left behind in /tmp: {e}" for e in new_entries] + [f"still running: pid {p}: {c}" for p, c in processes.items()]
                 + [f"written to the user's fact cache {user_fact_cache()} instead of the run's: {e}" for e in written])
        if reporter:
            reporter.write_line("\nthe tests left things behind (issue 16.10):\n  " + "\n  ".join(lines), red=True)
        if session.exitstatus == 0:
            session.exitstatus = 1
