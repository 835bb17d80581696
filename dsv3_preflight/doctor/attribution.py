"""Which node and rank printed a line, and when, from the prefixes launchers and libraries put on it.

Recognised prefixes (each seen in public logs of the tools):

- NCCL: ``host:pid:tid [cudaDev] NCCL ...``                            → node host, local device
- torch (2.2+): ``[rank3]:[E1206 ...]``, watchdog ``[Rank 3]``/``[PG 1 Rank 3]`` → global rank
- torchrun ``--tee``/``--role``: ``[default3]:``                        → local rank
- DeepSpeed's pdsh launcher, clush: ``worker-5: [rank22]: ...``       → node worker-5
- srun ``--label``: ``3: ...``                                         → rank 3 (the task id)
- Open MPI ``--tag-output``/Horovod: ``[1,3]<stdout>:``                → rank 3
- Ray: ``(RayTrainWorker pid=285, ip=192.168.177.12)``                  → node 192.168.177.12
- syslog/journal: ``Feb 24 09:28:28 gpu-node-2 nv-fabricmanager[1507]: ...`` → node gpu-node-2
- ``kubectl logs --prefix`` (a PyTorchJob's pods): ``[pod/trainer-worker-1/pytorch] ...`` → node trainer-worker-1
- ``docker compose logs``/``up`` (v2 ``name-1``, v1 ``name_1``): ``trainer-2  | ...``  → node trainer-2
- ``dsv3-preflight launch --all-nodes`` (our own launcher, launch/ray_launch.py): ``[node 1 gpu-node-1] ...``
  → node gpu-node-1; the prefix is taken off before the rest is read (``strip_launcher``)
- a log collector's prefix before all of these (``docker logs -t``, ``kubectl logs --timestamps``/``--prefix``, the
  kubelet's CRI files, ``docker compose``, moreutils' ``ts``, a pdsh host, the journal's) is taken off first
  (``strip_collector``)

Timestamps (``time_of``): glog ``E1206 18:44:12.715`` (torch C++), ``2024-05-08 08:47:31,877`` and ISO
``2020-08-03T10:20:25`` (Python logging, DeepSpeed, NeMo), ``08/06/2023 05:26:52`` (HF examples), ``05-29
04:08:22`` (vLLM), ``2024/06/22 06:29:35``, syslog ``Feb 24 09:28:28``, ``Sun Mar 30 08:24:00 2025`` (dmesg -T).
A timestamp is ``(month, day, seconds of day)``; month and day are ``None`` when the line shows only a time of
day. ``dmesg`` uptime stamps (``[2059991.49]``) are not wall-clock time and are left out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

_NCCL = re.compile(r"(?:^|[\s:\])])(?P<host>(?=[\w.-]*[A-Za-z])[A-Za-z0-9][\w.-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] ")
_RANK = re.compile(r"\[rank(?P<rank>\d+)\]:|\[(?:PG [^\]]*?)?Rank (?P<rank2>\d+)\]|^\[\d+,(?P<rank3>\d+)\]<std(?:out|err)>:"
                   r"|^(?P<rank4>\d{1,5}): (?=\S)")
_TEE = re.compile(r"^\[(?P<role>[A-Za-z_]+?)(?P<local_rank>\d+)\]:")
# `worker-5: ...` (pdsh, clush, DeepSpeed's multi-node runner): a host name with a digit or a dash
_PDSH = re.compile(r"^(?P<host>(?=[\w.-]*[A-Za-z])(?=[\w.-]*[\d-])[A-Za-z][\w.-]*): (?=\S)")
# syslog/journal: time, host, then the kernel or a process with its pid ("CUDA error: ..." after a time is no journal)
_JOURNAL = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d (?P<host>[\w.-]+) (?:kernel|[\w.@/-]+\[\d+\]): ")
_KUBECTL = re.compile(r"^\[pod/(?P<host>[\w.-]+)/[\w.-]+\] ")
_COMPOSE = re.compile(r"^(?P<host>[A-Za-z][\w.-]*[-_]\d+)\s+\| ")
# docker/kubectl --timestamps (RFC 3339, nanoseconds, Z or an offset); a CRI log file adds the stream and F/P (full or
# partial line)
_COLLECTED_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)(?: (?:stdout|stderr) [FP])? "
                             # moreutils' ts, default '%b %d %H:%M:%S' and '%F %T' (also -s/%.T's fraction): a time and
                             # a space, no millisecond comma (Python logging's '2024-05-08 08:47:31,877' is the program's)
                             r"|(?:[A-Z][a-z]{2} [ \d]\d|\d{4}-\d\d-\d\d) \d\d:\d\d:\d\d(?:\.\d+)? ")
# launch/ray_launch.py: every torchrun line of node rank N comes back as "[node N <name>] <line>"; its closing line
# "dsv3-preflight launch: [node N <name>] failed first (...)" names the node the same way
_LAUNCHER = re.compile(r"^(?P<lead>dsv3-preflight launch: )?\[node (?P<node_rank>\d+) (?P<host>[^\]\s]+)\] ")
_RAY = re.compile(r"\((?P<actor>[A-Za-z_]\w*)? ?pid=(?P<pid>\d+)(?:, ip=(?P<ip>[\d.]+))?\)")
# what looks like a pdsh host and is not: a URL's scheme, a log's own words, our own lines ("NO-GO: 1 fail",
# "dsv3-preflight: error: …"), and programs that begin their messages with their own name ("python3: can't open file
# …", "nvidia-container-cli: requirement error: …", "x86_64-linux-gnu-gcc: error: …")
_NOT_HOSTS = re.compile(
    r"https?|file|line|error|warning|info|debug|note|no-go|dsv3-preflight"
    r"|(?:python|pip|pydoc)\d[\d.]*|(?:g\+\+|gcc|cc|clang|cpp)-\d+|(?:x86_64|aarch64|ppc64le)-[\w.-]+"
    r"|nvidia-(?:container-(?:cli|runtime(?:-hook)?|toolkit)|ctk|smi|persistenced|fabricmanager|modprobe|installer"
    r"|cuda-mps-(?:control|server)|peermem)|nv-fabricmanager|dcgmi|nv-hostengine", re.I)

_MONTHS = {m: i for i, m in enumerate(("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1)}
_T = r"(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,](?P<f>\d+))?"
_TIME_RES = (
    re.compile(r"(?<!\d)(?P<y>20\d\d)[-/](?P<mo>\d\d)[-/](?P<d>\d\d)[ T_]" + _T),       # 2024-05-08 08:47:31,877
    re.compile(r"(?<![\d/])(?P<mo>\d\d)/(?P<d>\d\d)/(?P<y>20\d\d)[ ,]+" + _T),          # 08/06/2023 05:26:52
    re.compile(r"(?:^|[\[\s:])[IWEF](?P<mo>[01]\d)(?P<d>[0-3]\d) " + _T),               # glog E1206 18:44:12.71
    re.compile(r"\b(?:[A-Z][a-z]{2} )?(?P<mon>[A-Z][a-z]{2}) +(?P<d>\d{1,2}) " + _T),   # Feb 24 09:28:28, Sun Mar 30 …
    re.compile(r"(?:^|[\s\[])(?P<mo>[01]\d)-(?P<d>[0-3]\d) " + _T),                     # vLLM: INFO 05-29 04:08:22
    re.compile(r"(?:^|[\s\[:])" + _T + r"(?!\.\d+\.)"),                                 # 15:44:10 (time of day only)
)


@dataclass
class Origin:
    node: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    device: int | None = None


class Stamp(NamedTuple):
    month: int | None
    day: int | None
    seconds: float


def strip_collector(text: str) -> tuple[str, str | None]:
    """``(the line without what a log collector put before it, the node that prefix names)``.

    Collectors write their own prefix before the program's line: an RFC 3339 time (``docker logs -t``, ``kubectl
    logs --timestamps``), a time of moreutils' ``ts`` (``Sep 02 20:12:55 ``, ``2025-09-02 20:12:55 ``), that time
    and the stream in the kubelet's CRI log files (``/var/log/pods/…/0.log``: ``2025-09-02T20:12:55.418123456Z
    stderr F ``), the pod (``kubectl logs --prefix``: ``[pod/NAME/CONTAINER] ``, the node NAME), the service
    (``docker compose``: ``trainer-2  | ``), the host of a parallel shell (pdsh, clush, DeepSpeed's multi-node
    runner: ``worker-5: ``) and the journal's time, host and process (``journalctl``, syslog: ``Feb 24 09:28:28
    gpu-node-2 python3[4242]: ``). Under such a prefix a line's own prefixes (``[default3]:``, srun's ``3: ``, a C++
    ``frame #2:``, glog's ``I1124`` severity) are no longer at its start; read without it, the line is what the
    program printed. The time stays the reader's to take (``time_of`` on the whole line)."""
    node = None
    while True:
        m = _JOURNAL.match(text)
        if m is not None:   # the process's own message follows ("nvidia-fabricmanager.service: ..." is no pdsh host)
            return text[m.end():], node or m.group("host")
        m = _COLLECTED_TIME.match(text)
        if m is None:   # the outermost names the node: kubectl's pod before the pdsh host printed in it
            m = _KUBECTL.match(text) or _COMPOSE.match(text) or _PDSH.match(text)
            if m is not None and _NOT_HOSTS.fullmatch(m.group("host")):
                m = None
            if m is not None:
                node = node or m.group("host")
        if m is None:
            return text, node
        text = text[m.end():]


