"""The HTML report: one self-contained file rendered from a result document.

Contract: ``render_html(doc) -> str`` reads only the result document (schema_version 1, possibly a
merged one) and returns a complete HTML page with inline CSS, JS and SVG and no network references.
Every string from the document is escaped by jinja2's autoescape; secrets are masked again here, so a
hand-edited or foreign document cannot leak them into the page either.
"""
from __future__ import annotations

import base64
import hashlib
import math
import shlex
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from dsv3_preflight.result import STATUS_ORDER as _STATUS_ORDER
from dsv3_preflight.result import severity
from dsv3_preflight.secrets import mask

from .doctor_text import who_acts
from .fold import fold, names_text
from .pairs_view import pairs_view
from .rootcause import root_causes
from .stall_html import with_stall_section

TEMPLATES = Path(__file__).with_name("templates")
STATUS_ORDER = [s.value for s in _STATUS_ORDER]
SYMBOL = {s.value: s.symbol for s in _STATUS_ORDER}
NODE_STATE_SYMBOL = {"ok": "✔", "replayed": "↺", "error": "‼", "missing": "?"}
DASH = "—"

# Where the cluster summary looks for each version; facts from other probes may be absent.
_VERSION_KEYS = {
    "driver": ("driver", "driver_version", "nvidia_driver"),
    "fabricmanager": ("fabricmanager", "fabric_manager", "fm", "nvidia_fabricmanager", "fabricmanager_version"),
    "cuda": ("cuda", "cuda_version", "cuda_runtime", "torch_cuda"),
    "cuda_driver": ("cuda_driver", "cuda_driver_version_str"),
    "torch": ("torch", "pytorch", "torch_version"),
    "nccl": ("nccl", "nccl_version", "torch_nccl"),
}


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,  # every template, whatever its extension
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=["jinja2.ext.do"],
    )
    env.tests["is_scalar_t"] = _is_scalar
    env.filters["who_acts"] = who_acts   # the doctor's "who acts", worded once (reports/doctor_text.py)
    env.globals.update(symbol=SYMBOL, dash=DASH, sweep_chart=sweep_chart, is_scalar=_is_scalar,
                       uniform_rows=_uniform_rows, duplicate_values=_duplicate_values, fmt=_fmt, pairs_view=pairs_view)
    return env


def render_html(doc: Mapping[str, Any]) -> str:
    """The whole page for a result document (any mode: node, cluster, replay, pytest, merged)."""
    env = _environment()
    script = (TEMPLATES / "report.js").read_text(encoding="utf-8")
    style = (TEMPLATES / "report.css").read_text(encoding="utf-8")
    # The CSP allows exactly our script by its hash and nothing from the network.
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    masked = mask(dict(doc))
    view = build_view(masked)
    floor = ((doc.get("profile") or {}).get("values") or {}).get("min_busbw_gbps")
    page = env.get_template("report.html.j2").render(view=view, doc=masked, script=script, style=style, script_hash=digest,
                                                     min_busbw=floor if isinstance(floor, (int, float)) else None)
    return with_stall_section(page, masked)   # a launch's stall report (docs/stall-watch.md)


# ----------------------------------------------------------------------------------------------
# The view: plain data the template lays out.

def _node_names(nodes: list[dict[str, Any]], selected: list[dict[str, Any]]) -> list[str]:
    """The nodes of the document, then any node only a result names, in that order."""
    node_names = [str(n["node"]) for n in nodes]
    seen_names = set(node_names)
    for r in selected:
        if r["node"] not in seen_names:
            node_names.append(r["node"])
            seen_names.add(r["node"])
    return node_names


def _matrix(selected: list[dict[str, Any]], shown: list[str], folded: set[str]) -> list[dict[str, Any]]:
    """The rows of the check × node matrix, the worst check first: each shown node's worst result, and the
    folded nodes' results counted by status."""
    by_cell: dict[tuple[str, str], dict[str, Any]] = {}
    folded_counts: dict[str, dict[str, int]] = {}
    for r in selected:
        if r["node"] in folded:
            counts = folded_counts.setdefault(r["name"], {})
            counts[r["status"]] = counts.get(r["status"], 0) + 1
            continue
        key = (r["name"], r["node"])
        if key not in by_cell or severity(r["status"]) > severity(by_cell[key]["status"]):
            by_cell[key] = r
    worst: dict[str, int] = {}
    for (check, _), r in by_cell.items():
        worst[check] = max(worst.get(check, -1), severity(r["status"]))
    checks = sorted(set(worst) | set(folded_counts), key=lambda c: (-worst.get(c, -1), c))
    return [{"check": c, "cells": [by_cell.get((c, n)) for n in shown],
             "folded": [(s, folded_counts.get(c, {}).get(s, 0)) for s in STATUS_ORDER if folded_counts.get(c, {}).get(s)]}
            for c in checks]


