"""Declaring checks and probes, and finding them: built-ins, entry points, a site's own directory.

A check module declares its checks with :func:`check` and may declare probes with :func:`probe`.
The registry collects the declared objects from the modules it loads (it does not rely on import
side effects), validates every declared need against the known facts, and refuses duplicates.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

SCOPES = ("node", "cluster")
ENTRY_POINT_GROUP = "dsv3_preflight.checks"
#: facts the engine provides itself, not a probe: the resolved profile; on a node the wave (cluster mode's
#: parameters for this node's probes, ``dsv3_preflight.wave``); in cluster scope the node ranks and the node
#: states (what the runner saw of each node: {"state": "alive" | "dead", ...}).
ENGINE_FACTS = {"profile": "node and cluster", "wave": "node", "node_ranks": "cluster", "node_states": "cluster"}
CLUSTER_ONLY_FACTS = ("node_ranks", "node_states")
#: profile fields that are TCP ports a probe may claim
PORT_FIELDS = ("master_port",)
#: checks that stand for a plugin that could not be loaded: always selected, always an ERROR
PLUGIN_CHECK_PREFIX = "plugin."
#: seconds a plugin may take to import (a plugin that hangs at import becomes an ERROR for that plugin)
PLUGIN_IMPORT_TIMEOUT_S = 10.0
PLUGIN_TIMEOUT_ENV = "DSV3_PREFLIGHT_PLUGIN_IMPORT_TIMEOUT"
#: a plugin file larger than this is not a check module
PLUGIN_MAX_BYTES = 16 << 20


class RegistryError(Exception):
    """Plugins are inconsistent (duplicate name, unknown fact, bad declaration): a usage error, exit 4."""


class PluginLoadError(Exception):
    """A plugin hung, raised or tried to exit while it was imported: the ERROR of its ``plugin.*`` check."""


@dataclass(frozen=True)
class CheckSpec:
    """A declared check: its identity, what it needs, and its pure judge."""

    name: str
    scope: str
    needs: tuple[str, ...]
    tags: tuple[str, ...]
    timeout: float
    judge: Callable[..., Any]
    description: str = ""
    origin: str = ""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.judge(*args, **kwargs)

    @property
    def module(self) -> str:
        return getattr(self.judge, "__module__", "")


@dataclass(frozen=True)
class ProbeSpec:
    """A declared probe: the one fact it gathers, what it needs, and its timeout."""

    fact: str
    needs: tuple[str, ...]
    timeout: float
    gather: Callable[..., Any]
    description: str = ""
    origin: str = ""
    #: facts that must be finished (gathered or failed) before this probe starts, when this run gathers them too;
    #: for probes that disturb what another observes (the collective probe listens on the port others inspect)
    after: tuple[str, ...] = ()
    #: profile fields naming TCP ports this probe binds or inspects (``("master_port",)``): while it runs it holds
    #: a claim on them, so two dsv3-preflight runs on one node never see each other's test listeners (portclaim)
    claims: tuple[str, ...] = ()


def _check_needs(func: Callable[..., Any], needs: Iterable[str], what: str) -> tuple[str, ...]:
    needs = tuple(needs)
    params = inspect.signature(func).parameters
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in params.values())
    missing = [n for n in needs if n not in params and not takes_kwargs]
    if missing:
        raise RegistryError(f"{what}: declares needs {missing} but the function takes no such argument")
    required = [p for p, v in params.items() if v.default is v.empty and v.kind in (v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY)]
    undeclared = [p for p in required if p not in needs]
    if undeclared:
        raise RegistryError(f"{what}: the function requires {undeclared}, which are not in needs")
    return needs


def check(
    name: str,
    *,
    scope: str = "node",
    needs: Iterable[str] = (),
    tags: Iterable[str] = (),
    timeout: float = 30.0,
) -> Callable[[Callable[..., Any]], CheckSpec]:
    """Declare a check: ``@check("gpu.fabric_manager", needs=["fabric_manager", "profile"])``.

    The decorated function is a pure judge: it receives the needed facts as keyword arguments and
    returns a :class:`~dsv3_preflight.result.Result`. In cluster scope every fact argument is a
    mapping ``{node: value}`` ordered by node rank (``profile`` stays one value).
    """
    if scope not in SCOPES:
        raise RegistryError(f"check {name!r}: scope must be one of {SCOPES}, not {scope!r}")
    if not name or "." not in name or " " in name:
        raise RegistryError(f"check {name!r}: the name must be dotted, like 'net.port_free'")

    def decorate(func: Callable[..., Any]) -> CheckSpec:
        need_tuple = _check_needs(func, needs, f"check {name!r}")
        doc = inspect.getdoc(func) or ""
        return CheckSpec(name, scope, need_tuple, tuple(tags), float(timeout), func, doc.split("\n\n")[0])

    return decorate


def probe(fact: str, *, needs: Iterable[str] = (), timeout: float = 10.0,
          after: Iterable[str] = (), claims: Iterable[str] = ()) -> Callable[[Callable[..., Any]], ProbeSpec]:
    """Declare a probe that gathers the fact ``fact`` (plain JSON data) from this machine.

    ``after``: facts whose probes must have finished before this one starts when the same run gathers them
    (an ordering, not an input: they are not started for it and their failure does not fail it).
    ``claims``: profile fields naming the TCP ports the probe binds or inspects (``["master_port"]``); another
    dsv3-preflight run on this node waits for them, or says which run holds them (see portclaim).
    """
    claims = tuple(claims)
    unknown = [c for c in claims if c not in PORT_FIELDS]
    if unknown:
        raise RegistryError(f"probe {fact!r}: claims {unknown}: only port fields of the profile can be claimed "
                            f"({', '.join(PORT_FIELDS)})")

    def decorate(func: Callable[..., Any]) -> ProbeSpec:
        need_tuple = _check_needs(func, needs, f"probe {fact!r}")
        doc = inspect.getdoc(func) or ""
        return ProbeSpec(fact, need_tuple, float(timeout), func, doc.split("\n\n")[0], after=tuple(after),
                         claims=claims)

    return decorate


@dataclass
class Registry:
    checks: dict[str, CheckSpec] = field(default_factory=dict)
    probes: dict[str, ProbeSpec] = field(default_factory=dict)
    #: plugins that could not be loaded (hung, raised, exited at import): name of their ERROR check -> why
    failed_plugins: dict[str, str] = field(default_factory=dict)

    def add_failed_plugin(self, label: str, origin: str, error: str) -> None:
        """Record a plugin that could not be loaded as an always-selected check whose judging is an ERROR."""
        name = PLUGIN_CHECK_PREFIX + (re.sub(r"[^A-Za-z0-9_]+", "_", label).strip("_") or "unnamed")
        message = f"the plugin {origin} could not be loaded: {error}"

        def judge() -> Any:
            raise PluginLoadError(message)

        judge.__module__ = __name__
        self.checks[name] = CheckSpec(name, "node", (), ("plugin",), 5.0, judge, message, origin=origin)
        self.failed_plugins[name] = message

    def add_module(self, module: ModuleType, origin: str) -> None:
        """Collect every CheckSpec and ProbeSpec a module declares."""
        for value in vars(module).values():
            if isinstance(value, CheckSpec):
                self.add_check(value, origin)
            elif isinstance(value, ProbeSpec):
                self.add_probe(value, origin)

    def add_check(self, spec: CheckSpec, origin: str) -> None:
        known = self.checks.get(spec.name)
        if known is not None:
            if _unwrapped(known.judge) is _unwrapped(spec.judge):
                return
            raise RegistryError(f"two checks are named {spec.name!r}: one in {known.origin}, one in {origin}")
        self.checks[spec.name] = _with_origin(spec, origin)

    def add_probe(self, spec: ProbeSpec, origin: str) -> None:
        known = self.probes.get(spec.fact)
        if known is not None:
            if _unwrapped(known.gather) is _unwrapped(spec.gather):
                return
            raise RegistryError(f"two probes gather the fact {spec.fact!r}: one in {known.origin}, one in {origin}")
        if spec.fact in ENGINE_FACTS:
            raise RegistryError(f"probe in {origin}: {spec.fact!r} is provided by the engine and cannot be probed")
        self.probes[spec.fact] = _with_origin(spec, origin)

    def validate(self) -> None:
        """Every need is a known fact, and probes do not depend on each other in a cycle."""
        known = set(self.probes) | set(ENGINE_FACTS)
        for spec in self.checks.values():
            for need in spec.needs:
                if need not in known:
                    raise RegistryError(
                        f"check {spec.name!r} ({spec.origin}) needs the fact {need!r}, which no probe provides; "
                        f"known facts: {', '.join(sorted(known))}"
                    )
                if need in CLUSTER_ONLY_FACTS and spec.scope != "cluster":
                    raise RegistryError(f"check {spec.name!r}: {need!r} exists only in cluster scope")
        for spec in self.probes.values():
            for need in spec.needs:
                if need not in known or need in CLUSTER_ONLY_FACTS:
                    raise RegistryError(f"probe {spec.fact!r} ({spec.origin}) needs the unknown fact {need!r}")
            for first in spec.after:
                if first not in self.probes:
                    raise RegistryError(f"probe {spec.fact!r} ({spec.origin}) runs after the unknown probe {first!r}")
        # needs and after together must not make a probe wait for itself (a deadlock until the timeouts)
        self.fact_closure(self.probes, with_after=True)  # raises on a cycle

    def fact_closure(self, facts: Iterable[str], with_after: bool = False) -> list[str]:
        """The probe facts needed to gather ``facts``, dependencies first (``with_after``: and those they run after)."""
        order: list[str] = []
        state: dict[str, str] = {}

        def visit(fact: str, chain: tuple[str, ...]) -> None:
            if fact in ENGINE_FACTS or state.get(fact) == "done":
                return
            if state.get(fact) == "visiting":
                raise RegistryError(f"probes depend on each other in a cycle: {' -> '.join(chain + (fact,))}")
            state[fact] = "visiting"
            spec = self.probes[fact]
            for need in spec.needs + (spec.after if with_after else ()):
                visit(need, chain + (fact,))
            state[fact] = "done"
            order.append(fact)

        for fact in facts:
            visit(fact, ())
        return order

    def select(
        self,
        only: Iterable[str] = (),
        skip: Iterable[str] = (),
        tags: Iterable[str] = (),
    ) -> Selection:
        """The selected checks (sorted by name), the deselected ones with why, and the patterns that matched nothing.

        ``only`` and ``skip`` take names or prefixes ending in '.' or '*' (``net.*``). A pattern or tag that
        matches no check selects nothing: with nothing selected the run says why and exits 5.
        """
        only, skip, tags = list(only), list(skip), list(tags)
        unmatched = [f"--only {p!r}" for p in only if not any(_matches(p, n) for n in self.checks)]
        unmatched += [f"--skip {p!r}" for p in skip if not any(_matches(p, n) for n in self.checks)]
        known_tags = {t for spec in self.checks.values() for t in spec.tags}
        unmatched += [f"--tags {t!r}" for t in tags if t not in known_tags]
        selected, deselected = [], {}
        for name in sorted(self.checks):
            spec = self.checks[name]
            if name in self.failed_plugins and not any(_matches(p, name) for p in skip):
                selected.append(spec)  # the user asked for this plugin: its failure is shown whatever the selection
                continue
            if only and not any(_matches(p, name) for p in only):
                continue
            if tags and not set(tags) & set(spec.tags):
                continue
            if any(_matches(p, name) for p in skip):
                deselected[name] = "skipped on request (--skip)"
                continue
            selected.append(spec)
        return Selection(selected, deselected, unmatched)


@dataclass(frozen=True)
class Selection:
    """What a run's --only/--skip/--tags selected. Unpacks as ``selected, deselected``."""

    selected: list[CheckSpec]
    deselected: dict[str, str]
    unmatched: list[str] = field(default_factory=list)

    def __iter__(self):
        return iter((self.selected, self.deselected))

    def why_empty(self) -> str:
        """Why nothing is selected, in one line (`dsv3-preflight list` shows the names)."""
        if self.unmatched:
            return (f"no check matches {', '.join(self.unmatched)}; `dsv3-preflight list` shows the names and tags")
        if self.deselected:
            return f"every matching check was deselected by --skip ({len(self.deselected)})"
        return "no check matches the selection; `dsv3-preflight list` shows the names and tags"


