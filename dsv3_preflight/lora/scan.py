"""Find LoRA adapters in files and trees and judge each one from its header.

An adapter is ``adapter_model.safetensors`` (or the torch pickle ``adapter_model.bin``) beside its
``adapter_config.json``, as ``PeftModel.save_pretrained`` writes them, usually inside the
``checkpoint-<step>/`` directories that the HF Trainer and LLaMA-Factory write. The judge is a pure
function of the header, the parsed config and the trainer state; ``--deep`` adds a streamed pass over
the tensor data (see :mod:`dsv3_preflight.lora.deep`).
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .header import DEFAULT_HEADER_CAP, Header, read_header

WEIGHT_NAMES = ("adapter_model.safetensors", "adapter_model.bin")
CONFIG_NAME = "adapter_config.json"
JSON_CAP = 4 * 1024 * 1024  # adapter_config.json / trainer_state.json larger than this are not read
PREFIX = "base_model.model."
_LORA_KEY = re.compile(r"^(?P<module>.+)\.(?P<kind>lora_A|lora_B|lora_embedding_A|lora_embedding_B)(?:\.(?P<adapter>[^.]+))?(?:\.weight)?$")
_EXTRA_KEY = re.compile(r"\.(lora_magnitude_vector)(\.[^.]+)?(\.weight)?$")
_STEP = re.compile(r"checkpoint-(\d+)$")
MAX_NAMED = 6


@dataclass
class Finding:
    severity: str  # "fail" | "warn"
    code: str  # empty_adapter, zero_element, corrupt, truncated, unpaired, rank_mismatch, not_lora, config, target_uncovered, pickle, nan_inf, zero_lora_b, unreadable
    message: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass
class AdapterReport:
    """The verdict on one adapter (a weights file and the config beside it)."""

    path: str  # the weights file (or the directory when the weights are missing)
    format: str = "safetensors"  # safetensors | pickle | missing
    status: str = "ok"  # ok | warn | fail
    findings: list[Finding] = field(default_factory=list)
    tensors: int = 0
    lora_modules: int = 0
    ranks: list[int] = field(default_factory=list)
    zero_element: list[str] = field(default_factory=list)  # every tensor with zero elements, by full key
    config_r: int | None = None
    target_modules: list[str] | str | None = None
    step: int | None = None
    size: int = 0
    bytes_examined: int = 0

    def add(self, severity: str, code: str, message: str) -> None:
        self.findings.append(Finding(severity, code, message))
        if severity == "fail":
            self.status = "fail"
        elif severity == "warn" and self.status == "ok":
            self.status = "warn"

    @property
    def summary(self) -> str:
        if not self.findings:
            r = ",".join(map(str, self.ranks)) or "?"
            return f"{self.lora_modules} LoRA modules, {self.tensors} tensors, r={r}"
        worst = [f for f in self.findings if f.severity == "fail"] or self.findings
        more = f" (+{len(self.findings) - 1} more)" if len(self.findings) > 1 else ""
        return worst[0].message + more

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["summary"] = self.summary
        return d


# --------------------------------------------------------------------------------------------- discovery
def find_adapters(paths: Iterable[str | os.PathLike[str]]) -> tuple[list[Path], list[str]]:
    """Weights files to judge (and adapter dirs whose weights are missing), plus paths that do not exist.

    A file is taken as given; a directory is walked (symlinks not followed) for ``adapter_model.*``
    and for ``adapter_config.json`` without weights beside it. Sorted by checkpoint step, then path.
    """
    found: list[Path] = []
    missing: list[str] = []
    for raw in paths:
        p = Path(raw)
        if p.is_file():
            found.append(p)
        elif p.is_dir():
            for root, dirs, files in os.walk(p, onerror=None):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                names = set(files)
                weights = [n for n in WEIGHT_NAMES if n in names]
                for n in weights[:1]:  # safetensors wins when both are present (peft loads it first)
                    found.append(Path(root) / n)
                if not weights and CONFIG_NAME in names:
                    found.append(Path(root))
        else:
            missing.append(str(raw))
    unique = list(dict.fromkeys(found))
    return sorted(unique, key=lambda f: (_step_of(f) is None, _step_of(f) or 0, str(f))), missing


def _step_of(path: Path) -> int | None:
    for part in reversed(path.parts):
        m = _STEP.search(part)
        if m:
            return int(m.group(1))
    return None


def _read_json(path: Path) -> tuple[Any, str | None]:
    """(data, None) or (None, why): missing, too large, unreadable or invalid JSON."""
    try:
        size = path.stat().st_size
        if size > JSON_CAP:
            return None, f"{path.name} is {size} bytes, beyond the {JSON_CAP}-byte cap"
        with open(path, "rb") as fh:
            text = fh.read(JSON_CAP + 1)
        return json.loads(text), None
    except FileNotFoundError:
        return None, f"{path.name} is missing"
    except OSError as exc:
        return None, f"{path.name} is unreadable: {exc.strerror or exc}"
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"{path.name} is not valid JSON: {exc}"


def parse_adapter_config(directory: Path) -> tuple[Any, str | None]:
    """The adapter config parsed by peft's own config class, or why it cannot be."""
    data, why = _read_json(directory / CONFIG_NAME)
    if why:
        return None, why
    if not isinstance(data, dict):
        return None, f"{CONFIG_NAME} is not a JSON object"
    from peft import PeftConfig

    try:
        cfg = PeftConfig.from_peft_type(**data)
    except Exception as exc:  # noqa: BLE001 - peft's complaint is the finding
        return None, f"{CONFIG_NAME} is rejected by peft: {type(exc).__name__}: {exc}"
    return cfg, None


