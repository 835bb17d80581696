"""The pure launch builder: profile + derived environment in, torchrun argv + env out."""
import shlex

import pytest

from dsv3_preflight.launch.command import (
    Derived,
    build_command,
    default_torchrun,
    derive_env,
    shell_text,
    torchrun_argv,
)
from dsv3_preflight.profile import resolve_profile

TORCHRUN = ["torchrun"]
# nic_route's interface records (format: dsv3_preflight/probes/net.py, nic_route["interfaces"]).
IFACES = [{"name": "lo", "index": 1, "ipv4": ["127.0.0.1"], "ipv6": []},
          {"name": "eth0", "index": 2, "ipv4": ["10.0.0.5"], "ipv6": []},
          {"name": "eth01", "index": 3, "ipv4": ["10.9.0.5"], "ipv6": []},
          {"name": "ib0", "index": 4, "ipv4": ["10.1.0.5"], "ipv6": []}]


def route(ifname="eth0", interfaces=IFACES):
    return {"nic_route": {"ifname": ifname, "target": "10.0.0.1", "interfaces": interfaces, "env": {}}}
TRAIN = ["src/train.py", "--stage", "sft", "--output_dir", "/nfs/out dir"]


def dsv3(**cli):
    return resolve_profile(cli=cli, environ={"MASTER_ADDR": "10.0.0.1", "NODE_RANK": "2"}, profile_name="dsv3")


def cpu(**cli):
    return resolve_profile(cli=cli, environ={}, profile_name="cpu")


def test_argv_is_the_users_torchrun_command_from_the_profile():
    argv = torchrun_argv(dsv3(), TRAIN, torchrun=TORCHRUN)
    assert argv == ["torchrun", "--nnodes=3", "--nproc_per_node=8", "--node_rank=2", "--master_addr=10.0.0.1",
                    "--master_port=39500", "--max_restarts=0", *TRAIN]


def test_node_rank_given_by_the_cluster_overrides_the_profiles():
    argv = torchrun_argv(dsv3(), TRAIN, torchrun=TORCHRUN, node_rank=1)
    assert "--node_rank=1" in argv and "--node_rank=2" not in argv


def test_default_torchrun_is_the_module_of_the_given_interpreter():
    assert default_torchrun("/opt/py/bin/python") == ["/opt/py/bin/python", "-m", "torch.distributed.run"]


def test_cpu_profile_runs_two_processes_on_one_node():
    argv = torchrun_argv(cpu(master_port=40001), ["t.py"], torchrun=TORCHRUN)
    assert argv[1:4] == ["--nnodes=1", "--nproc_per_node=2", "--node_rank=0"]
    assert "--master_port=40001" in argv


def test_route_interface_derives_both_socket_ifnames():
    derived, notes = derive_env(dsv3(), route("ib0"))
    assert derived["NCCL_SOCKET_IFNAME"].value == "ib0" and derived["GLOO_SOCKET_IFNAME"].value == "ib0"
    assert "10.0.0.1" in derived["NCCL_SOCKET_IFNAME"].reason and notes == []


def test_nccl_value_is_exact_when_the_name_is_a_prefix_of_another_interface():
    derived, _ = derive_env(dsv3(), route("eth0"))
    assert derived["NCCL_SOCKET_IFNAME"].value == "=eth0"  # "eth0" would also select eth01
    assert derived["GLOO_SOCKET_IFNAME"].value == "eth0"   # Gloo takes exact names


def test_without_a_route_fact_nothing_is_derived_and_a_note_says_so():
    derived, notes = derive_env(cpu(), {})
    assert derived == {}
    assert notes and "nic_route" in notes[0]


def test_gpu_profile_derives_pci_bus_id_order_and_cpu_profile_does_not():
    assert derive_env(dsv3(), {})[0]["CUDA_DEVICE_ORDER"].value == "PCI_BUS_ID"
    assert "CUDA_DEVICE_ORDER" not in derive_env(cpu(), {})[0]


