"""The tree shows the architecture: one home per domain, no import circles, probes the only code touching
the system, checks that import no other check, no verdict built by a runner, one severity order.

Read from the source with the standard library's ast (every import counts, also those inside functions:
a lazy import is still a dependency a reader has to follow).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import REPO

PACKAGE = REPO / "dsv3_preflight"
MAPPED = {"checks": REPO / "checks", "launch": REPO / "launch", "reports": REPO / "reports"}
DOMAINS = ("host", "gpu", "net", "lora", "collective")
#: modules that touch the system: only probes (and the runners/commands that start processes) import them
SYSTEM_MODULES = {"subprocess", "socket", "ctypes", "psutil", "pynvml", "netifaces", "select", "tempfile",
                  "multiprocessing", "ray", "torch", "safetensors", "peft", "transformers", "deepspeed", "urllib.request"}


def _modules() -> dict[str, Path]:
    """Every module of the installed layout (dsv3_preflight.checks is checks/, and so on) by dotted name."""
    found = {}
    for root, prefix in [(PACKAGE, "dsv3_preflight")] + [(path, f"dsv3_preflight.{name}") for name, path in MAPPED.items()]:
        for file in root.rglob("*.py"):
            if "__pycache__" in file.parts:
                continue
            rel = file.relative_to(root).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            found[".".join([prefix, *parts])] = file
    return found


MODULES = _modules()


def _imports(name: str, file: Path) -> set[str]:
    """Dotted names a module imports (absolute, relative resolved), anywhere in the file."""
    tree = ast.parse(file.read_text(encoding="utf-8"))
    package = name if file.name == "__init__.py" else name.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)
    return out


def _internal(imported: set[str]) -> set[str]:
    """The project modules among imported names (``from pkg import mod`` names the module)."""
    return {m for m in imported if m in MODULES}


GRAPH = {name: _internal(_imports(name, file)) - {name} for name, file in MODULES.items()}


def _cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    return out


def _package_edge(a: str, b: str) -> bool:
    """A package's __init__ re-exporting from its own submodules is not a circle a reader has to follow."""
    return b.startswith(a + ".") or a.startswith(b + ".")


def test_no_import_circles():
    circles = []
    for component in _cycles():
        members = set(component)
        # drop package<->own-submodule edges, then look again inside the component
        edges = {v: {w for w in GRAPH[v] if w in members and not _package_edge(v, w)} for v in component}
        reach = {v: set() for v in component}
        for v in component:
            todo = list(edges[v])
            while todo:
                w = todo.pop()
                if w not in reach[v]:
                    reach[v].add(w)
                    todo.extend(edges[w])
        circle = sorted(v for v in component if v in reach[v])
        if circle:
            circles.append(circle)
    assert not circles, f"import circles: {circles}"


def test_every_probe_lives_in_its_domains_probes_package():
    for name, file in MODULES.items():
        if "@probe(" in file.read_text(encoding="utf-8"):
            parts = name.split(".")
            assert len(parts) >= 4 and parts[1] in DOMAINS and parts[2] == "probes", f"{name} declares a probe"


def test_a_check_imports_no_other_check_and_no_probe_module():
    for name in (m for m in MODULES if m.startswith("dsv3_preflight.checks.")):
        bad = {m for m in GRAPH[name] if m.startswith("dsv3_preflight.checks.") or ".probes" in m}
        assert not bad, f"{name} imports {sorted(bad)}"


@pytest.mark.parametrize("domain", DOMAINS)
def test_only_probes_touch_the_system_in_a_domain(domain):
    offenders = {}
    for name, file in MODULES.items():
        if not name.startswith(f"dsv3_preflight.{domain}.") and name != f"dsv3_preflight.{domain}":
            continue
        if f"dsv3_preflight.{domain}.probes" in name:
            continue
        system = {m for m in _imports(name, file) if m.split(".")[0] in SYSTEM_MODULES or m in SYSTEM_MODULES}
        if system:
            offenders[name] = sorted(system)
    assert not offenders, f"pure helpers of {domain} import system modules: {offenders}"


def test_no_private_names_imported_across_modules():
    offenders = []
    for name, file in MODULES.items():
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("dsv3_preflight", ".")) or (
                    isinstance(node, ast.ImportFrom) and node.level):
                offenders += [f"{name}: {alias.name}" for alias in node.names if alias.name.startswith("_")
                              and not alias.name.startswith("__")]
    assert not offenders, offenders


RUNNERS = ("dsv3_preflight.cluster", "dsv3_preflight.commands")
VERDICT_CALLS = {"passed", "failed", "warned", "skipped", "_engine_error", "decide", "decide_results"}


def test_runners_build_no_verdict():
    offenders = []
    for name, file in MODULES.items():
        if not name.startswith(RUNNERS):
            continue
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                if called in VERDICT_CALLS:
                    offenders.append(f"{name}:{node.lineno} {called}()")
    assert not offenders, f"runners judge (record facts or engine.error_result instead): {offenders}"


def test_one_severity_order():
    """Only result.py ranks statuses; everyone else asks it (severity(), STATUS_ORDER, decide())."""
    offenders = []
    for name, file in MODULES.items():
        if name == "dsv3_preflight.result":
            continue
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if {"pass", "fail", "error"} <= keys and all(isinstance(v, ast.Constant) and isinstance(v.value, int)
                                                           for v in node.values):
                    offenders.append(f"{name}:{node.lineno}")
    assert not offenders, f"a second severity table: {offenders}"
