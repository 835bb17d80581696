"""lora.deepspeed_config, lora.targets and lora.output_dir: the lint on the field's configs, the module
map of real transformers models built on the meta device, and the whole run through the CLI."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import test_lora_lab as lab
from paste_lint import paste_problems

from dsv3_preflight.checks.lora_output_dir import output_dir
from dsv3_preflight.lora.dsconfig import GATHER_KEY, lint
from dsv3_preflight.lora.probes.facts import model_facts as model_modules
from dsv3_preflight.lora.targets import resolve

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data" / "lora"


def _cfg(name: str) -> dict:
    return json.loads((DATA / name).read_text())


# ------------------------------------------------------------------------------------ deepspeed lint
def _fails(found):
    return [f.message for f in found.failures]


def _warns(found):
    return [f.message for f in found.warnings]


def test_field_configs_with_gather_pass():
    for name in ("ds_z3_offload.json", "ds_z3_no_offload.json"):
        found = lint(_cfg(name), world_size=24)
        assert not found, (name, list(found))


def test_zero3_without_gather_fails_with_a_fix_that_edits_the_users_file(tmp_path):
    """The fix sets the key in the user's own config (its real path), and does it when pasted."""
    path = tmp_path / "ds z3.json"
    shutil.copy(DATA / "ds_z3_no_gather.json", path)
    found = lint(_cfg("ds_z3_no_gather.json"), path=str(path), world_size=24)
    (f,) = found.failures
    assert GATHER_KEY in f.message and "not set" in f.message
    assert f.cause == "lora.gather_flag_off" and f.actor.value == "job"
    assert str(path) in f.fix and paste_problems(f.fix) == []
    subprocess.run(["bash", "-c", f.fix], check=True, capture_output=True, timeout=30)
    assert json.loads(path.read_text())["zero_optimization"][GATHER_KEY] is True
    assert not lint(json.loads(path.read_text()), world_size=24)


@pytest.mark.parametrize("value, why", [(False, "False"), ("auto", "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL, unset"),
                                        (None, "not set")])
def test_gather_false_auto_or_missing_fails_saying_why(value, why):
    cfg = _cfg("ds_z3_offload.json")
    if value is None:
        del cfg["zero_optimization"][GATHER_KEY]
    else:
        cfg["zero_optimization"][GATHER_KEY] = value
    found = lint(cfg, world_size=24)
    assert _fails(found) and why in _fails(found)[0]


@pytest.mark.parametrize("env", [None, "false", "true", "TRUE"])
def test_an_auto_gather_flag_is_judged_as_accelerate_fills_it_from_the_runs_environment(env, tmp_path):
    """The HF Trainer runs DeepSpeed through accelerate's DeepSpeedPlugin, which fills an "auto" gather flag from
    ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL (accelerate launch exports it; torchrun does not). The lint's verdict
    must be what accelerate itself resolves, run here on the same config with the same environment."""
    cfg = _cfg("ds_z3_offload.json")
    cfg["zero_optimization"][GATHER_KEY] = "auto"
    child = dict(os.environ)
    child.pop("ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL", None)
    if env is not None:
        child["ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL"] = env
    code = ("import json, sys; from accelerate.utils import DeepSpeedPlugin; "
            "p = DeepSpeedPlugin(hf_ds_config=json.loads(sys.argv[1])); "
            f"print(json.dumps(p.deepspeed_config['zero_optimization']['{GATHER_KEY}']))")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(cfg)], env=child, cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    resolved = json.loads(out.stdout.strip().splitlines()[-1])
    found = lint(cfg, world_size=24, accelerate_gather=env)
    assert resolved is (not _fails(found)), (env, resolved, _fails(found))
    if _fails(found):
        (f,) = found.failures
        assert "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL" in f.message and paste_problems(f.fix) == []
        assert "export ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL=true" in f.fix


GATHERS = {"gathers": True, "transformers": {"version": "5.23.0", "line": 4110}}