def trainer_step(directory: Path) -> int | None:
    """global_step from trainer_state.json beside the adapter, else the checkpoint-<step> name."""
    data, why = _read_json(directory / "trainer_state.json")
    if not why and isinstance(data, dict) and isinstance(data.get("global_step"), int):
        return data["global_step"]
    return None


# --------------------------------------------------------------------------------------------- the judge
def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _named(items: list[str], limit: int = MAX_NAMED) -> str:
    """A short list for a one-line summary (peft's "base_model.model." prefix dropped; the evidence keeps all)."""
    items = [i.removeprefix(PREFIX) for i in items]
    head = ", ".join(items[:limit])
    return head + (f" … (+{len(items) - limit} more)" if len(items) > limit else "")


def _expected_rank(module: str, cfg: Any) -> int | None:
    r = getattr(cfg, "r", None)
    for pattern, value in (getattr(cfg, "rank_pattern", None) or {}).items():
        if re.match(rf"(.*\.)?({pattern})$", module):
            return int(value)
    return r


def _target_covered(target: str, modules: set[str]) -> bool:
    return any(m == target or m.endswith("." + target) for m in modules)


def judge_tensors(report: AdapterReport, tensors: dict[str, dict[str, Any]], cfg: Any) -> None:
    """Judge the tensor table of one adapter (names, shapes) against its parsed config (or None)."""
    report.tensors = len(tensors)
    if not tensors:
        report.add("fail", "empty_adapter", "empty adapter: the file holds no tensors (only a header/metadata) — "
                   "the ZeRO-3 save did not gather the LoRA weights, or lora_target matched no module")
        return
    zero = [k for k, v in tensors.items() if _numel(v["shape"]) == 0]
    if zero:
        shapes = sorted({str(tensors[k]["shape"]) for k in zero})
        whole = " (every tensor)" if len(zero) == len(tensors) else ""
        report.add("fail", "zero_element", f"{len(zero)} of {len(tensors)} tensors have zero elements{whole}, shape "
                   f"{'/'.join(shapes)}: partitioned ZeRO-3 parameters saved without gathering: {_named(sorted(zero), 3)}")
        report.zero_element = sorted(zero)
    pairs: dict[str, dict[str, list[int]]] = {}
    other: list[str] = []
    modules_to_save = set(getattr(cfg, "modules_to_save", None) or [])
    for name, info in tensors.items():
        m = _LORA_KEY.match(name)
        if m:
            kind = m.group("kind").replace("lora_embedding_", "lora_")
            pairs.setdefault(m.group("module"), {})[kind] = info["shape"]
        elif _EXTRA_KEY.search(name) or any(f".{s}." in f".{name}" for s in modules_to_save):
            continue
        else:
            other.append(name)
    report.lora_modules = len(pairs)
    if other:
        report.add("fail", "not_lora", f"{len(other)} keys are not LoRA pairs (lora_A/lora_B): {_named(sorted(other))}")
    unpaired = sorted(f"{mod}.{'lora_A' if 'lora_A' in kinds else 'lora_B'} without its "
                      f"{'lora_B' if 'lora_A' in kinds else 'lora_A'}" for mod, kinds in pairs.items() if len(kinds) == 1)
    if unpaired:
        report.add("fail", "unpaired", f"{len(unpaired)} LoRA modules are unpaired: {_named(unpaired)}")
    ranks: set[int] = set()
    mismatched: list[str] = []
    for mod, kinds in sorted(pairs.items()):
        a, b = kinds.get("lora_A"), kinds.get("lora_B")
        ra = a[0] if a and len(a) >= 2 else None
        rb = b[-1] if b and len(b) >= 2 else None
        if ra is not None and rb is not None and ra != rb:
            mismatched.append(f"{mod} (lora_A r={ra}, lora_B r={rb})")
            continue
        r = ra if ra is not None else rb
        if r is None or r == 0:
            continue
        ranks.add(r)
        want = _expected_rank(mod.removeprefix(PREFIX), cfg) if cfg is not None else None
        fused = mod.endswith("experts") and want and r % want == 0  # peft's ParamWrapper: r × experts rows
        if want is not None and r != want and not fused:
            mismatched.append(f"{mod} (r={r}, adapter_config r={want})")
    report.ranks = sorted(ranks)
    if mismatched:
        report.add("fail", "rank_mismatch", f"{len(mismatched)} LoRA modules disagree with the rank in "
                   f"{CONFIG_NAME}: {_named(mismatched)}")
    if cfg is None:
        return
    targets = getattr(cfg, "target_modules", None)
    names = {m.removeprefix(PREFIX) for m in pairs}
    if isinstance(targets, (set, list, tuple)) and targets:
        uncovered = sorted(t for t in targets if not _target_covered(t, names))
        if uncovered and len(uncovered) == len(targets):
            report.add("fail", "target_uncovered", f"no saved key covers any target_modules: {_named(uncovered)}")
        elif uncovered:
            report.add("fail", "target_uncovered", f"target_modules {_named(uncovered)} are covered by no key (only "
                       f"{_named(sorted(t for t in targets if t not in uncovered))} were adapted): these names are "
                       "not modules of the model")
    elif isinstance(targets, str) and targets not in ("all-linear",):
        try:
            if not any(re.fullmatch(targets, n) for n in names):
                report.add("fail", "target_uncovered", f"no saved key matches the target_modules regex {targets!r}")
        except re.error as exc:
            report.add("fail", "config", f"target_modules regex {targets!r} is invalid: {exc}")


