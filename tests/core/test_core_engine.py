"""The engine: exceptions and timeouts become ERROR results, the run goes on and stays bounded."""
import json
import subprocess
import textwrap
import time

import pytest
from conftest import python_cli

from dsv3_preflight import Result, Status, check, probe
from dsv3_preflight.engine import exit_code, run_cluster_checks, run_node_checks
from dsv3_preflight.facts import FactStore
from dsv3_preflight.profile import resolve_profile
from dsv3_preflight.registry import Registry, RegistryError


def _registry(*specs):
    registry = Registry()
    for spec in specs:
        if hasattr(spec, "fact"):
            registry.add_probe(spec, "test")
        else:
            registry.add_check(spec, "test")
    registry.validate()
    return registry


@probe("number", timeout=2)
def number_probe():
    return 41


@probe("slow", timeout=0.3)
def slow_probe():
    time.sleep(30)
    return 0


@probe("broken", timeout=2)
def broken_probe():
    raise RuntimeError("device went away")


@probe("plus_one", needs=["number"], timeout=2)
def plus_one(number):
    return number + 1


@check("t.answer", needs=["plus_one"])
def answer(plus_one):
    """answer"""
    return Result.passed(f"answer {plus_one}") if plus_one == 42 else Result.failed("wrong", remediation="fix it")


@check("t.raises", needs=["number"])
def raises(number):
    """raises"""
    raise ValueError("bad judge")


@check("t.waits_slow", needs=["slow"])
def waits_slow(slow):
    """slow"""
    return Result.passed("never")


@check("t.needs_broken", needs=["broken"])
def needs_broken(broken):
    """broken"""
    return Result.passed("never")


@check("t.returns_junk", needs=[])
def returns_junk():
    """junk"""
    return "ok"


@check("t.unserialisable", needs=[])
def unserialisable():
    """bad evidence"""
    return Result.passed("x", evidence={"obj": object()})


@check("t.spins", needs=[], timeout=0.3)
def spins():
    """spins"""
    time.sleep(30)


def _run(*specs, profile=None):
    registry = _registry(number_probe, slow_probe, broken_probe, plus_one, *specs)
    profile = profile or resolve_profile(profile_name="cpu")
    store = FactStore(registry, {"profile": profile})
    return {r.name: r for r in run_node_checks(registry, list(specs), store, "n1")}, store


def test_probe_dependencies_are_gathered_first_and_the_result_is_stamped():
    results, store = _run(answer)
    r = results["t.answer"]
    assert r.status is Status.PASS and r.summary == "answer 42"
    assert r.name == "t.answer" and r.node == "n1" and r.duration_s >= 0
    assert store.snapshot()["facts"] == {"number": 41, "plus_one": 42}


def test_a_check_that_raises_is_an_error_and_the_others_still_run():
    results, _ = _run(raises, answer)
    assert results["t.raises"].status is Status.ERROR
    assert "ValueError: bad judge" in results["t.raises"].summary
    assert results["t.answer"].status is Status.PASS


def test_a_probe_past_its_timeout_makes_an_error_within_the_timeout():
    started = time.monotonic()
    results, store = _run(waits_slow, answer)
    assert time.monotonic() - started < 1.5
    assert results["t.waits_slow"].status is Status.ERROR
    assert "timed out after 0.3 s" in results["t.waits_slow"].summary
    assert results["t.answer"].status is Status.PASS
    assert "slow" in store.snapshot()["fact_errors"]


def test_a_probe_that_raises_is_an_error_for_its_checks_only():
    results, store = _run(needs_broken, answer)
    assert results["t.needs_broken"].status is Status.ERROR
    assert "RuntimeError: device went away" in results["t.needs_broken"].summary
    assert "device went away" in store.snapshot()["fact_errors"]["broken"]


# --- ordering: a probe that disturbs what another observes runs after it (the collective probe listens on
# MASTER_PORT, which port_bind and port_holders inspect; run together they reported this run's own socket) ---
_events: list[tuple[str, str, float]] = []


@probe("observer", timeout=5)
def observer_probe():
    _events.append(("observer", "start", time.monotonic()))
    time.sleep(0.4)
    _events.append(("observer", "end", time.monotonic()))
    return "seen"


@probe("observer_fails", timeout=5)
def observer_fails_probe():
    time.sleep(0.2)
    _events.append(("observer_fails", "end", time.monotonic()))
    raise OSError("cannot inspect")


@probe("disturber", timeout=5, after=["observer", "observer_fails"])
def disturber_probe():
    _events.append(("disturber", "start", time.monotonic()))
    return "done"


@check("t.observes", needs=["observer"])
def observes(observer):
    """observes"""
    return Result.passed(observer)


@check("t.disturbs", needs=["disturber"])
def disturbs(disturber):
    """disturbs"""
    return Result.passed(disturber)