def origin_of(text: str, outer_node: str | None = None) -> Origin:
    """Node and rank named by the line's own prefixes (``None`` where the line does not say); ``outer_node``: the node
    a prefix already taken off named (a collector's, our launcher's)."""
    text, collected_on = strip_collector(text)
    collected_on = outer_node or collected_on
    o = Origin()
    m = _RANK.search(text)
    if m:
        r = m.group("rank") or m.group("rank2") or m.group("rank3") or m.group("rank4")
        o.rank = int(r)
    m = _TEE.match(text)
    if m and m.group("role") != "rank":
        o.local_rank = int(m.group("local_rank"))
    m = _NCCL.search(text)
    if m:
        o.node = m.group("host")
        o.device = int(m.group("dev"))
    if o.node is None:
        o.node = collected_on
    if o.node is None:
        m = _RAY.search(text)
        if m and m.group("ip"):
            o.node = m.group("ip")
    return o


def strip_launcher(text: str) -> tuple[str, str | None]:
    """``(the line without our launcher's "[node N name] " prefix, the node's name)``; the line as is and None when it
    has none. The launcher's own closing line keeps its text (it is the launcher's, about that node)."""
    m = _LAUNCHER.match(text)
    if m is None:
        return text, None
    return (text if m.group("lead") else text[m.end():]), m.group("host")


