"""This node's memory of what its installed libraries answered for the same inputs (``~/.cache/dsv3-preflight/facts``).

Some facts are the answer of a library to a question about plain data: what peft adapts for these ``lora_targets``
on the model a config.json describes, what transformers, accelerate and DeepSpeed make of a DeepSpeed config. Each
costs seconds, nearly all of it importing those libraries (transformers and peft: 3-4 CPU-s; the Trainer's set-up
in a child: 2-3 CPU-s more); and every command that writes a document masks it with detect-secrets' patterns, whose
import is a fifth of a short command's CPU. A node asks the same questions every time it runs until the job's
configuration or the node's installation changes. So the answer is kept, keyed by everything it depends on:

- the question (the parsed config.json, the targets, the rank, the DeepSpeed config: the data, not a file name);
- every library that answers it: its version and where it is installed (the dist-info directory and its change
  time, so a reinstall of the same version is a new key), or that it is missing; and the import path with each
  directory's change time, so installing or removing any package (a dependency's dependency) is a new key too;
- this package's own code that asks (a hash of its sources: an upgrade or an edit of the preflight is a new key);
- the interpreter, the host's name and its GPU device files (a home directory shared by the nodes keeps each
  node's own answers), and the environment variables the library reads (for the Trainer's set-up ``ACCELERATE_*``,
  ``CUDA_*``, the ranks' and world size's, ``DS_*``/``DEEPSPEED_*``, ``TRANSFORMERS_*``, ``PYTORCH_*``), their
  values hashed (an entry on disk holds no token).

Only answers are kept: a timeout, a child that died or a library that could not start is asked again next time
(the caller's ``keep``). An entry that cannot be read or does not match its key is asked again and rewritten; a
cache directory that cannot be written (a read-only home) only means no memory. The facts carry ``from_cache``
(when the answer was first computed) so a report says where a figure came from.

``DSV3_PREFLIGHT_FACT_CACHE=off`` asks the libraries every time; ``DSV3_PREFLIGHT_FACT_CACHE_DIR`` moves the cache
(the test suite gives each run its own, so every run of the suite computes what it asserts at least once).
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import platform
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .inputs import InputError, read_json

OFF_ENV = "DSV3_PREFLIGHT_FACT_CACHE"
DIR_ENV = "DSV3_PREFLIGHT_FACT_CACHE_DIR"
#: an entry larger than this is not ours
MAX_ENTRY_BYTES = 8 << 20
#: bumped when the entries' shape changes
FORMAT = 1

_PACKAGE = Path(__file__).resolve().parent
_CODE: dict[tuple[str, ...], str] = {}
_LOCK = threading.Lock()


def enabled() -> bool:
    return (os.environ.get(OFF_ENV) or "on").strip().lower() not in ("off", "0", "no", "false")


def directory() -> Path:
    """Where the entries are: DSV3_PREFLIGHT_FACT_CACHE_DIR, else ${XDG_CACHE_HOME:-~/.cache}/dsv3-preflight/facts."""
    given = os.environ.get(DIR_ENV)
    if given:
        return Path(given).expanduser()
    return default_directory()


def default_directory() -> Path:
    """The user's cache: ${XDG_CACHE_HOME:-~/.cache}/dsv3-preflight/facts (where a run without DIR_ENV writes)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "dsv3-preflight" / "facts"


def dist_fingerprint(name: str) -> list[Any] | None:
    """A library as installed: [version, dist-info path, its change time], or None when it is not installed
    (read from its metadata; the library is not imported)."""
    import importlib.metadata

    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    where = getattr(dist, "_path", None)   # PathDistribution's dist-info directory
    try:
        changed = os.stat(where).st_ctime_ns if where is not None else None
    except OSError:
        changed = None
    return [dist.version, str(where), changed]


def paths_fingerprint() -> list[list[Any]]:
    """The import path (the script's own directory aside) with each directory's change time: installing or removing
    any package there (a dependency of a dependency too) changes its directory, so a library that imported fine when
    the answer was kept but would not now (a newer huggingface_hub under the same transformers) is asked again."""
    entries = sys.path if sys.flags.safe_path else sys.path[1:]
    found: list[list[Any]] = []
    for entry in entries:
        try:
            found.append([entry, os.stat(entry or ".").st_mtime_ns])
        except OSError:
            found.append([entry, None])
    return found


def code_fingerprint(parts: Iterable[str]) -> str:
    """A hash of this package's sources under ``parts`` (paths relative to the package: files or directories)."""
    key = tuple(sorted(parts))
    with _LOCK:
        if key in _CODE:
            return _CODE[key]
    digest = hashlib.sha256()
    files: list[Path] = []
    for part in key:
        path = _PACKAGE / part
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    for path in files:
        digest.update(str(path.relative_to(_PACKAGE)).encode())
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"<unreadable>")
    value = digest.hexdigest()
    with _LOCK:
        _CODE[key] = value
    return value


def _material(kind: str, question: Any, dists: Iterable[str], code: Iterable[str],
              env_prefixes: tuple[str, ...]) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "kind": kind,
        "question": question,
        "libraries": {name: dist_fingerprint(name) for name in sorted(set(dists))},
        "path": paths_fingerprint(),
        "code": code_fingerprint([*code, "factcache.py"]),
        "python": [sys.executable, sys.version],
        "host": [socket.gethostname(), platform.machine(), sorted(glob.glob("/dev/nvidia*"))],
        # values hashed: an entry on disk must not hold a token a variable carries
        "env": sorted((k, hashlib.sha256(v.encode(errors="replace")).hexdigest()[:24])
                      for k, v in os.environ.items() if env_prefixes and k.startswith(env_prefixes)),
    }


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def remembered(kind: str, question: Any, compute: Callable[[], dict[str, Any]], *, dists: Iterable[str],
               code: Iterable[str], env_prefixes: tuple[str, ...] = (),
               keep: Callable[[dict[str, Any]], bool] = lambda answer: True) -> dict[str, Any]:
    """``compute()``'s answer to ``question`` (JSON data), from this node's cache when the same question was answered
    by the same libraries (``dists``), the same code of this package (``code``: its files or directories) and the same
    environment (``env_prefixes``); else computed, and kept when ``keep(answer)``. A cached answer carries
    ``from_cache`` (the time it was computed, UTC)."""
    if not enabled():
        return compute()
    try:
        material = _material(kind, question, dists, code, env_prefixes)
        text = _canonical(material)
    except (TypeError, ValueError, OSError):
        return compute()
    path = directory() / f"{kind}-{hashlib.sha256(text.encode()).hexdigest()[:40]}.json"
    try:
        entry = read_json(path, what="fact cache entry", max_bytes=MAX_ENTRY_BYTES)
    except InputError:
        entry = None
    if (isinstance(entry, dict) and isinstance(entry.get("answer"), dict)
            and _canonical(entry.get("material")) == text):
        return {**entry["answer"], "from_cache": entry.get("at")}
    answer = compute()
    if keep(answer):
        _write(path, {"material": json.loads(text), "answer": answer,   # as asked: compute() may change the question
                      "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    return answer


def _write(path: Path, entry: dict[str, Any]) -> None:
    """Atomically (a reader sees the old entry or the new one, never half of one); a failure only means no memory.
    An answer JSON would not give back as it is (a tuple, a set, an integer key) is not kept."""
    try:
        text = json.dumps(entry)   # not sorted: the answer's order is the library's (module registration order)
        if json.loads(text)["answer"] != entry["answer"]:
            return
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, TypeError, ValueError):
        pass
