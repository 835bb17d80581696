"""`launch --all-nodes` on real Ray nodes in two network namespaces (tests/cluster_lab.py's RayLab): a 2-node x
1-process gloo job across the namespaces' own network, started from the head as docs/cluster.md's step 5 says."""
import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytest.importorskip("ray")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cluster_lab import MASTER_PORT, LabUnavailable, RayLab  # noqa: E402

from dsv3_preflight.launch.ray_launch import DOCTOR_HEAD  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.netns, pytest.mark.ray]
#: what the launch needs judged, cheaply (no GPU or collective probes on 2 cores)
ONLY = "env.*,net.nic_route,cluster.*"

TRAIN = Path(__file__).resolve().parents[1] / "data" / "launch" / "train_allreduce.py"
NNODES = 2


@pytest.fixture(scope="module")
def lab():
    try:
        lab = RayLab(NNODES, node_tmpdir=True).__enter__()   # torchrun's log dirs go in the lab's temp dir
    except LabUnavailable as exc:
        pytest.skip(f"netns lab unavailable: {exc}")
    try:
        yield lab
    finally:
        lab.close()  # every process by PID or group, the namespaces, the temp dir


def ours(tmp_path: Path) -> list[str]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if str(tmp_path) in cmd:
            found.append(cmd)
    return found


