"""NCCL's and Gloo's interface-selection rules (dsv3_preflight.net.ifselect), as tables.

The interface lists are those of real nodes: a GPU node as in the field notes (lo, eth0, docker0,
an IPoIB ib0) and node 1 of tests/netns_lab.py as its nic_route fact recorded it.
"""
import json

import pytest

from dsv3_preflight.net.ifselect import (find_interfaces, gloo_select, invalid_entries, nccl_select,
                                         parse_nccl_ifname, recommended_nccl_value)

GPU_NODE = [
    {"name": "lo", "index": 1, "ipv4": ["127.0.0.1"], "ipv6": ["::1"]},
    {"name": "eth0", "index": 2, "ipv4": ["10.18.122.131"], "ipv6": ["fe80::1"]},
    {"name": "eth1", "index": 3, "ipv4": [], "ipv6": []},
    {"name": "docker0", "index": 4, "ipv4": ["172.17.0.1"], "ipv6": []},
    {"name": "eth10", "index": 5, "ipv4": ["192.168.10.5"], "ipv6": []},
    {"name": "veth6a1", "index": 6, "ipv4": [], "ipv6": ["fe80::2"]},
]
WITH_IB = GPU_NODE + [{"name": "ib0", "index": 7, "ipv4": ["192.168.50.5"], "ipv6": []}]


def lab_node1(data_dir):
    return json.loads((data_dir / "net" / "lab_worker_two_nics.json").read_text())["facts"]["nic_route"]["interfaces"]


@pytest.mark.parametrize("value, expected", [
    ("eth0", (False, False, ["eth0"])),
    ("^docker,lo", (True, False, ["docker", "lo"])),
    ("=eth0", (False, True, ["eth0"])),
    ("^=docker0,lo", (True, True, ["docker0", "lo"])),
    ("eth0:1,ib", (False, False, ["eth0", "ib"])),
    ("eth,,", (False, False, ["eth"])),
])
def test_nccl_value_is_parsed_like_nccl(value, expected):
    assert parse_nccl_ifname(value) == expected


@pytest.mark.parametrize("spec, selected", [
    ("eth0", ["eth0"]),                      # prefix: eth0 only (eth1 has no address, eth10 does not start with eth0)
    ("eth", ["eth0", "eth10"]),              # a prefix matching two, in getifaddrs order
    ("=eth1", []),                           # exact, but eth1 has no address: NCCL skips it
    ("=eth", []),                            # exact: no interface is named 'eth'
    ("^docker,lo", ["eth0", "eth10", "veth6a1"]),  # IPv4 entries first, then the IPv6-only veth
    ("^=docker0,lo,eth10,veth6a1", ["eth0"]),
    ("docker", ["docker0"]),
    ("^", []),  # empty list: matchIfList's "no user list" exception matches all, and ^ inverts it
])
def test_nccl_prefix_exclude_and_exact_rules(spec, selected):
    assert find_interfaces(spec, GPU_NODE) == selected


def test_nccl_ipv4_addresses_come_before_ipv6_only_interfaces_and_loopback_v6_is_skipped():
    ifaces = [{"name": "a6", "index": 1, "ipv4": [], "ipv6": ["fd00::1"]},
              {"name": "b4", "index": 2, "ipv4": ["10.0.0.2"], "ipv6": []},
              {"name": "lo", "index": 3, "ipv4": [], "ipv6": ["::1"]}]
    assert find_interfaces("^x", ifaces) == ["b4", "a6"]


def test_nccl_socket_family_af_inet_drops_interfaces_without_ipv4():
    assert nccl_select("^docker,lo", GPU_NODE, "AF_INET")["selected"] == ["eth0", "eth10"]
    assert nccl_select("^docker,lo", GPU_NODE, "AF_INET6")["selected"] == ["eth0", "veth6a1"]


def test_nccl_unset_prefers_ib_then_anything_but_docker_lo_virbr():
    assert nccl_select(None, WITH_IB)["bootstrap"] == "ib0"
    unset = nccl_select(None, GPU_NODE)
    assert unset["honoured"] is False and unset["spec"] == "^docker,lo,virbr" and unset["bootstrap"] == "eth0"
    only_docker = [i for i in GPU_NODE if i["name"] in ("lo", "docker0")]
    assert nccl_select(None, only_docker)["bootstrap"] == "docker0"


def test_nccl_ignores_a_one_character_value():
    sel = nccl_select("e", GPU_NODE)
    assert sel["honoured"] is False and "ignores" in sel["note"] and sel["bootstrap"] == "eth0"


def test_nccl_bootstrap_is_the_first_selected_interface():
    sel = nccl_select("eth", GPU_NODE)
    assert sel["selected"] == ["eth0", "eth10"] and sel["bootstrap"] == "eth0"


@pytest.mark.parametrize("value, bad", [
    ("eth0", []), ("^docker,lo", []), ("=ens1f0np0", []), ("eth0:1", []),
    ("eth0 ", ["eth0 "]), ("eth0;rm -rf", ["eth0;rm -rf"]), ("a/b", ["a/b"]), ("averyveryverylongname0", ["averyveryverylongname0"]),
])
def test_interface_names_with_odd_characters_are_flagged(value, bad):
    assert invalid_entries(value) == bad


def test_gloo_takes_exact_names_only():
    assert gloo_select("eth0", GPU_NODE)["selected"] == ["eth0"]
    prefix = gloo_select("eth", GPU_NODE)
    assert prefix["selected"] == [] and prefix["missing"] == ["eth"]
    assert gloo_select("eth1", GPU_NODE)["no_address"] == ["eth1"]
    both = gloo_select("eth0,eth10", GPU_NODE)
    assert both["selected"] == ["eth0", "eth10"] and not both["missing"]


def test_recommended_value_is_exact_when_the_name_is_a_prefix_of_another():
    assert recommended_nccl_value("eth10", GPU_NODE) == "eth10"
    assert recommended_nccl_value("eth0", GPU_NODE) == "eth0"
    ifaces = GPU_NODE + [{"name": "eth0.100", "index": 9, "ipv4": ["10.100.0.5"], "ipv6": []}]
    assert recommended_nccl_value("eth0", ifaces) == "=eth0"


def test_rules_on_the_recorded_lab_node_with_two_nics(data_dir):
    ifaces = lab_node1(data_dir)
    assert [i["name"] for i in ifaces][:1] == ["lo"]
    assert nccl_select("eth", ifaces)["selected"] == ["eth0", "eth1"]
    assert nccl_select("^docker,lo", ifaces)["selected"] == ["eth0", "eth1"]
    assert nccl_select("^docker,lo,eth1", ifaces)["selected"] == ["eth0"]
    assert nccl_select(None, ifaces)["bootstrap"] == "eth0"