@pytest.mark.parametrize("save, status", [(GATHERS, "warn"), ({"gathers": False}, "fail"),
                                          ({"gathers": None, "reason": "transformers is not installed here"}, "fail"),
                                          (None, "fail")])
def test_the_gather_flag_off_is_a_warning_only_where_the_installed_trainer_gathers_on_its_own(save, status):
    found = lint(_cfg("ds_z3_no_gather.json"), world_size=24, trainer_save=save)
    (f,) = list(found)
    assert f.status.value == status and f.cause == "lora.gather_flag_off" and paste_problems(f.fix) == []
    if status == "warn":
        assert "transformers 5.23.0, trainer.py line 4110" in f.message and "save_pretrained" in f.message
    elif save and save.get("reason"):
        assert "transformers is not installed here" in f.message


def test_a_string_stage_fails_even_where_the_trainer_gathers_and_its_fix_writes_the_number(tmp_path):
    cfg = _cfg("ds_z3_offload.json")
    cfg["zero_optimization"]["stage"] = "3"
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(cfg))
    found = lint(cfg, path=str(path), world_size=24, trainer_save=GATHERS)
    (f,) = found.failures
    assert "is the string '3'" in f.message and "zero.Init" in f.message
    subprocess.run(["bash", "-c", f.fix], check=True, capture_output=True, timeout=30)
    assert json.loads(path.read_text())["zero_optimization"]["stage"] == 3
    assert not lint(json.loads(path.read_text()), world_size=24, trainer_save=GATHERS)


@pytest.mark.parametrize("env, fails", [(None, "ZeRO-2"), ("2", "ZeRO-2"), ("3", None)])
def test_an_auto_stage_is_what_accelerate_fills_it_with(env, fails):
    cfg = _cfg("ds_z3_offload.json")
    cfg["zero_optimization"]["stage"] = "auto"
    found = lint(cfg, world_size=24, accelerate_stage=env, trainer_save=GATHERS)
    if fails:
        (f,) = found.failures
        assert fails in f.message and "ACCELERATE_DEEPSPEED_ZERO_STAGE" in f.message and paste_problems(f.fix) == []
    else:
        assert not found, list(found)


@pytest.mark.parametrize("value", [1, "yes", "on", "1", "True"])
def test_a_gather_flag_deepspeed_reads_as_true_is_true(value):
    cfg = _cfg("ds_z3_offload.json")
    cfg["zero_optimization"][GATHER_KEY] = value
    assert not lint(cfg, world_size=24), value


def test_gather_key_at_the_top_level_is_reported_as_misplaced():
    cfg = _cfg("ds_z3_no_gather.json")
    cfg[GATHER_KEY] = True
    assert "belongs inside zero_optimization" in _fails(lint(cfg, world_size=24))[0]


def test_legacy_fp16_gather_key_counts_and_zero2_needs_no_gather():
    cfg = _cfg("ds_z3_no_gather.json")
    cfg["zero_optimization"]["stage3_gather_fp16_weights_on_model_save"] = True
    assert not _fails(lint(cfg, world_size=24))
    cfg = _cfg("ds_z3_no_gather.json")
    cfg["zero_optimization"]["stage"] = 2
    assert not _fails(lint(cfg, world_size=24))


def test_an_absent_pin_memory_is_what_the_installed_deepspeed_defaults_to():
    """DeepSpeed's own config model (installed here) fills an absent pin_memory with its default (True in 0.19;
    False in older releases): the probe records its reading and the rule follows it, not a guess."""
    from deepspeed.runtime.zero.offload_config import DeepSpeedZeroOffloadParamConfig

    from dsv3_preflight.lora.probes.facts import _deepspeed_model_check

    cfg = _cfg("ds_z3_offload.json")
    for part in ("offload_param", "offload_optimizer"):
        del cfg["zero_optimization"][part]["pin_memory"]
    parsed = _deepspeed_model_check(cfg)["offload"]
    default = DeepSpeedZeroOffloadParamConfig().pin_memory
    assert parsed["offload_param"] == {"device": "cpu", "pin_memory": default}
    assert bool(_warns(lint(cfg, world_size=24, deepspeed_offload=parsed))) is (not default)
    assert _warns(lint(cfg, world_size=24))   # without DeepSpeed's reading: absent is read as unpinned
    cfg["zero_optimization"]["offload_param"]["pin_memory"] = False   # said, not defaulted: unpinned either way
    assert _warns(lint(cfg, world_size=24, deepspeed_offload=parsed))


