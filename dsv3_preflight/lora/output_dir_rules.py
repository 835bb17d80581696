"""The rules of lora.output_dir (pure: facts in, findings out): the adapter output dir is node-local and writable, and the adapters already in it are sound."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from dsv3_preflight.host.facts import OutputDirFact
from dsv3_preflight.lora import causes, fixes
from dsv3_preflight.result import Actor, Finding, failure, warning

PSEUDO_FS = ("proc", "sysfs", "devtmpfs", "devpts", "cgroup", "cgroup2", "debugfs", "tracefs", "securityfs", "pstore",
             "bpf", "configfs", "fusectl", "mqueue", "hugetlbfs", "autofs", "binfmt_misc", "efivarfs")


EVIDENCE_KEYS = ("path", "setting", "exists", "is_dir", "writable", "write_error", "mount", "network_fs", "parent",
                 "parent_writable", "free_bytes", "total_bytes")


def setting_key(facts: OutputDirFact) -> str:
    """The profile setting that named the directory (output_dir or checkpoint_dir)."""
    key = facts.get("setting")
    return key if key in ("output_dir", "checkpoint_dir") else "output_dir"


#: what a node-local output dir asks of a multi-node ZeRO-3 run: by default DeepSpeed and the Trainer write a
#: checkpoint's shared files (the ``latest`` tag, the model states) on the first node only, so the other nodes could
#: not resume from their own disks. ``save_on_each_node`` makes every node write them (transformers then sets
#: DeepSpeed's ``checkpoint.use_node_local_storage``: transformers/integrations/deepspeed.py)
MULTI_NODE_LOCAL = ("# several nodes: also pass --save_on_each_node true to the trainer (LLaMA-Factory: save_on_each_node: "
                    "true), so each node's disk holds a whole checkpoint of its ranks (DeepSpeed's "
                    "checkpoint.use_node_local_storage), and resume on the same nodes with the same --node-rank")


def elsewhere_fix(facts: OutputDirFact, directory: str, why: str) -> str:
    """Point the output dir at a writable node-local disk (nothing to repair where it is)."""
    key = setting_key(facts)
    return "\n".join([fixes.comment(f"{directory} {why}: point {key} at a writable node-local disk"),
                      f'mkdir -p "${{OUTPUT_DIR:?a directory on a node-local disk, e.g. /local/run1/out}}"   '
                      f'# then pass --{key} "$OUTPUT_DIR" to the trainer'])


def size(n: int | None) -> str:
    """Bytes as a person reads them: 0 B, 512.0 MiB, 1.8 TiB."""
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def is_full(facts: OutputDirFact) -> bool:
    return "no space left" in (facts.get("write_error") or "").lower()


def mount_field(facts: OutputDirFact, key: Literal["device", "mountpoint", "fstype"]) -> str | None:
    """One field of the mount holding the directory, or None when the mount is unknown."""
    mount = facts.get("mount")
    return mount.get(key) if mount else None


def room(facts: OutputDirFact) -> str:
    """' (0 B free of 931.5 GiB on /dev/nvme0n1p1, mounted at /data)' from the statvfs of the directory's disk."""
    if facts.get("free_bytes") is None:
        return ""
    device, mountpoint = mount_field(facts, "device"), mount_field(facts, "mountpoint")
    where = f" on {device}" if device else ""
    where += f", mounted at {mountpoint}" if mountpoint else ""
    return f" ({size(facts.get('free_bytes'))} free of {size(facts.get('total_bytes'))}{where})"


def free_space_fix(facts: OutputDirFact, directory: str) -> str:
    """A full disk: see what takes the room, remove old checkpoints (or keep fewer), or move the output dir."""
    d = fixes.quote(directory)
    mountpoint = mount_field(facts, "mountpoint") or directory
    return "\n".join([
        f"df -h {d}   # {size(facts.get('free_bytes'))} free of {size(facts.get('total_bytes'))}",
        f"du -xsh {d}/* 2>/dev/null | sort -h | tail -n 20   # what takes the room in {directory}",
        f"du -xh --max-depth=2 {fixes.quote(mountpoint)} 2>/dev/null | sort -h | tail -n 20   # and on the whole disk",
        f"ls -d {d}/checkpoint-* 2>/dev/null | sort -V | head -n -2   # every checkpoint but the last two",
        fixes.comment("remove the old checkpoints you no longer need (rm -rf DIR), and keep fewer from now on: "
                      "the trainer's --save_total_limit 2"),
        fixes.comment(f"or move it: point {setting_key(facts)} at a node-local disk with room"),
        elsewhere_fix(facts, directory, "").splitlines()[-1]])


