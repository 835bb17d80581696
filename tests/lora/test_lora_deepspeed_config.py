"""lora.deepspeed_config (checks/lora_deepspeed_config.py): the lint on the field's DeepSpeed configs
(dsv3_preflight/lora/dsconfig.py) and each DeepSpeed rule on its own, firing with a fix that edits the user's file
and silent on the field configs. The runs through the CLI are in test_lora_checks.py."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from lora_tables_lab import DATA, _as_list, _cfg, _check_finding, _ds
from paste_lint import paste_problems

from dsv3_preflight.lora import dsconfig
from dsv3_preflight.lora.dsconfig import GATHER_KEY, lint


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


# ------------------------------------------------------------------------------------------------ DeepSpeed rules
DS_CASES = [
    (dsconfig.zero_is_object, lambda c: {**c, "zero_optimization": 3}, "zero_optimization is a int"),
    (dsconfig.gather_flag, lambda c: c, "is not true (it is not set"),
    (dsconfig.stage_known, lambda c: {**c, "zero_optimization": {**c["zero_optimization"], "stage": 7}}, "stage is 7"),
    (dsconfig.offload_pinned, lambda c: {**c, "zero_optimization": {**c["zero_optimization"],
                                                                   "offload_param": {"device": "cpu", "pin_memory": False}}},
     "offload_param has no pinned memory"),
    (dsconfig.precision_conflict, lambda c: {**c, "bf16": {"enabled": True}, "fp16": {"enabled": True}}, "both true"),
    (dsconfig.trainer_batch_agrees, lambda c: {**c, "gradient_accumulation_steps": 16},
     "gradient_accumulation_steps is 16 in the DeepSpeed config but the trainer has"),
    (dsconfig.batch_arithmetic, lambda c: {**c, "train_batch_size": 50, "train_micro_batch_size_per_gpu": 1,
                                           "gradient_accumulation_steps": 1}, "train_batch_size 50 ≠"),
]


@pytest.mark.parametrize("rule, change, phrase", DS_CASES, ids=[c[0].__name__ for c in DS_CASES])
def test_each_deepspeed_rule_fires_and_its_fix_edits_the_users_file(rule, change, phrase, tmp_path):
    path = tmp_path / "my ds config.json"
    config = change(_ds("ds_z3_no_gather.json"))
    path.write_text(json.dumps(config))
    ctx = dsconfig.Context(path=str(path), world_size=24, micro_batch=1, grad_accum=1)
    found = _as_list(rule(config, ctx))
    assert found and phrase in found[0].message, [f.message for f in found]
    for f in found:
        _check_finding(f)
        assert str(path) in f.fix
        subprocess.run(["bash", "-c", f.fix], check=True, capture_output=True, timeout=30)
    assert _as_list(rule(json.loads(path.read_text()), ctx)) == []  # the pasted fix cured it


@pytest.mark.parametrize("rule", dsconfig.RULES, ids=lambda r: r.__name__)
def test_each_deepspeed_rule_is_silent_on_the_field_configs(rule):
    for name in ("ds_z3_offload.json", "ds_z3_no_offload.json"):
        assert _as_list(rule(_ds(name), dsconfig.Context(world_size=24))) == [], name
