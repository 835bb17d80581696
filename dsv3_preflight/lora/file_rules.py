"""The rules on an adapter's files themselves (pure): can they be read, are they whole, and, with ``--deep``, what
their data holds. The rules on the keys and tensors the header declares are in :mod:`.rules`; both return findings
for one :class:`~dsv3_preflight.lora.case.AdapterCase`.
"""
from __future__ import annotations

from ..result import Actor, Finding, failure, warning
from . import causes, fixes
from .case import CONFIG_NAME, AdapterCase
from .rules import gather_fix, keys_fail, named


def directory_unreadable(case: AdapterCase) -> Finding | None:
    """A checkpoint directory the scan could not list is reported, never skipped."""
    why = case.facts.get("dir_error")
    if not why:
        return None
    return failure(f"cannot list this directory: {why}: its adapters cannot be judged",
                   f"ls -ld -- {fixes.quote(case.path)}   # then make it readable to this user (or scan as its owner)",
                   actor=Actor.JOB, cause=causes.ADAPTER_UNREADABLE)


def unreadable(case: AdapterCase) -> Finding | None:
    w = case.weights
    if not w or w.get("kind") != "unreadable":
        return None
    return failure(f"cannot read the weights: {w.get('error')}",
                   f"ls -la -- {fixes.quote(case.path)}   # a regular file readable by this user is what peft loads",
                   actor=Actor.JOB, cause=causes.ADAPTER_UNREADABLE)


def truncated(case: AdapterCase) -> Finding | None:
    w = case.weights
    if not w or w.get("kind") != "truncated":
        return None
    return failure(f"corrupt: {w.get('error')} (an interrupted save, a full disk, or a copy still running)",
                   "\n".join([fixes.comment("resume from the previous checkpoint, or save this one again; then:"),
                              fixes.rescan(case.path)]), actor=Actor.JOB, cause=causes.ADAPTER_CORRUPT)


def corrupt(case: AdapterCase) -> Finding | None:
    w = case.weights
    if not w or w.get("kind") != "corrupt":
        return None
    message = w.get("error") or "corrupt"
    return failure(message if message.startswith(("corrupt", "torch pickle")) else f"corrupt header: {message}",
                   "\n".join([fixes.comment("the file is damaged: resume from the previous checkpoint, or save this "
                                            "one again; then:"), fixes.rescan(case.path)]),
                   actor=Actor.JOB, cause=causes.ADAPTER_CORRUPT)


def weights_missing(case: AdapterCase) -> Finding | None:
    if case.format != "missing":
        return None
    return failure(f"{CONFIG_NAME} without adapter weights (no adapter_model.safetensors or adapter_model.bin)",
                   f"ls -la -- {fixes.quote(case.directory)}   # the save stopped before the weights were written",
                   actor=Actor.JOB, cause=causes.ADAPTER_CORRUPT)


def pickle_format(case: AdapterCase) -> list[Finding]:
    if case.format != "pickle" or not case.weights:
        return []
    found = [warning("torch pickle adapter (adapter_model.bin): prefer safetensors (save_safetensors=true)",
                     fixes.comment("pass --save_safetensors true to the trainer (the default in recent transformers)"),
                     actor=Actor.JOB)]
    odd = case.weights.get("non_tensors") or []
    if odd:
        found.append(keys_fail(f"{len(odd)} pickle entries are not tensors: {named(odd)}", case))
    return found


def deep_readable(case: AdapterCase) -> Finding | None:
    deep = case.facts.get("deep")
    if not deep or not deep.get("error"):
        return None
    return failure(f"--deep: {deep['error']}", fixes.rescan(case.path, deep=True), actor=Actor.JOB,
                   cause=causes.ADAPTER_CORRUPT)


def nan_inf(case: AdapterCase) -> Finding | None:
    deep = case.facts.get("deep") or {}
    if not deep.get("nan_inf"):
        return None
    return failure(f"{len(deep['nan_inf'])} tensors hold NaN or Inf: {named(deep['nan_inf'])}",
                   fixes.comment("the training diverged before this save: resume from an earlier checkpoint with a "
                                 "lower learning rate (or bf16 instead of fp16)"), actor=Actor.JOB)


def zero_lora_b(case: AdapterCase) -> Finding | None:
    deep = case.facts.get("deep") or {}
    zero, total, step = deep.get("zero_lora_b") or [], deep.get("lora_b") or 0, case.facts.get("trainer_step")
    if not zero or not step:
        return None
    every = len(zero) == total
    which = f"every lora_B ({total})" if every else f"{len(zero)} of {total} lora_B"
    names = "" if every else f": {named(zero, 3)}"
    return failure(f"{which} all zeros after {step} training steps (trainer_state.json): the saved weights are the "
                   f"untrained initial ones{names}", gather_fix(), actor=Actor.JOB)


#: the rules on reading the files, shown first
READ_RULES = (directory_unreadable, unreadable, truncated, corrupt, weights_missing)
#: the rules on the pickle format and on the data (--deep), shown last
DATA_RULES = (pickle_format, deep_readable, nan_inf, zero_lora_b)
