"""JUnit XML from a result document, for CI systems that show test reports (pure: a document in, text out).

One ``<testsuite>`` per run; one ``<testcase>`` per result (classname = the node, name = the check).
FAIL -> ``<failure>``, ERROR -> ``<error>``, SKIP -> ``<skipped>`` with its reason, WARN -> a passed case
whose ``<system-out>`` says the warning. The message is the summary; the body adds the fix to paste.
Deselected checks are listed as skipped cases on node ``-`` (CI dashboards count them).
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any

from dsv3_preflight.secrets import mask
from dsv3_preflight.text import safe_terminal

_XML_BAD = {c: None for c in range(0x20) if c not in (0x09, 0x0A, 0x0D)}


def _x(value: Any) -> str:
    """Text XML 1.0 can hold (control characters shown escaped, never dropped silently)."""
    return safe_terminal(value).translate(_XML_BAD)


def render_junit(doc: Mapping[str, Any]) -> str:
    doc = mask(dict(doc))
    results = list(doc.get("results") or [])
    counts = doc.get("counts") or {}
    suite = ET.Element("testsuite", {
        "name": "dsv3-preflight", "tests": str(len(results) + len(doc.get("deselected") or {})),
        "failures": str(counts.get("fail", 0)), "errors": str(counts.get("error", 0)),
        "skipped": str(counts.get("skip", 0) + len(doc.get("deselected") or {})),
        "time": f"{sum(float(r.get('duration_s') or 0) for r in results):.3f}",
        "timestamp": _x(doc.get("created", "")),
    })
    props = ET.SubElement(suite, "properties")
    for key in ("verdict", "mode", "exit_code"):
        ET.SubElement(props, "property", {"name": key, "value": _x(doc.get(key, ""))})
    for r in results:
        case = ET.SubElement(suite, "testcase", {"classname": _x(r.get("node")), "name": _x(r.get("name")),
                                                 "time": f"{float(r.get('duration_s') or 0):.3f}"})
        status, summary = r.get("status"), _x(r.get("summary"))
        body = summary + (f"\n\nfix:\n{_x(r['remediation'])}" if r.get("remediation") else "")
        if status == "fail":
            ET.SubElement(case, "failure", {"message": summary, "type": "FAIL"}).text = body
        elif status == "error":
            ET.SubElement(case, "error", {"message": summary, "type": "ERROR"}).text = body
        elif status == "skip":
            ET.SubElement(case, "skipped", {"message": summary})
        elif status == "warn":
            ET.SubElement(case, "system-out").text = f"WARN: {body}"
    for name, reason in (doc.get("deselected") or {}).items():
        case = ET.SubElement(suite, "testcase", {"classname": "-", "name": _x(name), "time": "0.000"})
        ET.SubElement(case, "skipped", {"message": _x(reason)})
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
