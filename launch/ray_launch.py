"""``launch --all-nodes``: torchrun on every node of the Ray cluster, after a green cluster preflight.

The driver keeps the Ray connection the preflight used (same node ids, same ranks), starts one
actor per node pinned with ``NodeAffinitySchedulingStrategy(soft=False)`` (no CPU/GPU asked), and
each actor builds its node's command with the pure builder (the node's own environment, the facts
the preflight gathered there), starts torchrun in its own session, and writes every output line to
a node-local log file. The driver streams the lines with a ``[node R name]`` prefix. When one
node's torchrun exits non-zero, the others are stopped (SIGTERM to their process group, SIGKILL
after the grace period) and the exit code is ``10 + R`` of the node that failed first. The driver then
runs the doctor on what every node printed (as it received it) and prints its root cause, who acts and the fix
above its closing line: the first failure is named the moment the run ends, not after someone collects the logs.
"""
from __future__ import annotations

import collections
import os
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: exit code of `launch --all-nodes` when node R failed first: FAILED_NODE_BASE + R
FAILED_NODE_BASE = 10
RAY_CALL_TIMEOUT_S = 60.0
POLL_INTERVAL_S = 0.3
#: the last lines of each node's output the driver keeps for the doctor (a failure's cause is near its end)
DOCTOR_TAIL_LINES = 20000
#: how the driver's doctor block starts (the doctor reads it back as this launcher's own line, not a run's)
DOCTOR_HEAD = "dsv3-preflight launch: doctor: "


