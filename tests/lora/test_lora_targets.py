"""lora.targets (checks/lora_targets.py): the module map of real transformers models built on the meta device, and
the targets rules' fixes. PEFT's own verdicts are in test_lora_targets_peft.py, the models with native code in
test_lora_targets_native_arch.py."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
from lora_tables_lab import model_dirs  # noqa: F401 (pytest fixtures)
from paste_lint import paste_problems

from dsv3_preflight.lora.probes.facts import model_facts as model_modules
from dsv3_preflight.lora.targets import resolve


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


# ------------------------------------------------------------------------------------------------ lora.targets
def test_the_targets_fix_follows_where_lora_target_came_from(tmp_path):
    from dsv3_preflight.lora.target_rules import target_fix

    mla = ["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"]
    yaml_file = tmp_path / "deepseek3 lora.yaml"
    yaml_file.write_text("model_name_or_path: /m\nlora_target: q_proj,k_proj,v_proj,o_proj\nlora_rank: 16\n")
    fix = target_fix(mla, f"training command {yaml_file} [lora_target]", "/models/DeepSeek-V3", "MLA")
    assert paste_problems(fix) == []
    subprocess.run(["bash", "-c", fix.splitlines()[0]], check=True, capture_output=True, timeout=30)
    assert "lora_target: q_a_proj,q_b_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj\n" in yaml_file.read_text()
    json_file = tmp_path / "train.json"
    json_file.write_text(json.dumps({"lora_target": "q_proj"}))
    fix = target_fix(mla, f"training command {json_file} [lora_target]", "/m", "MLA")
    assert paste_problems(fix) == [] and fix.splitlines()[-1].startswith("dsv3-preflight run --only lora.targets")
    subprocess.run(["bash", "-c", "\n".join(fix.splitlines()[:-1])], check=True, capture_output=True, timeout=30)
    assert json.loads(json_file.read_text())["lora_target"] == ",".join(mla)
    flag = target_fix(mla, "training command --lora_target", "/m", "MLA")
    assert "# in the training command: --lora_target q_a_proj,q_b_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj" in flag
    assert paste_problems(flag) == []


def test_deepseek_v3_gets_the_exact_mla_list_in_model_order():
    from dsv3_preflight.lora.target_rules import suggested_targets

    res = {"candidates": ["down_proj", "gate_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj", "q_a_proj", "q_b_proj",
                          "up_proj"], "siblings": ["o_proj", "q_b_proj", "kv_b_proj", "q_a_proj", "kv_a_proj_with_mqa"]}
    assert suggested_targets(res, "deepseek_v3") == ["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"]
    assert suggested_targets({"candidates": ["q_proj", "k_proj", "v_proj", "o_proj"], "siblings": ["v_proj", "q_proj"]},
                             "llama") == ["q_proj", "v_proj"]
