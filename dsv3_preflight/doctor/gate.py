"""Our own preflight's verdict in the inputs: when it said NO-GO, torchrun never started and the failed checks are the
root cause. The preflight has judged already; this module reads its judgement back, it does not judge again.

Three places hold it:

- the console of `dsv3-preflight launch` or `run` (reports/console.py): under "Why NO-GO", one line per cause,
  "1. ✘ FAIL host.resources: port 39511 is held by pid 1321 (…)" (" on node1, node2" after the check with several
  nodes), then "   also blocks: …", "   who acts: …" and the fix; the gate's closing line
  "dsv3-preflight launch: NO-GO (2 FAIL): torchrun not started; report: reports/preflight-….json";
- the launch log (launch/gate.py): the same cause lines behind "# ", and "# report: ….json";
- the JSON result document: every result, and each cause's fix with the node's real values.

``GateText`` reads the lines of one file (they reach it through the reader's needles, ``GATE_NEEDLES``);
``gate_json`` reads a result document. Both give entries the triage turns into one finding per failed check
(``signatures.gate_signature``). A launch log names its JSON document ("# report: ….json"): ``read_named_report``
reads the causes from that document (its fixes with the node's values), and the cause lines of the text stand
only for a log that names none, or one that can no longer be read.
"""
from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..reports.rootcause import CLUSTER, cause_lead, root_causes
from ..result import NO_GO
from .signatures import GATE_CAUSE_RE, GATE_NO_GO

GATE_NEEDLES: tuple[bytes, ...] = ("\u2718 FAIL ".encode(), "\u203c ERROR ".encode(), b"who acts: ", b"also blocks: ",
                                   b"NO-GO", b"# report: ", b"(paste as is)", b"! WARN ", b"GO: ", b"launch: doctor: ")
_CAUSE = re.compile(GATE_CAUSE_RE.format(check=r"[A-Za-z_][\w.-]*"))
_WHO = re.compile(r"^\s*(?:#\s*)?who acts: (?P<who>.+)$")
_ALSO = re.compile(r"^\s*(?:#\s*)?also blocks: (?P<also>.+?)(?: \(same cause\))?$")
_REPORT = re.compile(r"^# report: (?P<report>\S+?\.json)\b")
#: a row of the console's table of results, or a cell of its node × check matrix, that is FAIL or ERROR: the causes
#: below the table say it again, with who acts and the fix
_TABLE_ROW = re.compile(r"[│|]\s*(?:\u2718 FAIL|\u203c ERROR)\b")
#: the console's own verdict line ("NO-GO: 2 fail, 8 pass, 20 skip"), the launch log's last ("# NO-GO: torchrun not started")
_VERDICT = re.compile(r"^\s*(?:# )?NO-GO: (?:\d+ (?:error|fail)\b|torchrun not started)")
#: a cause's "who acts" and "also blocks" lines follow it within this many lines
_FOLLOW = 4
#: the console's "fix: (paste as is)" (or "fix on node1:"): the fix's lines follow, up to the next cause or the verdict
_FIX_HEAD = re.compile(r"^\s*fix(?: on [^:]+)?: \(paste as is\)$")
#: what ends a fix: the next cause (a warning's too), the verdict line, a note of the run
_FIX_END = re.compile(r"^\s*(?:\d+\. (?:\u2718 FAIL|\u203c ERROR|! WARN) |(?:GO|NO-GO|NOTHING SELECTED): |note: "
                      r"|dsv3-preflight launch: )")
#: the launcher's own account of a failed launch (launch --all-nodes runs the doctor and prints its root cause): a copy
#: of what the doctor found, not a line of the run
_LAUNCH_DOCTOR = re.compile(r"^\s*(?:# )?dsv3-preflight launch: doctor: ")
#: a fix is at most this many lines (a console cut after a fix does not swallow the rest of the file)
_FIX_LINES = 60


@dataclass
class GateText:
    """The preflight's verdict as one input gives it."""
    entries: list[dict] = field(default_factory=list)
    #: the lines that say NO-GO (the gate's closing line, the launch log's verdict): where, and their groups
    closed: list[dict] = field(default_factory=list)
    report: str | None = None
    #: a line of `dsv3-preflight launch` said so (its closing line, its log): torchrun was not started. A plain `run`'s
    #: console or a report says nothing of a launch
    launched: bool = False
    #: the JSON result document the launch log names ("# report: ….json"), as it names it
    named: str | None = None
    _fix_from: tuple[str, int] | None = None   # (file, line) of the fix header being read

    def observe(self, text: str, where: dict) -> bool:
        """True when the line is the preflight's own (then it is no log line of a run)."""
        if _FIX_HEAD.match(text):
            self._fix_from = (where["file"], where["line"])
            return True
        if self._fix_from is not None:
            file, start = self._fix_from
            if file == where["file"] and 0 < where["line"] - start <= _FIX_LINES and not _FIX_END.match(text):
                return True   # a line of the preflight's fix: its words ("refused", "failed") are no error of a run
            self._fix_from = None
        if _LAUNCH_DOCTOR.match(text):
            return True
        m = _CAUSE.search(text)
        if m:
            nodes = [n.strip() for n in (m.group("nodes") or "").split(",") if n.strip() and n.strip() != CLUSTER]
            self.entries.append({"check": m.group("check"), "status": m.group("status"), "summary": m.group("summary"),
                                 "nodes": nodes, "who": None, "also": None, "fix": None, "text": text, **where})
            return True
        last = self.entries[-1] if self.entries else None
        near = last is not None and last["file"] == where["file"] and 0 < where["line"] - last["line"] <= _FOLLOW
        m = _WHO.search(text)
        if m and near:
            last["who"] = m.group("who").strip()
            return True
        m = _ALSO.search(text)
        if m and near:
            last["also"] = m.group("also").strip()
            return True
        m = GATE_NO_GO.regex.search(text)
        if m:
            groups = {k.rstrip("0123456789"): v for k, v in m.groupdict().items() if v}
            self.report = self.report or groups.get("report")
            self.closed.append({"text": text, "groups": groups, **where})
            self.launched = True   # both of its forms are the launcher's (its closing line, its log's header)
            return True
        m = _REPORT.search(text)
        if m:   # the launch log's "# report: ….json, ….html"
            self.report = self.report or m.group("report")
            self.named = self.named or m.group("report")
            return True
        m = _VERDICT.search(text)
        if m and m.group(0).endswith("torchrun not started"):   # the launch log's last line
            self.launched = True
        return bool(m or _TABLE_ROW.search(text))

    def __bool__(self) -> bool:
        return bool(self.entries or self.closed)