class NodeTorchrun:
    """The actor on one node: build this node's command, run torchrun, keep its output (log + buffer)."""

    def __init__(self) -> None:
        self.proc = None
        self.lines: list[str] = []   # lines not yet fetched by the driver; self.base lines came before them
        self.base = 0
        self.reader = None
        self.log_path: str | None = None

    def start(self, profile: Mapping[str, Any], training: Sequence[str], derived: Mapping[str, Any], notes: Sequence[str],
              torchrun: Sequence[str] | None, node_rank: int, log_path: str, header: str,
              cwd: str | None = None) -> dict[str, Any]:
        import socket
        import subprocess
        import threading

        from dsv3_preflight.launch.command import build_command, default_torchrun, shell_text, training_script
        from dsv3_preflight.launch.gate import torchrun_log_dir
        from dsv3_preflight.profile import Profile

        # torchrun runs in the driver's working directory (a relative `src/train.py` means the same file
        # on every node), not in the Ray worker's, which is wherever `ray start` ran.
        warnings: list[str] = []
        if cwd and not os.path.isdir(cwd):
            warnings.append(f"the driver's working directory {cwd} does not exist on this node; torchrun runs in {os.getcwd()}")
            cwd = None
        where = cwd or os.getcwd()
        script = training_script(training, torchrun)
        if script and not os.path.exists(os.path.join(where, script)):
            raise FileNotFoundError(f"the training script {script} does not exist in {where} on this node")
        command = build_command(Profile.from_dict(profile), training, environ=dict(os.environ), derived=derived,
                                torchrun=list(torchrun) if torchrun else default_torchrun(sys.executable),
                                node_rank=node_rank, notes=notes, log_dir=str(torchrun_log_dir(log_path)))
        path = Path(log_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        log = open(path, "a", buffering=1)
        warnings += command.warnings
        log.write(header + f"# in {where}\n" + "".join(f"# warning: {w}\n" for w in warnings) + shell_text(command))
        self.log_path = str(path)
        # torchrun under a shim: when the actor dies Ray SIGKILLs its children, and a SIGKILLed torchrun
        # leaves its workers (each in its own session) running; the shim's death SIGTERMs torchrun instead.
        env = {**command.env, **_stall_env(command.env, log_path)}
        self.proc = subprocess.Popen([sys.executable, "-c", _SHIM, *command.argv], env=env, cwd=where,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                     errors="replace", start_new_session=True, preexec_fn=_die_with_parent)

        def pump() -> None:
            for line in self.proc.stdout:
                log.write(line)
                self.lines.append(line.rstrip("\n"))
            self.proc.wait()
            log.write(f"# torchrun exited with {self.proc.returncode}\n")
            log.close()

        self.reader = threading.Thread(target=pump, daemon=True)
        self.reader.start()
        return {"pid": _child_pid(self.proc.pid), "host": socket.gethostname(), "log": self.log_path, "argv": list(command.argv),
                "diff": list(command.diff), "warnings": warnings}

    def poll(self, cursor: int) -> tuple[list[str], int | None]:
        """Output lines from line number ``cursor`` on (those before it are dropped: a long run keeps no
        history here, the node log has it), and the exit code once torchrun ended and all is read."""
        done = self.reader is not None and not self.reader.is_alive()
        drop = max(min(cursor - self.base, len(self.lines)), 0)
        del self.lines[:drop]
        self.base += drop
        return self.lines[:], (self.proc.returncode if done else None)

    def stall_sample(self) -> dict:
        """The stall watch's sample of this node's ranks (CPU time, stacks): dsv3_preflight/stall/probes/capture.py."""
        from dsv3_preflight.stall.probes.capture import sample_node

        return sample_node(_child_pid(self.proc.pid) if self.proc is not None and self.proc.poll() is None else None)

    def stall_capture(self, node: str, node_rank: int) -> dict:
        """The stall watch's capture of this node's ranks (stacks, wchan, TCP queues, Flight Recorder, RAS, NVML)."""
        from dsv3_preflight.stall.probes.capture import capture_node

        return dict(capture_node(_child_pid(self.proc.pid) if self.proc is not None and self.proc.poll() is None else None,
                                 node, node_rank))

    def stop(self, grace: float) -> int | None:
        """Stop torchrun and its workers (their whole session) by process group; SIGKILL after ``grace`` seconds."""
        import signal
        import subprocess

        if self.proc is None:
            return None
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        try:  # workers torchrun left behind in its session
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.reader is not None:
            self.reader.join(timeout=10.0)
        return self.proc.returncode


#: Runs torchrun (argv[1:]) as its child with PR_SET_PDEATHSIG=SIGTERM: however the shim dies (Ray SIGKILLs
#: a dead actor's children), torchrun gets SIGTERM and stops its workers. Signals sent to the process
#: group reach torchrun directly, so the shim ignores them; it exits with torchrun's code (or signal).
_SHIM = r"""
import ctypes, os, signal, subprocess, sys
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
def child():
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
code = subprocess.Popen(sys.argv[1:], preexec_fn=child).wait()
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
"""


def _child_pid(shim: int, wait: float = 2.0) -> int:
    """torchrun's pid: the shim's child (Linux /proc); the shim's own pid when it cannot be read in time."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{shim}/task/{shim}/children") as fh:
                children = fh.read().split()
        except OSError:
            break
        if children:
            return int(children[0])
        time.sleep(0.02)
    return shim


def _stall_env(env: Mapping[str, str], log_path: str) -> dict[str, str]:
    """The Flight Recorder's variables for the stall watch's capture, its dump pipe beside this node's torchrun log
    directory (a value the user set is kept): docs/stall-watch.md."""
    from dsv3_preflight.launch.gate import torchrun_log_dir
    from dsv3_preflight.stall.probes.capture import watch_env

    fr_dir = torchrun_log_dir(log_path) / "flight_recorder"
    try:
        fr_dir.mkdir(parents=True, exist_ok=True)
    except OSError:
        return {}
    return watch_env(env, str(fr_dir))


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """The shim dies with the actor process (Linux PR_SET_PDEATHSIG), and torchrun (SIGTERMed) with the shim."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
    except Exception:  # noqa: BLE001 - best effort on systems without prctl
        pass


def _why(exc: BaseException) -> str:
    """One line: the node-side exception inside a RayTaskError (whose own first line is only the task's name)."""
    cause = getattr(exc, "cause", None)
    cause = cause if type(exc).__name__.startswith("RayTaskError") and isinstance(cause, BaseException) else exc
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0][:300] if text else ''}"


def _sigterm_interrupts():
    """SIGTERM (a scheduler or `kill` stopping the driver) takes the Ctrl-C path: torchrun is stopped on
    every node before the driver leaves. Returns the previous handler (None off the main thread)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, interrupt)


def _nodes_from_doc(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The preflight's nodes: name, Ray node id, rank and facts, ordered by rank."""
    facts = {n["node"]: n.get("facts") or {} for n in doc.get("nodes", [])}
    ray_nodes = (doc.get("cluster") or {}).get("nodes") or []
    return sorted(({**n, "facts": facts.get(n["name"], {})} for n in ray_nodes), key=lambda n: n["node_rank"])