def _setup(doc: Mapping[str, Any], nodes: list[dict[str, Any]], summaries: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's set-up: rendezvous, profile, NIC, GPUs per node, the command."""
    profile = doc.get("profile") or {}
    values = profile.get("values") or {}
    return {
        "rendezvous": _merged_values(doc, "rendezvous") or _rendezvous(values),
        "profiles_differ": len({m.get("profile") for m in doc.get("merged_from") or []}) > 1,
        "nic": _chosen_nic(nodes),
        "gpus_per_node": _gpus_per_node(summaries, values),
        "profile_rows": [{"key": k, "value": v, "source": (profile.get("sources") or {}).get(k, DASH)}
                         for k, v in values.items()],
        "profile_name": _merged_values(doc, "profile") or profile.get("name", DASH),
        "command": " ".join(shlex.quote(a) for a in doc.get("command") or []) or DASH,
    }


def _node_facts(nodes: list[dict[str, Any]], summaries: list[dict[str, Any]], folded: set[str]) -> dict[str, Any]:
    """The nodes' facts and summaries: each shown node's own, the folded ones grouped."""
    return {
        "fact_nodes": [n for n in nodes if str(n.get("node")) not in folded],
        "summaries": [s for s in summaries if str(s["node"]) not in folded],
        "summary_groups": _summary_groups([s for s in summaries if str(s["node"]) in folded]),
        "columns": _summary_columns(summaries),
    }


def build_view(doc: Mapping[str, Any]) -> dict[str, Any]:
    results = [dict(r, id=f"r{i}") for i, r in enumerate(doc.get("results") or [])]
    nodes = sorted((dict(n) for n in doc.get("nodes") or []),
                   key=lambda n: (n.get("node_rank") is None, n.get("node_rank") or 0, str(n.get("node"))))
    selected = [r for r in results if r.get("node") != "-"]  # "-": a deselection written by an older version
    deselected = [{"name": name, "summary": reason} for name, reason in (doc.get("deselected") or {}).items()]
    node_names = _node_names(nodes, selected)
    # a large cluster: healthy nodes folded into one column of counts (reports/fold.py); every other node shown
    shown, folded = fold(node_names, nodes, selected)
    folded_set = set(folded)
    dead = [n for n in nodes if n.get("state") not in ("ok", "replayed")]
    red = [r for r in selected if r["status"] in ("fail", "error")]
    warn = [r for r in selected if r["status"] == "warn"]
    causes = _causes(selected)
    summaries = [node_summary(n) for n in nodes]
    shown_results = [r for r in selected if r["node"] not in folded_set]
    return {
        "doc": doc,
        "verdict": doc.get("verdict", "NO-GO"),
        "why": _why(doc, causes, warn, dead, selected),
        "causes": causes,
        "multi_node": len([n for n in node_names if n != "cluster"]) > 1,
        "counts": {s: (doc.get("counts") or {}).get(s, 0) for s in STATUS_ORDER},
        "results": shown_results,
        "deselected": deselected,
        "attention": red + warn,
        "node_names": shown,
        "folded": {"count": len(folded), "names": names_text(folded), "results": len(selected) - len(shown_results)},
        "node_state": {str(n["node"]): n for n in nodes},
        "dead_nodes": dead,
        "rows": _matrix(selected, shown, folded_set),
        **_node_facts(nodes, summaries, folded_set),
        **_setup(doc, nodes, summaries),
        "doctor": doc.get("doctor") if isinstance(doc.get("doctor"), Mapping) else None,
        "merged_from": doc.get("merged_from") or [],
        "title_node": node_names[0] if len(node_names) == 1 else f"{len(nodes)} nodes",
    }


def _causes(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The root causes (reports.rootcause), with the ids of the results they stand for, for the cards."""
    out = []
    for cause in root_causes(results):
        lead = next((p for p in cause.problems if p.message == cause.title), cause.problems[0])
        entry = cause.as_dict()
        entry.update(lead_check=lead.check, also=[c for c in cause.checks if c != lead.check],
                     evidence=[{"id": results[i]["id"], "name": results[i]["name"], "node": results[i]["node"]}
                               for i in entry["results"]],
                     fixes=[dict(f, label=(f"on {', '.join(f['nodes'])}" if len(entry["fixes"]) > 1 else ""))
                            for f in entry["fixes"]])
        out.append(entry)
    return out


def _why(doc, causes, warn, dead, selected) -> list[str]:
    """One line per reason for the verdict, the root cause first (results sharing a cause are one line)."""
    lines = []
    for n in dead:
        lines.append(f"‼ node {n.get('node')} is down ({n.get('state')}): {n.get('error') or 'no result came back from it'}")
    for c in causes:
        if c["status"] not in ("fail", "error"):
            continue
        also = f" (also blocks {', '.join(c['also'])})" if c["also"] else ""
        lines.append(f"{SYMBOL[c['status']]} {c['status'].upper()} {c['lead_check']} on {', '.join(c['nodes'])}: "
                     f"{c['title']}{also} — who acts: {c['actor_label']}")
    if doc.get("strict") and warn:
        lines.append(f"--strict: {len(warn)} warning(s) count as failures")
    if not selected:
        lines.append("no check ran")
    if not lines:
        lines.append(f"all {len(selected)} checks passed or were skipped with a reason")
    doctor = doc.get("doctor")
    if isinstance(doctor, Mapping) and doctor.get("verdict") == "failure":
        # logs attached with --logs explain an earlier run: say so at the top, apart from this run's verdict
        lines.append(f"attached logs (doctor, see below): {doctor.get('summary') or 'a failure was found'}")
    return lines


def node_summary(node: Mapping[str, Any]) -> dict[str, Any]:
    """Versions, GPUs and NIC of one node from its facts; missing values are None (shown as a dash)."""
    facts = node.get("facts") or {}
    versions = facts.get("versions") if isinstance(facts.get("versions"), Mapping) else {}
    nvml = facts.get("nvml") if isinstance(facts.get("nvml"), Mapping) else {}
    out: dict[str, Any] = {"node": node.get("node"), "rank": node.get("node_rank"),
                           "state": node.get("state", DASH), "error": node.get("error")}
    for field, keys in _VERSION_KEYS.items():
        out[field] = _version(_first(versions, keys)) or _version(_first(nvml, keys))
    driver_cuda = out.pop("cuda_driver")
    if driver_cuda and driver_cuda != out["cuda"]:  # what torch was built with vs what the driver supports
        out["cuda"] = f"{out['cuda'] or DASH} (driver {driver_cuda})"
    devices = _first(nvml, ("gpus", "devices"))
    count = _first(nvml, ("device_count", "count", "gpu_count"))
    if count is None and isinstance(devices, list) and nvml.get("available") is not False:
        count = len(devices)
    out["gpus"] = count
    models = sorted({str(_first(d, ("name", "model")) or "") for d in devices or [] if isinstance(d, Mapping)} - {""})
    out["gpu_model"] = ", ".join(models) or None
    route = facts.get("nic_route") if isinstance(facts.get("nic_route"), Mapping) else {}
    out["nic"] = _first(route, ("interface", "ifname", "dev", "nic"))
    out["source"] = _first(route, ("source", "src", "source_address"))
    return out


def _summary_groups(summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Folded nodes grouped by identical values (versions, GPUs, NIC): one row per group, with its count."""
    groups: dict[tuple, dict[str, Any]] = {}
    keys = [k for k, _ in _summary_columns(summaries)]
    for s in summaries:
        key = (s.get("state"),) + tuple(s.get(k) for k in keys)
        group = groups.setdefault(key, {**{k: s.get(k) for k in keys}, "state": s.get("state"), "nodes": []})
        group["nodes"].append(str(s["node"]))
    return [{**g, "count": len(g["nodes"]), "names": names_text(g["nodes"])} for g in groups.values()]


def _summary_columns(summaries: list[dict[str, Any]]) -> list[tuple[str, str]]:
    cols = [("gpus", "GPUs"), ("gpu_model", "model"), ("driver", "driver"), ("fabricmanager", "Fabric Manager"),
            ("cuda", "CUDA"), ("torch", "torch"), ("nccl", "NCCL"), ("nic", "NIC"), ("source", "source IP")]
    return cols


def _first(mapping: Any, keys) -> Any:
    if not isinstance(mapping, Mapping):
        return None
    for k in keys:
        if mapping.get(k) not in (None, ""):
            return mapping[k]
    return None


def _version(value: Any) -> str | None:
    if isinstance(value, Mapping):
        value = _first(value, ("version", "value", "running"))
    return None if value in (None, "") else str(value)


def _merged_values(doc: Mapping[str, Any], key: str) -> str | None:
    """For a merged document whose inputs disagree on key: each value with the files that had it."""
    seen: dict[str, list[str]] = {}
    for m in doc.get("merged_from") or []:
        seen.setdefault(str(m.get(key) or DASH), []).append(Path(str(m.get("file"))).name)
    if len(seen) < 2:
        return None
    return " / ".join(f"{value} ({', '.join(files)})" for value, files in seen.items())


def _rendezvous(values: Mapping[str, Any]) -> str:
    addr, port = values.get("master_addr"), values.get("master_port")
    if not addr:
        return DASH
    return f"{addr}:{port}" if port else str(addr)


def _chosen_nic(nodes: list[Mapping[str, Any]]) -> str:
    """The NIC the rendezvous route leaves by (first node that has the fact), with its env override."""
    for n in nodes:
        facts = n.get("facts") or {}
        route = facts.get("nic_route")
        if isinstance(route, Mapping):
            name = _first(route, ("interface", "ifname", "dev", "nic"))
            extra = [f"{label} {value}" for label, value in (
                ("source", _first(route, ("source", "src", "source_address"))),
                ("gateway", route.get("gateway")), ("mtu", route.get("mtu"))) if value not in (None, "")]
            if name or extra:
                return " · ".join([str(name or DASH)] + extra)
        env = facts.get("env") if isinstance(facts.get("env"), Mapping) else {}
        if env.get("NCCL_SOCKET_IFNAME"):
            return f"NCCL_SOCKET_IFNAME={env['NCCL_SOCKET_IFNAME']}"
    return DASH


def _gpus_per_node(summaries: list[dict[str, Any]], values: Mapping[str, Any]) -> str:
    seen = sorted({str(s["gpus"]) for s in summaries if s.get("gpus") is not None})
    expected = values.get("gpus_per_node")
    text = " / ".join(seen) if seen else DASH
    if expected is not None:
        text += f" (expected {expected})"
    return text


# ----------------------------------------------------------------------------------------------
# Helpers the evidence macros call.

def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _fmt(value: Any) -> str:
    """A scalar as text: null as a dash, booleans as yes/no, floats without noise."""
    if value is None:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _uniform_rows(value: Any) -> list[str] | None:
    """Column names when value is a non-empty list of dicts whose cells are mostly scalars, else None."""
    if not isinstance(value, list) or not value or not all(isinstance(v, Mapping) for v in value):
        return None
    columns: list[str] = []
    for row in value:
        for k in row:
            if k not in columns:
                columns.append(k)
    return columns if len(columns) <= 16 else None


def _duplicate_values(rows: list[Mapping[str, Any]], columns: list[str]) -> dict[str, set]:
    """For rank-like columns, the values that occur in more than one row (a duplicate rank)."""
    dupes: dict[str, set] = {}
    for col in columns:
        if col in ("rank", "global_rank", "local_rank", "node_rank", "cuda_device", "device", "gpu", "bus_id",
                   "pci_bus_id", "uuid"):
            seen: dict[Any, int] = {}
            for row in rows:
                v = row.get(col)
                if _is_scalar(v) and v is not None:
                    seen[v] = seen.get(v, 0) + 1
            if col in ("local_rank", "cuda_device", "device", "gpu", "bus_id", "pci_bus_id", "uuid"):
                # per node these repeat legitimately across nodes; only flag them within one node
                per_node: dict[tuple, int] = {}
                for row in rows:
                    k = (row.get("node") or row.get("host") or row.get("hostname"), row.get(col))
                    per_node[k] = per_node.get(k, 0) + 1
                # a CPU run shares "cpu" legitimately; only a GPU identity may not repeat on one node
                dupes[col] = {k[1] for k, c in per_node.items() if c > 1 and k[1] not in (None, "", "cpu")}
            else:
                dupes[col] = {v for v, c in seen.items() if c > 1}
    return dupes


def _human_bytes(n: float) -> str:
    for unit in ("B", "K", "M", "G", "T"):
        if abs(n) < 1024 or unit == "T":
            return f"{n:.0f}{unit}" if float(n).is_integer() else f"{n:.1f}{unit}"
        n /= 1024
    return f"{n}"


def sweep_chart(rows: Any, floor: float | None = None, width: int = 560, height: int = 240) -> dict[str, Any] | None:
    """Geometry of the bandwidth chart (bus and algorithm bandwidth over message size, log2 x axis),
    with the profile's required bus bandwidth (``floor``, GB/s) as a horizontal line when given.

    Returns None when rows are not a sweep (a list of dicts with a numeric message size: ``size_bytes``, as the
    collective worker records it, or ``bytes``)."""
    if not isinstance(rows, list):
        return None
    def num(v: Any) -> bool:  # a plottable number (not a bool, NaN, infinity or beyond float range)
        return isinstance(v, (int, float)) and not isinstance(v, bool) and abs(v) < 1e300 and math.isfinite(v)

    pts = [{**r, "bytes": r.get("size_bytes", r.get("bytes"))} for r in rows if isinstance(r, Mapping)]
    pts = [r for r in pts if num(r["bytes"]) and r["bytes"] > 0]
    if not pts:
        return None
    pts.sort(key=lambda r: r["bytes"])
    left, right, top, bottom = 56, 16, 14, 40
    pw, ph = width - left - right, height - top - bottom
    xs = [math.log2(r["bytes"]) for r in pts]
    x0, x1 = min(xs), max(xs)
    span = (x1 - x0) or 1.0
    series_keys = [k for k in ("busbw_gbps", "algbw_gbps") if any(num(r.get(k)) for r in pts)]
    ymax = max([float(r[k]) for r in pts for k in series_keys if num(r.get(k))] + [float(floor or 0)])
    ymax = _nice_ceiling(ymax)

    def sx(b: float) -> float:
        return round(left + (math.log2(b) - x0) / span * pw, 1)

    def sy(v: float) -> float:
        return round(top + ph - (v / ymax) * ph, 1)

    series = []
    for k, label, cls in (("busbw_gbps", "bus bandwidth", "bus"), ("algbw_gbps", "algorithm bandwidth", "alg")):
        if k not in series_keys:
            continue
        p = [(sx(r["bytes"]), sy(float(r[k])), r["bytes"], r[k]) for r in pts if num(r.get(k))]
        series.append({"label": label, "cls": cls, "points": " ".join(f"{x},{y}" for x, y, _, _ in p),
                       "dots": [{"x": x, "y": y, "title": f"{_human_bytes(b)}: {v:.1f} GB/s {label}"} for x, y, b, v in p]})
    step = max(1, math.ceil(len(pts) / 8))
    xticks = [{"x": sx(r["bytes"]), "label": _human_bytes(r["bytes"])} for r in pts[::step]]
    yticks = [{"y": sy(ymax * i / 4), "label": f"{ymax * i / 4:g}"} for i in range(5)]
    peak = max(pts, key=lambda r: float(r["busbw_gbps"]) if num(r.get("busbw_gbps")) else 0.0)
    return {"width": width, "height": height, "left": left, "top": top, "pw": pw, "ph": ph, "series": series,
            "xticks": xticks, "yticks": yticks, "bottom_y": top + ph,
            "floor": None if not floor else {"y": sy(float(floor)), "label": f"required bus bandwidth {float(floor):g} GB/s"},
            "peak": f"peak bus bandwidth {float(peak['busbw_gbps']) if num(peak.get('busbw_gbps')) else 0.0:.1f} GB/s "
                    f"at {_human_bytes(peak['bytes'])}"}


def _nice_ceiling(v: float) -> float:
    if v <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * exp:
            return m * exp
    return 10 * exp
