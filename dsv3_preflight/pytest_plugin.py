"""`pytest checks/`: every registered check becomes a test item on this machine.

PASS → passed; WARN → passed with a warning; SKIP → skipped with its reason; FAIL/ERROR → failed,
showing summary, evidence and remediation. The items run through the same engine as the CLI, on one
fact store per pytest process, so each probe runs once per process (once per xdist worker).
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from .options import cli_profile_values, profile_option_specs

CHECKS_DIR = Path(__file__).resolve().parent.parent / "checks"


class PreflightWarning(UserWarning):
    """A check returned WARN."""


class CheckFailed(Exception):
    def __init__(self, result) -> None:
        super().__init__(result.summary)
        self.result = result


def addoption(parser) -> None:
    group = parser.getgroup("dsv3-preflight", "dsv3-preflight profile (same as the CLI's)")
    for flag, kwargs in profile_option_specs():
        if flag in ("--profile", "--config"):
            flag = "--preflight-" + flag[2:]
        group.addoption(flag, **kwargs)
    group.addoption("--checks-dir", action="append", default=[], metavar="DIR", help="also load the checks in DIR")
    group.addoption("--preflight-json", default=None, metavar="PATH", help="also write a dsv3-preflight result document")
    group.addoption("--no-plugins", action="store_true", default=False, help="do not load entry-point check plugins")


class _Session:
    """The registry, profile and one preflight run of this pytest process (built on first use).

    The run goes through ``preflight.run_preflight`` like the CLI's, over exactly the checks this process
    will run (pytest's own selection: ``-k``, node ids), so each probe runs once per process.
    """

    def __init__(self, config) -> None:
        from .preflight import RunOptions, resolve
        from .registry import load_registry

        self.config = config
        self.options = RunOptions(
            profile_name=config.getoption("profile_name"), config_path=config.getoption("config_path"),
            profile_values={k: v for k, v in cli_profile_values(config.getoption).items() if v is not None},
            checks_dirs=tuple(config.getoption("checks_dir")), entry_points=not config.getoption("no_plugins"),
            progress=False, command=("pytest", *config.invocation_params.args),
        )
        self.registry = load_registry(self.options.checks_dirs, entry_points=self.options.entry_points)
        self.profile = resolve(self.options)
        self.facts: dict[str, Any] = {}

    def result(self, spec) -> Any:
        """Run one check through run_preflight; facts gathered for earlier items are reused, not probed again."""
        from dataclasses import replace

        from .preflight import run_preflight
        from .result import Result

        doc = run_preflight(replace(self.options, profile=self.profile, only=(spec.name,), seed_facts=self.facts))
        self.facts.update(doc["nodes"][0].get("facts") or {})
        return Result.from_dict(next(r for r in doc["results"] if r["name"] == spec.name))


def _session(config) -> _Session:
    if not hasattr(config, "_dsv3_session"):
        config._dsv3_session = _Session(config)
    return config._dsv3_session


class CheckItem(pytest.Item):
    def __init__(self, *, spec, **kwargs) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        for tag in spec.tags:
            marker = tag.replace("-", "_").replace(".", "_")
            if marker not in self.config.getini("markers") and marker.isidentifier():
                self.config.addinivalue_line("markers", f"{marker}: dsv3-preflight checks tagged {tag}")
            if marker.isidentifier():
                self.add_marker(marker)

    def runtest(self) -> None:
        from .result import Status

        result = _session(self.config).result(self.spec)
        self.user_properties.append(("dsv3_preflight_result", json.dumps(result.to_dict())))
        if result.status is Status.SKIP:
            pytest.skip(result.summary)
        if result.status is Status.WARN:
            warnings.warn(PreflightWarning(f"{self.spec.name}: {result.summary}"), stacklevel=1)
        if result.status.is_red:
            raise CheckFailed(result)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, CheckFailed):
            r = excinfo.value.result
            lines = [f"{r.status.value.upper()} {r.name} on {r.node}: {r.summary}"]
            if r.evidence:
                lines += ["evidence:", json.dumps(r.to_dict()["evidence"], indent=2, default=str)]
            if r.remediation:
                lines += ["remediation:", *("    " + line for line in r.remediation.splitlines())]
            return "\n".join(lines)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"{self.spec.name} ({self.spec.scope})"


class CheckModule(pytest.File):
    """The checks one module declares (or, for checks/__init__.py, the plugins' and --checks-dir's)."""

    def collect(self):
        session = _session(self.config)
        if self.path.name == "__init__.py":
            specs = [s for s in session.registry.checks.values() if not s.origin.startswith("dsv3_preflight.checks.")]
        else:
            module = f"dsv3_preflight.checks.{self.path.stem}"
            specs = [s for s in session.registry.checks.values() if s.origin == module]
        for spec in sorted(specs, key=lambda s: s.name):
            yield CheckItem.from_parent(self, name=spec.name, spec=spec)


def collect_file(file_path: Path, parent):
    if file_path.suffix != ".py" or file_path.resolve().parent != CHECKS_DIR:
        return None
    if file_path.name == "conftest.py" or file_path.name.startswith("test_"):
        return None
    return CheckModule.from_parent(parent, path=file_path)


def configure(config) -> None:
    for tag in ("env", "host", "gpu", "network", "lora", "collective", "launch", "cluster"):
        config.addinivalue_line("markers", f"{tag}: dsv3-preflight checks tagged {tag}")


def write_json(session) -> None:
    """With --preflight-json, the results of this pytest run as a result document (controller side)."""
    path = session.config.getoption("preflight_json")
    if not path or hasattr(session.config, "workerinput"):
        return
    from .document import build_document, write_document
    from .result import Result
    from .runner import this_node_name

    results = [Result.from_dict(json.loads(v)) for v in getattr(session.config, "_dsv3_results", [])]
    profile = _session(session.config).profile
    node = {"node": this_node_name(), "node_rank": profile.node_rank, "state": "ok", "error": None, "facts": {}, "fact_errors": {}}
    doc = build_document(mode="pytest", profile=profile.to_dict(), nodes=[node], results=results,
                         command=["pytest", *session.config.invocation_params.args])
    write_document(doc, path)


def logreport(config, report) -> None:
    for key, value in getattr(report, "user_properties", []):
        if key == "dsv3_preflight_result" and report.when == "call":
            config.__dict__.setdefault("_dsv3_results", []).append(value)