def unwritable_fix(facts: OutputDirFact, directory: str) -> tuple[str, Actor]:
    """chown where permissions are the reason; elsewhere for a read-only or pseudo filesystem (chown cannot help);
    room made on a full disk (or elsewhere)."""
    error = (facts.get("write_error") or "").lower()
    fstype = mount_field(facts, "fstype") or ""
    if is_full(facts):
        return free_space_fix(facts, directory), Actor.JOB
    if "read-only" in error:
        return elsewhere_fix(facts, directory, "is on a read-only filesystem"), Actor.JOB
    if fstype in PSEUDO_FS:
        return elsewhere_fix(facts, directory, f"is on {fstype}, a kernel filesystem, not a disk"), Actor.JOB
    if "permission" in error or "not permitted" in error:
        path = facts["path"]
        then = "" if directory == path else "   " + fixes.comment(f"then the trainer creates {path}")
        return f"sudo chown -R \"$(id -u):$(id -g)\" {fixes.quote(directory)}{then}", Actor.NODE
    return elsewhere_fix(facts, directory, f"cannot be written ({facts.get('write_error')})"), Actor.JOB


def can_be_created(facts: OutputDirFact) -> Finding | None:
    """A missing output dir is fine when its nearest existing parent is a writable directory (the trainer creates it)."""
    if facts.get("exists"):
        return None
    key, path, parent = setting_key(facts), facts["path"], facts.get("parent")
    if not facts.get("parent_is_dir"):
        return failure(f"{key} {path} cannot be created: {parent} is not a directory",
                       elsewhere_fix(facts, str(parent), "is not a directory"), actor=Actor.JOB,
                       cause=causes.OUTPUT_DIR_UNWRITABLE)
    if not facts.get("parent_writable"):
        fix, actor = unwritable_fix(facts, str(parent))
        return failure(f"{key} {path} does not exist and cannot be created: {parent} is not writable "
                       f"({facts.get('write_error')}){room(facts) if is_full(facts) else ''}", fix, actor=actor,
                       cause=causes.OUTPUT_DIR_UNWRITABLE)
    return None


def is_writable_dir(facts: OutputDirFact) -> Finding | None:
    if not facts.get("exists"):
        return None
    key, path = setting_key(facts), facts["path"]
    if not facts.get("is_dir"):
        return failure(f"{key} {path} is not a directory", elsewhere_fix(facts, path, "is not a directory"),
                       actor=Actor.JOB, cause=causes.OUTPUT_DIR_UNWRITABLE)
    if not facts.get("writable"):
        fix, actor = unwritable_fix(facts, path)
        return failure(f"{key} {path} is not writable: {facts.get('write_error')}"
                       f"{room(facts) if is_full(facts) else ''}", fix, actor=actor,
                       cause=causes.OUTPUT_DIR_UNWRITABLE)
    return None


def node_local(facts: OutputDirFact) -> Finding | None:
    if not facts.get("network_fs") or (facts.get("exists") and not facts.get("writable")):
        return None
    fstype, device = mount_field(facts, "fstype"), mount_field(facts, "device")
    return warning(f"{setting_key(facts)} {facts['path']} is on {fstype} ({device}): saving adapters "
                   "to a network filesystem during training stalled runs in the field",
                   "\n".join([elsewhere_fix(facts, facts["path"], f"is on {fstype}; save on a local disk and copy "
                                                                 "to shared storage after the run"), MULTI_NODE_LOCAL]),
                   actor=Actor.JOB, cause=causes.OUTPUT_DIR_NETWORK_FS)


def saved_adapters_sound(verdicts: list[dict[str, Any]], facts: OutputDirFact) -> list[Finding]:
    """Each bad adapter already in the output dir, with its own reason (a resumed run would start from it)."""
    found = []
    for v in verdicts:
        if v["status"] != "fail":
            continue
        shown = v["path"].removeprefix(facts["path"].rstrip("/") + "/")
        lead: Mapping[str, Any] = next((f for f in v["findings"] if f["status"] == "fail"), {})
        found.append(failure(f"saved adapter {shown}: {lead.get('message') or v['summary']}",
                             "\n".join(x for x in [lead.get("fix"), f"{fixes.rescan(facts['path'])}   "
                                                   "# every adapter of the run, before resuming from one"] if x),
                             actor=Actor.JOB, cause=lead.get("cause") or causes.SAVED_ADAPTER_BAD))
    return found