def test_derived_values_fill_what_the_user_did_not_set():
    derived, _ = derive_env(dsv3(), route("ib0"))
    cmd = build_command(dsv3(), TRAIN, environ={"PATH": "/bin"}, derived=derived, torchrun=TORCHRUN)
    assert cmd.env == {"PATH": "/bin", "NCCL_SOCKET_IFNAME": "ib0", "GLOO_SOCKET_IFNAME": "ib0",
                       "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert cmd.diff == (("NCCL_SOCKET_IFNAME", "ib0"), ("GLOO_SOCKET_IFNAME", "ib0"), ("CUDA_DEVICE_ORDER", "PCI_BUS_ID"))
    assert cmd.warnings == () and cmd.kept == ()


def test_users_explicit_value_wins_and_a_contradiction_warns():
    derived, _ = derive_env(dsv3(), route("eth0"))
    environ = {"NCCL_SOCKET_IFNAME": "ib0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    cmd = build_command(dsv3(), TRAIN, environ=environ, derived=derived, torchrun=TORCHRUN)
    assert cmd.env["NCCL_SOCKET_IFNAME"] == "ib0"
    assert cmd.diff == (("GLOO_SOCKET_IFNAME", "eth0"),)
    assert cmd.kept == (("NCCL_SOCKET_IFNAME", "ib0", "=eth0"),)
    assert len(cmd.warnings) == 1
    assert cmd.warnings[0].startswith("NCCL_SOCKET_IFNAME=ib0 is yours and is kept, but the preflight derived "
                                      "NCCL_SOCKET_IFNAME==eth0: the route to MASTER_ADDR 10.0.0.1 leaves through eth0")


@pytest.mark.parametrize("name, spec", [
    ("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_SOCKET_IFNAME", "=eth0"), ("NCCL_SOCKET_IFNAME", "^lo,docker"),
    ("NCCL_SOCKET_IFNAME", "eth"), ("GLOO_SOCKET_IFNAME", "eth0"),
])
def test_users_value_selecting_the_route_interface_is_kept_without_warning(name, spec):
    derived, _ = derive_env(dsv3(), route("eth0"))
    cmd = build_command(dsv3(), TRAIN, environ={name: spec}, derived=derived, torchrun=TORCHRUN)
    assert cmd.env[name] == spec and cmd.warnings == ()


# a down eth2 before eth0 (index 2): NCCL 2.28.3 and later skip it; earlier ones bootstrap on it
DOWN_FIRST = [{"name": "lo", "index": 1, "ipv4": ["127.0.0.1"], "ipv6": [], "operstate": "unknown"},
              {"name": "eth2", "index": 2, "ipv4": ["10.94.0.1"], "ipv6": [], "operstate": "down", "up": False},
              {"name": "eth0", "index": 3, "ipv4": ["10.0.0.5"], "ipv6": [], "operstate": "up"}]


@pytest.mark.parametrize("nccl_version, warns", [("2.29.7", False), (None, False), ("2.27.7", True)])
def test_a_prefix_also_matching_a_down_interface_contradicts_only_an_nccl_that_bootstraps_on_it(nccl_version, warns):
    facts = route("eth0", DOWN_FIRST)
    facts["nic_route"]["nccl_version"] = nccl_version
    derived, _ = derive_env(dsv3(), facts)
    cmd = build_command(dsv3(), TRAIN, environ={"NCCL_SOCKET_IFNAME": "eth"}, derived=derived, torchrun=TORCHRUN)
    assert bool(cmd.warnings) is warns, cmd.warnings


@pytest.mark.parametrize("spec, warns", [("eth0,", False), ("eth0,eth0", False), (",eth0", True), ("eth0,ib0", True)])
def test_a_gloo_list_contradicts_only_when_gloo_uses_another_interface_or_fails(spec, warns):
    derived, _ = derive_env(dsv3(), route("eth0"))
    cmd = build_command(dsv3(), TRAIN, environ={"GLOO_SOCKET_IFNAME": spec}, derived=derived, torchrun=TORCHRUN)
    assert bool(cmd.warnings) is warns, cmd.warnings


@pytest.mark.parametrize("name, spec", [
    ("NCCL_SOCKET_IFNAME", "ib"), ("NCCL_SOCKET_IFNAME", "^eth0"), ("NCCL_SOCKET_IFNAME", "ens"),
    ("GLOO_SOCKET_IFNAME", "eth"), ("GLOO_SOCKET_IFNAME", "eth0,ib0"),
])
def test_users_value_selecting_another_interface_is_kept_with_a_warning(name, spec):
    derived, _ = derive_env(dsv3(), route("eth0"))
    cmd = build_command(dsv3(), TRAIN, environ={name: spec}, derived=derived, torchrun=TORCHRUN)
    assert cmd.env[name] == spec
    assert [w.split(" is yours")[0] for w in cmd.warnings] == [f"{name}={spec}"]


def test_an_empty_user_value_counts_as_unset():
    cmd = build_command(dsv3(), TRAIN, environ={"CUDA_DEVICE_ORDER": " "},
                        derived={"CUDA_DEVICE_ORDER": Derived("PCI_BUS_ID", "order")}, torchrun=TORCHRUN)
    assert cmd.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and cmd.diff == (("CUDA_DEVICE_ORDER", "PCI_BUS_ID"),)


def test_the_given_environment_is_not_mutated():
    environ = {"PATH": "/bin"}
    build_command(dsv3(), TRAIN, environ=environ, derived={"X": Derived("1", "r")}, torchrun=TORCHRUN)
    assert environ == {"PATH": "/bin"}


def test_no_training_script_is_refused():
    with pytest.raises(ValueError, match="after `--`"):
        build_command(dsv3(), [], environ={}, derived={}, torchrun=TORCHRUN)


def test_shell_text_is_quoted_and_round_trips_through_a_shell_parser():
    cmd = build_command(dsv3(), [*TRAIN, "--note", "it's $HOME"], environ={"NCCL_SOCKET_IFNAME": "ib 0"},
                        derived=derive_env(cpu(), route("ib0"))[0], torchrun=TORCHRUN)
    text = shell_text(cmd)
    lines = text.splitlines()
    assert lines[0] == "export GLOO_SOCKET_IFNAME=ib0"
    assert lines[1] == "# NCCL_SOCKET_IFNAME='ib 0' kept from your environment (derived: ib0)"
    assert shlex.split(lines[2]) == list(cmd.argv)
    assert text.endswith("\n") and len(lines) == 3


def test_torchruns_log_dir_is_given_unless_the_user_chose_one():
    def argv(torchrun=TORCHRUN, environ=None):
        return list(build_command(cpu(), ["t.py"], environ=environ or {}, derived={}, torchrun=torchrun,
                                  log_dir="/r/launch-1-n").argv)

    assert argv()[-2:] == ["--log-dir=/r/launch-1-n", "t.py"]   # torchrun's option, before the script
    for yours in (["torchrun", "--log-dir", "/mine"], ["torchrun", "--log_dir=/mine"]):
        assert not [a for a in argv(yours) if "/r/launch" in a]
    assert not [a for a in argv(environ={"PET_LOG_DIR": "/mine"}) if "/r/launch" in a]   # torchrun's variable
    assert "--log-dir" not in " ".join(torchrun_argv(cpu(), ["t.py"], torchrun=TORCHRUN))   # none asked: none given