def test_both_offloads_without_pinned_memory_warn():
    cfg = _cfg("ds_z3_offload.json")
    cfg["zero_optimization"]["offload_param"]["pin_memory"] = False
    found = lint(cfg, world_size=24)
    assert not _fails(found) and len(_warns(found)) == 1 and "offload_param has no pinned memory" in _warns(found)[0]
    one = _cfg("ds_z3_offload.json")
    one["zero_optimization"]["offload_param"] = {"device": "none"}
    one["zero_optimization"]["offload_optimizer"]["pin_memory"] = False
    assert not _warns(lint(one, world_size=24))  # only one offload: not this finding


def test_bf16_and_fp16_both_enabled_fails():
    cfg = _cfg("ds_z3_no_offload.json")
    cfg["fp16"] = {"enabled": True}
    assert any("both true" in f for f in _fails(lint(cfg, world_size=24)))
    cfg["fp16"] = {"enabled": "auto"}
    assert not _fails(lint(cfg, world_size=24))


def test_batch_arithmetic_against_world_size_and_trainer_arguments():
    cfg = _cfg("ds_z3_no_offload.json")  # micro 1 × accumulation 16
    cfg["train_batch_size"] = 384
    assert not _fails(lint(cfg, world_size=24))  # 1 × 16 × 24
    cfg["train_batch_size"] = 24
    assert "train_batch_size 24 ≠ micro batch 1 × gradient accumulation 16 × world size 24 = 384" in _fails(lint(cfg, world_size=24))[0]
    # the field's launch passed --gradient_accumulation_steps 1 with this config's 16
    del cfg["train_batch_size"]
    found = lint(cfg, world_size=24, micro_batch=1, grad_accum=1)
    assert _fails(found) == ["gradient_accumulation_steps is 16 in the DeepSpeed config but the trainer has "
                             "--gradient_accumulation_steps 1"]
    auto = _cfg("ds_z3_offload.json")
    auto["train_batch_size"] = 50
    assert _fails(lint(auto, world_size=24, micro_batch=1, grad_accum=1)) == [
        "train_batch_size 50 ≠ micro batch 1 × gradient accumulation 1 × world size 24 = 24"]
    # "auto" micro batch/accumulation and no trainer arguments: whatever they are, 50 is no multiple of 24 ranks
    # (DeepSpeedConfig asserts train_batch_size == micro × accumulation × world size, all whole numbers)
    assert _fails(lint(auto, world_size=24)) == [
        "train_batch_size 50 is not a multiple of the world size 24: DeepSpeed asserts train_batch_size = micro batch "
        "× gradient accumulation × world size"]
    auto["train_batch_size"] = 48
    assert _fails(lint(auto, world_size=24)) == []   # 1 × 2 × 24 or 2 × 1 × 24: unknown without the trainer's values


# ------------------------------------------------------------------------------------ targets
@pytest.fixture(scope="session")
def model_dirs(tmp_path_factory):
    from transformers import DeepseekV3Config, LlamaConfig

    root = tmp_path_factory.mktemp("models")
    (root / "dsv3").mkdir()  # full-size DeepSeek-V3 as published: only config.json, no weights
    shutil.copy(DATA / "deepseek_v3_config.json", root / "dsv3" / "config.json")
    DeepseekV3Config().save_pretrained(root / "dsv3_transformers")  # the same model as transformers writes it
    LlamaConfig(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                num_key_value_heads=32, vocab_size=32000).save_pretrained(root / "llama7b")
    return root


@pytest.fixture(scope="session")
def dsv3_modules(model_dirs):
    return model_modules(model_dirs / "dsv3")


