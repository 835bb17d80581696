"""PyTorch Flight Recorder dumps, read with ``torch.distributed.flight_recorder``'s own loader.

A Flight Recorder dump is one pickle per rank (``TORCH_FR_BUFFER_SIZE=N`` — ``TORCH_NCCL_TRACE_BUFFER_SIZE`` in
older torch — and ``TORCH_FR_DUMP_TEMP_FILE``/``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` as the file prefix; torch writes
them when a collective times out, or on ``torch._C._distributed_c10d._dump_fr_trace()``). The loader is
``torch.distributed.flight_recorder.components.loader.read_dir``, the one ``torchfrtrace`` uses; this module
only compares what it returns: per process group, the last collective each rank issued. A rank that is behind
the others never entered a collective they are waiting in (it crashed or is stuck elsewhere); ranks that
issued different operations at the same sequence number are desynchronised.

Loading a pickle runs code from the file, so dumps are read only when asked for (``--flight-recorder DIR``) and
only from regular files under ``MAX_FILE_BYTES``.
"""
from __future__ import annotations

import os
import stat
from typing import Any

from .reader import InputError

MAX_FILE_BYTES = 512 << 20
MAX_FILES = 16384


def _check_dir(trace_dir: str) -> None:
    try:
        st = os.stat(trace_dir)
    except OSError as exc:
        raise InputError(trace_dir, str(exc.strerror or exc)) from exc
    if not stat.S_ISDIR(st.st_mode):
        raise InputError(trace_dir, "--flight-recorder takes the directory holding one dump per rank")
    n = 0
    for root, _dirs, files in os.walk(trace_dir):
        for f in files:
            full = os.path.join(root, f)
            fst = os.stat(full)
            if not stat.S_ISREG(fst.st_mode):
                raise InputError(full, "not a regular file: refused (a Flight Recorder dump is a file per rank)")
            if fst.st_size > MAX_FILE_BYTES:
                raise InputError(full, f"larger than {MAX_FILE_BYTES >> 20} MiB: not read")
            n += 1
            if n > MAX_FILES:
                raise InputError(trace_dir, f"more than {MAX_FILES} files: not read")


def load(trace_dir: str, prefix: str | None = None) -> tuple[dict[str, dict[str, Any]], str]:
    """``(details, version)`` as ``read_dir`` returns them; InputError when torch or the dumps are unusable."""
    _check_dir(trace_dir)
    try:
        from torch.distributed.flight_recorder.components.config_manager import JobConfig
        from torch.distributed.flight_recorder.components.loader import read_dir
    except ImportError as exc:   # torch missing, or older than 2.6 (no flight_recorder package)
        raise InputError(trace_dir, f"reading Flight Recorder dumps needs torch >= 2.6 here ({exc})") from exc
    argv = [trace_dir] + (["--prefix", prefix] if prefix else [])
    try:
        args = JobConfig().parse_args(argv)
        return read_dir(args)
    except (AssertionError, ValueError, OSError, EOFError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(trace_dir, f"not a Flight Recorder dump directory: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - unpickling error types vary (pickle.UnpicklingError, ImportError, ...)
        raise InputError(trace_dir, f"Flight Recorder dumps unreadable: {type(exc).__name__}: {exc}") from exc


def _by_group(details: dict[str, dict[str, Any]]) -> tuple[list[int], dict[str, dict[int, list[dict]]]]:
    """(the ranks, process group → rank → its collective entries; point-to-point ones left out)."""
    ranks: set[int] = set()
    groups: dict[str, dict[int, list[dict]]] = {}
    for dump in details.values():
        rank = int(dump["rank"])
        ranks.add(rank)
        for e in dump.get("entries") or []:
            if not isinstance(e, dict) or e.get("is_p2p"):
                continue
            pg = e.get("process_group")
            key = "/".join(str(x) for x in pg) if isinstance(pg, (list, tuple)) else str(pg)
            groups.setdefault(key, {}).setdefault(rank, []).append(e)
    return sorted(ranks), groups


def _seq(e: dict) -> int:
    return e.get("collective_seq_id") or 0


def _behind(pg: str, per_rank: dict[int, list[dict]]) -> tuple[dict, dict | None]:
    """(the group's last collective per rank, the ranks behind the others' last one, if any)."""
    last = {r: max(es, key=_seq) for r, es in per_rank.items()}
    seqs = {r: _seq(e) for r, e in last.items()}
    top = max(seqs.values())
    waiting_in = next(e for e in last.values() if _seq(e) == top)
    behind = sorted(r for r, s in seqs.items() if s < top)
    group = {"last_seq": {str(r): s for r, s in sorted(seqs.items())},
             "last_op": {str(r): last[r].get("profiling_name") for r in sorted(last)}}
    if not behind:
        return group, None
    return group, {"pg": pg, "ranks": behind, "seq": top, "op": waiting_in.get("profiling_name"),
                   "ahead": sorted(r for r, s in seqs.items() if s == top), "behind_at": {str(r): seqs[r] for r in behind}}


def _desync(pg: str, per_rank: dict[int, list[dict]]) -> dict | None:
    """The first sequence number at which the ranks ran different collectives (op or sizes), if any."""
    by_seq: dict[int, dict[int, tuple]] = {}
    for r, es in per_rank.items():
        for e in es:
            by_seq.setdefault(_seq(e), {})[r] = (e.get("profiling_name"), str(e.get("input_sizes")))
    for seq in sorted(by_seq):
        if len(set(by_seq[seq].values())) > 1 and len(by_seq[seq]) > 1:
            return {"pg": pg, "seq": seq, "ops": {str(r): list(v) for r, v in sorted(by_seq[seq].items())}}
    return None


def analyse(details: dict[str, dict[str, Any]], version: str) -> dict:
    """Per process group: each rank's last collective; the ranks behind; desynchronised sequence numbers."""
    ranks, groups = _by_group(details)
    out: dict = {"version": version, "ranks": ranks, "groups": {}, "behind": [], "desync": []}
    for pg, per_rank in sorted(groups.items()):
        out["groups"][pg], behind = _behind(pg, per_rank)
        if behind is not None:
            out["behind"].append(behind)
        desync = _desync(pg, per_rank)
        if desync is not None:
            out["desync"].append(desync)
    return out
