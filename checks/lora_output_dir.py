"""lora.output_dir: the adapter output dir is node-local and writable, and the adapters already in it are sound."""
from __future__ import annotations

from dsv3_preflight import Result, check
from dsv3_preflight.lora.output_dir_rules import (
    EVIDENCE_KEYS,
    can_be_created,
    is_writable_dir,
    node_local,
    saved_adapters_sound,
    setting_key,
)
from dsv3_preflight.lora.verdict import judge_adapter, unreadable_dir
from dsv3_preflight.result import Findings


@check("lora.output_dir", needs=["output_dir", "saved_adapters"], tags=["lora", "storage"], timeout=120)
def output_dir(output_dir, saved_adapters=None):
    """The adapter output dir is writable (or can be created), is not on a network filesystem; its saved adapters are sound."""
    f = output_dir
    if not f.get("configured"):
        return Result.skipped("the profile names no output_dir (--output-dir / OUTPUT_DIR)")
    saved = saved_adapters or {}
    verdicts = [judge_adapter(a) for a in saved.get("adapters") or []]
    verdicts += [unreadable_dir(u) for u in saved.get("unreadable") or []]
    evidence = {k: f.get(k) for k in EVIDENCE_KEYS}
    evidence["adapters"] = [{k: v[k] for k in ("path", "step", "status", "summary")} for v in verdicts]
    evidence["adapters_found"] = saved.get("total", len(verdicts))
    found = Findings()
    found.check(can_be_created, f)
    found.check(is_writable_dir, f)
    found.check(saved_adapters_sound, verdicts, f)
    found.check(node_local, f)
    key, path, mount = setting_key(f), f["path"], f.get("mount") or {}
    if not f.get("exists"):
        ok = (f"{key} {path} does not exist yet; the trainer can create it in {f.get('parent')} "
              f"(node-local {mount.get('fstype', '?')}, writable)")
    else:
        n = len(verdicts)
        ok = f"{key} {path} is node-local ({mount.get('fstype', '?')}) and writable" + (f"; {n} saved adapters sound" if n else "")
    return found.result(ok, evidence)