MLA = ["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"]


def test_dsv3_mla_targets_imply_the_trainers_trainable_parameter_count(dsv3_modules):
    """The field's trainer printed 'Number of trainable parameters = 97,006,592' for rank 16 on the MLA projections."""
    res = resolve(MLA, dsv3_modules, 16)
    assert not res["unmatched"] and res["adapted_modules"] == 61 * 5
    assert res["trainable_params"] == 97_006_592
    dotted = resolve([f"self_attn.{t}" for t in MLA], dsv3_modules, 16)  # the field notes (Part 7, torchrun under Ray) spell them so
    assert dotted["trainable_params"] == 97_006_592
    assert dsv3_modules["num_hidden_layers"] == 61 and dsv3_modules["built_layers"] == 4  # 3 dense + 1 MoE built


def test_config_written_by_transformers_gives_the_same_module_map(model_dirs, dsv3_modules):
    other = model_modules(model_dirs / "dsv3_transformers")
    assert other["modules"] == dsv3_modules["modules"]
    assert resolve(MLA, other, 16)["trainable_params"] == 97_006_592


def test_dsv3_qkvo_matches_only_o_proj(dsv3_modules):
    res = resolve(["q_proj", "v_proj", "k_proj", "o_proj"], dsv3_modules, 16)
    assert res["unmatched"] == ["q_proj", "v_proj", "k_proj"] and list(res["matched"]) == ["o_proj"]
    assert res["trainable_params"] == 16 * (16384 + 7168) * 61
    assert {"q_a_proj", "kv_b_proj", "o_proj"} <= set(res["candidates"])


def test_dsv3_mlp_targets_account_for_fused_experts(dsv3_modules):
    res = resolve(["gate_proj", "up_proj", "down_proj"], dsv3_modules, 8)
    dense = 3 * 3 * 8 * (7168 + 18432)  # 3 dense layers
    shared = 58 * 3 * 8 * (7168 + 2048)  # 58 MoE layers' shared expert
    assert res["trainable_params"] == dense + shared
    routed = 58 * 256 * 3 * 8 * (7168 + 2048)  # per-expert Linear modules in transformers < 5
    assert res["trainable_params_unfused_experts"] == dense + shared + routed
    assert "model.layers.*.mlp.experts.gate_up_proj" in dsv3_modules["fused_expert_params"]


def test_a_layer_qualified_target_counts_one_layer_and_a_layer_past_the_depth_matches_nothing(dsv3_modules):
    """Matched by name (without peft): peft's dotted suffix on the module templates, one layer's modules counted."""
    res = resolve(["layers.0.self_attn.q_a_proj", "model.layers.60.self_attn.kv_b_proj", "o_proj"], dsv3_modules, 8)
    assert not res["unmatched"] and res["adapted_modules"] == 1 + 1 + 61
    assert res["trainable_params"] == 8 * ((7168 + 1536) + (512 + 32768) + 61 * (16384 + 7168))
    moe = resolve(["layers.10.mlp.shared_experts.down_proj"], dsv3_modules, 8)   # a module of the MoE layers only
    assert moe["adapted_modules"] == 1 and moe["trainable_params"] == 8 * (2048 + 7168)
    past = resolve(["layers.61.self_attn.q_a_proj", "o_proj"], dsv3_modules, 8)
    assert past["unmatched"] == ["layers.61.self_attn.q_a_proj"] and past["adapted_modules"] == 61


def test_llama_qkvo_all_match(model_dirs):
    res = resolve(["q_proj", "k_proj", "v_proj", "o_proj"], model_modules(model_dirs / "llama7b"), 8)
    assert not res["unmatched"] and res["adapted_modules"] == 4 * 32
    assert res["trainable_params"] == 32 * 4 * 8 * (4096 + 4096)  # = 8,388,608 (peft's well-known figure for 7B)


def test_llama_with_mla_names_matches_nothing(model_dirs):
    res = resolve(MLA, model_modules(model_dirs / "llama7b"), 8)
    assert res["matched"] == {"o_proj": ["model.layers.*.self_attn.o_proj"]} and "q_a_proj" in res["unmatched"]