def time_of(text: str) -> Stamp | None:
    """The wall-clock time a line carries, or None (see the module docstring for the formats)."""
    head = text[:160]
    for rx in _TIME_RES:
        m = rx.search(head)
        if not m:
            continue
        g = m.groupdict()
        h, mi, s = int(g["h"]), int(g["mi"]), int(g["s"])
        if h > 23 or mi > 59 or s > 60:
            continue
        frac = float("0." + g["f"]) if g.get("f") else 0.0
        month = _MONTHS.get(g["mon"]) if g.get("mon") else (int(g["mo"]) if g.get("mo") else None)
        if g.get("mon") and month is None:
            continue
        day = int(g["d"]) if g.get("d") else None
        if month is not None and not (1 <= month <= 12 and day and 1 <= day <= 31):
            continue
        return Stamp(month, day, h * 3600 + mi * 60 + s + frac)
    return None


def local_stamp(epoch: float) -> Stamp:
    """A time given in seconds since the epoch (a torchrun error file's), in this machine's local time: the time
    torchrun's own failure summary prints for it, and the time zone logs are written in on the node."""
    t = datetime.fromtimestamp(epoch)
    return Stamp(t.month, t.day, t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6)


def stamp_key(a: Stamp, with_date: bool) -> tuple:
    return (a.month, a.day, a.seconds) if with_date else (a.seconds,)


def stamp_text(s: Stamp | None) -> str | None:
    if s is None:
        return None
    h, rem = divmod(s.seconds, 3600)
    mi, sec = divmod(rem, 60)
    clock = f"{int(h):02d}:{int(mi):02d}:{sec:06.3f}"
    return f"{s.month:02d}-{s.day:02d} {clock}" if s.month else clock