def _matches(pattern: str, name: str) -> bool:
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    if pattern.endswith("."):
        return name.startswith(pattern)
    return name == pattern


def _unwrapped(func: Any) -> Any:
    return getattr(func, "__wrapped__", func)


def _with_origin(spec: Any, origin: str) -> Any:
    return replace(spec, origin=origin)


def _import_package_modules(package: str) -> Iterable[ModuleType]:
    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_") or info.name in ("conftest",) or info.name.startswith("test_"):
            continue
        yield importlib.import_module(f"{package}.{info.name}")


def _load_entry_points(registry: Registry) -> None:
    from importlib.metadata import entry_points

    from . import plugin_guard

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        origin = f"entry point {ep.name} = {ep.value}"
        obj, error = plugin_guard.load(origin, ep.load, plugin_import_timeout())
        if error is not None:  # a broken third-party plugin is an ERROR with its name; the run goes on
            registry.add_failed_plugin(ep.name, origin, error)
            continue
        if isinstance(obj, ModuleType):
            _add_plugin_module(registry, obj, origin)
        elif isinstance(obj, CheckSpec):
            registry.add_check(plugin_guard.guard_check(obj, origin), origin)
        elif isinstance(obj, ProbeSpec):
            registry.add_probe(plugin_guard.guard_probe(obj, origin), origin)
        else:
            raise RegistryError(f"{origin} is neither a module nor a check nor a probe")