def test_model_dir_problems_are_errors_not_tracebacks(tmp_path):
    assert "does not exist" in model_modules(tmp_path / "nope")["error"]
    (tmp_path / "empty").mkdir()
    assert "needs its config.json" in model_modules(tmp_path / "empty")["error"]
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{")
    assert "not valid JSON" in model_modules(tmp_path / "bad")["error"]
    (tmp_path / "alien").mkdir()
    (tmp_path / "alien" / "config.json").write_text('{"model_type": "no_such_arch_xyz"}')
    assert "cannot be read by transformers" in model_modules(tmp_path / "alien")["error"]
    (tmp_path / "list").mkdir()
    (tmp_path / "list" / "config.json").write_text('[]')
    assert model_modules(tmp_path / "list")["error"] == f"model config {tmp_path / 'list' / 'config.json'}: has no model_type"


def test_a_model_config_that_is_a_fifo_is_refused_at_once_naming_the_file(tmp_path):
    """Issue 21.2: a FIFO config.json hung the run."""
    (tmp_path / "m").mkdir()
    os.mkfifo(tmp_path / "m" / "config.json")
    facts = model_modules(tmp_path / "m")
    assert facts["error"] == f"model config {tmp_path / 'm' / 'config.json'}: is a FIFO (named pipe), not a regular file"


# ------------------------------------------------------------------------------------ the CLI run
def _run(*args, timeout=300):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MODEL_PATH", "OUTPUT_DIR", "DEEPSPEED_CONFIG", "WORLD_SIZE", "NNODES", "NPROC_PER_NODE")}
    p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--profile", "cpu", "--only", "lora.*",
                        "--no-report", "--no-color", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, cwd=REPO, env={**env, "COLUMNS": "250"})
    return p


def _doc(tmp_path, *args):
    out = tmp_path / "result.json"
    p = _run(*args, "--json", out)
    doc = json.loads(out.read_text())
    return p, {r["name"]: r for r in doc["results"]} if "results" in doc else doc


@pytest.mark.slow
def test_run_reports_each_lora_check(tmp_path, model_dirs):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    p, results = _doc(tmp_path, "--deepspeed-config", DATA / "ds_z3_string_stage.json", "--model-path", model_dirs / "dsv3",
                      "--lora-targets", "q_proj,k_proj,v_proj,o_proj", "--lora-rank", "16", "--output-dir", out_dir)
    assert p.returncode == 1, p.stdout + p.stderr
    assert results["lora.deepspeed_config"]["status"] == "fail"
    assert "is the string '3'" in results["lora.deepspeed_config"]["summary"]
    p, results = _doc(tmp_path, "--deepspeed-config", DATA / "ds_z3_no_gather.json", "--model-path", model_dirs / "dsv3",
                      "--lora-targets", "q_proj,k_proj,v_proj,o_proj", "--lora-rank", "16", "--output-dir", out_dir)
    # without the flag: a warning here, where the installed Trainer gathers on its own (tests/lora/test_lora_zero3_save.py)
    assert results["lora.deepspeed_config"]["status"] == "warn", results["lora.deepspeed_config"]["summary"]
    assert GATHER_KEY in results["lora.deepspeed_config"]["remediation"]
    t = results["lora.targets"]
    assert t["status"] == "fail" and "q_proj, k_proj, v_proj match no module of deepseek_v3" in t["summary"]
    assert t["evidence"]["trainable_params"] == 22_986_752
    assert results["lora.output_dir"]["status"] == "pass"