def _cli(lab: RayLab, tmp_path: Path, argv: list[str], timeout: float) -> subprocess.CompletedProcess:
    """The launch on the head (namespace 0), in tmp_path; its process group is stopped whatever happens."""
    proc = lab.net.popen(0, argv, env=lab.cli_env(), cwd=str(tmp_path))
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        from netns_lab import stop_group

        stop_group(proc, grace=5.0)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def launch(lab: RayLab, tmp_path: Path, *train_args: str, extra: tuple = (), timeout: float = 240.0,
           script: str = str(TRAIN)):
    argv = [sys.executable, "-m", "dsv3_preflight", "launch", "--all-nodes", "--ray-address", lab.gcs,
            "--profile", "cpu", "--nnodes", str(NNODES), "--nproc-per-node", "1", "--only", ONLY, "--no-color",
            "--no-report", "--json", str(tmp_path / "report.json"), "--launch-log", str(tmp_path / "launch.log"),
            "--reports-dir", str(tmp_path / "logs"), "--stop-grace", "5", *extra,
            "--", script, "--out", str(tmp_path / "result.json"), *train_args]
    proc = _cli(lab, tmp_path, argv, timeout)
    deadline = time.monotonic() + 30
    while ours(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ours(tmp_path) == [], "the launch left processes running"
    doc = json.loads((tmp_path / "report.json").read_text())
    return proc, doc


def node_logs(tmp_path: Path) -> dict[int, str]:
    logs = {}
    for path in (tmp_path / "logs").glob("launch-*-node*.log"):
        rank = int(re.search(r"-node(\d+)-", path.name).group(1))
        logs[rank] = path.read_text()
    return logs


def test_all_nodes_launch_runs_torchrun_on_every_node_with_its_rank_in_the_drivers_directory(lab: RayLab, tmp_path: Path):
    # `-- src/train.py` as the users type it: a relative script means the driver's working directory on every
    # node (Ray workers run wherever `ray start` ran)
    (tmp_path / "src").mkdir()
    shutil.copy(TRAIN, tmp_path / "src" / "train.py")
    # --torchrun naming a torchrun script as pip writes it (#! this interpreter): every node runs that command, and
    # env.torchrun_python judged its Python on every node
    torchrun = tmp_path / "bin" / "torchrun"
    torchrun.parent.mkdir()
    ours_script = Path(shutil.which("torchrun", path=str(Path(sys.executable).parent)))
    torchrun.write_text(f"#!{sys.executable}\n" + ours_script.read_text().split("\n", 1)[1])
    torchrun.chmod(0o755)
    proc, doc = launch(lab, tmp_path, script="src/train.py", extra=("--torchrun", str(torchrun)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    judged = [r for r in doc["results"] if r["name"] == "env.torchrun_python"]
    assert sorted(r["node"] for r in judged) == ["lab-node0", "lab-node1"] and {r["status"] for r in judged} == {"pass"}
    ranks = doc["cluster"]["node_ranks"]
    assert ranks == {"lab-node0": 0, "lab-node1": 1}
    by_rank = {r: name for name, r in ranks.items()}
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["world_size"] == 2 and result["sum"] == 3.0  # across the namespaces' own network
    assert result["ifname"] == "eth0"  # Gloo used the interface of the route to MASTER_ADDR, derived by the preflight
    for rank in (0, 1):
        assert f"[node {rank} {by_rank[rank]}] rank {rank} all_reduce sum 3" in proc.stdout.splitlines()
    logs = node_logs(tmp_path)
    assert sorted(logs) == [0, 1]
    for rank, text in logs.items():
        assert f"--node_rank={rank} " in text and f"rank {rank} all_reduce sum 3" in text
        assert f"\n{torchrun} --nnodes=2 " in text   # the command env.torchrun_python judged, not this interpreter's
        assert f"# in {tmp_path}\n" in text
        assert text.rstrip().endswith("# torchrun exited with 0")
    for path in (tmp_path / "logs").glob("launch-*-node*.log"):   # torchrun's --log-dir is named as the node's log
        assert f"--log-dir={path.with_suffix('')} " in path.read_text() and path.with_suffix("").is_dir()
    assert "all 2 node(s) finished (torchrun exit 0)" in proc.stderr


def test_one_nodes_failure_stops_the_other_and_the_exit_code_names_it(lab: RayLab, tmp_path: Path):
    proc, doc = launch(lab, tmp_path, "--fail-on-node", "1")
    by_rank = {r: name for name, r in doc["cluster"]["node_ranks"].items()}
    assert proc.returncode == 11, proc.stderr[-3000:]
    assert not (tmp_path / "result.json").exists()
    assert f"[node 1 {by_rank[1]}] node 1: failing on purpose" in proc.stdout.splitlines()
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(f"dsv3-preflight launch: [node 1 {by_rank[1]}] failed first (torchrun exited with ")
    assert last.endswith(f"stopped the others: [node 0 {by_rank[0]}]; exit 11")
    logs = node_logs(tmp_path)
    assert "failing on purpose" in logs[1]
    assert re.search(r"# torchrun exited with -?\d+\s*$", logs[0]) and "exited with 0" not in logs[0]
    assert last in (tmp_path / "launch.log").read_text()
    # the launch ran the doctor on both nodes' output and said what it found, above its closing line
    said = [line for line in proc.stderr.splitlines() if line.startswith(DOCTOR_HEAD)]
    assert said and f"(node {by_rank[1]}" in said[0] and "in the output of 2 node(s)" in said[0], proc.stderr[-3000:]
    assert f"# {said[0]}\n" in (tmp_path / "launch.log").read_text()
    # `dsv3-preflight doctor` on what the launch printed, and on the nodes' logs it wrote: the node that failed first
    # is named by its name, from the "[node N name]" prefixes and from the logs' file names
    from dsv3_preflight.doctor import triage

    console = tmp_path / "console.log"
    console.write_text(proc.stdout + proc.stderr)
    for given in (console, tmp_path / "logs"):
        diag = triage([str(given)])
        assert diag["exit_code"] == 1 and diag["first_failure"]["node"] == by_rank[1], (given, diag["summary"])
        assert {n for f in diag["findings"] for n in f["nodes"]} <= set(by_rank.values()), (given, diag["summary"])


def test_a_node_stalled_before_a_collective_is_named_from_the_launchs_console(lab: RayLab, tmp_path: Path):
    # node 1's rank sleeps before the all_reduce (a data loader that never returns): node 0's times out in Gloo after
    # 8 s, its torchrun fails first and the launch stops node 1. Node 1 printed no timeout: it is the stuck one. The
    # console holds both nodes' lines in one file; the launch's "torchrun pid … on …" lines say which nodes ran
    proc, doc = launch(lab, tmp_path, "--stall-on-node", "1", "--pg-timeout", "8")
    by_rank = {r: name for name, r in doc["cluster"]["node_ranks"].items()}
    assert proc.returncode == 10, proc.stderr[-3000:]
    assert f"[node 1 {by_rank[1]}] node 1: stalling before the all_reduce" in proc.stdout.splitlines()
    from dsv3_preflight.doctor import triage

    console = tmp_path / "console.log"
    console.write_text(proc.stdout + proc.stderr)
    for given in (console, tmp_path / "logs"):
        diag = triage([str(given)])
        first = diag["first_failure"]
        assert (diag["exit_code"], diag["cause_class"]) == (1, "nccl_hang"), (given, diag["summary"])
        assert diag["silent_nodes"] == [by_rank[1]] and first["node"] == by_rank[1], (given, diag["summary"], first)
        assert first["inferred_from"], first
    # the launch's own doctor block says the same at once: a hang names no culprit's actor
    said = [line for line in proc.stderr.splitlines() if line.startswith(DOCTOR_HEAD)]
    assert said[0].startswith(DOCTOR_HEAD + "root cause: ") and "in the output of 2 node(s)" in said[0], said
    assert said[1].startswith(DOCTOR_HEAD + "who acts: not said by the log (read the first failing rank's lines first)"), said


def test_all_nodes_dry_run_prints_each_nodes_command_and_starts_nothing(lab: RayLab, tmp_path: Path):
    proc, doc = launch(lab, tmp_path, "--x", "a b", extra=["--dry-run"])
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = ""
    for node in sorted(doc["cluster"]["nodes"], key=lambda n: n["node_rank"]):
        rank = node["node_rank"]
        facts = next(n for n in doc["nodes"] if n["node"] == node["name"])["facts"]
        ifname = facts["nic_route"]["ifname"]
        # the node's own values win (the lab may export them); what it lacks is exported
        exports = [f"export {var}={ifname}\n" for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
                   if not facts["env"].get(var, "").strip()]
        kept = [f"# {var}={facts['env'][var]} kept from your environment (derived: {ifname})\n"
                for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")
                if facts["env"].get(var, "").strip() and facts["env"][var] != ifname]
        expected += (
            f"# node {rank} {node['name']} ({node['ip']})\n" + "".join(exports) + "".join(kept) +
            f"{shlex.quote(sys.executable)} -m torch.distributed.run --nnodes={NNODES} --nproc_per_node=1 --node_rank={rank} "
            f"--master_addr=lab-node0 --master_port={MASTER_PORT} --max_restarts=0 {TRAIN} --out {tmp_path / 'result.json'} "
            "--x 'a b'\n")
    assert proc.stdout == expected
    assert not (tmp_path / "result.json").exists() and node_logs(tmp_path) == {}


def test_all_nodes_red_preflight_starts_torchrun_nowhere(lab: RayLab, tmp_path: Path):
    # The profile expects 3 nodes; Ray has 2: cluster.node_count fails.
    proc, doc = launch(lab, tmp_path, extra=["--nnodes", "3"])
    assert proc.returncode == 1
    assert "cluster.node_count" in [r["name"] for r in doc["results"] if r["status"] == "fail"]
    assert proc.stdout == "" and node_logs(tmp_path) == {}
    assert proc.stderr.strip().splitlines()[-1].startswith("dsv3-preflight launch: NO-GO (")
    assert "NO-GO: torchrun not started" in (tmp_path / "launch.log").read_text()
    # `dsv3-preflight doctor` on the console, the launch log and the report: the check that closed the gate
    from dsv3_preflight.doctor import triage
    (tmp_path / "console.txt").write_text(proc.stderr)
    for inputs in (["console.txt"], ["launch.log"], ["report.json"], ["console.txt", "launch.log", "report.json"]):
        d = triage([str(tmp_path / p) for p in inputs])
        assert d["exit_code"] == 1 and d["cause_recognised"], (inputs, d["summary"])
        head = d["findings"][0]
        assert (head["id"], head["class"]) == ("preflight.cluster.node_count", "port_rendezvous"), (inputs, head["id"])
        assert "3" in head["title"] and "cluster" not in head["nodes"], (inputs, head)


def _argv(lab: RayLab, tmp_path: Path, *training: str) -> list[str]:
    return [sys.executable, "-m", "dsv3_preflight", "launch", "--all-nodes", "--ray-address", lab.gcs,
            "--profile", "cpu", "--nnodes", str(NNODES), "--nproc-per-node", "1", "--only", ONLY, "--no-color",
            "--no-report", "--json", str(tmp_path / "report.json"), "--reports-dir", str(tmp_path / "logs"),
            "--stop-grace", "5", "--", *training]


def _none_left(tmp_path: Path) -> None:
    deadline = time.monotonic() + 30
    while ours(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ours(tmp_path) == [], "the launch left processes running"


def test_a_missing_training_script_fails_the_start_with_the_reason(lab: RayLab, tmp_path: Path):
    # under `python -m torch.distributed.run` too: that -m names torchrun, the training word is still a script
    argv = _argv(lab, tmp_path, "no_such_train.py")
    argv[argv.index("--"):argv.index("--")] = ["--torchrun", f"{sys.executable} -m torch.distributed.run"]
    proc = _cli(lab, tmp_path, argv, 240)
    _none_left(tmp_path)
    assert proc.returncode == 10, proc.stderr[-3000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert (f"failed first (could not start torchrun: FileNotFoundError: the training script no_such_train.py does not "
            f"exist in {tmp_path} on this node)") in last


def _start_slow(lab: RayLab, tmp_path: Path) -> subprocess.Popen:
    """A launch whose training processes sleep, returned once every node's process runs."""
    slow = tmp_path / "slow_train.py"
    slow.write_text("import os, time\nprint('rank', os.environ['RANK'], 'up', flush=True)\ntime.sleep(600)\n")
    proc = lab.net.popen(0, _argv(lab, tmp_path, str(slow)), env=lab.cli_env(), cwd=str(tmp_path))
    up = 0
    for line in proc.stdout:
        up += " up" in line
        if up == NNODES:
            return proc
    proc.kill()
    raise AssertionError(proc.stderr.read()[-3000:])


def test_a_driver_killed_outright_leaves_no_torchrun_or_training_process(lab: RayLab, tmp_path: Path):
    # SIGKILL (the OOM killer, a lost session): Ray SIGKILLs the dead actor's children; torchrun's
    # workers must not outlive it
    proc = _start_slow(lab, tmp_path)
    proc.kill()
    proc.wait(timeout=30)
    deadline = time.monotonic() + 60
    while ours(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert ours(tmp_path) == [], "the killed launch left processes running"


def test_sigterm_to_the_driver_stops_torchrun_and_its_workers_on_every_node(lab: RayLab, tmp_path: Path):
    slow = tmp_path / "slow_train.py"
    slow.write_text("import os, time\nprint('rank', os.environ['RANK'], 'up', flush=True)\ntime.sleep(600)\n")
    proc = lab.net.popen(0, _argv(lab, tmp_path, str(slow)), env=lab.cli_env(), cwd=str(tmp_path))
    try:
        up = 0
        for line in proc.stdout:  # every node's training process is running
            up += " up" in line
            if up == NNODES:
                break
        assert up == NNODES, proc.stderr.read()[-3000:]
        proc.terminate()  # SIGTERM: a scheduler or `kill` stopping the driver
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    _none_left(tmp_path)  # torchrun and the slow_train.py workers (torchrun's own sessions) are all gone
    assert proc.returncode == 2, err[-3000:]
    assert err.strip().splitlines()[-1] == "dsv3-preflight launch: interrupted; torchrun stopped on every node"
