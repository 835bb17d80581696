"""The gate: the preflight's result document decides whether torchrun starts; the launch log says why."""
from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from dsv3_preflight.result import decide_results

from .command import LaunchCommand, shell_text


def is_go(doc: Mapping[str, Any], code: int) -> bool:
    """Green: the one verdict function, re-applied to the document's results, says GO, and so did the run."""
    decision = decide_results(doc.get("results") or [], strict=bool(doc.get("strict")))
    return decision.is_go and code == decision.exit_code and doc.get("verdict") == decision.label


def red_line(doc: Mapping[str, Any], code: int, written: Sequence[Path]) -> str:
    """The one line printed when the gate stays closed."""
    decision = decide_results(doc.get("results") or [], strict=bool(doc.get("strict")))
    why = decision.reason if not decision.is_go else f"the run ended with exit code {code}"
    where = f"report: {written[0]}" if written else "report: not written (--no-report); the results are above"
    return f"dsv3-preflight launch: NO-GO ({why}): torchrun not started; {where}"


def skipped_by_request(doc: Mapping[str, Any]) -> dict[str, str]:
    """Checks the user deselected (--skip/--only/--tags), with the reason recorded in the report."""
    return dict(doc.get("deselected") or {})


def launch_log_path(directory: str | Path, node: str) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", node)[:60] or "node"
    return Path(directory) / f"launch-{stamp}-{safe}.log"


def torchrun_log_dir(launch_log: str | Path) -> Path:
    """torchrun's ``--log-dir`` beside the launch log, named as it is: ``launch-<stamp>-<node>.log`` → ``launch-<stamp>-<node>/``
    (the doctor, given the reports directory, reads the error files there as that node's)."""
    path = Path(os.path.abspath(launch_log))
    return path.with_suffix("") if path.suffix == ".log" else path.with_name(f"{path.name}.torchrun")


def launch_log_text(doc: Mapping[str, Any], code: int, written: Sequence[Path], command: LaunchCommand | None,
                    decision: str, training_lines: Sequence[str] = ()) -> str:
    """The launch log's header: verdict, report, skipped checks, warnings, the exact command."""
    counts = doc.get("counts", {})
    lines = [
        f"# dsv3-preflight launch {_dt.datetime.now(_dt.timezone.utc).isoformat(timespec='seconds')}",
        f"# preflight: {doc.get('verdict')} (exit {code}; " + ", ".join(f"{v} {k}" for k, v in counts.items() if v) + ")",
        f"# report: {', '.join(str(p) for p in written) or 'not written (--no-report)'}",
    ]
    lines += [f"# {line}" for line in cause_lines(doc)]
    lines += [f"# {line}" for line in training_lines]
    for name, reason in skipped_by_request(doc).items():
        lines.append(f"# skipped by request: {name}: {reason}")
    if command is not None:
        lines += [f"# warning: {w}" for w in command.warnings]
        lines += [f"# note: {n}" for n in command.notes]
        lines += shell_text(command).rstrip("\n").splitlines()
    lines.append(f"# {decision}")
    return "\n".join(lines) + "\n"


def cause_lines(doc: Mapping[str, Any]) -> list[str]:
    """The causes that closed the gate, as the console heads them ("1. ✘ FAIL check: summary", who acts): the launch
    log says why torchrun did not start without the console (`dsv3-preflight doctor` reads them back)."""
    from dsv3_preflight.reports.rootcause import cause_heading, is_multi_node, root_causes

    out: list[str] = []
    red = [c for c in root_causes(doc.get("results") or []) if c.status in ("fail", "error")]
    for number, cause in enumerate(red, 1):
        out.append(cause_heading(number, cause, multi_node=is_multi_node(doc)))
        out.append(f"   who acts: {cause.actor_label}")
    return out


def write_launch_log(path: str | Path, text: str) -> Path:
    """Append to the launch log with secrets masked: it lies beside the reports (often on shared NFS), and a
    training command line carries `--hf_token ...` or `export WANDB_API_KEY=...` as often as not."""
    from dsv3_preflight.secrets import mask_text

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fh.write(mask_text(text))
    return path