def test_the_check_reads_an_auto_gather_flag_with_the_environment_the_run_inherits(tmp_path):
    cfg = _cfg("ds_z3_offload.json")
    cfg["zero_optimization"][GATHER_KEY] = "auto"
    path = tmp_path / "ds_auto.json"
    path.write_text(json.dumps(cfg))
    verdicts = {}
    for env in (None, "true"):
        p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--profile", "cpu", "--only",
                            "lora.deepspeed_config", "--deepspeed-config", str(path), "--no-report", "--no-color",
                            "--json", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=300, cwd=REPO,
                           env={**{k: v for k, v in os.environ.items() if k != "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL"},
                                **({"ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL": env} if env else {})})
        (r,) = json.loads((tmp_path / "r.json").read_text())["results"]
        verdicts[env] = (p.returncode, r["status"])
        if env is None:
            assert "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL, unset in this environment" in r["summary"], r["summary"]
    # unset: false, so a warning where the installed Trainer gathers on its own (as here), else a failure
    assert verdicts == {None: (0, "warn"), "true": (0, "pass")}, verdicts


@pytest.mark.slow
def test_run_fails_clearly_on_paths_that_do_not_exist(tmp_path):
    p, results = _doc(tmp_path, "--deepspeed-config", tmp_path / "nope.json", "--model-path", tmp_path / "nomodel",
                      "--lora-targets", "o_proj", "--output-dir", tmp_path / "noout")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert {n: r["status"] for n, r in results.items()} == {"lora.deepspeed_config": "fail", "lora.targets": "fail",
                                                            "lora.output_dir": "pass", "lora.adapter_base": "skip"}
    assert results["lora.adapter_base"]["summary"] == "nothing to compare with the model: no output directory to scan"
    assert results["lora.deepspeed_config"]["summary"] == f"DeepSpeed config {tmp_path / 'nope.json'}: no such file"
    assert "does not exist" in results["lora.targets"]["summary"]
    # the trainer creates its output dir: a missing one under a writable parent is fine, and says so
    assert results["lora.output_dir"]["summary"].startswith(f"output_dir {tmp_path / 'noout'} does not exist yet; "
                                                            f"the trainer can create it in {tmp_path}")


def test_output_dir_probe_judges_the_nearest_existing_parent(tmp_path):
    from dsv3_preflight.host.probes.storage import output_dir as probe_output_dir
    from dsv3_preflight.profile import resolve_profile

    deep = tmp_path / "a" / "b" / "out"
    facts = probe_output_dir.gather(resolve_profile(profile_name="cpu", cli={"output_dir": str(deep)}))
    assert facts["exists"] is False and facts["parent"] == str(tmp_path) and facts["parent_writable"] is True
    assert output_dir(facts, {}).status.value == "pass"
    (tmp_path / "file").write_text("x")
    facts = probe_output_dir.gather(resolve_profile(profile_name="cpu", cli={"output_dir": str(tmp_path / "file" / "out")}))
    r = output_dir(facts, {})
    assert r.status.value == "fail" and "is not a directory" in r.summary


@pytest.mark.parametrize("error, fix", [
    ("Permission denied", 'sudo chown -R "$(id -u):$(id -g)" /data   # then the trainer creates /data/run/out'),
    ("Read-only file system", "# /data is on a read-only filesystem: point output_dir at a writable node-local disk"),
])
def test_output_dir_that_cannot_be_created_names_the_parent_and_a_fix_that_helps(error, fix):
    facts = {"configured": True, "path": "/data/run/out", "setting": "output_dir", "exists": False, "is_dir": False,
             "parent": "/data", "parent_is_dir": True, "parent_writable": False, "write_error": error,
             "mount": {"fstype": "ext4", "device": "/dev/nvme0n1p1", "mountpoint": "/data"}, "network_fs": False}
    r = output_dir(facts, {})
    assert r.status.value == "fail" and r.cause == "lora.output_dir_unwritable"
    assert r.summary == f"output_dir /data/run/out does not exist and cannot be created: /data is not writable ({error})"
    assert r.remediation.startswith(fix) and paste_problems(r.remediation) == []


def test_missing_output_dir_on_nfs_still_warns():
    facts = {"configured": True, "path": "/nfs/run/out", "setting": "output_dir", "exists": False, "is_dir": False,
             "parent": "/nfs", "parent_is_dir": True, "parent_writable": True,
             "mount": {"fstype": "nfs4", "device": "srv:/export", "mountpoint": "/nfs"}, "network_fs": True}
    r = output_dir(facts, {})
    assert r.status.value == "warn" and "nfs4" in r.summary and paste_problems(r.remediation) == []


