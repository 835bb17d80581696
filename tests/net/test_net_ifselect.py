"""NCCL's and Gloo's interface-selection rules (dsv3_preflight.net.ifselect), as tables.

The interface lists are those of real nodes: a GPU node as in the field notes (lo, eth0, docker0,
an IPoIB ib0) and node 1 of tests/netns_lab.py as its nic_route fact recorded it.
"""
import json

import pytest

from dsv3_preflight.net.ifselect import (
    find_interfaces,
    gloo_default_address,
    gloo_select,
    invalid_entries,
    is_running,
    nccl_select,
    nccl_settings,
    parse_nccl_conf,
    parse_nccl_ifname,
    recommended_nccl_value,
)

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


# -- NCCL 2.28.3 and later skip interfaces that are not RUNNING ------------------------------------------------
def _audit_case_id(case):
    return f"{case['NCCL_SOCKET_IFNAME']!r}/{case['NCCL_SOCKET_FAMILY']}"


@pytest.fixture
def recorded_nccl(data_dir):
    return json.loads((data_dir / "net" / "nccl_2.29.7_audit_netns.json").read_text())


def test_selection_agrees_with_nccl_2_29_7_own_code_on_every_recorded_value(recorded_nccl):
    # eth2 (down) and nocarr0 (up, no carrier) come before eth0 by index: NCCL 2.29.7 skips them, bootstraps on eth0
    wrong = {}
    for case in recorded_nccl["cases"]:
        got = nccl_select(case["NCCL_SOCKET_IFNAME"], recorded_nccl["interfaces"], case["NCCL_SOCKET_FAMILY"], "2.29.7")
        if got["selected"] != case["selected"]:
            wrong[_audit_case_id(case)] = (got["selected"], case["selected"])
    assert wrong == {}
    assert len(recorded_nccl["cases"]) == 40


def test_an_unknown_nccl_version_is_judged_as_the_one_torch_2_13_ships(recorded_nccl):
    ifaces = recorded_nccl["interfaces"]
    unknown = nccl_select("eth", ifaces)
    assert unknown["selected"] == ["eth0", "eth01", "eth1"] and unknown["not_running"] == ["eth2"]
    assert unknown["nccl_version"] == "2.29.7" and unknown["version_assumed"] is True


def test_nccl_before_2_28_3_keeps_interfaces_that_are_down_and_has_no_virbr_step(recorded_nccl):
    ifaces = recorded_nccl["interfaces"]
    old = nccl_select("eth", ifaces, None, "2.27.7")
    assert old["selected"] == ["eth2", "eth0", "eth01", "eth1"] and old["bootstrap"] == "eth2"
    assert old["not_running"] == [] and old["skips_not_running"] is False and old["version_assumed"] is False
    assert nccl_select(None, ifaces, None, "2.27.7")["spec"] == "^docker,lo"
    only_virbr = [{"name": "lo", "index": 1, "ipv4": ["127.0.0.1"], "operstate": "unknown"},
                  {"name": "virbr0", "index": 2, "ipv4": ["192.168.122.1"], "operstate": "up"}]
    assert nccl_select(None, only_virbr, None, "2.27.7")["bootstrap"] == "virbr0"  # ^docker,lo takes it
    assert nccl_select(None, only_virbr, None, "2.28.3")["bootstrap"] == "lo"      # ^docker,lo,virbr; lo before virbr
    assert nccl_select(None, only_virbr[1:], None, "2.28.3")["spec"] == "virbr"


def test_a_value_matching_only_interfaces_that_are_not_running_selects_nothing(recorded_nccl):
    ifaces = recorded_nccl["interfaces"]
    for value, skipped in (("eth2", ["eth2"]), ("nocarr0", ["nocarr0"]), ("eth2,nocarr0", ["eth2", "nocarr0"])):
        sel = nccl_select(value, ifaces, None, "2.29.7")
        assert (sel["selected"], sel["bootstrap"], sel["not_running"]) == ([], None, skipped), value


@pytest.mark.parametrize("record, running", [
    ({"operstate": "up", "up": True}, True),
    ({"operstate": "unknown", "up": True}, True),            # lo, tun, dummy: the kernel sets IFF_RUNNING
    ({"operstate": "down", "up": True}, False),              # up, no carrier
    ({"operstate": "lowerlayerdown", "up": True}, False),
    ({"operstate": "dormant", "up": True}, False),
    ({"operstate": "down", "up": False}, False),
    ({"operstate": "up", "up": True, "running": False}, True),  # the old probe's running field was always false
    ({}, True),                                              # nothing known: kept
])
def test_running_follows_the_operstate_as_the_kernel_sets_iff_running(record, running):
    assert is_running(dict(record, name="x")) is running


def test_recommended_value_ignores_the_state_of_the_other_interfaces(recorded_nccl):
    # eth01 is up today; were it down, NCCL 2.29.7 would skip it, but a bare eth0 would take it once it came up
    ifaces = [dict(i, operstate="down") if i["name"] == "eth01" else i for i in recorded_nccl["interfaces"]]
    assert recommended_nccl_value("eth0", ifaces) == "=eth0"
    assert recommended_nccl_value("eth0", []) == "=eth0"        # interfaces unknown: the exact form


# -- Gloo: what torch 2.13 does with the value, and the host name's address ------------------------------------
@pytest.mark.parametrize("value, honoured, names, empty", [
    ("lo", True, ["lo"], False),
    ("l", False, [], False),            # one character: torch ignores it (strlen > 1)
    ("", False, [], False),
    ("lo,", True, ["lo"], False),       # std::getline drops the trailing empty piece
    ("lo,lo,", True, ["lo", "lo"], False),
    (",lo", True, ["", "lo"], True),    # a leading or middle empty piece stays: makeTCPDevice refuses it
    ("lo,,lo", True, ["lo", "", "lo"], True),
    ("lo,,", True, ["lo", ""], True),
])
def test_gloo_value_is_split_as_torch_splits_it(value, honoured, names, empty):
    sel = gloo_select(value, [{"name": "lo", "index": 1, "ipv4": ["127.0.0.1"]}])
    assert (sel["honoured"], sel["names"], sel["empty"]) == (honoured, names, empty)
    assert sel["invalid"] == [] and (sel["note"] is None) is honoured


