"""The verdict on each adapter, and on a scan (pure: facts in, plain data out).

:func:`judge_adapter` runs every rule of :mod:`.config_rules` and :mod:`.rules` through one
:class:`~dsv3_preflight.result.Findings` accumulator: each distinct problem keeps its own message, fix,
actor and cause, and the adapter's status is the worst of them (PASS when there is none). The rules are
pure and do not guard themselves: ``lora scan`` and ``lora watch`` judge each adapter through the engine's
wrapper (:mod:`dsv3_preflight.lora.run`), so a rule that raises on an input nobody foresaw is that adapter's
ERROR (a bug to report, never blamed on the job's configuration) and the others are judged as usual; inside a
check (``lora.output_dir``) it is the check's ERROR. :func:`scan_document` is what ``lora scan`` prints: the
adapters, their counts and the verdict from :func:`dsv3_preflight.result.decide`.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..result import Findings, Result, counts, decide
from . import config_rules, file_rules, rules
from .case import AdapterCase, step_of

RULES = (*file_rules.READ_RULES, *config_rules.RULES, *rules.WEIGHT_RULES, *file_rules.DATA_RULES)


def _ok_summary(case: AdapterCase) -> str:
    lay = case.layout
    if not lay:
        return "0 LoRA modules, 0 tensors, r=?"
    built = rules.peft_layers(case)
    wrapped = {m for saved in built[1].wrappers.values() for m in saved.values()} if built else set()

    def ranks(modules: Iterable[str]) -> str:
        return ",".join(map(str, sorted({lay.pairs[m]["A"][0] for m in modules if len(lay.pairs[m].get("A", ())) >= 2})))

    text = f"{len(lay.pairs)} LoRA modules, {lay.tensors} tensors"
    if len(wrapped) < len(lay.pairs):
        text += f", r={ranks(set(lay.pairs) - wrapped) or '?'}"
    if wrapped:  # a wrapper's lora_A stacks r rows per expert
        text += f"; {len(wrapped)} of them target_parameters wrappers, r x experts={ranks(wrapped) or '?'}"
    return text


def adapter_result(case: AdapterCase, *, rule_set: Iterable[Any] = RULES) -> Result:
    """The result of every rule on one adapter (pure; a rule that raises is left to the caller's wrapper)."""
    found = Findings()
    for rule in rule_set:
        found.check(rule, case)
    return found.result(_ok_summary(case))


def verdict_of(case: AdapterCase, result: Result, step: Any = None) -> dict[str, Any]:
    """One adapter's verdict as ``lora scan`` reports it: the result, and what the adapter holds."""
    lay = case.layout
    config = case.config or {}
    r = config.get("r")
    tm = config.get("target_modules")
    weights = case.weights or {}
    return {
        "path": case.path,
        "step": step,
        "format": case.format,
        "status": result.status.value,
        "summary": result.summary,
        "findings": [f.to_dict() for f in result.findings],
        "remediation": result.remediation,
        "actor": result.actor.value if result.actor else None,
        "cause": result.cause,
        "tensors": lay.tensors if lay else 0,
        "lora_modules": len(lay.pairs) if lay else 0,
        "ranks": rules.saved_ranks(lay) if lay else [],
        "config_r": r if type(r) is int else None,
        "target_modules": sorted(tm) if isinstance(tm, (list, dict)) and all(isinstance(t, str) for t in tm)
        else tm if isinstance(tm, str) else None,
        "size": weights.get("size"),
        "bytes_read": weights.get("bytes_read", 0),
        "peft_version": case.facts.get("peft_version"),   # the release judged for (None: none known)
    }


def judge_adapter(facts: Mapping[str, Any], *, rule_set: Iterable[Any] = RULES) -> dict[str, Any]:
    """The verdict on one adapter from its facts (:func:`~dsv3_preflight.lora.probes.adapter_files.read_adapter`).

    Pure: a rule that raises propagates (a check's judge is wrapped by the engine; ``lora scan`` wraps each
    adapter, see :mod:`dsv3_preflight.lora.run`)."""
    case = AdapterCase.of(facts)
    return verdict_of(case, adapter_result(case, rule_set=rule_set), facts.get("step"))


def unreadable_facts(entry: Mapping[str, str]) -> dict[str, Any]:
    """The facts of a directory the scan could not list (``{"path", "error"}`` from find_adapters)."""
    return {"path": entry["path"], "dir": entry["path"], "format": "unreadable", "step": step_of(entry["path"]),
            "dir_error": entry["error"]}


#: the one rule a directory the scan could not list is judged by
UNREADABLE_RULES = (file_rules.directory_unreadable,)


def unreadable_dir(entry: Mapping[str, str]) -> dict[str, Any]:
    """The verdict on a directory the scan could not list (``{"path", "error"}`` from find_adapters)."""
    return judge_adapter(unreadable_facts(entry), rule_set=UNREADABLE_RULES)


def scan_document(adapters: list[dict[str, Any]], *, paths: Iterable[str] = (),
                  peft_version: str | None = None) -> dict[str, Any]:
    """What ``lora scan`` reports: every adapter's verdict, the counts, the verdict of the scan, and the peft release
    it judged for (None: none known)."""
    statuses = [a["status"] for a in adapters]
    verdict = decide(statuses)
    return {"format": "dsv3-preflight/lora-scan", "paths": [str(p) for p in paths], "adapters": adapters,
            "counts": counts(statuses), "verdict": verdict.label, "exit_code": int(verdict.exit_code),
            "reason": verdict.reason, "peft_version": peft_version}


def watch_summary(adapters: list[dict[str, Any]], pending: list[str], *, peft_version: str | None = None) -> dict[str, Any]:
    """What ``lora watch`` reports when it stops: the verdicts it printed, and the saves still incomplete."""
    doc = scan_document(adapters, peft_version=peft_version)
    doc.update(format="dsv3-preflight/lora-watch", pending=list(pending))
    return doc


__all__ = ["RULES", "UNREADABLE_RULES", "adapter_result", "judge_adapter", "scan_document", "unreadable_dir",
           "unreadable_facts", "verdict_of", "watch_summary"]
