"""Check/probe declaration, discovery and validation."""
import textwrap

import pytest

from dsv3_preflight import Result, check, probe
from dsv3_preflight.registry import Registry, RegistryError, load_checks_dir, load_registry


def test_builtin_checks_load_and_validate():
    registry = load_registry(entry_points=False)
    assert {"env.launch_vars", "host.resources"} <= set(registry.checks)
    for spec in registry.checks.values():
        assert spec.scope in ("node", "cluster")
        assert spec.description, f"{spec.name} has no docstring"


def test_check_declaring_a_need_the_function_does_not_take_is_refused():
    with pytest.raises(RegistryError, match="no such argument"):
        @check("x.y", needs=["env"])
        def judge():  # pragma: no cover
            return Result.passed("x")


def test_check_requiring_an_undeclared_argument_is_refused():
    with pytest.raises(RegistryError, match="not in needs"):
        @check("x.y", needs=[])
        def judge(env):  # pragma: no cover
            return Result.passed("x")


@pytest.mark.parametrize("name", ["nodots", "has space.x", ""])
def test_check_name_must_be_dotted(name):
    with pytest.raises(RegistryError, match="dotted"):
        check(name)


def test_unknown_scope_is_refused():
    with pytest.raises(RegistryError, match="scope"):
        check("a.b", scope="rack")


def _write(dirpath, name, body):
    path = dirpath / name
    path.write_text(textwrap.dedent(body))
    return path


def test_two_checks_with_one_name_is_a_load_error_naming_both(tmp_path):
    _write(tmp_path, "dup.py", """
        from dsv3_preflight import Result, check
        @check("env.launch_vars", needs=[])
        def again():
            return Result.passed("x")
    """)
    with pytest.raises(RegistryError, match=r"two checks are named 'env.launch_vars'.*checks.env_launch_vars.*dup.py"):
        load_registry([tmp_path], entry_points=False)


def test_check_needing_a_fact_no_probe_provides_is_a_load_error(tmp_path):
    _write(tmp_path, "needy.py", """
        from dsv3_preflight import Result, check
        @check("site.needy", needs=["no_such_fact"])
        def needy(no_such_fact):
            return Result.passed("x")
    """)
    with pytest.raises(RegistryError, match="needs the fact 'no_such_fact', which no probe provides"):
        load_registry([tmp_path], entry_points=False)


def test_probe_cycle_is_a_load_error():
    @probe("a", needs=["b"])
    def a(b):  # pragma: no cover
        return 1

    @probe("b", needs=["a"])
    def b(a):  # pragma: no cover
        return 1

    registry = Registry()
    registry.add_probe(a, "t")
    registry.add_probe(b, "t")
    with pytest.raises(RegistryError, match="cycle"):
        registry.validate()


def test_checks_dir_that_fails_to_import_is_an_always_selected_error_check_naming_the_file(tmp_path):
    _write(tmp_path, "broken.py", "import no_such_module_xyz\n")
    registry = Registry()
    load_checks_dir(registry, tmp_path)
    spec = registry.checks["plugin.broken"]
    assert registry.failed_plugins["plugin.broken"].startswith(f"the plugin {tmp_path / 'broken.py'} could not be loaded: "
                                                                "ModuleNotFoundError")
    assert spec in registry.select(only=["env.*"]).selected  # whatever the selection, the failure is shown
    assert spec not in registry.select(skip=["plugin.broken"]).selected


def test_missing_checks_dir_is_a_clear_error(tmp_path):
    with pytest.raises(RegistryError, match="not a directory"):
        load_checks_dir(Registry(), tmp_path / "nope")


def test_selection_by_name_prefix_tag_and_skip():
    registry = load_registry(entry_points=False)
    selected, deselected = registry.select(only=["env.*"])
    assert [c.name for c in selected] == ["env.launch_vars", "env.torchrun_python"]
    selected, deselected = registry.select(skip=["env.launch_vars"])
    assert "env.launch_vars" not in [c.name for c in selected]
    assert deselected == {"env.launch_vars": "skipped on request (--skip)"}
    selected, _ = registry.select(tags=["host"])
    assert "host.resources" in [c.name for c in selected]
    assert all("host" in c.tags for c in selected)


def test_selecting_an_unknown_check_selects_nothing_and_says_which_pattern():
    selection = load_registry(entry_points=False).select(only=["nope.x"], tags=["no-tag"])
    assert selection.selected == [] and selection.unmatched == ["--only 'nope.x'", "--tags 'no-tag'"]
    assert selection.why_empty().startswith("no check matches --only 'nope.x', --tags 'no-tag'")
