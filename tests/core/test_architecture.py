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
DOMAINS = ("host", "gpu", "net", "lora", "collective", "kuberay")
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


def _called_names(file: Path) -> list[tuple[int, str]]:
    """(line, name) of every call in a file: ``f()`` and ``x.f()`` both give ``f``."""
    out = []
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            out.append((node.lineno, called))
    return out


#: what builds a result or a finding: only checks, domains' rules and the engine call these
RESULT_CALLS = {"passed", "failed", "warned", "skipped", "_engine_error", "Result", "Finding", "Findings", "failure",
                "warning", "Verdict"}
#: runners beside cluster/ and commands/ (issue 43.4): the one-node runner, the pytest plugin (its hooks in
#: checks/conftest.py) and lora's probes (what `lora scan` and `lora watch` read) move results, never build them
MORE_RUNNERS = ("dsv3_preflight.runner", "dsv3_preflight.pytest_plugin", "dsv3_preflight.checks.conftest",
                "dsv3_preflight.lora.probes")


@pytest.mark.parametrize("prefix", MORE_RUNNERS)
def test_runner_plugin_and_lora_probes_build_no_result_and_no_verdict(prefix):
    modules = {name: file for name, file in MODULES.items() if name == prefix or name.startswith(prefix + ".")}
    assert modules, f"no module {prefix}: the architecture test names a module that moved"
    offenders = [f"{name}:{line} {called}()" for name, file in modules.items() for line, called in _called_names(file)
                 if called in RESULT_CALLS | VERDICT_CALLS]
    assert not offenders, f"runners judge (ask the engine: engine.error_result, engine.skip_cluster_checks): {offenders}"


def test_launch_builds_no_result_and_asks_the_one_verdict_function():
    """The launcher's gate reads the verdict of a result document through result.decide_results, the function the
    engine and every renderer share; it builds no result of its own."""
    modules = {name: file for name, file in MODULES.items() if name.startswith("dsv3_preflight.launch")}
    offenders = [f"{name}:{line} {called}()" for name, file in modules.items() for line, called in _called_names(file)
                 if called in RESULT_CALLS]
    assert not offenders, f"the launcher builds results: {offenders}"
    asks = {name for name, file in modules.items() for _, called in _called_names(file) if called == "decide_results"}
    assert asks, "the launcher's gate no longer asks result.decide_results for the verdict"


def test_lora_probes_import_no_judging():
    """lora's probes gather; `lora scan` and `lora watch` judge in dsv3_preflight.lora.run, through the engine's
    wrapper (a rule that raises is an ERROR, issue 43.5): the probes import no rule, no verdict and no engine."""
    judging = ("dsv3_preflight.lora.verdict", "dsv3_preflight.lora.rules", "dsv3_preflight.lora.config_rules",
               "dsv3_preflight.lora.file_rules", "dsv3_preflight.engine", "dsv3_preflight.result")
    offenders = {name: sorted(m for m in GRAPH[name] if m.startswith(judging))
                 for name in MODULES if name.startswith("dsv3_preflight.lora.probes")}
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, f"lora's probes judge: {offenders}"


def test_lora_scan_and_watch_judge_through_the_engines_wrapper():
    """The module that runs `lora scan` and `lora watch` calls engine.judged, the wrapper checks go through."""
    run = MODULES["dsv3_preflight.lora.run"]
    assert "dsv3_preflight.engine.judged" in _imports("dsv3_preflight.lora.run", run)
    assert "judged" in {called for _, called in _called_names(run)}


#: verdict labels of a run (result.decide) and of the doctor: a table ranking them is a second verdict order
VERDICT_LABELS = ({"GO", "NO-GO"}, {"healthy", "failure"})


def test_the_doctor_and_merge_rank_verdicts_in_the_one_order_of_result_py():
    """Only result.py orders verdicts (ExitCode, decide): no other module holds a table ranking verdict labels, so
    the doctor's verdict of a log and merge's verdict of several documents follow the shared order."""
    offenders = []
    for name, file in MODULES.items():
        if name == "dsv3_preflight.result":
            continue
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
                if any(labels <= keys for labels in VERDICT_LABELS) and all(
                        isinstance(v, ast.Constant) and isinstance(v.value, int) for v in node.values):
                    offenders.append(f"{name}:{node.lineno}")
    assert not offenders, f"a second verdict order: {offenders}"


def test_no_probe_reads_a_replay_switch_from_the_environment():
    """Recorded machines are replayed at the library boundary through the run's fact store (the engine fact
    `replay`, facts.Replay), issue 43.6: no probe names a replay environment variable or reads them itself."""
    from dsv3_preflight.facts import REPLAY_ENV

    switches = set(REPLAY_ENV.values())
    offenders = []
    for name, file in MODULES.items():
        if ".probes" not in name:
            continue
        for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
            named = node.value if isinstance(node, ast.Constant) else node.id if isinstance(node, ast.Name) else (
                node.attr if isinstance(node, ast.Attribute) else None)
            if named in switches or named in ("REPLAY_ENV", "from_environ"):
                offenders.append(f"{name}:{node.lineno} {named}")
    assert not offenders, f"probes steered by environment switches: {offenders}"


