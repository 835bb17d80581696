"""Profile resolution: precedence, sources, and every bad-value path (exit 4 naming source and key)."""
import subprocess

import pytest
from conftest import python_cli

from dsv3_preflight.profile import ConfigError, resolve_profile


def test_defaults_are_this_jobs_cluster():
    p = resolve_profile()
    assert (p.name, p.nnodes, p.nproc_per_node, p.master_port, p.gpus_per_node) == ("dsv3", 3, 8, 39500, 8)
    assert p.effective_world_size == 24
    assert p.sources["master_port"] == "default"


def test_cpu_profile_expects_no_gpus_and_uses_gloo():
    p = resolve_profile(profile_name="cpu")
    assert not p.expects_gpus and p.backend == "gloo" and p.nnodes == 1
    assert p.sources["backend"] == "profile cpu"


def test_precedence_cli_over_env_over_toml_over_profile(tmp_path):
    toml = tmp_path / "preflight.toml"
    toml.write_text('profile = "cpu"\nmaster_port = 40000\nnnodes = 2\nnproc_per_node = 4\nlora_targets = ["q_a_proj", "o_proj"]\n')
    env = {"MASTER_PORT": "41000", "NNODES": "3"}
    p = resolve_profile(cli={"master_port": "42000"}, environ=env, config_path=toml)
    assert p.master_port == 42000 and p.sources["master_port"] == "--master-port"
    assert p.nnodes == 3 and p.sources["nnodes"] == "env NNODES"
    assert p.nproc_per_node == 4 and p.sources["nproc_per_node"] == f"{toml} [nproc_per_node]"
    assert p.backend == "gloo" and p.sources["backend"] == "profile cpu"
    assert p.lora_targets == ("q_a_proj", "o_proj")


def test_env_aliases_and_empty_values():
    p = resolve_profile(environ={"LOCAL_WORLD_SIZE": "4", "MASTER_ADDR": "  ", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert p.nproc_per_node == 4 and p.sources["nproc_per_node"] == "env LOCAL_WORLD_SIZE"
    assert p.master_addr == "127.0.0.1" and p.sources["master_addr"] == "default"  # blank env is not a value
    assert p.cuda_visible_devices == "0,1"


def test_profile_round_trips_through_json_types():
    from dsv3_preflight.profile import Profile

    p = resolve_profile(cli={"lora_targets": "a,b"})
    assert Profile.from_dict(p.to_dict()) == p


@pytest.mark.parametrize("kwargs, message", [
    ({"environ": {"MASTER_PORT": "abc"}}, "env MASTER_PORT: master_port: expected an integer, got 'abc'"),
    ({"environ": {"MASTER_PORT": "70000"}}, "env MASTER_PORT: master_port: must be <= 65535"),
    ({"environ": {"NNODES": "0"}}, "env NNODES: nnodes: must be >= 1"),
    ({"cli": {"master_addr": "bad host!"}}, "--master-addr: master_addr: 'bad host!' is neither an IP address nor a valid host name"),
    ({"cli": {"backend": "mpi"}}, "--backend: backend: must be one of nccl, gloo"),
    ({"cli": {"probe_timeout": "nan"}}, "--probe-timeout: probe_timeout: expected a finite number"),
    ({"cli": {"lora_targets": " , "}}, "--lora-targets: lora_targets: must name at least one entry"),
    ({"environ": {"NODE_RANK": "3"}}, "env NODE_RANK: node_rank: 3 is out of range for nnodes=3"),
    ({"profile_name": "gpu9000"}, "unknown profile 'gpu9000'"),
])
def test_bad_values_name_their_source_and_key(kwargs, message):
    with pytest.raises(ConfigError) as err:
        resolve_profile(**kwargs)
    assert message in str(err.value)


@pytest.mark.parametrize("content, message", [
    ("master_port = 'x'\n", "[master_port]: master_port: expected an integer"),
    ("nnodes = true\n", "nnodes: expected an integer, got a boolean"),
    ("mastr_port = 1\n", "unknown key(s) mastr_port"),
    ("master_port = \n", "invalid TOML"),
    ('profile = "nope"\n', "unknown profile 'nope'"),
])
def test_bad_toml_values_name_the_file_and_key(tmp_path, content, message):
    toml = tmp_path / "p.toml"
    toml.write_text(content)
    with pytest.raises(ConfigError) as err:
        resolve_profile(config_path=toml)
    assert message in str(err.value)
    assert str(toml) in str(err.value) or "profile" in str(err.value)


def test_missing_config_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        resolve_profile(config_path=tmp_path / "missing.toml")


def test_cli_config_shows_sources_and_bad_values_exit_4(tmp_path, clean_env):
    clean_env.setenv("MASTER_ADDR", "10.99.0.1")
    ok = subprocess.run(python_cli("config", "--profile", "cpu", "--master-port", "40001", "--no-color"),
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert "env MASTER_ADDR" in ok.stdout and "--master-port" in ok.stdout and "profile cpu" in ok.stdout
    bad = subprocess.run(python_cli("config", "--master-port", "x"), capture_output=True, text=True, timeout=60)
    assert bad.returncode == 4
    assert "--master-port: master_port: expected an integer" in bad.stderr
    assert "Traceback" not in bad.stderr
