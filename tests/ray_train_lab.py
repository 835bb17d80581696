"""Two Ray nodes in network namespaces, each in a mount namespace of its own, for the Ray Train gate's tests.

``RayTrainLab`` is ``cluster_lab.RayLab`` (real `ray start` on 10.77.0.10-11, one CPU a node, host names lab-node0/1
in their own UTS namespaces) whose nodes also run under ``unshare --mount``, with a private tmpfs mounted over
``local_dir``: the same path on every node, and a different directory on each, as a head's ``~/ray_results`` is on
a real cluster. ``shared_dir`` is not mounted over: every node sees the one directory (a shared filesystem).

The training script runs as a user runs it on the head: a Ray driver in node 0's network namespace. Nothing calls
`ray stop`; every process is stopped by its process group, the mounts end with their namespaces, and the lab's
temp dir is removed at close.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cluster_lab import REPO, RayLab, stop_group

EXAMPLE = REPO / "examples" / "ray_train" / "train_lora.py"
CALLBACK = "dsv3_preflight.ray_train.PreflightCallback"


@dataclass
class Fit:
    """One run of the example: its exit code, output, the seconds it took, and the reports the gate wrote."""

    code: int
    stdout: str
    stderr: str
    seconds: float
    reports: list[Path]

    @property
    def last_line(self) -> str:
        lines = [line for line in self.stdout.splitlines() if line.strip()]
        return lines[-1] if lines else ""


class RayTrainLab(RayLab):
    """Two namespaced Ray nodes with per-node mount namespaces (a context manager)."""

    def __init__(self) -> None:
        super().__init__(nodes=2)
        self.local_dir = os.path.join(self.tmp, "node-local")
        self.shared_dir = os.path.join(self.tmp, "shared")
        os.makedirs(self.local_dir)
        os.makedirs(self.shared_dir)
        self._fits = 0

    def node_argv(self, argv: list[str], hostname: str) -> list[str]:
        """Its own host name, and its own tmpfs over local_dir (private propagation: no other node sees it)."""
        script = 'hostname "$0" && mount -t tmpfs -o size=2g lab-local "$1" && shift && exec "$@"'
        return ["unshare", "--uts", "--mount", "--propagation", "private", "--", "sh", "-c", script, hostname,
                self.local_dir, *argv]

    def fit(self, storage: str, *args: str, gate: str = "env", timeout: float = 420.0, **env: str) -> Fit:
        """The example on the head, as a driver of the lab's cluster; ``gate``: env (RAY_TRAIN_CALLBACKS) or code."""
        self._fits += 1
        reports = Path(self.tmp) / f"reports-{self._fits}"
        run_env = {**self.cli_env(), "RAY_ADDRESS": self.gcs, "DSV3_PREFLIGHT_RAY_TRAIN_REPORTS_DIR": str(reports),
                   **env}
        if gate == "env":
            run_env["RAY_TRAIN_CALLBACKS"] = CALLBACK
        argv = [sys.executable, str(EXAMPLE), "--storage-path", storage, "--name", f"fit{self._fits}", "--gate", gate,
                *args]
        started = time.monotonic()
        proc = self.net.popen(0, argv, env=run_env, cwd=self.tmp)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        finally:
            stop_group(proc, grace=5.0)
        return Fit(proc.returncode, stdout, stderr, time.monotonic() - started,
                   sorted(reports.glob("*.json")) if reports.exists() else [])

    def in_node(self, name: str, argv: list[str]) -> subprocess.CompletedProcess:
        """``argv`` in lab node ``name``'s mount namespace (`ip netns exec`, unshare and sh all exec into `ray start`,
        so its PID is the namespace's)."""
        return subprocess.run(["nsenter", "--mount", "--target", str(self.nodes[name].pid), *argv],
                              capture_output=True, text=True, timeout=10)

    def node_sees(self, name: str, path: str) -> bool:
        """Whether lab node ``name`` sees ``path``."""
        return self.in_node(name, ["test", "-e", path]).returncode == 0
