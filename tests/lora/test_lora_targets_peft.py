"""lora.targets answers what peft itself does with a lora_target on the model (get_peft_model run on the model built
on the meta device), not a name match of our own: with transformers 5, peft rewrites DeepSeek-V3's MoE names
(gate_proj/up_proj/down_proj of the fused routed experts, the router's gate) into target_parameters, refuses
gate_proj without up_proj, and (peft 0.21; 0.22 adapts them too) leaves the dense and shared-expert Linear modules of
those names alone.

Each verdict here is held against peft run on the real model (CPU weights) for the same targets, passed as
LLaMA-Factory passes its lora_target (a list; ``all`` alone becomes every linear leaf name)."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import test_lora_lab as lab

from dsv3_preflight.checks.lora_targets import targets as targets_check
from dsv3_preflight.lora.probes.facts import lora_model_modules
from dsv3_preflight.profile import resolve_profile

DATA = Path(__file__).resolve().parents[1] / "data" / "lora"
# more MoE layers and experts than the probe builds (3 MoE layers, 8 experts; it builds one MoE layer with 2 and 4
# experts), so the full-size count is the probe's extrapolation, checked against peft on the whole model
TINY = {**lab.DSV3_TINY, "num_hidden_layers": 4, "n_routed_experts": 8}
# LLaMA-Factory's `lora_target: all` on DeepSeek-V3 (find_all_linear_modules: Linear leaf names, no lm_head)
LF_ALL = ["down_proj", "gate_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj", "q_a_proj", "q_b_proj", "up_proj"]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from transformers import DeepseekV3Config

    root = tmp_path_factory.mktemp("dsv3_tiny8")
    DeepseekV3Config(**TINY).save_pretrained(root)
    return root


def _check(model_dir, spec: str, rank: int = 4, source: str | None = None):
    profile = resolve_profile(profile_name="cpu", cli={"lora_targets": spec, "lora_rank": rank, "model_path": str(model_dir)})
    if source:
        profile = profile.with_values(source, lora_targets=spec)
    return targets_check.judge(lora_model_modules=lora_model_modules.gather(profile), profile=profile)


def _peft_model(spec: str, rank: int = 4):
    """Real peft (the installed one) on the real tiny model, given ``spec`` as LLaMA-Factory gives its lora_target."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, DeepseekV3Config

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(DeepseekV3Config(**TINY))
    names = [t.strip() for t in spec.split(",")]
    given = LF_ALL if names == ["all"] else "all-linear" if names == ["all-linear"] else names
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=given))


def _peft(spec: str, rank: int = 4):
    """peft on the real tiny model: its refusal, or its trainable parameter count."""
    try:
        pm = _peft_model(spec, rank)
    except Exception as exc:  # noqa: BLE001 - the refusal is the answer
        return type(exc).__name__, None
    return None, pm.get_nb_trainable_parameters()[0]


@pytest.mark.parametrize("spec", [
    "q_a_proj,q_b_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj",   # DeepSeek-V3's MLA
    "q_proj,k_proj,v_proj,o_proj",        # only o_proj exists: peft adapts o_proj, a failure (less than asked)
    "gate_proj,up_proj,down_proj",        # the fused routed experts, not the dense/shared Linear modules
    "all",                                # LLaMA-Factory's every linear layer
    "all-linear",                         # peft's own keyword (given with --lora-targets)
    "gate",                               # the router's weight: peft adapts it
    "gate_proj",                          # refused: fused with up_proj
    "q_proj",                             # refused: no such module
    "all,o_proj",                         # all is expanded only alone: peft adapts o_proj
    # layer-qualified names (peft's dotted suffix): the probe builds 2 of the 4 layers unless a target names one
    "layers.0.self_attn.q_a_proj",        # the dense layer: one module
    "model.layers.3.self_attn.kv_b_proj,o_proj",   # the last MoE layer, which the shrunk build does not have
    # one MoE layer's shared expert: peft 0.21 with transformers 5 takes its leaf name and adapts the fused routed
    # experts' down_proj of every MoE layer instead (the count says so, as peft's own does)
    "layers.2.mlp.shared_experts.down_proj",
    "layers.4.self_attn.q_a_proj",        # refused: the model has layers 0-3
])
def test_the_verdict_and_the_count_are_peft_s_own(tiny_dir, spec):
    refused, count = _peft(spec)
    r = _check(tiny_dir, spec)
    if refused:
        assert r.status.value == "fail" and r.cause == "lora.targets_missing", r.summary
        assert refused in r.findings[0].message and "refuses lora_target" in r.findings[0].message
    else:
        # peft adapts what matches; a named target matching nothing is still a failure (lora_unmatched_targets)
        assert r.status.value == ("fail" if r.evidence["unmatched"] else "pass"), r.summary
        assert r.evidence["trainable_params"] == count, (spec, r.evidence["trainable_params"], count)