def cluster_changed_line(judged: Mapping[str, int], now: Mapping[str, int]) -> str:
    """The closing line when Ray's nodes differ from those the preflight judged (`doctor` reads it:
    launch.cluster_changed)."""
    return (f"dsv3-preflight launch: NO-GO: the Ray cluster changed after the preflight (ranks then {dict(judged)}, "
            f"now {dict(now)}); torchrun not started")


def launch_all_nodes(doc: Mapping[str, Any], *, training: Sequence[str], reports_dir: str, stop_grace: float,
                     profile: Any, torchrun: Sequence[str] | None, launch_log: Path | None, log_text: str,
                     stall: Any = None, publish: Any = None) -> int:
    """Start torchrun on every node the preflight judged; stream; stop all when one fails. Returns the exit code.

    ``stall`` (StallOptions) and ``publish``: the stall watch (docs/stall-watch.md); with ``--on-stall=stop`` a stall
    ends the run as a failure of the node its report names first (exit 10 + R)."""
    from dsv3_preflight.cluster import alive_nodes, assign_node_ranks, unique_names

    nodes = _nodes_from_doc(doc)
    now = {n.node_id: n.node_rank for n in assign_node_ranks(unique_names(alive_nodes()), profile.master_addr)}
    judged = {n["node_id"]: n["node_rank"] for n in nodes}
    if now != judged:
        print(cluster_changed_line(judged, now), file=sys.stderr, flush=True)
        return 1
    run = _Launch(nodes, Path(os.path.abspath(reports_dir)), launch_log)
    run.stall = _stall_watch(stall, nodes, run.actors, publish, (profile.master_addr, int(profile.master_port)))
    previous_term = _sigterm_interrupts()
    try:
        run.start(profile, training, torchrun, log_text)
        run.stream()
    except KeyboardInterrupt:
        run.failed = run.failed or (-1, "interrupted")
    finally:
        run.stop(stop_grace)
        if previous_term is not None:
            signal.signal(signal.SIGTERM, previous_term)
    return run.close()


def _stall_watch(options: Any, nodes: Sequence[Mapping[str, Any]], actors: Mapping[int, Any], publish: Any,
                 master: tuple[str, int]) -> Any:
    """The driver's stall watch over the nodes' actors (None when off)."""
    if options is None or not options.enabled:
        return None
    from dsv3_preflight.stall.ray_watch import RayStallWatch

    return RayStallWatch(options, nodes, actors, publish, master)


def _stall_tick(run: _Launch) -> None:
    """One look of the stall watch between two polls; with --on-stall=stop a reported stall fails the run."""
    from dsv3_preflight.stall.ray_watch import named_node_rank

    section = run.stall.tick(refresh=run.read_new_lines) if run.stall is not None else None
    if section is not None and section.get("action") == "stop" and run.failed is None:
        cause = (section.get("causes") or [{}])[0]
        run.failed = (named_node_rank(section), f"stalled: {cause.get('id')}, stopped by --on-stall=stop")


