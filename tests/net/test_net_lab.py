"""The netns lab itself: topology, route lookups inside it (netlink and the UDP fallback), teardown."""
import json
import subprocess
import sys

import pytest
from netns_lab import NetnsLab, netns_lab, unavailable_reason  # noqa: F401  (netns_lab is the fixture)

pytestmark = pytest.mark.netns
PY = sys.executable
ROUTE_SNIPPET = (
    "import json,sys; from dsv3_preflight.net.probes.route import netlink_route_get, udp_route_get, route_get; "
    "d=sys.argv[1]; print(json.dumps({'netlink': netlink_route_get(d), 'udp': udp_route_get(d)}))"
)


def lab_namespaces(lab):
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=10).stdout
    return [ns for ns in [lab.switch, *lab.namespaces] if ns in listed]


def test_route_to_the_head_goes_through_eth0_although_the_default_route_is_eth1(netns_lab):
    lab = netns_lab
    proc = lab.exec(1, [PY, "-c", ROUTE_SNIPPET, lab.addr(0)], check=True)
    both = json.loads(proc.stdout)
    for method in ("netlink", "udp"):
        assert both[method]["ifname"] == "eth0" and both[method]["src"] == lab.addr(1), method
        assert both[method]["gateway"] is None
    default = json.loads(lab.exec(1, [PY, "-c", ROUTE_SNIPPET, "10.99.0.1"], check=True).stdout)
    for method in ("netlink", "udp"):
        assert default[method]["ifname"] == "eth1" and default[method]["gateway"] == "10.77.1.1", method


def test_route_to_an_own_address_is_local(netns_lab):
    out = json.loads(netns_lab.exec(0, [PY, "-c", ROUTE_SNIPPET, netns_lab.addr(0)], check=True).stdout)
    assert out["netlink"]["route_type"] == "local" and out["udp"]["route_type"] == "local"


def test_lab_is_torn_down_even_when_the_body_raises():
    if unavailable_reason():
        pytest.skip(unavailable_reason())
    with pytest.raises(RuntimeError):
        with NetnsLab() as lab:
            sleeper = lab.popen(2, ["sleep", "300"])
            assert len(lab_namespaces(lab)) == 4
            raise RuntimeError("scenario failed")
    assert lab_namespaces(lab) == []
    assert sleeper.poll() is not None


def test_two_labs_at_once_do_not_collide():
    if unavailable_reason():
        pytest.skip(unavailable_reason())
    with NetnsLab() as a, NetnsLab() as b:
        assert set(a.namespaces).isdisjoint(b.namespaces)
        assert a.exec(1, ["true"]).returncode == 0 and b.exec(1, ["true"]).returncode == 0
    assert lab_namespaces(a) == [] and lab_namespaces(b) == []