def test_a_target_naming_one_layer_adapts_that_layer_once_and_a_missing_layer_is_named(tiny_dir):
    # it failed before: the probe's model was shrunk to layers 0-1, where peft found no layers.3
    r = _check(tiny_dir, "model.layers.3.self_attn.kv_b_proj,o_proj")
    assert r.status.value == "pass", r.summary
    assert r.evidence["adapted_modules"] == 1 + 4 and "adapt 5 modules" in r.summary   # kv_b_proj once, o_proj x4
    assert r.evidence["matched"]["model.layers.3.self_attn.kv_b_proj"] == ["model.layers.*.self_attn.kv_b_proj"]
    r = _check(tiny_dir, "layers.4.self_attn.q_a_proj")
    assert r.status.value == "fail" and "layers.4.self_attn.q_a_proj: the model has 4 layers (0-3)" in r.summary


def _peft_adapted_linear_modules(spec: str) -> list[str]:
    """The Linear modules real peft (the installed one) adapts on the tiny model for ``spec``."""
    pm = _peft_model(spec)
    return sorted(n for n in pm.base_model.targeted_module_names if not n.endswith(".mlp.experts"))


def dense_mlp_params(rank: int) -> int:
    """What the installed peft adds to full-size DeepSeek-V3's gate_proj,up_proj,down_proj beyond the fused routed
    experts: nothing (peft 0.21), or the dense layers' and shared experts' Linear modules of those names (peft 0.22.0,
    measured: 183 modules and 7,570,702,336 at r=16): 3 dense layers x 3r(7168+18432) + 58 shared experts x
    3r(7168+2048). Which one, real peft on the tiny model says."""
    if not _peft_adapted_linear_modules("gate_proj,up_proj,down_proj"):
        return 0
    return 3 * 3 * rank * (7168 + 18432) + 58 * 3 * rank * (7168 + 2048)


def test_moe_mlp_names_adapt_the_routed_experts_and_say_what_peft_does_with_the_dense_modules(tiny_dir):
    # peft 0.21 leaves the dense layers' and shared experts' gate/up/down_proj alone once it turns the
    # names into target_parameters; peft 0.22 adapts them too. The summary says what the installed peft does.
    r = _check(tiny_dir, "gate_proj,up_proj,down_proj")
    dense = _peft_adapted_linear_modules("gate_proj,up_proj,down_proj")
    assert r.status.value == "pass"
    assert r.evidence["adapted_parameters"] == ["model.layers.*.mlp.experts.down_proj",
                                                "model.layers.*.mlp.experts.gate_up_proj"]
    assert r.evidence["adapted_modules"] == len(dense), (r.evidence["adapted_modules"], dense)
    if dense:
        assert "are not adapted" not in r.summary and f"adapt {len(dense)} modules and the fused weights" in r.summary
    else:
        assert "are not adapted" in r.summary and "peft" in r.summary


def test_all_linear_in_a_llamafactory_config_is_a_name_peft_does_not_find(tiny_dir):
    r = _check(tiny_dir, "all-linear", source="training command train.yaml [lora_target]")
    assert r.status.value == "fail" and "NoMatchingPeftModuleError" in r.summary
    assert "lora_target: all is its every-linear-layer" in r.summary
    assert r.remediation and "lora_target" in r.remediation


def test_all_among_other_names_is_a_name_and_the_failure_says_so(tiny_dir):
    r = _check(tiny_dir, "all,o_proj")
    assert r.status.value == "fail" and "expands all only when it is the whole lora_target" in r.summary
    assert r.evidence["matched"] == {"o_proj": ["model.layers.*.self_attn.o_proj"]}


def _field_notes_check(model_dir, tmp_path, cli=None, environ=None, toml=None):
    """The field notes' --lora_target q_proj,v_proj,k_proj,o_proj on DeepSeek-V3, with the profile layers given."""
    config = None
    if toml is not None:
        config = tmp_path / "preflight.toml"
        config.write_text(toml)
    profile = resolve_profile(profile_name="cpu", environ=environ or {}, config_path=config,
                              cli={"lora_targets": "q_proj,v_proj,k_proj,o_proj", "lora_rank": 4,
                                   "model_path": str(model_dir), **(cli or {})})
    return targets_check.judge(lora_model_modules=lora_model_modules.gather(profile), profile=profile)