def plugin_import_timeout() -> float:
    """Seconds a plugin may take to import ($DSV3_PREFLIGHT_PLUGIN_IMPORT_TIMEOUT, default 10)."""
    try:
        value = float(os.environ.get(PLUGIN_TIMEOUT_ENV, "") or PLUGIN_IMPORT_TIMEOUT_S)
    except ValueError:
        return PLUGIN_IMPORT_TIMEOUT_S
    return value if 0 < value < 3600 else PLUGIN_IMPORT_TIMEOUT_S


def _add_plugin_module(registry: Registry, module: ModuleType, origin: str) -> None:
    """Collect a plugin module's checks and probes, each guarded (exits and stdout, see plugin_guard)."""
    from . import plugin_guard

    for value in list(vars(module).values()):
        if isinstance(value, CheckSpec):
            registry.add_check(plugin_guard.guard_check(value, origin), origin)
        elif isinstance(value, ProbeSpec):
            registry.add_probe(plugin_guard.guard_probe(value, origin), origin)


def load_checks_dir(registry: Registry, directory: str | Path) -> None:
    """Import every ``*.py`` of a site's own checks directory (not ``_*``, ``test_*``, ``conftest``).

    Each file is imported under a deadline (:func:`plugin_import_timeout`) with its exits guarded: a file that
    is not a regular file, hangs, raises, or calls ``sys.exit``/``os._exit`` at import becomes an ERROR check
    ``plugin.<file>`` naming the file and why, and the other plugins and the run go on."""
    from . import plugin_guard
    from .inputs import InputError, open_regular

    path = Path(directory)
    if not path.is_dir():
        raise RegistryError(f"--checks-dir {directory}: not a directory")
    for file in sorted(path.glob("*.py")):
        if file.name.startswith(("_", "test_")) or file.stem == "conftest":
            continue
        try:  # a FIFO named x.py would block the import forever; a device or a 1 GB file is not a check module
            with open_regular(file, what="--checks-dir file") as fh:
                if os.fstat(fh.fileno()).st_size > PLUGIN_MAX_BYTES:
                    raise InputError(f"--checks-dir file {file}: larger than {PLUGIN_MAX_BYTES >> 20} MiB",
                                     path=str(file), reason=f"larger than {PLUGIN_MAX_BYTES >> 20} MiB")
        except InputError as exc:
            registry.add_failed_plugin(file.stem, str(file), exc.reason)
            continue
        mod_name = f"dsv3_preflight_site.{abs(hash(str(file.resolve())))}_{file.stem}"
        module = sys.modules.get(mod_name)
        if module is None:
            spec = importlib.util.spec_from_file_location(mod_name, file)
            if spec is None or spec.loader is None:
                registry.add_failed_plugin(file.stem, str(file), "not importable as a Python module")
                continue
            module = importlib.util.module_from_spec(spec)
            sys.modules[mod_name] = module
            _, error = plugin_guard.load(str(file), lambda spec=spec, module=module: spec.loader.exec_module(module), plugin_import_timeout())
            if error is not None:
                sys.modules.pop(mod_name, None)
                registry.add_failed_plugin(file.stem, str(file), error)
                continue
        _add_plugin_module(registry, module, str(file))


