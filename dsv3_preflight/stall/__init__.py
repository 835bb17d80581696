"""The stall watch of ``launch`` and ``launch --all-nodes`` (docs/stall-watch.md).

While a launched run hangs, no rank exits, so nothing else reacts. The watch reads the run's output for progress
(progress.py), decides when a silence is a stall and how a slow run is told apart (rule.py), and then, only then,
samples and captures every rank (probes/) and names the culprit (culprit.py) in one report (report.py).

- ``progress``: signs of progress per rank, with the doctor's progress signatures
- ``rule``: the stall rule and the slow-versus-stuck rule (pure)
- ``probes``: the only code touching the system: /proc (``procs``: rank processes, CPU time, wchan, status, TCP
  queues), the capture (``capture``: py-spy, Flight Recorder, NCCL RAS, NVML, each with a timeout), the rendezvous
  store (``store``: the agents' keys)
- ``local``, ``ray_watch``, ``publish``: the runners (plain launch, launch --all-nodes) and where the report goes
- ``culprit``: group ranks by where they wait; the odd ones out, a stuck link, a node that never joined (pure)
- ``report``: the stall section (JSON) and its console lines
- ``watch``: the state machine both launchers drive
"""
from __future__ import annotations

from .watch import ON_STALL, StallOptions, StallWatch

__all__ = ["ON_STALL", "StallOptions", "StallWatch"]
