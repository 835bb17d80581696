"""GPU memory health rules: uncorrectable ECC errors, row remapping (Ampere and newer), page retirement (older GPUs).

Pure functions over the ``nvml`` fact's GPUs. What they follow is NVIDIA's memory error management: an
uncorrectable error marks its row for remapping, which takes effect at the next GPU reset ("Pending"); a
remapping that fails means the GPU is out of spare rows and goes back to the vendor
(https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/index.html). Pending work shares the root cause
``gpu.reset_pending:<bus id>`` with gpu.reset_pending and gpu.xid, so one reset card covers them.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dsv3_preflight.result import Actor, Finding, failure, warning

from . import remedies
from .common import gpu_label, gpu_list, gpu_target, replace_cause, reset_cause
from .facts import Gpu

Gpus = Sequence[Gpu]


def _rows(g: Gpu) -> Mapping[str, Any]:
    return g.get("remapped_rows") or {}


def rule_uncorrectable_since_boot(gpus: Gpus) -> list[Finding]:
    """Volatile uncorrectable ECC errors: memory the job would use returned bad data since the last reset."""
    return [failure(f"{gpu_label(g)}: {g['ecc_uncorrected_volatile']} uncorrectable ECC errors since boot",
                    remedies.reset_gpus([g], "clears the error and applies the remapping it triggered"),
                    actor=Actor.NODE, cause=reset_cause(g))
            for g in gpus if (g.get("ecc_uncorrected_volatile") or 0) > 0]


def rule_uncorrectable_lifetime(gpus: Gpus) -> Finding | None:
    """Uncorrectable errors in the GPU's lifetime but none since boot: history to watch, not a blocker."""
    old = [g for g in gpus if (g.get("ecc_uncorrected_aggregate") or 0) > 0 and not g.get("ecc_uncorrected_volatile")]
    if not old:
        return None
    return warning("uncorrectable ECC errors in the GPU's lifetime on " + ", ".join(
        f"{gpu_label(g)} ({g['ecc_uncorrected_aggregate']})" for g in old),
        "\n".join(f"nvidia-smi -q -i {gpu_target(g)} -d ECC,ROW_REMAPPER   # {gpu_label(g)}: does the count grow between runs?"
                  for g in old), actor=Actor.NODE)


def rule_ecc_enabled(gpus: Gpus) -> Finding | None:
    off = [g for g in gpus if g.get("ecc_enabled") is False]
    if not off:
        return None
    return warning(f"ECC is disabled on {gpu_list(off)}: memory errors go unnoticed and rows are not remapped",
                   "\n".join([f"nvidia-smi -i {gpu_target(g)} -e 1" for g in off] + ["reboot   # ECC mode changes at the next boot"]),
                   actor=Actor.NODE)


def rule_remap_failure(gpus: Gpus) -> list[Finding]:
    """A failed row remapping: the GPU has no spare rows left for the failing memory (NVIDIA: an RMA criterion)."""
    return [failure(f"{gpu_label(g)}: row remapping failed: the GPU is out of spare memory rows and needs replacing",
                    remedies.replace_gpus([g], "row remapping failure"), actor=Actor.NODE, cause=replace_cause(g))
            for g in gpus if _rows(g).get("failure")]


def rule_remap_pending(gpus: Gpus) -> list[Finding]:
    """Rows marked for remapping are swapped in only by a GPU reset. After an uncorrectable error that must happen
    before the job (the row's data was lost; only page offlining keeps it out of use until then): FAIL. Rows
    remapped for correctable errors still read correctly: reset when convenient (WARN)."""
    found = []
    for g in gpus:
        rows = _rows(g)
        if not rows.get("pending") or rows.get("failure"):
            continue
        counts = f"({rows.get('uncorrectable', 0)} rows remapped for uncorrectable, {rows.get('correctable', 0)} for correctable errors)"
        fix = remedies.reset_gpus([g], "applies the pending row remapping")
        if rows.get("uncorrectable"):
            found.append(failure(f"{gpu_label(g)}: a row remapping after uncorrectable errors is pending until the GPU is "
                                 f"reset {counts}", fix, actor=Actor.NODE, cause=reset_cause(g)))
        else:
            found.append(warning(f"{gpu_label(g)}: a row remapping is pending until the GPU is reset {counts}: reset it "
                                 "when convenient", fix, actor=Actor.NODE, cause=reset_cause(g)))
    return found


def rule_retired_pages_pending(gpus: Gpus) -> list[Finding]:
    """Older GPUs (page retirement): pages waiting to be retired at the next reset or driver reload."""
    return [failure(f"{gpu_label(g)}: retired memory pages are pending until the GPU is reset",
                    remedies.reset_gpus([g], "retires the pending pages"), actor=Actor.NODE, cause=reset_cause(g))
            for g in gpus if g.get("retired_pages_pending")]


def rule_retired_pages(gpus: Gpus) -> Finding | None:
    """Pages already retired (older GPUs): the count to watch; they are out of use, so no blocker."""
    retired = [(g, (g.get("retired_pages_dbe") or 0) + (g.get("retired_pages_sbe") or 0)) for g in gpus]
    retired = [(g, n) for g, n in retired if n]
    if not retired:
        return None
    return warning("retired memory pages on " + ", ".join(f"{gpu_label(g)} ({n})" for g, n in retired),
                   "\n".join(f"nvidia-smi -q -i {gpu_target(g)} -d PAGE_RETIREMENT   # {gpu_label(g)}: does the count grow?"
                             for g, _ in retired), actor=Actor.NODE)


RULES = (rule_uncorrectable_since_boot, rule_remap_failure, rule_remap_pending, rule_retired_pages_pending,
         rule_uncorrectable_lifetime, rule_ecc_enabled, rule_retired_pages)


#: the NVML fields gpu.memory_errors shows as evidence
FIELDS = ("ecc_enabled", "ecc_uncorrected_volatile", "ecc_uncorrected_aggregate", "remapped_rows",
          "retired_pages_dbe", "retired_pages_sbe", "retired_pages_pending")