def test_run_without_lora_paths_skips_and_stays_green(tmp_path):
    p, results = _doc(tmp_path)
    assert p.returncode == 0 and {r["status"] for r in results.values()} == {"skip"}


@pytest.mark.slow
def test_output_dir_with_an_empty_saved_adapter_fails(tmp_path):
    src = lab.write_adapter(tmp_path / "src", "llama", lab.QKVO)
    out = tmp_path / "out"
    lab.write_checkpoint(out, 50, src)
    lab.write_checkpoint(out, 100, lab.empty_header(src, tmp_path / "empty"))
    p, results = _doc(tmp_path, "--output-dir", out)
    r = results["lora.output_dir"]
    assert r["status"] == "fail" and "checkpoint-100" in r["summary"] and "empty adapter" in r["summary"]
    assert r["cause"] == "lora.gather_flag_off"  # shown under the same cause as lora.deepspeed_config's finding


def test_unreadable_deepspeed_config_fails(tmp_path):
    f = tmp_path / "ds.json"
    f.write_text('{"zero_optimization": {"stage": 3,}}')
    p, results = _doc(tmp_path, "--deepspeed-config", f)
    assert results["lora.deepspeed_config"]["status"] == "fail" and "not valid JSON" in results["lora.deepspeed_config"]["summary"]


def test_zero_optimization_that_is_not_an_object_fails_with_a_fix_and_never_errors(tmp_path):
    """DeepSpeed's own model check used to call .items() on it (an ERROR wherever deepspeed is installed)."""
    from dsv3_preflight.lora.probes.facts import _deepspeed_model_check

    assert _deepspeed_model_check({"zero_optimization": 3})["reason"] == "zero_optimization is a int, not an object"
    f = tmp_path / "ds.json"
    f.write_text('{"zero_optimization": 3}')
    p, results = _doc(tmp_path, "--deepspeed-config", f)
    r = results["lora.deepspeed_config"]
    assert r["status"] == "fail" and "zero_optimization is a int, not an object" in r["summary"]
    assert '"zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": true}' in r["remediation"]


