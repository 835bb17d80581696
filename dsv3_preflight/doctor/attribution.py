"""Which node and rank printed a line, from the prefixes launchers and libraries put on it.

Recognised (each seen in public logs of the tools):
- NCCL: ``host:pid:tid [cudaDev] NCCL ...``                          → node host, local device
- torch (2.2+): ``[rank3]:[E1206 ...]``, watchdog ``[Rank 3]``/``[PG 1 Rank 3]`` → global rank
- torchrun ``--tee``/``--role``: ``[default3]:``                      → local rank
- DeepSpeed's pdsh launcher: ``worker-5: [rank22]: ...``             → node worker-5, rank 22
- Open MPI/Horovod: ``[1,3]<stdout>:``                               → rank 3
- Ray: ``(RayTrainWorker pid=285, ip=192.168.177.12)``                → node 192.168.177.12
- syslog/journal: ``Feb 24 09:28:28 gpu-node-2 nv-fabricmanager[1507]: ...`` → node gpu-node-2
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_NCCL = re.compile(r"(?:^|[\s:\])])(?P<host>(?=[\w.-]*[A-Za-z])[A-Za-z0-9][\w.-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] ")
_RANK = re.compile(r"\[rank(?P<rank>\d+)\]:|\[(?:PG [^\]]*?)?Rank (?P<rank2>\d+)\]|^\[\d+,(?P<rank3>\d+)\]<std(?:out|err)>:")
_TEE = re.compile(r"^\[(?P<role>[A-Za-z_]+?)(?P<local_rank>\d+)\]:")
_PDSH = re.compile(r"^(?P<host>[A-Za-z][\w.-]*): (?=\[rank\d+\])")
_JOURNAL = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d (?P<host>[\w.-]+) [\w.@/-]+(?:\[\d+\])?: ")
_RAY = re.compile(r"\((?P<actor>[A-Za-z_]\w*) pid=(?P<pid>\d+)(?:, ip=(?P<ip>[\d.]+))?\)")


@dataclass
class Origin:
    node: str | None = None
    rank: int | None = None
    local_rank: int | None = None
    device: int | None = None


def origin_of(text: str) -> Origin:
    """Node and rank named by the line's own prefixes (``None`` where the line does not say)."""
    o = Origin()
    m = _RANK.search(text)
    if m:
        o.rank = int(m.group("rank") or m.group("rank2") or m.group("rank3"))
    m = _TEE.match(text)
    if m and m.group("role") != "rank":
        o.local_rank = int(m.group("local_rank"))
    m = _NCCL.search(text)
    if m:
        o.node = m.group("host")
        o.device = int(m.group("dev"))
    if o.node is None:
        m = _PDSH.match(text)
        if m:
            o.node = m.group("host")
    if o.node is None:
        m = _JOURNAL.match(text)
        if m:
            o.node = m.group("host")
    if o.node is None:
        m = _RAY.search(text)
        if m and m.group("ip"):
            o.node = m.group("ip")
    return o