#: the preflight's HTML report (reports/templates): the same results as its JSON twin, in markup a log reader would misread
_HTML_GENERATOR = b'<meta name="generator" content="dsv3-preflight'


def is_preflight_html(path: str) -> bool:
    """Whether ``path`` is an HTML report the preflight wrote (its generator tag is in the first lines)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return head.lstrip()[:15].lower() == b"<!doctype html>" and _HTML_GENERATOR in head


def html_twin(path: str) -> str | None:
    """The JSON result document written beside an HTML report (preflight-….html → preflight-….json), if any."""
    if not path.endswith(".html"):
        return None
    twin = path[:-5] + ".json"
    return twin if os.path.isfile(twin) else None


def is_result_document(doc: object) -> bool:
    """Whether ``doc`` is a preflight result document (``run --json``, the reports the launcher writes)."""
    return (isinstance(doc, dict) and isinstance(doc.get("results"), list) and isinstance(doc.get("nodes"), list)
            and isinstance(doc.get("verdict"), str) and "counts" in doc)


def gate_json(doc: Mapping[str, Any], path: str) -> GateText:
    """The failed checks of a result document, grouped as the console groups them (``reports.rootcause``), each
    with the fix the preflight gave, its real values in it."""
    gate = GateText(report=path)
    where = {"file": path, "line": 1}
    for cause in root_causes(doc.get("results") or []):
        if cause.status not in ("fail", "error"):
            continue
        lead = cause_lead(cause)
        multi = len(cause.fixes) > 1
        fix = "\n".join((f"# on {', '.join(nodes)}:\n" if multi else "") + text for text, nodes in cause.fixes)
        others = [c for c in cause.checks if c != lead.check]
        gate.entries.append({
            "check": lead.check, "status": cause.status.upper(), "summary": cause.title,
            "nodes": [n for n in cause.nodes if n != CLUSTER], "who": cause.actor_label if cause.actor else None,
            "also": ", ".join(others) or None, "fix": fix or None,
            "text": f"{cause.status.upper()} {lead.check}: {cause.title}", **where})
    if doc.get("verdict") == NO_GO and not gate.entries:
        gate.closed.append({"text": f"verdict {doc.get('verdict')}", "groups": {"why": str(doc.get("verdict")),
                                                                              "report": path}, **where})
    return gate


#: a result document larger than this is not read back (the launcher's documents are a few hundred KiB)
_REPORT_LIMIT = 64 << 20


def _locate(named: str, log_path: str) -> str | None:
    """The file a launch log's "# report:" names: as named (absolute, or from the working directory), else beside
    the log (the reports directory copied or moved with it)."""
    here = os.path.dirname(os.path.abspath(log_path)) if log_path != "-" else os.getcwd()
    for candidate in (named, os.path.join(here, named), os.path.join(here, os.path.basename(named))):
        if os.path.isfile(candidate):
            return candidate
    return None


def read_named_report(gate: GateText, log_path: str) -> GateText:
    """The preflight's verdict from the JSON result document the launch log names: the causes, who acts and each
    fix with the node's values, as ``gate_json`` reads them; whether the launcher said torchrun was not started stays
    the log's. The gate as the text gave it when the log names no document, or the document is gone, unreadable or
    not a result document."""
    path = _locate(gate.named, log_path) if gate.named else None
    if path is None:
        return gate
    try:
        with open(path, "rb") as fh:
            data = fh.read(_REPORT_LIMIT + 1)
        doc = json.loads(data) if len(data) <= _REPORT_LIMIT else None
    except (OSError, ValueError):
        return gate
    if not is_result_document(doc):
        return gate
    read = gate_json(doc, path)
    read.launched, read.named = gate.launched, gate.named
    read.closed = read.closed or gate.closed
    return read


__all__ = ["GATE_NEEDLES", "GateText", "gate_json", "html_twin", "is_preflight_html", "is_result_document",
           "read_named_report"]
