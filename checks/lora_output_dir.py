"""lora.output_dir: the adapter output dir is node-local and writable, and the adapters already in it are not empty."""
from __future__ import annotations

from dsv3_preflight import Result, check


@check("lora.output_dir", needs=["output_dir", "saved_adapters"], tags=["lora", "storage"], timeout=120)
def output_dir(output_dir, saved_adapters=None):
    """The adapter output dir is writable (or can be created), is not on a network filesystem; its saved adapters are sound."""
    f = {**output_dir, "adapters": (saved_adapters or {}).get("adapters", [])}
    if not f.get("configured"):
        return Result.skipped("the profile names no output_dir (--output-dir / OUTPUT_DIR)")
    path, key = f["path"], f.get("key", "output_dir")
    evidence = {k: f.get(k) for k in ("path", "key", "exists", "is_dir", "writable", "write_error", "mount", "network_fs",
                                      "parent", "parent_writable")}
    mount = f.get("mount") or {}
    if not f.get("exists"):
        parent = f.get("parent")
        if not f.get("parent_is_dir"):
            return Result.failed(f"{key} {path} cannot be created: {parent} is not a directory", evidence,
                                 f"# point {key} at a directory on a node-local disk")
        if not f.get("parent_writable"):
            return Result.failed(f"{key} {path} does not exist and cannot be created: {parent} is not writable "
                                 f"({f.get('write_error')})", evidence, _unwritable_fix(parent, f.get("write_error"), key, path))
        if f.get("network_fs"):
            return _network_fs(key, path, mount, evidence)
        return Result.passed(f"{key} {path} does not exist yet; the trainer can create it in {parent} "
                             f"(node-local {mount.get('fstype', '?')}, writable)", evidence)
    if not f.get("is_dir"):
        return Result.failed(f"{key} {path} is not a directory", evidence, f"# point {key} at a directory")
    if not f.get("writable"):
        return Result.failed(f"{key} {path} is not writable: {f.get('write_error')}", evidence,
                             _unwritable_fix(path, f.get("write_error"), key, path))
    bad = [a for a in f.get("adapters", []) if a["status"] == "fail"]
    evidence["adapters"] = f.get("adapters", [])
    if bad:
        return Result.failed(f"{len(bad)} adapters already in {path} are bad, first {bad[0]['path']}: {bad[0]['summary']}",
                             evidence, f"dsv3-preflight lora scan {path}   # then fix the cause before resuming")
    if f.get("network_fs"):
        return _network_fs(key, path, mount, evidence)
    n = len(f.get("adapters", []))
    return Result.passed(f"{key} {path} is node-local ({mount.get('fstype', '?')}) and writable"
                         + (f"; {n} saved adapters sound" if n else ""), evidence)


def _network_fs(key: str, path: str, mount: dict, evidence: dict) -> Result:
    return Result.warned(f"{key} {path} is on {mount.get('fstype')} ({mount.get('device')}): saving adapters to a "
                         "network filesystem during training stalled runs in the field", evidence,
                         "--output_dir /home/ubuntu/<run>/output   # node-local; copy to shared storage after the run")


def _unwritable_fix(directory: str, error: str | None, key: str, path: str) -> str:
    if error and "read-only" in error.lower():  # chown cannot help on a read-only filesystem
        return f"# {directory} is on a read-only filesystem: point {key} at a writable node-local disk, e.g.\n" \
               f"--output_dir /home/ubuntu/<run>/output"
    return f"sudo chown -R $(id -u):$(id -g) {directory}" + ("" if directory == path else f"   # then the trainer creates {path}")