def test_a_named_target_matching_no_module_fails_unless_the_profile_lowers_it_to_a_warning(tiny_dir, tmp_path):
    """Issue 46.11: the field notes' list adapted only o_proj and the gate said GO (a warning)."""
    from paste_lint import paste_problems

    r = _field_notes_check(tiny_dir, tmp_path)
    assert r.status.value == "fail" and r.cause == "lora.targets_missing", r.summary
    assert "q_proj, v_proj, k_proj match no module of deepseek_v3; only o_proj will be adapted" in r.summary
    assert 'lora_unmatched_targets = "warn"' in r.remediation and paste_problems(r.remediation) == []
    for where, kwargs in [("--lora-unmatched-targets", {"cli": {"lora_unmatched_targets": "warn"}}),
                          ("env DSV3_PREFLIGHT_LORA_UNMATCHED_TARGETS",
                           {"environ": {"DSV3_PREFLIGHT_LORA_UNMATCHED_TARGETS": "warn"}}),
                          ("preflight.toml [lora_unmatched_targets]", {"toml": 'lora_unmatched_targets = "warn"\n'})]:
        r = _field_notes_check(tiny_dir, tmp_path, **kwargs)
        assert r.status.value == "warn", (where, r.summary)
        assert "only o_proj will be adapted" in r.summary and "lora_unmatched_targets = warn" in r.summary
        assert where in r.summary, (where, r.summary)
    # none of the targets matching stays a failure whatever the setting
    r = _field_notes_check(tiny_dir, tmp_path, cli={"lora_targets": "q_proj,v_proj", "lora_unmatched_targets": "warn"})
    assert r.status.value == "fail", r.summary


@pytest.mark.slow
@pytest.mark.parametrize("spec, rank, count", [
    # the field's trainer printed "Number of trainable parameters = 97,006,592" for these (field notes, Part 2: torchrun and DeepSpeed ZeRO-3)
    ("q_a_proj,q_b_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj", 16, 97_006_592),
    # peft 0.21.2 print_trainable_parameters on the full-size model on the meta device (transformers 5.23):
    # 58 MoE layers x 256 experts x [2r(7168+4096) + r(2048+7168)], the dense and shared Linear modules untouched
    ("gate_proj,up_proj,down_proj", 16, 7_541_358_592),
])
def test_full_size_deepseek_v3_counts(tmp_path, spec, rank, count):
    if spec == "gate_proj,up_proj,down_proj":
        count += dense_mlp_params(rank)
    (tmp_path / "config.json").write_text((DATA / "deepseek_v3_config.json").read_text())
    r = _check(tmp_path, spec, rank)
    assert r.status.value == "pass" and r.evidence["trainable_params"] == count, r.summary
    assert f"{count:,} trainable parameters at r={rank}" in r.summary


def _peft_with_dropout(given, dropout):
    """peft on the real tiny model (CPU weights) with a lora_dropout: its refusal's first line, or None."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, DeepseekV3Config

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(DeepseekV3Config(**TINY))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=given, lora_dropout=dropout))
    except Exception as exc:  # noqa: BLE001 - the refusal is the answer
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return None


@pytest.mark.parametrize("spec, refused", [("all", True), ("gate_proj,up_proj,down_proj", True),
                                           (",".join(lab.MLA_TARGETS), False)])
def test_a_lora_dropout_peft_refuses_on_fused_experts_fails_before_launch_as_peft_does(tiny_dir, tmp_path, spec,
                                                                                       refused):
    """With transformers 5, peft wraps DeepSeek-V3's fused expert weights (target_parameters) in wrappers that refuse
    lora_dropout != 0: LLaMA-Factory's `all`, or any MLP target, with --lora_dropout 0.05 fails at get_peft_model,
    after the model has loaded. The check runs peft with the run's dropout and fails the same way; the attention
    alone takes a dropout."""
    yaml = tmp_path / "train.yaml"
    yaml.write_text(f"lora_target: {spec}\nlora_dropout: 0.05\n")
    names = [t.strip() for t in spec.split(",")]
    want = _peft_with_dropout(LF_ALL if names == ["all"] else names, 0.05)
    assert (want is not None) is refused and (not refused or "does not work with lora_dropout != 0" in want), want
    profile = resolve_profile(profile_name="cpu", cli={"lora_targets": spec, "lora_rank": 4, "model_path": str(tiny_dir)},
                              training={"lora_dropout": ("0.05", f"{yaml} [lora_dropout]"),
                                        "lora_targets": (spec, f"{yaml} [lora_target]")})
    r = targets_check.judge(lora_model_modules=lora_model_modules.gather(profile), profile=profile)
    assert r.status.value == ("fail" if refused else "pass"), r.summary
    if refused:
        assert want.split(": ", 1)[1] in r.summary and r.evidence["lora_dropout"] == 0.05
        import subprocess

        first = r.remediation.splitlines()[0]   # the trainer config edited in place, then the check passes
        subprocess.run(["bash", "-c", first], check=True, capture_output=True, timeout=30)
        assert "lora_dropout: 0.0" in yaml.read_text() and _peft_with_dropout(LF_ALL if names == ["all"] else names,
                                                                             0.0) is None
        again = profile.with_values(f"training command {yaml} [lora_dropout]", lora_dropout="0.0")
        assert targets_check.judge(lora_model_modules=lora_model_modules.gather(again), profile=again).status.value \
            == "pass"