def _judge_config(report: AdapterReport, directory: Path) -> Any:
    cfg, why = parse_adapter_config(directory)
    if why:
        report.add("fail", "config", why)
        return None
    report.config_r = getattr(cfg, "r", None)
    tm = getattr(cfg, "target_modules", None)
    report.target_modules = sorted(tm) if isinstance(tm, (set, list, tuple)) else tm
    if getattr(cfg, "peft_type", None) is not None and str(getattr(cfg.peft_type, "value", cfg.peft_type)) not in ("LORA",):
        report.add("warn", "config", f"{CONFIG_NAME} is a {cfg.peft_type} config, not LoRA")
    return cfg


def _pickle_refusal(exc: BaseException) -> str:
    """The finding for a pickle torch.load(weights_only=True) refused: its specific reason, never torch's
    boilerplate suggesting a re-run with weights_only=False (which executes whatever the pickle holds)."""
    text = str(exc)
    if type(exc).__name__ == "UnpicklingError" and "weights_only" in text:
        boiler = ("Weights only load failed", "Please file an issue", "Check the documentation", "Re-running `torch.load`")
        reason = " ".join(l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith(boiler))
        return ("torch pickle refused by weights_only=True: it is not a plain tensor dict (corrupt, or it holds "
                f"objects/code; do not load it with weights_only=False unless you trust it): {reason[:200] or 'no reason given'}")
    return f"torch pickle not loadable with weights_only=True: {type(exc).__name__}: {(text.splitlines() or [''])[0][:200]}"