def _ordered_run(*checks):
    _events.clear()
    registry = _registry(observer_probe, observer_fails_probe, disturber_probe, *checks)
    store = FactStore(registry, {"profile": resolve_profile(profile_name="cpu")})
    return {r.name: r for r in run_node_checks(registry, list(checks), store, "n1")}, store


def test_a_probe_declared_after_others_starts_once_they_finished_even_when_they_failed():
    results, store = _ordered_run(observes, disturbs)
    assert results["t.observes"].status is Status.PASS and results["t.disturbs"].status is Status.PASS
    at = {(name, what): t for name, what, t in _events}
    assert at[("disturber", "start")] >= at[("observer", "end")]
    # the failing one was not gathered for it (no check needs it): ordering does not start probes
    assert ("observer_fails", "end") not in at and "observer_fails" not in store.snapshot()["fact_errors"]


def test_ordering_waits_for_a_failed_probe_and_does_not_inherit_its_error():
    _events.clear()
    registry = _registry(observer_probe, observer_fails_probe, disturber_probe, disturbs)
    store = FactStore(registry, {"profile": resolve_profile(profile_name="cpu")})
    store.start(["observer_fails", "disturber"])
    assert store.get("disturber") == "done"
    at = {(name, what): t for name, what, t in _events}
    assert at[("disturber", "start")] >= at[("observer_fails", "end")]
    assert "cannot inspect" in store.snapshot()["fact_errors"]["observer_fails"]


def test_a_probe_ordered_after_probes_this_run_does_not_gather_does_not_wait():
    _events.clear()
    registry = _registry(observer_probe, observer_fails_probe, disturber_probe, disturbs)
    store = FactStore(registry, {"profile": resolve_profile(profile_name="cpu")})
    started = time.monotonic()
    results = {r.name: r for r in run_node_checks(registry, [disturbs], store, "n1")}
    assert results["t.disturbs"].status is Status.PASS and time.monotonic() - started < 0.3
    assert [e[0] for e in _events] == ["disturber"]


def test_ordering_that_makes_a_probe_wait_for_itself_or_names_an_unknown_probe_is_a_load_error():
    @probe("first", timeout=1, after=["second"])
    def first():
        return 1

    @probe("second", needs=["first"], timeout=1)
    def second(first):
        return first

    with pytest.raises(RegistryError, match="cycle: .*first.*second.*first|cycle: .*second.*first.*second"):
        _registry(first, second)

    @probe("lonely", timeout=1, after=["nowhere"])
    def lonely():
        return 1

    with pytest.raises(RegistryError, match="runs after the unknown probe 'nowhere'"):
        _registry(lonely)


def test_the_collective_probe_runs_after_the_probes_that_inspect_the_rendezvous_port():
    from dsv3_preflight.registry import load_registry

    registry = load_registry()
    assert {"port_bind", "port_holders"} <= set(registry.probes["collective"].after)


@pytest.mark.parametrize("spec, text", [
    (returns_junk, "returned str, not a Result"),
    (unserialisable, "not JSON-serialisable"),
    (spins, "did not finish within its timeout of 0.3 s"),
])
def test_bad_judges_become_errors(spec, text):
    results, _ = _run(spec)
    assert results[spec.name].status is Status.ERROR
    assert text in results[spec.name].summary


def test_after_the_overall_deadline_checks_with_facts_at_hand_are_still_judged_and_the_others_name_what_is_missing():
    registry = _registry(number_probe, slow_probe, broken_probe, plus_one, answer, waits_slow, returns_junk)
    store = FactStore(registry, {"profile": resolve_profile(profile_name="cpu")})
    store.start(["plus_one"])
    store.get("plus_one")
    started = time.monotonic()
    results = {r.name: r for r in run_node_checks(registry, [answer, waits_slow, returns_junk], store, "n1",
                                                   deadline=time.monotonic() - 1)}
    assert time.monotonic() - started < 1.0  # nothing waits once the deadline has passed
    assert results["t.answer"].status is Status.PASS and results["t.answer"].summary == "answer 42"
    assert results["t.waits_slow"].status is Status.ERROR
    assert results["t.waits_slow"].summary == "the run's overall timeout was reached before slow could be gathered"
    assert results["t.waits_slow"].evidence == {"facts_not_gathered": ["slow"]}
    assert "returned str, not a Result" in results["t.returns_junk"].summary  # judged late, still checked


def test_a_fact_cut_off_by_the_run_deadline_says_so():
    registry = _registry(number_probe, slow_probe, broken_probe, plus_one, waits_slow)
    store = FactStore(registry, {"profile": resolve_profile(profile_name="cpu")})
    [result] = run_node_checks(registry, [waits_slow], store, "n1", deadline=time.monotonic() + 0.1)
    assert result.status is Status.ERROR
    assert result.summary == "cannot judge: fact 'slow' unavailable: slow: not gathered before the run's overall timeout"


