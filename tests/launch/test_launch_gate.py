"""The gate, end to end: the real CLI runs the preflight, then a real torchrun (CPU, gloo, 2 processes) or nothing."""
import fcntl
import json
import os
import re
import select
import shlex
import signal
import socket
import subprocess
import sys
import termios
import time
from pathlib import Path

import psutil
import pytest
from ports import free_port

from dsv3_preflight.cli import main

DATA = Path(__file__).resolve().parents[1] / "data" / "launch"
TRAIN = DATA / "train_allreduce.py"
SLEEPER = DATA / "train_sleep.py"
READER = DATA / "train_reads_stdin.py"
TORCHRUN_MARK = "torch.distributed.run"


@pytest.fixture
def user_env(clean_env, tmp_path_factory):
    """The environment a user's shell would pass: this one without launch variables."""
    env = dict(os.environ)
    env["DSV3_PREFLIGHT_NODE_NAME"] = "launchnode"
    # torchrun without --log-dir makes $TMPDIR/torchelastic_* and never removes it: a per-test TMPDIR
    env["TMPDIR"] = str(tmp_path_factory.mktemp("tmpdir"))
    return env


def ours(tmp_path: Path) -> list[psutil.Process]:
    """Processes still running whose command line names this test's directory."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(str(tmp_path) in part for part in proc.info["cmdline"] or []):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def launch_watched(args: list[str], env: dict, tmp_path: Path, timeout: float = 150.0):
    """Run `dsv3-preflight launch ARGS` as a user would, recording every command line seen in its process tree."""
    argv = [sys.executable, "-m", "dsv3_preflight", "launch", *args]
    seen: set[str] = set()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    root = psutil.Process(proc.pid)
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"launch still running after {timeout} s")
            try:
                for p in [root, *root.children(recursive=True)]:
                    seen.add(" ".join(p.cmdline()))
            except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
                pass
            time.sleep(0.02)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            for child in root.children(recursive=True):
                child.kill()
            proc.kill()
            proc.communicate(timeout=30)
    deadline = time.monotonic() + 20
    while ours(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ours(tmp_path) == [], "the launch left processes running"
    return proc.returncode, out, err, seen


def common(tmp_path: Path, port: int, quick: bool = True) -> list[str]:
    """Options of every launch here; quick: without the collective probe (seconds of CPU each)."""
    return ["--profile", "cpu", "--master-port", str(port), "--no-report", "--json", str(tmp_path / "report.json"),
            "--launch-log", str(tmp_path / "launch.log"), *(["--skip", "dist.*"] if quick else [])]


@pytest.mark.slow
def test_green_preflight_starts_torchrun_and_the_allreduce_result_appears(tmp_path, user_env):
    out = tmp_path / "result.json"
    port = free_port()
    code, stdout, stderr, seen = launch_watched(
        [*common(tmp_path, port, quick=False), "--", str(TRAIN), "--out", str(out), "--x", "1"], user_env, tmp_path)
    assert code == 0, stderr
    # GLOO_SOCKET_IFNAME reached the ranks: derived from the route to MASTER_ADDR 127.0.0.1.
    assert json.loads(out.read_text()) == {"world_size": 2, "sum": 3.0, "ifname": "lo",
                                          "args": ["--out", str(out), "--x", "1"]}
    assert any(TORCHRUN_MARK in cmd for cmd in seen)  # the watcher does see a torchrun when there is one
    assert "rank 1 all_reduce sum 3" in stdout
    log = (tmp_path / "launch.log").read_text()
    assert "# preflight: GO (exit 0" in log and f"--master_port={port}" in log and "# GO: start" in log
    assert "export GLOO_SOCKET_IFNAME=lo" in log
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"] == "GO" and report["deselected"] == {}
    # torchrun's log directory is the launch log's, not a $TMPDIR/torchelastic_* it would never remove
    assert f"--log-dir={tmp_path / 'launch'}" in log and (tmp_path / "launch").is_dir()
    assert list(Path(user_env["TMPDIR"]).glob("torchelastic_*")) == []


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupt_after_go_stops_torchrun_and_exits_2_like_every_command(tmp_path, user_env, sig):
    """Issue 46.7: the launcher exec'd torchrun, so an interrupt ended with torchrun's exit (1). Now it stays the
    parent, forwards the signal to torchrun's process group, waits for it, and exits 2 (README's exit codes)."""
    started = tmp_path / "started"
    argv = [sys.executable, "-m", "dsv3_preflight", "launch", *common(tmp_path, free_port()), "--",
            str(SLEEPER), "--started", str(started)]
    proc = subprocess.Popen(argv, env=user_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 150
        while len(list(tmp_path.glob("started.*"))) < 2:   # both ranks of the real torchrun are running
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the ranks never started"
            time.sleep(0.1)
        ranks = [int(p.read_text()) for p in tmp_path.glob("started.*")]
        launcher = psutil.Process(proc.pid)
        torchrun = [c for c in launcher.children() if TORCHRUN_MARK in " ".join(c.cmdline())]
        assert torchrun, "the launcher is not torchrun's parent"
        proc.send_signal(sig)   # to the launcher alone, as `kill` or a scheduler sends it
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=30)
    assert proc.returncode == 2, (proc.returncode, err[-3000:])
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                   for pid in ranks), "a rank outlived the interrupt"
    assert "# GO: start" in (tmp_path / "launch.log").read_text()


@pytest.mark.slow
def test_a_failing_rank_leaves_its_error_file_beside_the_launch_log_and_the_doctor_reads_it_as_that_nodes(
        tmp_path, user_env):
    # torchrun writes to the terminal, not to the launch log; the rank's error file is
    out, reports = tmp_path / "result.json", tmp_path / "reports"
    code, stdout, stderr, _ = launch_watched(
        ["--profile", "cpu", "--master-port", str(free_port()), "--reports-dir", str(reports), "--skip", "dist.*",
         "--", str(TRAIN), "--out", str(out), "--alloc-on-rank", "1"], user_env, tmp_path)
    assert code == 1 and not out.exists(), stderr
    [launch_log] = reports.glob("launch-*-launchnode.log")
    [error_file] = reports.glob(f"{launch_log.stem}/*/attempt_0/1/error.json")   # named as the launch log is
    assert "DefaultCPUAllocator: can't allocate memory" in json.loads(error_file.read_text())["message"]["message"]
    assert f"error_file: {error_file}" in stderr   # torchrun's failure summary points there
    assert list(Path(user_env["TMPDIR"]).glob("torchelastic_*")) == []

    doctor = subprocess.run([sys.executable, "-m", "dsv3_preflight", "doctor", "--json", str(reports)],
                            capture_output=True, text=True, timeout=120)
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    found = json.loads(doctor.stdout)
    assert found["findings"][0]["id"] == "host.cpu_memory" and found["cause_class"] == "host_resources"
    nodes = {Path(f["path"]).name: f["node"] for f in found["files"]}
    assert nodes["error.json"] == "launchnode" == nodes[launch_log.name]   # one node, not a "launch-…" one
    assert (found["first_failure"]["node"], found["first_failure"]["local_rank"]) == ("launchnode", 1)
    # the traceback the file holds, decoded: the exception's own line at the time torchrun's summary gives
    first = found["first_failure"]
    assert first["file"] == str(error_file) and first["text"].startswith("RuntimeError: [enforce fail"), first
    # the root cause's time (a rank that failed too, on its peer's loss, is listed first under "Failures:")
    summary_time = re.search(r"time\s*: \d{4}-(\d\d-\d\d)_(\d\d:\d\d:\d\d)", stderr.partition("Root Cause")[2])
    assert summary_time and first["time"] == f"{summary_time[1]} {summary_time[2]}.000", (first, stderr[-2000:])


def _on_a_terminal(argv: list[str], env: dict, timeout: float) -> tuple[int | None, str]:
    """``argv`` as a shell runs a foreground job: a session of its own whose controlling terminal is a new pseudo
    terminal, stdin, stdout and stderr on it. (exit code, or None when it still ran after ``timeout``; its output)."""
    master, slave = os.openpty()

    def take_the_terminal() -> None:   # in the child, after setsid: the pty becomes its controlling terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(argv, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
                            preexec_fn=take_the_terminal)  # noqa: PLW1509 - the test's own child, no threads here
    os.close(slave)
    out, deadline = b"", time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:   # EIO: every process holding the terminal is gone
                    chunk = b""
                out += chunk
                if chunk:
                    continue
            if proc.poll() is not None:
                break
        return proc.poll(), out.decode(errors="replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


@pytest.mark.slow
def test_a_rank_that_reads_the_terminal_ends_at_once_instead_of_hanging_stopped(tmp_path, user_env):
    # torchrun runs in a process group of its own, a background group of the terminal: a rank reading it (a login
    # prompt) was stopped by SIGTTIN and the launch hung without a word. Now the read ends (end of file) and the
    # rank fails with its own message
    argv = [sys.executable, "-m", "dsv3_preflight", "launch", *common(tmp_path, free_port()), "--", str(READER)]
    try:
        code, out = _on_a_terminal(argv, {**user_env, "READER_SYNC_DIR": str(tmp_path / "sync")}, timeout=120)
    finally:
        for proc in ours(tmp_path):   # a stopped rank (the hang this test is about) outlives its launcher
            proc.kill()
    assert code is not None, f"the launch still ran after 120 s (a rank stopped on the terminal?): {out[-3000:]}"
    assert code == 1, out[-3000:]
    assert "# GO: start" in (tmp_path / "launch.log").read_text()
    assert {m for m in re.findall(r"rank (\d) stdin: end of file", out)} == {"0", "1"}, out[-3000:]
    assert sorted(p.name for p in (tmp_path / "sync").iterdir()) == ["rank0", "rank1"]


@pytest.mark.slow
def test_red_check_never_starts_torchrun(tmp_path, user_env):
    out = tmp_path / "result.json"
    # WORLD_SIZE=3 contradicts 1 node x 2 processes: env.launch_vars fails.
    code, stdout, stderr, seen = launch_watched(
        [*common(tmp_path, free_port()), "--world-size", "3", "--", str(TRAIN), "--out", str(out)], user_env, tmp_path)
    assert code == 1
    assert not out.exists()
    assert not [cmd for cmd in seen if TORCHRUN_MARK in cmd or (str(TRAIN) in cmd and "dsv3_preflight" not in cmd)]
    assert stdout == ""
    assert stderr.strip().splitlines()[-1] == (
        f"dsv3-preflight launch: NO-GO (1 FAIL): torchrun not started; report: {tmp_path / 'report.json'}")
    assert "NO-GO: torchrun not started" in (tmp_path / "launch.log").read_text()
    report = json.loads((tmp_path / "report.json").read_text())
    assert [r["name"] for r in report["results"] if r["status"] == "fail"] == ["env.launch_vars"]


@pytest.mark.slow
def test_a_held_master_port_keeps_the_gate_closed(tmp_path, user_env):
    out = tmp_path / "result.json"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        code, stdout, stderr, seen = launch_watched(
            [*common(tmp_path, port), "--", str(TRAIN), "--out", str(out)], user_env, tmp_path)
    assert code == 1 and not out.exists()
    assert not any(TORCHRUN_MARK in cmd for cmd in seen)
    assert "torchrun not started" in stderr.strip().splitlines()[-1]
    _doctor_names_the_held_port(tmp_path, stderr, port)


def _doctor_names_the_held_port(tmp_path: Path, console: str, port: int) -> None:
    """`dsv3-preflight doctor` on what a NO-GO launch left (its console, its launch log, its JSON report, the HTML
    report beside that): the check that closed the gate, not "no error" or "cause not recognised"."""
    from dsv3_preflight.doctor import triage
    from dsv3_preflight.reports import write_html

    report = json.loads((tmp_path / "report.json").read_text())
    red = [r["name"] for r in report["results"] if r["status"] in ("fail", "error")]
    (tmp_path / "console.txt").write_text(console)
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "preflight-x.json").write_text(json.dumps(report))
    write_html(report, reports / "preflight-x.html")
    answers = {}
    for name, inputs in (("console", [tmp_path / "console.txt"]), ("launch log", [tmp_path / "launch.log"]),
                         ("report", [tmp_path / "report.json"]), ("html", [reports / "preflight-x.html"]),
                         ("directory", [reports])):
        d = triage([str(p) for p in inputs])
        assert d["exit_code"] == 1 and d["cause_recognised"], (name, d["summary"])
        head = d["findings"][0]
        assert head["id"] == f"preflight.{head['check']}" and head["check"] in red, (name, head["id"])
        assert str(port) in head["title"], (name, head["title"])
        assert not d["error_lines"], (name, d["error_lines"])   # the console's table rows are the preflight's, not errors
        answers[name] = head
    # from the report: the preflight's own fix, with the holder's pid, and the check to re-run
    assert f"kill {os.getpid()}" in answers["report"]["fix"]
    assert f"dsv3-preflight run --only {answers['report']['check']}" in answers["report"]["fix"]
    # from the console and the launch log: where the fix is, the report to read it from
    assert f"dsv3-preflight doctor {tmp_path / 'report.json'}" in answers["console"]["fix"]
    assert answers["html"]["fix"] == answers["report"]["fix"]
    for head in answers.values():
        p = subprocess.run(["bash", "-n"], input=head["fix"], capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, (p.stderr, head["fix"])


@pytest.mark.slow
def test_dry_run_prints_exactly_the_command_and_starts_nothing(tmp_path, user_env):
    port = free_port()
    code, stdout, stderr, seen = launch_watched(
        [*common(tmp_path, port), "--only", "env.launch_vars,net.nic_route", "--dry-run",
         "--", "train.py", "--x", "1", "--name", "a b"], user_env, tmp_path)
    assert code == 0, stderr
    assert stdout == (
        "export NCCL_SOCKET_IFNAME=lo\n"
        "export GLOO_SOCKET_IFNAME=lo\n"
        f"{shlex.quote(sys.executable)} -m torch.distributed.run --nnodes=1 --nproc_per_node=2 --node_rank=0 "
        f"--master_addr=127.0.0.1 --master_port={port} --max_restarts=0 "
        f"{shlex.quote('--log-dir=' + str(tmp_path / 'launch'))} train.py --x 1 --name 'a b'\n")
    assert not any(TORCHRUN_MARK in cmd for cmd in seen)
    assert "# dry run: not started" in (tmp_path / "launch.log").read_text()


@pytest.mark.slow
def test_the_launch_log_masks_secrets_the_printed_command_keeps_them(tmp_path, user_env):
    # The launch log lies beside the reports (shared NFS); stdout is the user's own terminal, meant for pasting.
    code, stdout, stderr, _ = launch_watched(
        [*common(tmp_path, free_port()), "--only", "env.launch_vars", "--dry-run",
         "--", "train.py", "--hf_token", "hf_secretvalue0123", "--lr", "1e-4",
         "--wandb_api_key=wandb0123456789"], user_env, tmp_path)
    assert code == 0, stderr
    assert "--hf_token hf_secretvalue0123 --lr 1e-4 --wandb_api_key=wandb0123456789" in stdout
    log = (tmp_path / "launch.log").read_text()
    assert "--hf_token *** --lr 1e-4 --wandb_api_key=***" in log
    assert "hf_secretvalue0123" not in log and "wandb0123456789" not in log


@pytest.mark.slow
def test_skip_is_recorded_in_the_report_and_the_launch_log(tmp_path, user_env):
    code, stdout, stderr, _ = launch_watched(
        [*common(tmp_path, free_port()), "--skip", "host.resources", "--dry-run", "--", "train.py"], user_env, tmp_path)
    assert code == 0, stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert "host.resources" in report["deselected"]
    assert not any(r["name"] == "host.resources" for r in report["results"])  # deselection lives in `deselected` only
    log = (tmp_path / "launch.log").read_text()
    assert f"# skipped by request: host.resources: {report['deselected']['host.resources']}" in log


@pytest.mark.slow
def test_users_own_interface_value_wins_over_the_derived_one_and_the_contradiction_warns(tmp_path, user_env):
    # net.nic_route would fail bogus0; with it skipped, the launcher still knows the route (port_free needs it).
    user_env.update(NCCL_SOCKET_IFNAME="bogus0", GLOO_SOCKET_IFNAME="lo")
    port = free_port()
    code, stdout, stderr, _ = launch_watched(
        [*common(tmp_path, port), "--only", "net.port_free", "--dry-run", "--", "train.py"], user_env, tmp_path)
    assert code == 0, stderr
    assert stdout.splitlines()[:-1] == ["# NCCL_SOCKET_IFNAME=bogus0 kept from your environment (derived: lo)"]
    warning = ("warning: NCCL_SOCKET_IFNAME=bogus0 is yours and is kept, but the preflight derived NCCL_SOCKET_IFNAME=lo: "
               "the route to MASTER_ADDR 127.0.0.1 leaves through lo (nic_route)")
    assert warning in stderr.splitlines()
    assert f"# warning: {warning[len('warning: '):]}" in (tmp_path / "launch.log").read_text()


@pytest.mark.slow
def test_profile_values_from_the_environment_become_torchrun_flags(tmp_path, user_env):
    port = free_port()
    user_env.update(MASTER_PORT=str(port), NPROC_PER_NODE="1")
    code, stdout, stderr, _ = launch_watched(
        ["--profile", "cpu", "--no-report", "--only", "env.launch_vars", "--dry-run", "--", "t.py"], user_env, tmp_path)
    assert code == 0, stderr
    assert f"--nproc_per_node=1 --node_rank=0 --master_addr=127.0.0.1 --master_port={port} " in stdout
    # a CLI flag beats the environment
    code, stdout, _, _ = launch_watched(
        ["--profile", "cpu", "--no-report", "--only", "env.launch_vars", "--nproc-per-node", "2", "--dry-run", "--", "t.py"],
        user_env, tmp_path)
    assert code == 0 and "--nproc_per_node=2 " in stdout


def test_launch_without_a_training_script_is_a_usage_error(capsys):
    assert main(["launch", "--profile", "cpu", "--no-report"]) == 4
    assert "name the training script after `--`" in capsys.readouterr().err


def test_launch_refuses_replayed_facts_except_for_a_dry_run(tmp_path, capsys):
    facts = tmp_path / "facts.json"
    facts.write_text("{}")
    assert main(["launch", "--profile", "cpu", "--no-report", "--facts-in", str(facts), "--", "train.py"]) == 4
    assert "use it with --dry-run" in capsys.readouterr().err


def test_a_missing_training_script_is_a_usage_error_before_the_preflight(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["launch", "--profile", "cpu", "--no-report", "--", "no_such_train.py", "--x", "1"]) == 4
    err = capsys.readouterr().err
    assert f"the training script no_such_train.py does not exist (in {tmp_path})" in err
    assert "GO" not in err  # no preflight ran, no torchrun traceback


def test_a_module_or_executable_after_the_separator_is_not_checked_as_a_file():
    from dsv3_preflight.launch.command import training_script

    assert training_script(["src/train.py", "--x"]) == "src/train.py"
    assert training_script(["-m", "pkg.train"]) is None
    assert training_script(["bash", "run.sh"], ["torchrun", "--no-python"]) is None
    assert training_script(["pkg.train"], ["/opt/conda/bin/python", "-m", "torch.distributed.run", "-m"]) is None


def test_the_interpreters_own_dash_m_naming_torchrun_leaves_the_script_checked():
    """``python -m torch.distributed.run``: that -m runs torchrun; the training word is still a script file."""
    from dsv3_preflight.launch.command import torchrun_options, training_script

    for torchrun in (["python3.10", "-m", "torch.distributed.run"], ["/env/bin/python", "-u", "-m", "torch.distributed.run"],
                     ["python", "-mtorch.distributed.run", "--standalone"], ["torchrun", "--nnodes=1"]):
        assert training_script(["src/train.py", "--x"], torchrun) == "src/train.py", torchrun
    assert torchrun_options(["python", "-m", "torch.distributed.run", "--no-python", "-x"]) == ["--no-python", "-x"]
    assert torchrun_options(["torchrun", "--module"]) == ["--module"]
    assert torchrun_options([]) == []


@pytest.mark.parametrize("where", ["--torchrun", "--config"])
def test_a_missing_script_is_refused_under_a_python_dash_m_torchrun(where, tmp_path, capsys, monkeypatch):
    """``python -m torch.distributed.run`` as torchrun (on the command line or in --config) still runs a script: a
    missing one is refused before the preflight. Its -m was read as torchrun's own: the preflight ran, then
    torchrun failed on the file."""
    monkeypatch.chdir(tmp_path)
    torchrun = f"{sys.executable} -m torch.distributed.run"
    config = tmp_path / "preflight.toml"
    config.write_text(f'torchrun = "{torchrun}"\n')
    given = ["--torchrun", torchrun] if where == "--torchrun" else ["--config", str(config)]
    assert main(["launch", "--profile", "cpu", *given, "--no-report", "--only", "env.launch_vars", "--",
                 "no_such_train.py"]) == 4
    err = capsys.readouterr().err
    assert f"the training script no_such_train.py does not exist (in {tmp_path})" in err
    assert "GO" not in err


@pytest.mark.slow
def test_an_executable_under_the_config_files_no_python_torchrun_is_not_refused_as_a_missing_script(tmp_path, user_env):
    """``torchrun = "... --no-python"`` in --config: the training word is an executable on PATH (``true``), not a
    file of the working directory. It was refused as a missing script: the check read only --torchrun's CLI value."""
    config = tmp_path / "preflight.toml"
    config.write_text(f'torchrun = "{sys.executable} -m torch.distributed.run --no-python"\n')
    code, stdout, stderr, seen = launch_watched(
        ["--profile", "cpu", "--config", str(config), "--master-port", str(free_port()), "--no-report",
         "--only", "env.*", "--launch-log", str(tmp_path / "launch.log"), "--", "true"], user_env, tmp_path)
    assert code == 0, stderr
    assert "does not exist" not in stderr
    log = (tmp_path / "launch.log").read_text()
    assert "# GO: start" in log and "--no-python" in log and any(TORCHRUN_MARK in cmd for cmd in seen)
