"""Shared by the net.* rule and check tables: facts recorded in the netns lab (tests/data/net/lab_*.json) loaded
fresh per test (the `lab` and `facts` fixtures, one loader under the two names the tables use), the profiles they
judge under, and the check that a finding names who acts and that its fix pastes (tests/paste_lint.py)."""
import copy
import json

import pytest
from paste_lint import paste_problems

from dsv3_preflight.profile import resolve_profile

MULTI = resolve_profile(environ={"NNODES": "3", "MASTER_ADDR": "10.77.0.10", "NODE_RANK": "1"})
HEAD = resolve_profile(environ={"NNODES": "3", "MASTER_ADDR": "10.77.0.10", "NODE_RANK": "0"})
#: the two tables' copies differed only in this `.with_values("test", nnodes=3)`, which the check table applied
#: where it used it (test_nic_route_fails_gloo_backend_when_the_host_name_resolves_to_loopback): the same profile
MULTI_GLOO = resolve_profile(environ={"NNODES": "3", "MASTER_ADDR": "10.77.0.10", "NODE_RANK": "1"},
                             profile_name="cpu").with_values("test", nnodes=3)
SINGLE = resolve_profile(profile_name="cpu")


@pytest.fixture
def lab(data_dir):
    def load(name):
        return copy.deepcopy(json.loads((data_dir / "net" / f"lab_{name}.json").read_text())["facts"])
    return load


def route(lab, node="worker_two_nics", **changes):
    fact = lab(node)["nic_route"]
    env = {k: changes.pop(k) for k in list(changes) if k.isupper()}
    fact["env"].update(env)
    fact.update(changes)
    return fact


def assert_finding(found, status, cause, actor, *words):
    assert found is not None, "the rule found nothing"
    assert found.status is status, found
    assert found.cause == cause and found.actor is actor, found
    for word in words:
        assert word in found.message, found.message
    assert found.fix and paste_problems(found.fix) == [], (found.fix, paste_problems(found.fix))


@pytest.fixture
def facts(data_dir):
    def load(name):
        return copy.deepcopy(json.loads((data_dir / "net" / f"lab_{name}.json").read_text())["facts"])
    return load


def with_env(fact, **env):
    fact["env"].update(env)
    return fact
