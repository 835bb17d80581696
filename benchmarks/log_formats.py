"""How logs reach the doctor in the field: the same lines under what a collector, a launcher or an editor did to them.

Each format is a function from a log's lines (bytes, split on ``\\n``) to the bytes of the file as that tool writes it.
Used by ``bench_doctor_accuracy.py --formats`` (the corpus's figures in each format) and by
``tests/doctor/test_doctor_collectors.py`` (every recorded log reads the same in each).

- ``docker-logs-t``: ``docker logs -t`` / ``kubectl logs --timestamps`` (Docker's RFC3339Nano before each line);
- ``cri-file``: the kubelet's CRI log files (``/var/log/pods/…/0.log``): ``<RFC 3339> <stdout|stderr> <F|P> <line>``;
- ``kubectl-prefix-timestamps``: ``kubectl logs --prefix --timestamps``: ``[pod/NAME/CONTAINER] <time> <line>``;
- ``compose``: ``docker compose logs``: ``<service>-<n>  | <line>``;
- ``docker-json-file``: Docker's json-file driver, ``{"log":"<line>\\n","stream":"stderr","time":"…"}`` a line;
- ``crlf``: CRLF line breaks (a log saved on Windows, or copied from a browser);
- ``ts``, ``ts-iso``: moreutils' ``ts`` (its default ``%b %d %H:%M:%S`` and ``%F %T``);
- ``journalctl``: a training service's output read back with ``journalctl -u train`` (time, host, process[pid]);
- ``utf-16``: Windows PowerShell 5's ``kubectl logs pod > train.log`` (UTF-16LE with its byte order mark, CRLF);
- ``utf-8-bom``: PowerShell 5's ``Out-File -Encoding utf8``, Notepad (UTF-8 with its byte order mark, CRLF).

``LABELS``: a launcher's rank label on every line (srun ``--label``, Open MPI ``--tag-output``, torchrun ``--tee``):
they name the rank, so only the cause must read the same.

``PASTES``: what a person did to the log before the doctor got it: ``quoted`` (``> `` before each line: a GitHub or
forum reply quoting the reporter's log, a mailing list), ``fold-80`` and ``fold-120`` (GNU ``fold -w``, or a
terminal or web console copied as it showed the lines: each line longer than the width cut into pieces of it).
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

Format = Callable[[list[bytes]], bytes]


def _time(i: int) -> str:
    return f"2025-09-02T20:{i // 60 % 60:02d}:{i % 60:02d}.418123456Z"


def _prefixed(prefix: Callable[[int], str]) -> Format:
    return lambda lines: b"\n".join(prefix(i).encode() + line if line else line for i, line in enumerate(lines))


def _docker_json_file(lines: list[bytes]) -> bytes:
    # one record a line, blank lines too ({"log":"\n"}); no record for the empty piece after the last line break;
    # Go's encoder escapes <, > and & as \u003c, \u003e, \u0026 (Docker's logs show "\u003cnil\u003e")
    lines = lines[:-1] if lines and not lines[-1] else lines
    return b"".join(json.dumps({"log": line.decode("utf-8", "replace") + "\n", "stream": "stderr", "time": _time(i)},
                               separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e")
                    .replace("&", "\\u0026").encode() + b"\n" for i, line in enumerate(lines))


COLLECTORS: dict[str, Format] = {
    "docker-logs-t": _prefixed(lambda i: _time(i) + " "),
    "cri-file": _prefixed(lambda i: f"{_time(i)[:-1]}+00:00 {('stdout', 'stderr')[i % 2]} F "),
    "kubectl-prefix-timestamps": _prefixed(lambda i: f"[pod/dsv3-lora-worker-1/pytorch] {_time(i)} "),
    "compose": _prefixed(lambda i: "trainer-1  | "),
    "docker-json-file": _docker_json_file,
    "crlf": lambda lines: b"\r\n".join(lines),
    "ts": _prefixed(lambda i: f"Sep 02 20:{i // 60 % 60:02d}:{i % 60:02d} "),
    "ts-iso": _prefixed(lambda i: f"2025-09-02 20:{i // 60 % 60:02d}:{i % 60:02d} "),
    "journalctl": _prefixed(lambda i: f"Sep 02 20:{i // 60 % 60:02d}:{i % 60:02d} gpu-node-1 python3[4242]: "),
    "utf-16": lambda lines: b"\r\n".join(lines).decode("utf-8", "replace").encode("utf-16"),
    # PowerShell 5's Out-File -Encoding utf8 / Set-Content -Encoding UTF8, Notepad: UTF-8 with a byte order mark, CRLF
    "utf-8-bom": lambda lines: b"\xef\xbb\xbf" + b"\r\n".join(lines),
}

LABELS: dict[str, Format] = {
    "srun-label": _prefixed(lambda i: "0: "),
    "mpirun-tag-output": _prefixed(lambda i: "[1,0]<stderr>:"),
    "torchrun-tee": _prefixed(lambda i: "[default0]:"),
}



def _fold(width: int) -> Format:
    # GNU fold -w WIDTH: a line longer than WIDTH bytes becomes pieces of WIDTH bytes and a last shorter one
    return lambda lines: b"\n".join(b"\n".join(line[i:i + width] for i in range(0, len(line), width)) if line else line
                                    for line in lines)


PASTES: dict[str, Format] = {
    "quoted": lambda lines: b"\n".join(b"> " + line if line else b">" for line in lines),
    "fold-80": _fold(80),
    "fold-120": _fold(120),
}

FORMATS: dict[str, Format] = {**COLLECTORS, **LABELS, **PASTES}


_DOCTOR_DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "doctor"


def recorded_logs(data: Path = _DOCTOR_DATA) -> list[Path]:
    """The recorded fixtures and the corpus's development part: what the format tests read (the held-out part
    measures the doctor; it is never tested against)."""
    manifest = (data / "corpus" / "manifest.jsonl").read_text().splitlines()
    held_out = {data / "corpus" / json.loads(line)["file"] for line in manifest
                if line.strip() and json.loads(line)["split"] == "heldout"}
    return [p for p in sorted(data.rglob("*.log")) if p not in held_out]