HOST = [{"name": "lo", "index": 1, "ipv4": ["127.0.0.1"], "ipv6": ["::1"]},
        {"name": "eth0", "index": 2, "ipv4": ["10.77.0.11"], "ipv6": []}]


@pytest.mark.parametrize("resolved, address, fallback", [
    (["127.0.1.1", "10.77.0.11"], "127.0.1.1", False),   # Debian's line first: Gloo binds it (any 127/8 binds)
    (["10.77.0.11", "127.0.1.1"], "10.77.0.11", False),
    (["10.9.9.9", "10.77.0.11"], "10.77.0.11", False),   # not this node's: bind fails, the next one is taken
    (["10.9.9.9"], "127.0.0.1", True),                   # none binds: torch warns and binds 127.0.0.1
    ([], "127.0.0.1", True),
])
def test_gloo_binds_the_first_host_name_address_this_node_can_bind(resolved, address, fallback):
    bound = gloo_default_address(resolved, HOST)
    assert (bound["address"], bound["fallback"]) == (address, fallback)


# -- NCCL reads at most 16 entries; ':' ends an entry's name whatever follows ---------------------------------------
#: NCCL 2.29.7's own selection code (parseStringList, matchIfList, ncclOsFindInterfaces, ncclFindInterfaces copied
#: unchanged into the ifname audit's harness, which calls getifaddrs) run on this development machine, whose
#: interfaces were lo (127.0.0.1) and eth0 (192.0.2.2, fd00::2), both RUNNING (2026-11-25). X15 is x0,...,x14.
X15 = ",".join(f"x{i}" for i in range(15))
HERE = [{"name": "lo", "index": 1, "ipv4": ["127.0.0.1"], "ipv6": ["::1"], "operstate": "unknown", "up": True},
        {"name": "eth0", "index": 2, "ipv4": ["192.0.2.2"], "ipv6": ["fd00::2"], "operstate": "up", "up": True}]


@pytest.mark.parametrize("value, selected", [
    (f"{X15},lo", ["lo"]),                  # 16 entries: lo is the 16th
    (f"{X15},x15,lo", []),                  # 17: lo is never read
    (f"{X15},,lo", ["lo"]),                 # an empty entry does not count
    (f"{X15},:5,lo", ["lo"]),               # nor one with only a port
    (f"^{X15},x15,lo", ["lo", "eth0"]),     # excluding: the 17th entry is not excluded
])
def test_only_the_first_16_entries_are_read_as_nccl_2_29_7_reads_them_here(value, selected):
    sel = nccl_select(value, HERE, nccl_version="2.29.7")
    assert sel["selected"] == selected
    assert ("ignores the 1 after them: lo" in (sel["note"] or "")) == (selected != ["lo"])


@pytest.mark.parametrize("value", ["eth0:1:2", "eth0:", "eth0:x"])
def test_an_entry_is_cut_at_its_first_colon_as_nccl_does_and_is_not_invalid(value):
    # the audit's harness selected eth0 and eth01 for eth0:1:2 and eth0: (tests/data/net/nccl_2.29.7_audit_netns.json)
    assert invalid_entries(value) == [] and parse_nccl_ifname(value) == (False, False, ["eth0"])


# -- nccl.conf (src/misc/param.cc setEnvFile / initEnvFunc) ----------------------------------------------------------
def test_nccl_conf_lines_are_read_as_set_env_file_reads_them():
    text = ("# site defaults\nNCCL_SOCKET_IFNAME==ens1f0\nNCCL_DEBUG=WARN\n NCCL_IB_HCA=mlx5\nexport NCCL_X=1\n"
            "NCCL_SOCKET_IFNAME=eth9\nNCCL_COMM_ID=10.0.0.1:29500\r\nnot a setting\n")
    assert parse_nccl_conf(text) == {
        "NCCL_SOCKET_IFNAME": "=ens1f0",      # the first line wins within a file (setenv without overwrite)
        "NCCL_DEBUG": "WARN", " NCCL_IB_HCA": "mlx5", "export NCCL_X": "1",   # names are not trimmed
        "NCCL_COMM_ID": "10.0.0.1:29500\r"}  # nor values: a CRLF file's value ends in \r


def test_the_environment_wins_then_the_first_file_in_nccls_order():
    files = [{"path": "/home/u/.nccl.conf", "values": {"NCCL_SOCKET_IFNAME": "eth1"}},
             {"path": "/etc/nccl.conf", "values": {"NCCL_SOCKET_IFNAME": "eth2", "NCCL_SOCKET_FAMILY": "AF_INET"}}]
    names = ("NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY", "NCCL_COMM_ID")
    assert nccl_settings({}, files, names) == {"NCCL_SOCKET_IFNAME": ("eth1", "/home/u/.nccl.conf"),
                                               "NCCL_SOCKET_FAMILY": ("AF_INET", "/etc/nccl.conf"),
                                               "NCCL_COMM_ID": (None, None)}
    assert nccl_settings({"NCCL_SOCKET_IFNAME": "eth0"}, files, names)["NCCL_SOCKET_IFNAME"] == ("eth0", None)
    assert nccl_settings({"NCCL_SOCKET_IFNAME": ""}, files, names)["NCCL_SOCKET_IFNAME"] == ("", None)   # set, empty
