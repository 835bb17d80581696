"""The suite relies on `-n 2 --dist loadgroup` sending every Ray test to one worker (tests/conftest.py): two Ray
clusters at once starve a 2-core machine, the embedded-Ray tests skip when they see another cluster, and the
module-scoped Ray labs of test_pairs_netns are built again on each worker. pytest 9.2 with pytest-xdist 3.8 broke
that silently (pytest-dev/pytest-xdist#1386); this test fails when it happens again."""
import pytest


@pytest.mark.ray
def test_a_ray_test_is_scheduled_in_the_ray_group(request):
    if not request.config.getvalue("loadgroup"):
        pytest.skip("not run under xdist's --dist loadgroup (scripts/test.sh runs it so)")
    assert request.node.nodeid.endswith("@ray"), (
        f"{request.node.nodeid}: xdist did not put this Ray test in the 'ray' group; pytest "
        f"{pytest.__version__} with this pytest-xdist does not group (see pyproject.toml's test extras)")
