"""Reading Fabric Manager's output: its version line and the known failure lines of its log.

Line formats from nv-fabricmanager's own messages as users posted them (journalctl and
/var/log/fabricmanager.log), for example NVIDIA/gpu-operator#544 and siderolabs/pkgs#720:
"fabric manager NVIDIA GPU driver interface version 530.30.02 don't match with driver version
530.41.03. Please update with matching NVIDIA driver package."
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

VERSION = re.compile(r"\b(\d{3,}\.\d+(?:\.\d+)?)\b")

#: (kind, regex, what it means)
KNOWN_FAILURES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("version_mismatch",
     re.compile(r"driver interface version (?P<fm>\d+\.\d+(?:\.\d+)?) (?:don.t|doesn.t|does not) match with driver version (?P<driver>\d+\.\d+(?:\.\d+)?)", re.I),
     "Fabric Manager and the driver are different versions; FM refuses to start"),
    ("config_invalid",
     re.compile(r"fabric manager config file item: (?P<item>\S+) has an invalid value", re.I),
     "fabricmanager.cfg has an invalid value"),
    ("nvlsm_missing",
     re.compile(r"NV_WARN_NOTHING_TO_DO", re.I),
     "FM found nothing to do: on NVLink 5 systems the NVLink subnet manager (NVLSM) is missing"),
    ("nvswitch_open_failed",
     re.compile(r"(failed to open|request to query NVSwitch device information from NVSwitch driver failed)", re.I),
     "FM could not talk to the NVSwitch driver"),
    ("training_failed",
     re.compile(r"(NVLink training failed|failed to train NVLink)", re.I),
     "NVLink training failed: a link or a board problem"),
    ("gpu_not_found",
     re.compile(r"(detected GPU count|number of GPUs).*(not match|mismatch)", re.I),
     "FM saw a different number of GPUs than the topology expects"),
)


def parse_version(text: str | None) -> str | None:
    """The first driver-like version (535.129.03) in ``nv-fabricmanager --version`` or package output."""
    if not text:
        return None
    m = VERSION.search(text)
    return m.group(1) if m else None


def findings(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Known failure lines, newest last: ``{kind, line, meaning, ...named groups}``."""
    found = []
    for line in lines:
        for kind, pattern, meaning in KNOWN_FAILURES:
            m = pattern.search(line)
            if m:
                found.append({"kind": kind, "line": line.strip(), "meaning": meaning, **m.groupdict()})
                break
    return found