class _Launch:
    """torchrun on every node of one ``launch --all-nodes``: one actor per node, pinned; what each printed; which
    node failed first."""

    def __init__(self, nodes: Sequence[Mapping[str, Any]], log_dir: Path, launch_log: Path | None) -> None:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        self.nodes = list(nodes)
        self.by_rank = {n["node_rank"]: n for n in nodes}
        self.log_dir, self.launch_log = log_dir, launch_log
        self.stamp = time.strftime("%Y%m%d-%H%M%S")
        actor_cls = ray.remote(NodeTorchrun)
        self.actors: dict[int, Any] = {}
        self.labels: dict[int, str] = {}
        for node in nodes:
            rank = node["node_rank"]
            self.labels[rank] = f"[node {rank} {node['name']}]"
            self.actors[rank] = actor_cls.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node["node_id"], soft=False),
                num_cpus=0, num_gpus=0, max_restarts=0,
            ).remote()
        self.failed: tuple[int, str] | None = None
        self.stall: Any = None   # the stall watch (dsv3_preflight/stall/ray_watch.py), None when off
        self.cursors = dict.fromkeys(self.actors, 0)
        #: each node's last lines, for the doctor
        self.seen: dict[int, collections.deque[str]] = {rank: collections.deque(maxlen=DOCTOR_TAIL_LINES)
                                                         for rank in self.actors}

    def _log(self, text: str) -> None:
        if self.launch_log:
            from dsv3_preflight.launch.gate import write_launch_log

            write_launch_log(self.launch_log, text)

    def _show(self, rank: int, lines: Sequence[str]) -> None:
        self.cursors[rank] += len(lines)
        self.seen[rank].extend(lines)
        for line in lines:
            print(f"{self.labels[rank]} {line}", flush=True)
            if self.stall is not None:
                self.stall.observe(f"{self.labels[rank]} {line}")

    def start(self, profile: Any, training: Sequence[str], torchrun: Sequence[str] | None, log_text: str) -> None:
        """torchrun on every node, each with its node's derived environment; a node that cannot start failed."""
        import ray

        from dsv3_preflight.launch.command import derive_env

        starts = {}
        for node in self.nodes:
            rank = node["node_rank"]
            derived, notes = derive_env(profile, node["facts"])
            path = self.log_dir / f"launch-{self.stamp}-node{rank}-{node['name']}.log"
            header = f"{log_text}# node {rank} {node['name']} ({node['ip']}): torchrun output follows\n"
            starts[rank] = self.actors[rank].start.remote(profile.to_dict(), list(training), derived, notes, torchrun,
                                                          rank, str(path), header, os.getcwd())
        for rank, ref in starts.items():
            try:
                info = ray.get(ref, timeout=RAY_CALL_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - this node could not start: it failed first
                self.failed = self.failed or (rank, f"could not start torchrun: {_why(exc)}")
                continue
            for warning in info["warnings"]:
                print(f"warning: {self.labels[rank]} {warning}", file=sys.stderr)
            label = self.labels[rank]
            print(f"{label} torchrun pid {info['pid']} on {info['host']}; log {info['log']}", file=sys.stderr, flush=True)
            self._log(f"# {label} pid {info['pid']} on {info['host']}, log {info['log']}\n")

    def stream(self) -> None:
        """Print every node's lines as they come, until all finished or one failed (lost, or a non-zero exit)."""
        codes: dict[int, int] = {}
        while self.failed is None and len(codes) < len(self.actors):
            for rank in self.actors:
                if rank not in codes and not self._poll(rank, codes):
                    break
            _stall_tick(self)
            time.sleep(POLL_INTERVAL_S)

    def _poll(self, rank: int, codes: dict[int, int]) -> bool:
        """The node's new lines and exit code; False when it failed."""
        import ray

        try:
            lines, code = ray.get(self.actors[rank].poll.remote(self.cursors[rank]), timeout=RAY_CALL_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - the node or its actor is gone
            self.failed = (rank, f"lost: {_why(exc)}")
            return False
        self._show(rank, lines)
        if code is None:
            return True
        codes[rank] = code
        if code != 0:
            self.failed = (rank, f"torchrun exited with {code}")
            return False
        return True

    def read_new_lines(self, timeout: float = RAY_CALL_TIMEOUT_S) -> None:
        """Show (and hand to the stall watch) the lines every node printed since the last poll; exit codes are left
        for the next poll, which returns them again."""
        import ray

        refs = {rank: actor.poll.remote(self.cursors[rank]) for rank, actor in self.actors.items()}
        for rank, ref in refs.items():
            try:
                lines, _ = ray.get(ref, timeout=timeout)
            except Exception:  # noqa: BLE001 - a lost node: the next poll says so (a lost node has no more output)
                continue
            self._show(rank, lines)

    def stop(self, stop_grace: float) -> None:
        """Stop torchrun on every node, print what they said while stopping, end the actors."""
        import ray

        stopping = [actor.stop.remote(stop_grace) for actor in self.actors.values()]
        try:
            ray.get(stopping, timeout=stop_grace + 30.0)
        except Exception:  # noqa: BLE001 - a lost node has nothing left to stop
            pass
        self.read_new_lines(timeout=10.0)   # what the nodes printed while stopping
        for actor in self.actors.values():
            ray.kill(actor)

    def close(self) -> int:
        """The closing line (and the doctor's block when a node failed); the exit code."""
        if self.failed is None:
            line, code = f"dsv3-preflight launch: all {len(self.actors)} node(s) finished (torchrun exit 0)", 0
        elif self.failed[0] < 0:
            line, code = "dsv3-preflight launch: interrupted; torchrun stopped on every node", 2
        else:
            rank = self.failed[0]
            others = [self.labels[r] for r in self.actors if r != rank]
            code = FAILED_NODE_BASE + rank
            line = (f"dsv3-preflight launch: {self.labels[rank]} failed first ({self.failed[1]}); stopped the others"
                    + (f": {', '.join(others)}" if others else "") + f"; exit {code}")
            block = doctor_block({self.by_rank[r]["name"]: list(self.seen[r]) for r in self.actors}, self.log_dir)
            for text in block:
                print(text, file=sys.stderr, flush=True)
            if block:   # its headline lines (the doctor reads them back as the launcher's own)
                self._log("".join(f"# {t}\n" for t in block if t.startswith(DOCTOR_HEAD)))
        print(line, file=sys.stderr, flush=True)
        self._log(f"# {line}\n")
        return code


def doctor_block(outputs: Mapping[str, Sequence[str]], log_dir: str | Path | None = None) -> list[str]:
    """The doctor's root cause of a failed launch, from each node's output (node name → its lines): its headline,
    who acts, and the fix flush left under the console's "fix: (paste as is)" (so it pastes, and the doctor reading
    this console back takes it as the launcher's own, not as a run's lines). Nothing when it finds no failure; a line
    saying why when it cannot run (the launch's exit code does not depend on it)."""
    from dsv3_preflight.doctor import triage
    from dsv3_preflight.reports.doctor_text import who_acts

    try:
        with tempfile.TemporaryDirectory(prefix="dsv3-launch-doctor-") as tmp:
            paths = []
            for i, (name, lines) in enumerate(outputs.items()):
                safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:60] or f"node{i}"
                path = Path(tmp) / f"{safe}.log"
                if path.exists():   # two names that differ only in characters a file name cannot hold
                    path = Path(tmp) / f"{safe}-{i}.log"
                path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8", errors="replace")
                paths.append(str(path))
            diag = triage(paths, inputs_label="the output of {n} node(s)")   # one file per node
    except Exception as exc:  # noqa: BLE001 - the launch's verdict stands without the doctor's
        return [f"{DOCTOR_HEAD}could not read the nodes' output: {_why(exc)}"]
    if diag.get("verdict") != "failure":
        return []
    out = [DOCTOR_HEAD + diag["summary"]]
    head = next((f for f in diag.get("findings") or [] if f.get("role") == "root_cause"), None)
    more = ([f"{DOCTOR_HEAD}all of it (the error lines, the consequences): dsv3-preflight doctor "
             f"{shlex.quote(str(log_dir))}    # each node writes its log there, on its own machine"] if log_dir else [])
    if head is None:
        return out + more
    who = who_acts(head)
    check = f"; caught before launch by: dsv3-preflight run --only {head['check']}" if head.get("check") else ""
    out.append(f"{DOCTOR_HEAD}who acts: {who}{check}")
    out += more
    if head.get("fix"):
        out.append("   fix: (paste as is)")
        out += head["fix"].splitlines()
    return out


def dry_run_text(doc: Mapping[str, Any], profile: Any, training: Sequence[str], torchrun: Sequence[str] | None) -> str:
    """``--all-nodes --dry-run``: each node's command, built from the facts its preflight recorded.

    The environment compared against is the one the node reported (``env`` fact, secrets masked);
    torchrun defaults to the interpreter running Ray on that node (``host.python`` is not recorded,
    so this driver's interpreter stands in for it).
    """
    from dsv3_preflight.launch.command import build_command, default_torchrun, derive_env, shell_text

    parts = []
    for node in _nodes_from_doc(doc):
        derived, notes = derive_env(profile, node["facts"])
        command = build_command(profile, training, environ=dict(node["facts"].get("env") or {}), derived=derived,
                                torchrun=list(torchrun) if torchrun else default_torchrun(sys.executable),
                                node_rank=node["node_rank"], notes=notes)
        parts.append(f"# node {node['node_rank']} {node['name']} ({node['ip']})\n"
                     + "".join(f"# warning: {w}\n" for w in command.warnings) + shell_text(command))
    return "".join(parts)
