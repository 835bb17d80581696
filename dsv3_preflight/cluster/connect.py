"""Connecting to the user's Ray cluster, or starting an embedded local one when there is none."""
from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

#: Environment variables the cluster runner reads (documented in the README, "Cluster mode").
RUNTIME_ENV_VAR = "DSV3_PREFLIGHT_RAY_RUNTIME_ENV"   # a JSON runtime_env merged into the job's
SHIP_PACKAGE_VAR = "DSV3_PREFLIGHT_SHIP_PACKAGE"    # "1": ship this dsv3_preflight to every node (py_modules)
EMBEDDED_OBJECT_STORE_BYTES = 100 * 1024 * 1024
#: Ray gives a task asking for no GPU CUDA_VISIBLE_DEVICES=""; the probes must see the node's own value.
BASE_ENV_VARS = {"RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}


class ClusterError(Exception):
    """The Ray cluster cannot be reached or used; the message says what to do."""


@dataclass
class ConnectInfo:
    """How this process is connected to Ray."""

    address: str                  # what was asked for: an address, "auto" or "local"
    gcs_address: str | None       # the cluster's GCS address once connected
    embedded: bool                # True: we started a local Ray for this machine (stopped by disconnect)
    message: str                  # one line for the console
    elapsed_s: float = 0.0
    runtime_env: dict[str, Any] = field(default_factory=dict)
    already_connected: bool = False
    temp_dir: str | None = None   # the embedded Ray's own temp dir (its session files), removed by disconnect
    restore_env: dict[str, str | None] = field(default_factory=dict, repr=False)   # put back by disconnect

    def as_dict(self) -> dict[str, Any]:
        return {"address": self.address, "gcs_address": self.gcs_address, "embedded": self.embedded,
                "message": self.message, "connect_s": round(self.elapsed_s, 3),
                "runtime_env": {k: v for k, v in self.runtime_env.items() if k != "env_vars"}}


def job_runtime_env(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """The runtime_env of the preflight job: base env vars, the user's JSON, the package when shipped."""
    environ = os.environ if environ is None else environ
    env: dict[str, Any] = {}
    raw = environ.get(RUNTIME_ENV_VAR, "").strip()
    if raw:
        try:
            env = json.loads(raw)
        except ValueError as exc:
            raise ClusterError(f"${RUNTIME_ENV_VAR} is not valid JSON: {exc}") from None
        if not isinstance(env, dict):
            raise ClusterError(f"${RUNTIME_ENV_VAR} must be a JSON object (a Ray runtime_env)")
    env["env_vars"] = {**BASE_ENV_VARS, **(env.get("env_vars") or {})}
    if environ.get(SHIP_PACKAGE_VAR, "").strip() in ("1", "true", "yes"):
        modules = list(env.get("py_modules") or [])
        modules.append(stage_package())
        env["py_modules"] = modules
    return env


def stage_package() -> str:
    """This dsv3_preflight laid out as the wheel installs it, in a temporary directory, for py_modules.

    In a source checkout ``dsv3_preflight.checks``/``.launch``/``.reports`` live in the repository's
    ``checks/``, ``launch/`` and ``reports/``; the staged copy puts them inside the package.
    """
    import importlib.util
    import shutil
    import tempfile

    import dsv3_preflight

    root = os.path.dirname(os.path.abspath(dsv3_preflight.__file__))
    import atexit

    top = tempfile.mkdtemp(prefix="dsv3-preflight-ship-")
    atexit.register(shutil.rmtree, top, True)  # Ray has uploaded it by the time the command ends
    stage = os.path.join(top, "dsv3_preflight")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(root, stage, ignore=ignore)
    for sub in ("checks", "launch", "reports"):
        spec = importlib.util.find_spec(f"dsv3_preflight.{sub}")
        if spec is None or not spec.submodule_search_locations:
            continue
        where = os.path.abspath(list(spec.submodule_search_locations)[0])
        if where != os.path.join(root, sub):
            shutil.copytree(where, os.path.join(stage, sub), ignore=ignore, dirs_exist_ok=True)
    return stage


def _stale_auto_address(timeout: float) -> tuple[str, str] | None:
    """(address, why) when ``auto`` would pick an address nobody answers at, else None.

    ``auto`` trusts ``ray_current_cluster`` in Ray's temp dir, written by the last ``ray start``; a
    Ray killed without ``ray stop`` leaves it behind, and ``ray.init("auto")`` then waits on a dead
    address instead of finding no cluster.
    """
    try:
        from ray._private.services import get_ray_address_from_environment

        found = get_ray_address_from_environment("auto", None)
    except Exception:  # noqa: BLE001 - nothing found (ConnectionError) or Ray's internals moved
        return None
    if not found or found in ("auto", "local"):
        return None
    why = _reachable(found, timeout)
    return (found, why) if why is not None else None


def _auth_refused(address: str, timeout: float) -> str | None:
    """Why the GCS at ``address`` refuses this client's authentication, else None (also when unsure).

    Ray connects to an explicit address without a token unless RAY_AUTH_MODE=token; a cluster with
    token authentication then makes ray.init retry for many seconds and fail with a bare "Failed to
    connect". A standalone GCS client answers the same question in milliseconds.
    """
    if address.startswith("ray://") or address in ("auto", "local"):
        return None
    box: dict[str, BaseException] = {}

    def target() -> None:
        try:
            from ray._raylet import GcsClient

            GcsClient(address=address)
        except BaseException as exc:  # noqa: BLE001 - inspected below
            box["exc"] = exc

    thread = threading.Thread(target=target, daemon=True, name="ray.auth-check")
    thread.start()
    thread.join(timeout)
    exc = box.get("exc")
    if exc is None or type(exc).__name__ != "AuthenticationError":
        return None
    if os.environ.get("RAY_AUTH_MODE", "").strip().lower() == "token":
        return (f"the Ray cluster at {address} refused this client's token ({exc}); put the cluster's token in "
                "$RAY_AUTH_TOKEN or ~/.ray/auth_token (`ray get-auth-token` on the head prints it)")
    return (f"the Ray cluster at {address} requires token authentication and Ray sends no token to an explicit "
            "address unless asked: export RAY_AUTH_MODE=token (the cluster's token in ~/.ray/auth_token or "
            "$RAY_AUTH_TOKEN; `ray get-auth-token` on the head prints it)")


def _reachable(address: str, timeout: float) -> str | None:
    """None when host:port accepts a TCP connection, else why not (avoids ray.init's long retries)."""
    if address.startswith("ray://") or ":" not in address:
        return None
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=max(timeout, 0.1)):
            return None
    except ValueError:
        return None
    except OSError as exc:
        return f"{exc.strerror or exc}"


class _DropSigtermNote(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "SIGTERM handler is not set" not in record.getMessage()


def _quiet_sigterm_note() -> None:
    worker_logger = logging.getLogger("ray._private.worker")
    if not any(isinstance(f, _DropSigtermNote) for f in worker_logger.filters):
        worker_logger.addFilter(_DropSigtermNote())


RAY_AUTH_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _embedded_token() -> dict[str, str | None]:
    """Give the embedded Ray a token of its own, in the environment; return the values ``disconnect`` puts back.

    A new local Ray turns token authentication on and, finding no token, writes one to ``~/.ray/auth_token``. That
    file outlives the run: every later ``ray start --head`` on the machine then requires a token, and workers of
    the user's real cluster that lack it cannot join. A token in ``$RAY_AUTH_TOKEN`` (256 bits, as Ray makes them)
    keeps authentication on for the embedded Ray and its processes, which inherit it, and writes nothing. The
    user's own token setup (any ``RAY_AUTH_*`` variable, or an existing ``~/.ray/auth_token``) is used as it is.
    Ray also sets ``RAY_AUTH_MODE=token`` in this process; that is put back too, so ``launch`` does not hand it on.
    """
    before = {k: os.environ.get(k) for k in RAY_AUTH_ENV}
    if all(v is None for v in before.values()) and not os.path.exists(os.path.expanduser("~/.ray/auth_token")):
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    return before


def restore_environ(values: Mapping[str, str | None]) -> None:
    """Put environment variables back as ``{name: value}`` says; None: the variable was unset."""
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@contextmanager
def _one_machine_ray():
    """Start the embedded Ray as a one-machine Ray: every process it starts listens on 127.0.0.1 only.

    On Linux Ray gives a new node the address of the host's interface toward the internet and its GCS, raylet and
    workers listen on every interface, so an embedded Ray "for this machine only" was reachable from the network.
    Ray's one-machine mode (its default on macOS and Windows, ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``) uses
    127.0.0.1 instead; Ray reads that variable when it is imported, before we know whether a cluster exists, but its
    node-address lookup (``ray._private.services.get_node_ip_address``) reads the module constant at each call, so
    the constant is switched for the start only. ``ray.init(_node_ip_address="127.0.0.1")`` does not do it: the
    GCS still listens on every interface. A Ray without the constant is started as before.
    """
    try:
        from ray._private import ray_constants
    except ImportError:
        yield
        return
    before = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
    if before is None:
        yield
        return
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = before


def _init(timeout: float, starts_processes: bool = False, **kwargs: Any) -> None:
    """ray.init under a deadline: a call that does not return in time is a ClusterError."""
    import ray

    box: dict[str, BaseException] = {}

    def target() -> None:
        try:
            ray.init(**kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["exc"] = exc

    if starts_processes:
        # Ray ties the processes it starts to the creating *thread* (PR_SET_PDEATHSIG): starting the
        # embedded Ray in a helper thread would kill it when that thread ends. Starting is local and bounded.
        target()
    else:
        # Connecting (no process started) under a deadline, in a helper thread; Ray's note that it cannot
        # install its SIGTERM handler there is expected and not shown.
        _quiet_sigterm_note()
        thread = threading.Thread(target=target, daemon=True, name="ray.init")
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise ClusterError(f"ray.init({kwargs.get('address') or ''}) did not return within {timeout:g} s")
    if "exc" in box:
        raise box["exc"]


def connect(address: str | None = None, timeout: float = 60.0, *, runtime_env: dict[str, Any] | None = None,
            embedded_ok: bool = True, num_cpus: int | None = None) -> ConnectInfo:
    """Connect to Ray: ``address`` (or $RAY_ADDRESS, else ``auto``); start an embedded local Ray when none.

    ``auto`` finds a cluster started on this machine with ``ray start``; when there is none and
    ``embedded_ok``, a local single-node Ray is started (no dashboard, a 100 MiB object store) and
    ``ConnectInfo.embedded`` says so. ``local`` always starts the embedded one. An explicit address
    that cannot be reached raises :class:`ClusterError` within ``timeout`` seconds.
    """
    import ray

    os.environ.setdefault("RAY_DISABLE_USAGE_STATS", "1")
    started = time.monotonic()
    asked = address or os.environ.get("RAY_ADDRESS") or "auto"
    runtime_env = job_runtime_env() if runtime_env is None else runtime_env
    if ray.is_initialized():
        ctx = ray.get_runtime_context()
        return ConnectInfo(asked, ctx.gcs_address, False, f"using the Ray connection already open ({ctx.gcs_address})",
                           time.monotonic() - started, runtime_env, already_connected=True)
    common = dict(include_dashboard=False, log_to_driver=False, logging_level="warning", runtime_env=runtime_env,
                  namespace="dsv3-preflight")
    remaining = lambda: max(timeout - (time.monotonic() - started), 1.0)  # noqa: E731
    found = asked  # what `auto` names in the message when it found only a dead address
    if asked != "local":
        if asked != "auto":
            why = _reachable(asked, min(remaining(), 10.0))
            if why is not None:
                raise ClusterError(f"cannot reach the Ray cluster at {asked}: {why}; check --ray-address / $RAY_ADDRESS "
                                   "and that `ray start --head` runs there")
            refused = _auth_refused(asked, min(remaining(), 5.0))
            if refused is not None:
                raise ClusterError(refused)
        elif embedded_ok:
            stale = _stale_auto_address(min(remaining(), 5.0))
            if stale is not None:
                found = f"auto: {stale[0]}, the last `ray start`'s address, does not answer: {stale[1]}"
    if asked != "local" and found == asked:
        try:
            _init(remaining(), address=asked, **common)
            gcs = ray.get_runtime_context().gcs_address
            return ConnectInfo(asked, gcs, False, f"connected to the Ray cluster at {gcs}", time.monotonic() - started, runtime_env)
        except ConnectionError as exc:
            if asked != "auto" or not embedded_ok:
                raise ClusterError(f"cannot connect to the Ray cluster at {asked}: {exc}") from None
        except ClusterError:
            raise
        except Exception as exc:  # noqa: BLE001 - Ray raises various errors for bad addresses
            raise ClusterError(f"cannot connect to the Ray cluster at {asked}: {type(exc).__name__}: {exc}") from None
    # address="local": a new Ray, never the one a leftover ray_current_cluster file names
    # Ray's session files go to our own temp dir (removed at the end, never left in /tmp/ray), and a stop
    # signal waits until ray.init is done: one inside it crashed the interpreter and orphaned Ray's agents
    from .. import signals

    temp_dir = signals.mkdtemp("ray", tagged=False)  # short: Ray's socket paths live below it
    restore = _embedded_token()
    try:
        with signals.starting_ray(), _one_machine_ray():
            _init(remaining(), starts_processes=True, address="local", num_cpus=num_cpus,
                  object_store_memory=EMBEDDED_OBJECT_STORE_BYTES, _temp_dir=temp_dir, **common)
    except BaseException:
        restore_environ(restore)
        raise
    gcs = ray.get_runtime_context().gcs_address
    why = "asked for with --ray-address local" if asked == "local" else f"no Ray cluster found ({found})"
    return ConnectInfo(asked, gcs, True, f"{why}; started an embedded local Ray for this machine only ({gcs})",
                       time.monotonic() - started, runtime_env, temp_dir=temp_dir, restore_env=restore)


def disconnect(info: ConnectInfo | None) -> None:
    """Leave Ray; an embedded Ray is stopped with it. A connection we did not open stays open."""
    import ray

    if info is not None and info.already_connected:
        return
    if ray.is_initialized():
        ray.shutdown()
    if info is not None:
        restore_environ(info.restore_env)
    if info is not None and info.temp_dir:
        from .. import signals

        signals.rmtree(info.temp_dir)
