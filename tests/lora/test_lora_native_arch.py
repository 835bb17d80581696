"""A DeepSeek-V3-class model whose model_type transformers does not have (Kimi-K2: ``"model_type": "kimi_k2"`` on
``"architectures": ["DeepseekV3ForCausalLM"]``, the repo's own code in ``auto_map``). The LoRA checks failed it as
an unreadable config ("Unrecognized model identifier: kimi_k2"), a NO-GO for a model the run loads with
trust_remote_code. It is now judged as the native architecture its config.json names, and says so; without an
auto_map the run cannot build it, and the fix is the one its makers give (declare model_type deepseek_v3).

Held against peft on the real tiny DeepSeek-V3: the verdicts and counts for a ``kimi_k2``-declared copy of its
config are the native model's."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import test_lora_lab as lab
from paste_lint import paste_problems

from dsv3_preflight.checks.lora_targets import targets as targets_check
from dsv3_preflight.lora.probes.facts import lora_model_modules, model_facts
from dsv3_preflight.profile import resolve_profile

DATA = Path(__file__).resolve().parents[1] / "data" / "lora"
AUTO_MAP = {"AutoConfig": "configuration_deepseek.DeepseekV3Config",
            "AutoModelForCausalLM": "modeling_deepseek.DeepseekV3ForCausalLM"}


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """The tiny DeepSeek-V3 as transformers writes it, and copies declaring model_type kimi_k2 (with and without
    auto_map)."""
    from transformers import DeepseekV3Config

    root = tmp_path_factory.mktemp("native_arch")
    DeepseekV3Config(**lab.DSV3_TINY).save_pretrained(root / "dsv3")
    raw = json.loads((root / "dsv3" / "config.json").read_text())
    for name, extra in (("kimi", {"auto_map": AUTO_MAP}), ("kimi_no_code", {})):
        (root / name).mkdir()
        (root / name / "config.json").write_text(json.dumps({**raw, "model_type": "kimi_k2",
                                                              "architectures": ["DeepseekV3ForCausalLM"], **extra}))
    return root


def _check(model_dir: Path, spec: str, rank: int = 4, dropout: float | None = None):
    cli = {"lora_targets": spec, "lora_rank": rank, "model_path": str(model_dir)}
    if dropout is not None:
        cli["lora_dropout"] = dropout
    profile = resolve_profile(profile_name="cpu", cli=cli)
    return targets_check.judge(lora_model_modules=lora_model_modules.gather(profile), profile=profile)


def test_the_published_kimi_k2_config_is_built_as_deepseek_v3_at_full_size():
    facts = model_facts(DATA / "kimi_k2_config.json")
    assert "error" not in facts, facts.get("error")
    assert facts["model_type"] == "kimi_k2"
    assert facts["built_as"] == {"declared": "kimi_k2", "model_type": "deepseek_v3",
                                 "architecture": "DeepseekV3ForCausalLM",
                                 "remote_code": "modeling_deepseek.DeepseekV3ForCausalLM"}
    assert facts["module_params"]["model.layers.*.mlp.experts"][0]["shape"] == [384, 4096, 7168]
    assert facts["modules"]["model.layers.*.self_attn.q_b_proj"]["out"] == 64 * (128 + 64)   # 64 heads
    assert facts["modules"]["model.layers.*.self_attn.o_proj"]["count"] == 61


def test_mla_targets_of_kimi_pass_with_the_native_models_count_and_say_how_it_was_judged(dirs):
    native, kimi = _check(dirs / "dsv3", ",".join(lab.MLA_TARGETS)), _check(dirs / "kimi", ",".join(lab.MLA_TARGETS))
    assert native.status.value == kimi.status.value == "pass", kimi.summary
    assert native.evidence["trainable_params"] == kimi.evidence["trainable_params"] > 0
    import transformers

    assert kimi.summary.endswith(f"; transformers {transformers.__version__} has no model type kimi_k2: judged as its "
                                 "DeepseekV3ForCausalLM "
                                 "(the architecture config.json names), while the run builds it with the repo's own "
                                 "code (modeling_deepseek.DeepseekV3ForCausalLM, trust_remote_code=True)")
    assert "has no model type" not in native.summary


def test_expert_targets_of_kimi_warn_that_the_repos_code_decides_the_experts(dirs):
    spec = "gate_proj,up_proj,down_proj"
    native, kimi = _check(dirs / "dsv3", spec), _check(dirs / "kimi", spec)
    assert native.status.value == "pass" and kimi.status.value == "warn", kimi.summary
    assert "adapt the routed experts of kimi_k2, which the run builds with modeling_deepseek.DeepseekV3ForCausalLM" \
        in kimi.summary
    per_expert = kimi.evidence["trainable_params_unfused_experts"]
    assert per_expert and f"({per_expert:,} trainable parameters at r=4)" in kimi.summary
    assert paste_problems(kimi.remediation) == []
    # peft's refusal of a dropout on the fused experts is transformers' build, not the code the run uses: a warning
    refused = _check(dirs / "kimi", spec, dropout=0.05)
    assert _check(dirs / "dsv3", spec, dropout=0.05).status.value == "fail"
    assert refused.status.value == "warn" and "lora.ParamWrapper does not work with lora_dropout" in refused.summary
    assert "while the run builds it with the repo's own code" in refused.summary


def test_kimi_without_auto_map_fails_and_the_fix_its_makers_give_makes_it_deepseek_v3(dirs, tmp_path):
    r = _check(dirs / "kimi_no_code", "o_proj")
    assert r.status.value == "fail" and r.cause == "lora.model_config_unreadable"
    assert "cannot build model type kimi_k2" in r.summary and "is transformers' deepseek_v3" in r.summary
    assert paste_problems(r.remediation) == []
    # run the fix's edit on a copy (its last line re-runs the preflight, which this test does below)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text((dirs / "kimi_no_code" / "config.json").read_text())
    edit = [line for line in r.remediation.splitlines() if line.startswith(("cp ", "sed "))]
    script = "\n".join(edit).replace(str(dirs / "kimi_no_code"), str(model))
    subprocess.run(["bash", "-c", script], check=True, timeout=30)
    assert json.loads((model / "config.json").read_text())["model_type"] == "deepseek_v3"
    assert (model / "config.json.orig").exists()
    fixed = _check(model, "o_proj")
    assert fixed.status.value == "pass" and "has no model type" not in fixed.summary


def test_an_unknown_model_type_naming_no_native_architecture_is_still_unreadable(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "alien_lm", "architectures": ["AlienForCausalLM"]}))
    facts = model_facts(tmp_path)
    assert "cannot be read by transformers" in facts["error"] and "built_as" not in facts


@pytest.fixture(scope="module")
def remote_dir(dirs):
    """The tiny DeepSeek-V3 with the auto_map the published DeepSeek-V3 config.json has (its repo's own code)."""
    raw = json.loads((dirs / "dsv3" / "config.json").read_text())
    (dirs / "dsv3_remote").mkdir()
    (dirs / "dsv3_remote" / "config.json").write_text(json.dumps({**raw, "auto_map": AUTO_MAP}))
    return dirs / "dsv3_remote"


def _trusting(model_dir: Path, spec: str, trust: bool | None, dropout: float | None = None):
    cli = {"lora_targets": spec, "lora_rank": 4, "model_path": str(model_dir), "trust_remote_code": trust,
           "lora_dropout": dropout}
    profile = resolve_profile(profile_name="cpu", cli=cli)
    return targets_check.judge(lora_model_modules=lora_model_modules.gather(profile), profile=profile)


def test_trust_remote_code_with_an_auto_map_makes_the_experts_the_repos_code_to_judge(remote_dir):
    """transformers' auto classes build the repo's own code when the trainer trusts it and config.json's auto_map
    names it, even for a model type transformers has (DeepSeek-V3's published repo ships modeling_deepseek.py, whose
    routed experts are Linear modules of their own): expert targets, and a peft refusal about the fused experts, are
    then warnings; the attention is judged as before and the summary says which code the run uses."""
    mlp = "gate_proj,up_proj,down_proj"
    assert _trusting(remote_dir, mlp, None).status.value == "pass"
    assert _trusting(remote_dir, mlp, False).status.value == "pass"
    trusted = _trusting(remote_dir, mlp, True)
    assert trusted.status.value == "warn" and "which the run builds with modeling_deepseek.DeepseekV3ForCausalLM: " \
        "judged on transformers' own code" in trusted.summary, trusted.summary
    assert trusted.evidence["trust_remote_code"] is True
    assert _trusting(remote_dir, mlp, True, dropout=0.05).status.value == "warn"
    assert _trusting(remote_dir, mlp, None, dropout=0.05).status.value == "fail"
    mla = _trusting(remote_dir, ",".join(lab.MLA_TARGETS), True)
    assert mla.status.value == "pass" and mla.summary.endswith(
        "; the run builds deepseek_v3 with the repo's own code (modeling_deepseek.DeepseekV3ForCausalLM: the trainer's "
        "trust_remote_code is true), judged here with transformers' own deepseek_v3 code"), mla.summary
    # without an auto_map there is no repo code to build: trusting it changes nothing
    assert _trusting(remote_dir.parent / "dsv3", mlp, True).status.value == "pass"
