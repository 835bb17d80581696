"""The pure launch builder: profile + derived environment in, torchrun argv + env out."""
import shlex

import pytest

from dsv3_preflight.launch.command import (
    Derived,
    build_command,
    default_torchrun,
    derive_env,
    ifname_selects,
    shell_text,
    torchrun_argv,
)
from dsv3_preflight.profile import resolve_profile

TORCHRUN = ["torchrun"]
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
    derived, notes = derive_env(dsv3(), {"nic_route": {"interface": "eth0"}})
    assert derived["NCCL_SOCKET_IFNAME"].value == "eth0" and derived["GLOO_SOCKET_IFNAME"].value == "eth0"
    assert "eth0" in derived["NCCL_SOCKET_IFNAME"].reason and notes == []


def test_without_a_route_fact_nothing_is_derived_and_a_note_says_so():
    derived, notes = derive_env(cpu(), {})
    assert derived == {}
    assert notes and "nic_route" in notes[0]


def test_gpu_profile_derives_pci_bus_id_order_and_cpu_profile_does_not():
    assert derive_env(dsv3(), {})[0]["CUDA_DEVICE_ORDER"].value == "PCI_BUS_ID"
    assert "CUDA_DEVICE_ORDER" not in derive_env(cpu(), {})[0]


def test_derived_values_fill_what_the_user_did_not_set():
    derived = {"NCCL_SOCKET_IFNAME": Derived("eth0", "route"), "GLOO_SOCKET_IFNAME": Derived("eth0", "route")}
    cmd = build_command(dsv3(), TRAIN, environ={"PATH": "/bin"}, derived=derived, torchrun=TORCHRUN)
    assert cmd.env == {"PATH": "/bin", "NCCL_SOCKET_IFNAME": "eth0", "GLOO_SOCKET_IFNAME": "eth0"}
    assert cmd.diff == (("NCCL_SOCKET_IFNAME", "eth0"), ("GLOO_SOCKET_IFNAME", "eth0"))
    assert cmd.warnings == () and cmd.kept == ()


def test_users_explicit_value_wins_and_a_contradiction_warns():
    derived = {"NCCL_SOCKET_IFNAME": Derived("eth0", "route to MASTER_ADDR leaves through eth0")}
    environ = {"NCCL_SOCKET_IFNAME": "ib0"}
    cmd = build_command(dsv3(), TRAIN, environ=environ, derived=derived, torchrun=TORCHRUN)
    assert cmd.env["NCCL_SOCKET_IFNAME"] == "ib0"
    assert cmd.diff == ()
    assert cmd.kept == (("NCCL_SOCKET_IFNAME", "ib0", "eth0"),)
    assert len(cmd.warnings) == 1 and "NCCL_SOCKET_IFNAME=ib0" in cmd.warnings[0] and "eth0" in cmd.warnings[0]


@pytest.mark.parametrize("spec", ["eth", "eth0", "=eth0", "^docker,lo", "ib0,eth"])
def test_users_interface_spec_that_selects_the_route_interface_does_not_warn(spec):
    cmd = build_command(dsv3(), TRAIN, environ={"GLOO_SOCKET_IFNAME": spec},
                        derived={"GLOO_SOCKET_IFNAME": Derived("eth0", "route")}, torchrun=TORCHRUN)
    assert cmd.env["GLOO_SOCKET_IFNAME"] == spec and cmd.warnings == ()


@pytest.mark.parametrize("spec, iface, selects", [
    ("eth", "eth0", True), ("=eth", "eth0", False), ("^eth", "eth0", False), ("^=eth", "eth0", True),
    ("^docker,lo", "docker0", False), ("ens", "eth0", False), ("ens,eth1", "eth1", True),
])
def test_interface_spec_follows_nccls_prefix_exact_and_exclusion_rules(spec, iface, selects):
    assert ifname_selects(spec, iface) is selects


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
                        derived={"NCCL_SOCKET_IFNAME": Derived("eth0", "route"), "GLOO_SOCKET_IFNAME": Derived("eth0", "route")},
                        torchrun=TORCHRUN)
    text = shell_text(cmd)
    lines = text.splitlines()
    assert lines[0] == "export GLOO_SOCKET_IFNAME=eth0"
    assert lines[1] == "# NCCL_SOCKET_IFNAME='ib 0' kept from your environment (derived: eth0)"
    assert shlex.split(lines[2]) == list(cmd.argv)
    assert text.endswith("\n") and len(lines) == 3
