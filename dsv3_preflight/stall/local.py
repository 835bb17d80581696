"""The watch of plain ``launch`` (one node): torchrun's stdout and stderr pass through the launcher (copied byte for
byte to its own), each line is read for progress, and a watcher thread reads /proc once a second. On a stall it
samples, captures, names the culprit and hands the report to ``publish``; with ``--on-stall=stop`` it then ends
torchrun's process group (SIGTERM, SIGKILL after the grace)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import IO, Any

from . import report
from .probes import capture
from .watch import POLL_S, StallOptions, StallWatch

#: the launch's exit code when the watch stopped a stalled run (--on-stall=stop): a failure, as a FAIL is
EXIT_STALLED = 1


class LocalWatch:
    """Pumps torchrun's output and watches it for a stall; ``stopped`` once it ended a stalled torchrun."""

    EXIT_STALLED = EXIT_STALLED

    def __init__(self, options: StallOptions, *, node: str, node_rank: int = 0, facts: Mapping[str, Any] | None = None,
                 publish: Callable[[dict[str, Any]], None] | None = None, stop_grace: float = 10.0,
                 rendezvous: Callable[[], dict[str, Any]] | None = None) -> None:
        self.watch = StallWatch(options)
        self.rendezvous = rendezvous
        self.node, self.node_rank, self.facts = node, node_rank, facts or {}
        self.publish = publish
        self.stop_grace = stop_grace
        self.stopped = False
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._done = threading.Event()

    @staticmethod
    def popen_kwargs() -> dict[str, Any]:
        """What torchrun's Popen gets so its output passes through the watch."""
        return {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}

    def start(self, proc: subprocess.Popen) -> None:
        for pipe, out in ((proc.stdout, sys.stdout), (proc.stderr, sys.stderr)):
            t = threading.Thread(target=self._pump, args=(pipe, out), daemon=True)
            t.start()
            self._threads.append(t)
        watcher = threading.Thread(target=self._watch, args=(proc,), daemon=True)
        watcher.start()
        self._threads.append(watcher)

    def _pump(self, pipe: IO[bytes] | None, out: Any) -> None:
        if pipe is None:
            return
        sink = getattr(out, "buffer", None)
        partial = b""
        while True:
            chunk = os.read(pipe.fileno(), 65536)
            if not chunk:
                break
            if sink is not None:
                sink.write(chunk)
                sink.flush()
            else:
                out.write(chunk.decode("utf-8", "replace"))
                out.flush()
            *lines, partial = (partial + chunk).replace(b"\r", b"\n").split(b"\n")
            with self._lock:
                for line in lines:
                    self.watch.observe(line.decode("utf-8", "replace"))
        if partial:
            with self._lock:
                self.watch.observe(partial.decode("utf-8", "replace"))

    def _watch(self, proc: subprocess.Popen) -> None:
        while proc.poll() is None and not self._done.wait(POLL_S):
            with self._lock:
                due = self.watch.due()
            if not due:
                continue
            section = self.watch.judge(lambda: {self.node_rank: capture.sample_node(proc.pid)},
                                       lambda: [capture.capture_node(proc.pid, self.node, self.node_rank)],
                                       expected_nodes=[self.node_rank], facts={self.node: self.facts},
                                       rendezvous=self.rendezvous)
            if section is None:
                print(report.slow_line(self.watch.slow[-1]), file=sys.stderr, flush=True)
                continue
            if proc.poll() is not None:
                return
            if self.publish is not None:
                self.publish(section)
            if self.watch.options.on_stall == "stop":
                self.stopped = True
                _stop_group(proc, self.stop_grace)
            return

    def close(self) -> None:
        """Wait for the pumps to drain (torchrun ended) and the watcher to end."""
        self._done.set()
        for t in self._threads:
            t.join(timeout=30.0)


def _stop_group(proc: subprocess.Popen, grace: float) -> None:
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if proc.poll() is not None:
            return


def for_launch(options: StallOptions, *, doc: Mapping[str, Any], launch_log: Any, written: Any, reports_dir: str,
               env: Mapping[str, str], stop_grace: float, node_rank: int = 0,
               master: tuple[str, int, int] | None = None) -> tuple[LocalWatch | None, dict[str, str]]:
    """Plain ``launch``'s watch and the variables it adds to torchrun's environment (the Flight Recorder's, with its
    dump pipe beside torchrun's log directory); (None, {}) with ``--stall-after 0``. ``master``: MASTER_ADDR,
    MASTER_PORT and the number of nodes, for the rendezvous store's agent keys when this node has no rank."""
    from pathlib import Path

    from dsv3_preflight.launch.gate import torchrun_log_dir

    from .publish import publisher

    if not options.enabled:
        return None, {}
    node = doc["nodes"][0]
    added: dict[str, str] = {}
    if launch_log:
        fr_dir = Path(torchrun_log_dir(launch_log)) / "flight_recorder"
        fr_dir.mkdir(parents=True, exist_ok=True)
        added = capture.watch_env(env, str(fr_dir))
    watch = LocalWatch(options, node=str(node["node"]), node_rank=node_rank, facts=node.get("facts") or {},
                       publish=publisher(launch_log=Path(launch_log) if launch_log else None,
                                         written=[Path(p) for p in written], reports_dir=reports_dir),
                       stop_grace=stop_grace, rendezvous=_rendezvous(master) if master and master[2] > 1 else None)
    return watch, added


def _rendezvous(master: tuple[str, int, int]) -> Callable[[], dict[str, Any]]:
    from .probes.store import agents_joined

    return lambda: agents_joined(master[0], master[1], master[2])