@pytest.mark.parametrize("kind", ["fifo", "directory", "binary"])
def test_a_deepspeed_config_that_is_no_json_file_fails_at_once_naming_it(tmp_path, kind):
    """Issue 21.2: DeepSpeed and model configs are read through the one bounded reader (a FIFO hung the run)."""
    import threading

    from dsv3_preflight.checks.lora_deepspeed_config import deepspeed_config
    from dsv3_preflight.lora.probes.facts import lora_deepspeed_config
    from dsv3_preflight.profile import resolve_profile

    path = tmp_path / "ds.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"\xff\xfe\x00{")
    profile = resolve_profile(profile_name="cpu", cli={"deepspeed_config": str(path)})
    got: list = []
    reader = threading.Thread(target=lambda: got.append(lora_deepspeed_config.gather(profile)), daemon=True)
    reader.start()
    reader.join(20)
    assert got, "the probe blocked"
    expected = {"fifo": "is a FIFO (named pipe), not a regular file", "directory": "is a directory",
                "binary": "not UTF-8 text"}[kind]
    assert got[0]["error"].startswith(f"DeepSpeed config {path}: ") and expected in got[0]["error"]
    r = deepspeed_config(got[0], profile, {})
    assert r.status.value == "fail" and r.actor.value == "job" and r.cause == "lora.deepspeed_config_unreadable"
    assert paste_problems(r.remediation) == []


def test_deepspeeds_own_config_model_rejects_a_misspelled_zero_key_and_accepts_a_sound_config(tmp_path):
    """The check asks the installed DeepSpeed's config model (pydantic, extra keys forbidden) about zero_optimization:
    a misspelled key DeepSpeed would refuse at deepspeed.initialize is a failure before launch."""
    pytest.importorskip("deepspeed.runtime.zero.config")
    zero = {"stage": 3, "stage3_gather_16bit_weights_on_model_save": True, "stage3_prefetch_bucket_sz": 50000000}
    f = tmp_path / "ds.json"
    f.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": zero}))
    p, results = _doc(tmp_path, "--deepspeed-config", f)
    r = results["lora.deepspeed_config"]
    assert r["status"] == "fail" and r["summary"].startswith("DeepSpeed's own config model rejects zero_optimization")
    assert "stage3_prefetch_bucket_sz" in r["summary"] and r["evidence"]["deepspeed_model"]["available"] is True
    assert paste_problems(r["remediation"]) == []
    zero["stage3_prefetch_bucket_size"] = zero.pop("stage3_prefetch_bucket_sz")
    zero["reduce_bucket_size"] = "auto"   # HF's "auto" values are filled by the trainer, not judged here
    f.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": zero}))
    p, results = _doc(tmp_path, "--deepspeed-config", f)
    r = results["lora.deepspeed_config"]
    assert r["status"] == "pass" and r["evidence"]["deepspeed_model"] == {"available": True, "error": None, "offload": {}}, r["summary"]


def test_a_full_output_dir_gives_its_free_bytes_and_a_fix_that_frees_space():
    """Issue 46.13b: a full output dir read 'not writable: No space left on device' without the free bytes, and its
    only fix moved the directory."""
    facts = {"configured": True, "path": "/data/run/out", "setting": "output_dir", "exists": True, "is_dir": True,
             "writable": False, "write_error": "No space left on device",
             "mount": {"fstype": "ext4", "device": "/dev/nvme0n1p1", "mountpoint": "/data"}, "network_fs": False,
             "free_bytes": 0, "total_bytes": 1000 * 2**30}
    r = output_dir(facts, {})
    assert r.status.value == "fail" and r.cause == "lora.output_dir_unwritable" and r.actor.value == "job"
    assert r.summary == ("output_dir /data/run/out is not writable: No space left on device (0 B free of 1000.0 GiB "
                         "on /dev/nvme0n1p1, mounted at /data)")
    lines = r.remediation.splitlines()
    assert lines[0] == "df -h /data/run/out   # 0 B free of 1000.0 GiB"
    assert any(line.startswith("du -xsh /data/run/out/*") for line in lines)
    assert any("checkpoint-*" in line for line in lines) and "--save_total_limit" in r.remediation
    assert lines[-1].startswith('mkdir -p "${OUTPUT_DIR:?')   # moving it stays, beside freeing space
    assert paste_problems(r.remediation) == [] and r.evidence["free_bytes"] == 0
    # the directory not created yet, on a full parent: the same, for the parent
    missing = {**facts, "exists": False, "is_dir": False, "writable": None, "parent": "/data/run",
               "parent_is_dir": True, "parent_writable": False}
    r = output_dir(missing, {})
    assert "is not writable (No space left on device) (0 B free of 1000.0 GiB" in r.summary
    assert r.remediation.startswith("df -h /data/run   # 0 B free")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_real_full_disk_under_output_dir_is_reported_with_its_room(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    fill = f"mount -t tmpfs -o size=1m tmpfs {mnt} && mkdir {mnt}/out && (head -c 2M /dev/zero > {mnt}/out/fill || true)"
    out = tmp_path / "r.json"
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{fill} && exec "$@"', "sh",
            sys.executable, "-m", "dsv3_preflight", "run", "--profile", "cpu", "--only", "lora.output_dir",
            "--output-dir", str(mnt / "out"), "--no-report", "--no-color", "--json", str(out)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO)
    if not out.exists() and "mount" in p.stderr:
        pytest.skip(f"no private mount here: {p.stderr.strip()[-200:]}")
    [r] = json.loads(out.read_text())["results"]
    assert r["status"] == "fail" and "No space left on device (0 B free of 1.0 MiB" in r["summary"], r["summary"]
    assert f"du -xsh {mnt}/out/*" in r["remediation"]
