"""Log triage: name the root cause of a failed run from its logs (``dsv3-preflight doctor LOG...``).

Library entry point for other parts (the HTML report renders ``doc["doctor"]`` in this shape)::

    from dsv3_preflight.doctor import triage
    doc = triage(["logs/"])        # files, directories (walked), "-" for stdin; gzip detected by content

The document (plain JSON types)::

    {
      "tool": "dsv3-preflight doctor",
      "verdict": "failure" | "healthy" | "unknown",
      "exit_code": 1 | 0 | 5 | 4,          # 4: an input was refused (the rest is still diagnosed)
      "cause_recognised": true,            # false: a failure whose cause no signature knows
      "cause_class": "gpu_oom",            # the headline's class; "unrecognised", "healthy" or "no_progress";
                                           # "interrupted": stopped by a signal (Ctrl-C, SIGTERM) after no error
      "stalled": false,                    # true: no error, no progress, and the log stops after a suspect that
                                           # explains a hang (NCCL on lo in a multi-node job): that suspect leads
      "summary": "one line",
      "first_failure": {"node", "rank", "local_rank", "file", "line", "time", "text", "finding", "inferred_from"},
      "findings": [                        # root causes (headline first), then consequences
        {"id": "cuda.error_802",           # signature id (dsv3_preflight.doctor.signatures)
         "class": "cuda_fabric",           # CLASSES, or null for a consequence that names no cause
         "class_title": "...", "kind": "cause" | "suspect" | "symptom", "tier": 0,
         "role": "root_cause" | "consequence", "headline": true,   # headline only on the first
         "title": "...", "root_cause": "...", "fix": "lines that paste into bash",
         "check": "gpu.fabric_manager" | null,   # the preflight check that catches it before launch
         "actor": "job" | "node" | "network" | null,   # who acts (null: the log does not say; null on consequences)
         "actor_label": "the node's administrator (repair or drain the node)" | null,
         "node": "node2" | null, "rank": 16 | null, "local_rank": 0 | null, "time": "03-21 02:05:38.764" | null,
         "nodes": [...], "ranks": [...], "count": 8,
         "first_seen": {"file": "...", "line": 12},
         "explained_by": "cuda.error_802" | null,   # for consequences: the headline root cause
         "evidence": [{"file": "...", "line": 12, "text": "... (secrets masked)"}],
         "detail": {...}}                  # drift values per node, RAS mismatch lines (when any)
      ],
      "warnings": [...],                   # same shape: suspects (NCCL on lo) in a log without failure (role
                                           # "warning"), and lines printed while processes exited after the log
                                           # says the run finished (role "teardown": noise, not a failure), and
                                           # NCCL WARN lines no signature knows that the run went past (role
                                           # "went_on": before the first progress of their file; not a failure),
                                           # and, in a run that succeeded after them, its errors (role "survived":
                                           # each before a sign of success in its own file; not a failure)
      "error_lines": [{"file", "line", "text", "node", "rank"}],   # error lines no signature knows
      "nearest_causes": [{"id", "class", "title", "check", "score"}],   # when the cause is not recognised
      "silent_ranks": [5],                 # ranks that did not report the collective timeout the others did
      "silent_nodes": ["node2"],           # without a world size: nodes (a log file each) whose log does not report it
      "healthy_signs": [{"id", "title", "count", "first": {"file", "line", "text"}}],
      "unrecognised": {"count": 0, "first": [{"file", "line", "text"}]},
      "nccl": {"nodes": {"node1": {"nccl_version": [...], "cuda_driver": [...], "bootstrap_iface": [...],
                                   "network": [...], "net_plugin": [...]}}, "nranks": 16, "world": 16},
      "ras": {"dead": [...], "missing": [...], "mismatch": [...], "errors": [...]} | null,
      "flight_recorder": {...} | null,     # with --flight-recorder DIR
      "files": [{"path", "node", "lines", "bytes", "host"?}],   # node: the file's label; host: torchrun's name for it
      "unreadable": [{"path", "error"}],
      "skipped": [{"path", "why"}]          # read through another input (the preflight's HTML report: its JSON twin)
    }

Verdicts: ``failure`` (exit 1) when a cause, a symptom or any error line is found, or when a log without either
stops after a suspect that explains a hang; ``healthy`` (exit 0) only when the logs show progress and no error
line (teardown noise after a sign that the run finished is not one); ``unknown`` (exit 5) when they show
neither (never exit 0).
"""
from __future__ import annotations

from .reader import InputError, UnreadableLog
from .signatures import CLASSES, DERIVED, SIGNATURES, Signature
from .triage import Triage, triage

__all__ = ["triage", "Triage", "SIGNATURES", "DERIVED", "CLASSES", "Signature", "InputError", "UnreadableLog"]