def test_a_check_cannot_report_error_itself():
    @check("t.self_error", needs=[])
    def self_error():
        """x"""
        return Result(Status.ERROR, "I am broken")

    results, _ = _run(self_error)
    assert results["t.self_error"].status is Status.ERROR
    assert "only the engine reports ERROR" in results["t.self_error"].summary


def test_skip_needs_a_reason():
    with pytest.raises(ValueError):
        Result.skipped("  ")


def test_cluster_checks_see_each_fact_per_node_in_rank_order():
    seen = {}

    @check("t.cluster", scope="cluster", needs=["number", "profile", "node_ranks"])
    def cluster(number, profile, node_ranks):
        """c"""
        seen.update(number=number, ranks=node_ranks)
        return Result.passed("ok")

    facts = {"b": {"facts": {"number": 2}}, "a": {"facts": {"number": 1}}, "c": {"facts": {}, "fact_errors": {"number": "x"}}}
    [result] = run_cluster_checks([cluster], resolve_profile(profile_name="cpu"), facts, {"b": 0, "a": 1, "c": 2})
    assert result.status is Status.PASS and result.node == "cluster"
    assert list(seen["number"].items()) == [("b", 2), ("a", 1)]
    assert seen["ranks"] == {"b": 0, "a": 1, "c": 2}


def test_exit_codes_follow_pytest():
    ok, warn, fail, skip = (Result.passed("p"), Result.warned("w"), Result.failed("f"), Result.skipped("s"))
    assert exit_code([]) == 5
    assert exit_code([ok, skip]) == 0
    assert exit_code([ok, warn]) == 0
    assert exit_code([ok, warn], strict=True) == 1
    assert exit_code([ok, fail]) == 1
    assert exit_code([Result._engine_error("e")]) == 1


SITE = textwrap.dedent("""
    import time
    from dsv3_preflight import Result, check, probe

    @probe("sleepy", timeout=1)
    def sleepy():
        time.sleep(60)

    @check("site.sleepy", needs=["sleepy"], timeout=30)
    def sleepy_check(sleepy):
        "waits on a sleeping probe"
        return Result.passed("never")

    @check("site.raises", needs=[])
    def raises():
        "raises"
        raise KeyError("boom")
""")


@pytest.mark.slow
def test_cli_run_with_a_hanging_probe_and_a_raising_check_returns_within_the_timeout(tmp_path, clean_env):
    (tmp_path / "site.py").write_text(SITE)
    out = tmp_path / "r.json"
    argv = python_cli("run", "--profile", "cpu", "--checks-dir", str(tmp_path), "--json", str(out), "--no-report",
                      "--timeout", "3")
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - started
    doc = json.loads(out.read_text())
    by_name = {r["name"]: r for r in doc["results"]}
    assert proc.returncode == 1, proc.stderr
    assert by_name["site.sleepy"]["status"] == "error"
    assert by_name["site.raises"]["status"] == "error" and "KeyError" in by_name["site.raises"]["summary"]
    assert by_name["env.launch_vars"]["status"] == "pass"
    # the run gave up on the probe at its own timeout (1 s) or at the run's (3 s; on a loaded machine the probe may
    # not have started before it), not at the check's (30 s) or when the probe ended (60 s)
    assert by_name["site.sleepy"]["summary"] in (
        "cannot judge: fact 'sleepy' unavailable: probe 'sleepy' timed out after 1 s",
        "the run's overall timeout was reached before sleepy could be gathered"), by_name["site.sleepy"]
    # and returned long before either: the wall time includes the interpreter's start, which on a loaded 2-core CI
    # machine took up to 7 s, so the bound sits between that and the check's 30 s
    assert elapsed < 20, f"took {elapsed:.1f}s"


def test_a_one_node_run_of_a_several_node_profile_reports_each_cluster_check_as_the_engines_skip():
    """runner.py builds no result (issue 43.4): the SKIP of a cluster check one node cannot judge is the engine's."""
    from dsv3_preflight.registry import load_registry
    from dsv3_preflight.runner import run_this_node

    registry = load_registry(entry_points=False)
    profile = resolve_profile(environ={}, profile_name="cpu").with_values("test", nnodes=2)
    seen = []
    outcome = run_this_node(registry, [registry.checks["cluster.node_count"]], profile, node="n0", timeout=30,
                            on_result=seen.append)
    (result,) = outcome.results
    assert result.status is Status.SKIP and result.name == "cluster.node_count" and result.node == "cluster"
    assert result.summary == ("cluster-scope check: the profile has 2 nodes, and this run saw only this one; "
                              "run `dsv3-preflight run --all-nodes` to judge all nodes together")
    assert seen == [result]