# -- checks declare, domains judge ----------------------------------------------------------------------------
CHECK_MODULES = {name: file for name, file in MODULES.items()
                 if name.startswith("dsv3_preflight.checks.") and file.name not in ("__init__.py", "conftest.py")}
#: a check function composes its domain's rules: gates, a Findings accumulator, the summary; never a rule table
CHECK_MAX_LINES, CHECK_MAX_BRANCHES = 35, 16
RULE_HOMES = tuple(f"dsv3_preflight.{d}" for d in DOMAINS)


def _is_check(node: ast.AST) -> bool:
    return isinstance(node, ast.FunctionDef) and any(
        isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "check" for d in node.decorator_list)


def _branches(func: ast.FunctionDef) -> int:
    """Decision points, counted as radon counts them (if/for/while/except/with-less boolean operands/comprehensions)."""
    count = 0
    for node in ast.walk(func):
        if isinstance(node, (ast.If, ast.IfExp, ast.For, ast.While, ast.ExceptHandler, ast.Assert)):
            count += 1
        elif isinstance(node, ast.comprehension):
            count += 1 + len(node.ifs)
        elif isinstance(node, ast.BoolOp):
            count += len(node.values) - 1
    return count


def test_a_check_file_declares_one_check_and_nothing_else():
    """checks/X.py: its docstring, its imports and one @check function; a helper, a constant or a rule is its
    domain's (dsv3_preflight/<domain>/), where the domain's tests find it."""
    offenders = []
    for name, file in CHECK_MODULES.items():
        body = ast.parse(file.read_text(encoding="utf-8")).body
        docstring = body[:1] if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else []
        checks = [n for n in body if _is_check(n)]
        other = [n for n in body if n not in docstring and n not in checks and not isinstance(n, (ast.Import, ast.ImportFrom))]
        if len(checks) != 1:
            offenders.append(f"{name}: {len(checks)} checks")
        offenders += [f"{name}:{n.lineno} {type(n).__name__} {getattr(n, 'name', '')}".rstrip() for n in other]
    assert not offenders, f"check files that hold more than one check declaration: {offenders}"


def test_a_check_function_composes_its_domains_rules_and_holds_none():
    offenders = []
    for name, file in CHECK_MODULES.items():
        for func in (n for n in ast.parse(file.read_text(encoding="utf-8")).body if _is_check(n)):
            lines = func.end_lineno - func.lineno + 1
            nested = [n for n in ast.walk(func) if n is not func and isinstance(
                n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda))
                and not (isinstance(n, ast.Lambda) and lines <= CHECK_MAX_LINES and len(list(ast.walk(n))) < 12)]
            if lines > CHECK_MAX_LINES or _branches(func) > CHECK_MAX_BRANCHES or nested:
                offenders.append(f"{name}.{func.name}: {lines} lines, {_branches(func)} branches, "
                                 f"{len(nested)} nested definitions")
    assert not offenders, f"check functions that judge by themselves (move the rules to the domain): {offenders}"


def test_every_check_calls_rules_of_a_domain():
    offenders = [name for name in CHECK_MODULES if not any(m.startswith(RULE_HOMES) for m in GRAPH[name])]
    assert not offenders, f"check modules that import no rule of a domain: {offenders}"


# -- one test file per check (issue 43.8) ---------------------------------------------------------------------
#: checks whose rule tables do not have their own file yet, with the reason; shrink it, never grow it.
#: Empty since issue 43.8 gave the cluster and collective checks their files; a check added without its file
#: names its reason here.
CHECKS_WITHOUT_THEIR_TEST_FILE: set[str] = set()


def _test_area(check: str) -> str:
    """The tests/ folder of checks/<check>.py: its name's prefix where tests/ has that folder (gpu_xid → gpu,
    cluster_hostnames → cluster), else the domain whose rules it calls (env_launch_vars → net, dist_pairs →
    collective), the name's own domain first where it calls several."""
    prefix = check.split("_")[0]
    if (REPO / "tests" / prefix).is_dir():
        return prefix
    domains = sorted({m.split(".")[1] for m in GRAPH[f"dsv3_preflight.checks.{check}"] if m.startswith(RULE_HOMES)})
    return domains[0] if len(domains) == 1 else prefix


def test_every_check_has_its_own_test_file_named_after_it():
    """checks/<name>.py has tests/<area>/test_<name>.py holding its rule tables (as Meta's gcm keeps one test
    file per check); integration runs may live elsewhere."""
    checks = sorted(name.rsplit(".", 1)[1] for name in CHECK_MODULES)
    missing = [f"checks/{c}.py → tests/{_test_area(c)}/test_{c}.py" for c in checks
               if c not in CHECKS_WITHOUT_THEIR_TEST_FILE and not (REPO / "tests" / _test_area(c) / f"test_{c}.py").is_file()]
    assert not missing, f"checks without their own test file: {missing}"
    have_now = sorted(c for c in CHECKS_WITHOUT_THEIR_TEST_FILE if (REPO / "tests" / _test_area(c) / f"test_{c}.py").is_file())
    assert not have_now, f"these have their test file now: take them off CHECKS_WITHOUT_THEIR_TEST_FILE: {have_now}"
    assert CHECKS_WITHOUT_THEIR_TEST_FILE <= set(checks), "the allow-list names a check that no longer exists"