#: the domains: each is a package of dsv3_preflight whose ``probes`` subpackage holds every probe of that domain
#: (the only code that touches the system) and whose other modules are the pure helpers its checks use
DOMAINS = ("host", "gpu", "net", "lora", "collective")


def probe_packages() -> list[str]:
    """The packages probes are collected from: ``dsv3_preflight.<domain>.probes`` for every domain that has one."""
    found = []
    for domain in DOMAINS:
        name = f"dsv3_preflight.{domain}.probes"
        if importlib.util.find_spec(name) is not None:
            found.append(name)
    return found


def _walk(package: str) -> Iterable[ModuleType]:
    """A package and every module below it (not ``_*``, ``test_*``, ``conftest``), in name order."""
    pkg = importlib.import_module(package)
    yield pkg
    for info in sorted(pkgutil.walk_packages(pkg.__path__, prefix=f"{package}."), key=lambda i: i.name):
        leaf = info.name.rsplit(".", 1)[-1]
        if leaf.startswith(("_", "test_")) or leaf == "conftest":
            continue
        yield importlib.import_module(info.name)


def load_registry(checks_dirs: Iterable[str | Path] = (), entry_points: bool = True) -> Registry:
    """Built-in probes (each domain's ``probes`` package) and checks, then entry-point plugins, then each
    ``--checks-dir``; validated."""
    registry = Registry()
    for package in probe_packages():
        for module in _walk(package):
            registry.add_module(module, module.__name__)
    for module in _import_package_modules("dsv3_preflight.checks"):
        registry.add_module(module, module.__name__)
    if entry_points:
        _load_entry_points(registry)
    for directory in checks_dirs:
        load_checks_dir(registry, directory)
    registry.validate()
    return registry