def _pickle_tensors(path: Path, report: AdapterReport) -> dict[str, dict[str, Any]] | None:
    """Names and shapes from a torch pickle, loaded only with weights_only=True (memory-mapped when possible)."""
    import torch

    try:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as exc:
            if "mmap" not in str(exc):
                raise
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - a refused or broken pickle is a finding
        report.add("fail", "corrupt", _pickle_refusal(exc))
        return None
    if not isinstance(state, dict):
        report.add("fail", "corrupt", f"torch pickle holds a {type(state).__name__}, not a state dict")
        return None
    out = {}
    for k, v in state.items():
        if isinstance(v, torch.Tensor):
            out[str(k)] = {"dtype": str(v.dtype).removeprefix("torch."), "shape": list(v.shape)}
        else:
            report.add("fail", "not_lora", f"pickle entry {k!r} is a {type(v).__name__}, not a tensor")
    return out


def scan_adapter(path: str | os.PathLike[str], *, cap: int = DEFAULT_HEADER_CAP, deep: bool = False) -> AdapterReport:
    """Judge one adapter: a weights file (its directory holds the config) or a directory without weights."""
    p = Path(path)
    directory = p if p.is_dir() else p.parent
    report = AdapterReport(path=str(p), step=_step_of(p))
    if p.is_dir():
        report.format = "missing"
        _judge_config(report, directory)
        report.add("fail", "empty_adapter", f"{CONFIG_NAME} without adapter weights (no {' or '.join(WEIGHT_NAMES)})")
        return report
    if p.suffix == ".bin" or p.suffix == ".pt":
        report.format = "pickle"
        try:
            report.size = p.stat().st_size
        except OSError as exc:
            report.add("fail", "unreadable", f"cannot read: {exc.strerror or exc}")
            return report
        report.bytes_examined = report.size
        report.add("warn", "pickle", "torch pickle adapter (adapter_model.bin): prefer safetensors (save_safetensors=true)")
        cfg = _judge_config(report, directory)
        tensors = _pickle_tensors(p, report)
        if tensors is not None:
            judge_tensors(report, tensors, cfg)
        return report
    header: Header = read_header(p, cap)
    report.size, report.bytes_examined = header.size, header.bytes_examined
    if header.error:
        code = "unreadable" if header.unreadable else ("truncated" if header.error.startswith("truncated") else "corrupt")
        report.add("fail", code, ("corrupt: " if code != "unreadable" else "") + header.error)
        return report
    is_adapter = p.name in WEIGHT_NAMES or (directory / CONFIG_NAME).exists()
    cfg = _judge_config(report, directory) if is_adapter else None
    judge_tensors(report, header.tensors, cfg)
    if deep and report.status != "fail":
        from .deep import deep_scan

        deep_scan(p, header.tensors, report, trainer_step(directory))
    return report


def scan_paths(paths: Iterable[str | os.PathLike[str]], *, cap: int = DEFAULT_HEADER_CAP, deep: bool = False) -> tuple[list[AdapterReport], list[str]]:
    """Reports for every adapter found under ``paths``, and the paths that do not exist."""
    found, missing = find_adapters(paths)
    return [scan_adapter(f, cap=cap, deep=deep) for f in found], missing
