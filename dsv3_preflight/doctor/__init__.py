"""Log triage: name the root cause of a failed run from its logs (``dsv3-preflight doctor LOG...``).

Library entry point for other parts (the HTML report renders ``doc["doctor"]`` in this shape)::

    from dsv3_preflight.doctor import triage
    doc = triage(["logs/"])        # files, directories (walked), "-" for stdin; gzip detected by content

The document (plain JSON types)::

    {
      "tool": "dsv3-preflight doctor",
      "verdict": "failure" | "healthy" | "unknown",
      "summary": "one line",
      "findings": [                        # ordered by causality: root causes (upstream first), then consequences
        {"id": "cuda.error_802",           # signature id (dsv3_preflight.doctor.signatures)
         "class": "cuda_init",             # cuda_init, rank_mapping, rendezvous, nic_selection,
                                           # collective_timeout, transport, oom, lora_save, process_exit
         "kind": "cause" | "symptom" | "suspect",
         "role": "root_cause" | "consequence",
         "title": "...", "root_cause": "...", "fix": "commands/config to paste",
         "check": "gpu.cuda_init" | null,  # the preflight check that catches it before launch
         "node": "node2" | null, "rank": 16 | null, "local_rank": 0 | null,   # of the first occurrence
         "nodes": [...], "ranks": [...], "count": 8,
         "first_seen": {"file": "...", "line": 12},
         "explained_by": "cuda.error_802" | null,   # for consequences: the headline root cause
         "evidence": [{"file": "...", "line": 12, "text": "... (secrets masked)"}]}
      ],
      "warnings": [...],                   # suspects (e.g. NCCL on lo) in a log without failure, same shape
      "healthy_signs": [{"id", "title", "count", "first": {"file", "line", "text"}}],
      "unrecognised": {"count": 0, "first": [{"file", "line", "text"}]},   # error lines no signature knows
      "files": [{"path", "node", "lines", "bytes"}],
      "unreadable": [{"path", "error"}]
    }

Verdict: ``failure`` when a cause or symptom is found; ``healthy`` when the log shows a successful start
(NCCL Init COMPLETE, HF "Running training", DeepSpeed ZeRO init end) and no error line; else ``unknown``
(the tool says it does not know rather than guessing).
"""
from __future__ import annotations

from .reader import UnreadableLog
from .signatures import SIGNATURES, Signature
from .triage import Triage, triage

__all__ = ["triage", "Triage", "SIGNATURES", "Signature", "UnreadableLog"]
