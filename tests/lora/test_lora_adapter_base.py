"""lora.adapter_base: adapters written by real peft compared with models built from their config.json (meta device).
An adapter of a hidden-size-64 Llama in the output dir of a run on a hidden-size-32 Llama is what made peft raise
"size mismatch ... copying a param with shape torch.Size([4, 64]) from checkpoint, the shape in current model is
torch.Size([4, 32])" in the doctor's library-messages test."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import test_lora_lab as lab
from paste_lint import paste_problems

from dsv3_preflight.checks.lora_adapter_base import adapter_base
from dsv3_preflight.lora.base_fit import compare
from dsv3_preflight.lora.case import AdapterCase
from dsv3_preflight.lora.layout import template
from dsv3_preflight.lora.probes.facts import model_facts, read_model_facts
from dsv3_preflight.lora.probes.scan import adapter_facts

DATA = Path(__file__).resolve().parents[1] / "data" / "lora"


@pytest.fixture(scope="module")
def lab_dirs(tmp_path_factory):
    from transformers import DeepseekV3Config, LlamaConfig

    root = tmp_path_factory.mktemp("adapter_base")
    LlamaConfig(**lab.LLAMA_TINY).save_pretrained(root / "llama64")
    LlamaConfig(**{**lab.LLAMA_TINY, "hidden_size": 32, "intermediate_size": 64}).save_pretrained(root / "llama32")
    DeepseekV3Config(**lab.DSV3_TINY).save_pretrained(root / "dsv3_tiny")
    (root / "dsv3").mkdir()
    (root / "dsv3" / "config.json").write_text((DATA / "deepseek_v3_config.json").read_text())
    lab.write_adapter(root / "llama_qkvo", "llama", lab.QKVO, r=4)
    lab.write_adapter(root / "dsv3_mla", "dsv3", lab.MLA_TARGETS, r=4)
    return root


def _facts(adapter: Path) -> dict:
    return adapter_facts(adapter / "adapter_model.safetensors")


def _check(out: Path, adapters: list[dict], model_dir: Path | None):
    model = {"configured": False} if model_dir is None else {"configured": True, "needed": bool(adapters),
                                                             **model_facts(model_dir)}
    return adapter_base({"path": str(out)}, {"adapters": adapters}, model)


def test_an_adapter_on_the_model_it_was_trained_on_fits(lab_dirs):
    res = compare(AdapterCase.of(_facts(lab_dirs / "llama_qkvo")).layout, model_facts(lab_dirs / "llama64"))
    assert res == {"compared": [f"model.layers.*.self_attn.{t}" for t in ("k_proj", "o_proj", "q_proj", "v_proj")],
                   "mismatched": [], "absent": [], "not_compared": []}
    r = _check(lab_dirs, [_facts(lab_dirs / "llama_qkvo")], lab_dirs / "llama64")
    assert r.status.value == "pass", r.summary
    assert r.summary == "1 saved adapter(s) fit llama: 4 adapted module kinds take the model's widths"


def test_an_adapter_of_a_wider_model_fails_naming_both_widths_and_the_model_it_was_trained_on(lab_dirs, tmp_path):
    adapter = lab.edit_config(shutil.copytree(lab_dirs / "llama_qkvo", tmp_path / "llama_qkvo"),
                              base_model_name_or_path="/models/llama-64")
    r = _check(tmp_path, [_facts(adapter)], lab_dirs / "llama32")
    assert r.status.value == "fail" and r.cause == "lora.adapter_base_mismatch"
    # the width peft's "size mismatch" names: lora_A [4, 64] where the model's q_proj takes 32 in-features
    assert ("saved adapter llama_qkvo/adapter_model.safetensors does not fit llama "
            f"({lab_dirs / 'llama32'}): model.layers.*.self_attn.k_proj.lora_A [4, 64] (the model's in-features: 32)"
            in r.summary), r.summary
    assert r.summary.endswith("; 5 more; adapter_config.json says it was trained on /models/llama-64")   # 4 modules x (A, B): 3 named
    mism = r.evidence["adapters"][0]["mismatched"]
    assert {(m["module"].rsplit(".", 1)[1], m["matrix"], m["want"]) for m in mism} >= {
        ("q_proj", "lora_A", 32), ("q_proj", "lora_B", 32), ("o_proj", "lora_B", 32)}
    assert r.remediation and paste_problems(r.remediation) == []
    assert "--only lora.adapter_base" in r.remediation and "adapter_config.json" in r.remediation


def test_mla_targets_of_a_dsv3_adapter_are_absent_from_llama_and_too_narrow_for_the_full_dsv3(lab_dirs):
    mla = _facts(lab_dirs / "dsv3_mla")
    assert _check(lab_dirs, [mla], lab_dirs / "dsv3_tiny").status.value == "pass"
    on_llama = _check(lab_dirs, [mla], lab_dirs / "llama64")
    assert on_llama.status.value == "fail" and "llama has no model.layers.*.self_attn.kv_a_proj_with_mqa" in on_llama.summary
    on_full = _check(lab_dirs, [mla], lab_dirs / "dsv3")   # DeepSeek-V3's hidden size is 7168, the tiny one's 64
    assert on_full.status.value == "fail"
    assert "model.layers.*.self_attn.kv_a_proj_with_mqa.lora_A [4, 64] (the model's in-features: 7168)" in on_full.summary


def test_empty_zero3_tensors_are_not_compared_and_nothing_to_compare_is_a_skip(lab_dirs, tmp_path):
    empty = lab.zero3_unGathered(lab_dirs / "llama_qkvo", tmp_path / "empty")
    r = _check(tmp_path, [_facts(empty)], lab_dirs / "llama32")
    assert r.status.value == "skip" and "no saved module could be compared with llama" in r.summary
    assert _check(tmp_path, [], lab_dirs / "llama32").status.value == "skip"
    assert _check(tmp_path, [_facts(lab_dirs / "llama_qkvo")], None).status.value == "skip"


def test_a_model_config_that_cannot_be_read_fails_under_the_shared_cause(lab_dirs, tmp_path):
    r = _check(tmp_path, [_facts(lab_dirs / "llama_qkvo")], tmp_path / "nomodel")
    assert r.status.value == "fail" and r.cause == "lora.model_config_unreadable" and "does not exist" in r.summary


def test_model_facts_are_built_once_per_config_and_again_after_an_edit(tmp_path):
    from transformers import LlamaConfig

    LlamaConfig(**lab.LLAMA_TINY).save_pretrained(tmp_path)
    first = model_facts(tmp_path)
    assert model_facts(tmp_path) == first
    # read again, the facts are the same; from this run's fact cache they carry when they were computed (the first
    # read wrote them there, or another test of this run asked first): alone, this test's second read is a hit
    assert {**read_model_facts(tmp_path), "from_cache": None} == {**first, "from_cache": None}
    LlamaConfig(**{**lab.LLAMA_TINY, "hidden_size": 32, "intermediate_size": 64}).save_pretrained(tmp_path)
    assert model_facts(tmp_path)["modules"]["model.layers.*.self_attn.q_proj"]["in"] == 32


@pytest.mark.slow
def test_run_fails_on_an_adapter_of_another_model_in_the_output_dir_and_passes_on_its_own(lab_dirs, tmp_path):
    out = tmp_path / "out"
    lab.write_checkpoint(out, 100, lab_dirs / "llama_qkvo")

    def run(model: Path):
        js = tmp_path / f"{model.name}.json"
        p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--profile", "cpu", "--only",
                            "lora.adapter_base", "--model-path", str(model), "--output-dir", str(out), "--json", str(js),
                            "--no-report", "--no-color"], capture_output=True, text=True, timeout=300)
        return p, {r["name"]: r for r in json.loads(js.read_text())["results"]}["lora.adapter_base"]

    p, r = run(lab_dirs / "llama32")
    assert p.returncode == 1 and r["status"] == "fail", p.stdout + p.stderr
    assert "checkpoint-100/adapter_model.safetensors does not fit llama" in r["summary"]
    p, r = run(lab_dirs / "llama64")
    assert p.returncode == 0 and r["status"] == "pass", p.stdout + p.stderr


def test_checkpoints_that_differ_the_same_way_are_one_finding(lab_dirs, tmp_path):
    out = tmp_path / "out"
    for step in (100, 200):
        lab.write_checkpoint(out, step, lab_dirs / "llama_qkvo")
    lab.write_checkpoint(out, 300, lab_dirs / "dsv3_mla")   # another layout: a finding of its own
    cases = [_facts(out / f"checkpoint-{s}") for s in (100, 200, 300)]
    r = _check(out, cases, lab_dirs / "llama32")
    assert r.status.value == "fail" and len(r.findings) == 2, [f.message for f in r.findings]
    assert r.findings[0].message.startswith("2 saved adapters checkpoint-100/adapter_model.safetensors, "
                                            "checkpoint-200/adapter_model.safetensors do not fit llama")
    assert r.findings[1].message.startswith("saved adapter checkpoint-300/adapter_model.safetensors does not fit llama")


def _transformers4_moe_adapter(lab_dirs: Path, out: Path, r: int = 4) -> Path:
    """A DeepSeek-V3 adapter as peft saved it under transformers 4, whose routed experts were a ModuleList of Linear
    modules: real peft's save of the MLA targets (transformers 5), plus the per-expert keys transformers 4 gave the
    MoE layer's experts (``model.layers.1.mlp.experts.<e>.{gate,up,down}_proj``), written with safetensors, and
    gate_proj/up_proj/down_proj in target_modules as that run's adapter_config.json had them."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(lab_dirs / "dsv3_mla", out)
    tensors = load_file(out / "adapter_model.safetensors")
    cfg = lab.DSV3_TINY
    hidden, inter = cfg["hidden_size"], cfg["moe_intermediate_size"]
    torch.manual_seed(0)
    for e in range(cfg["n_routed_experts"]):
        for name, (fan_in, fan_out) in {"gate_proj": (hidden, inter), "up_proj": (hidden, inter),
                                         "down_proj": (inter, hidden)}.items():
            key = f"base_model.model.model.layers.1.mlp.experts.{e}.{name}"
            tensors[f"{key}.lora_A.weight"] = torch.randn(r, fan_in)
            tensors[f"{key}.lora_B.weight"] = torch.randn(fan_out, r) * 0.01
    save_file(tensors, out / "adapter_model.safetensors", metadata={"format": "pt"})
    config = json.loads((out / "adapter_config.json").read_text())
    config["target_modules"] = sorted(set(config["target_modules"]) | {"gate_proj", "up_proj", "down_proj"})
    (out / "adapter_config.json").write_text(json.dumps(config))
    return out


@pytest.mark.slow
def test_a_transformers4_adapter_of_per_expert_modules_is_converted_by_peft_and_fits(lab_dirs, tmp_path):
    """peft with transformers 5 converts such an adapter as it loads it (the Trainer's resume, from_pretrained): the
    per-expert matrices become adapters of the fused expert weights. The check failed it ('deepseek_v3 has no
    model.layers.*.mlp.experts.*.down_proj'), blocking the resume of a run started before the upgrade."""
    import warnings

    import peft
    from peft import PeftModel

    out = tmp_path / "out"
    adapter = _transformers4_moe_adapter(lab_dirs, out / "checkpoint-100")
    # what real peft does with it on the tiny model (CPU weights): it loads, the experts' lora_B as saved (not zero)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = PeftModel.from_pretrained(lab.tiny_model("dsv3"), adapter)
    experts = {n: p for n, p in loaded.named_parameters() if ".mlp.experts." in n and "lora_B" in n}
    assert experts and all(float(p.abs().sum()) > 0 for p in experts.values()), sorted(experts)
    assert not any(".experts.0." in n for n, _ in loaded.named_parameters())   # fused: no per-expert module left
    js = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--profile", "cpu", "--only", "lora.adapter_base",
                        "--model-path", str(lab_dirs / "dsv3_tiny"), "--output-dir", str(out), "--json", str(js),
                        "--no-report", "--no-color"], capture_output=True, text=True, timeout=300)
    r = {x["name"]: x for x in json.loads(js.read_text())["results"]}["lora.adapter_base"]
    assert p.returncode == 0 and r["status"] == "pass", r["summary"]
    assert f"peft {peft.__version__} converts checkpoint-100/adapter_model.safetensors as it loads it" in r["summary"]
    (a,) = r["evidence"]["adapters"]
    assert a["peft_converts"] is True and a["absent"] == [] and "model.layers.*.self_attn.q_a_proj" in a["compared"]
    # the converted experts are held to the model's experts and widths like a transformers-5 save
    assert {"model.layers.*.mlp.experts.gate_up_proj", "model.layers.*.mlp.experts.down_proj"} <= set(a["compared"])
    assert a["not_compared"] == []
    # on another model the attention still does not fit: the conversion hides no mismatch
    p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--profile", "cpu", "--only", "lora.adapter_base",
                        "--model-path", str(lab_dirs / "dsv3"), "--output-dir", str(out), "--json", str(js),
                        "--no-report", "--no-color"], capture_output=True, text=True, timeout=300)
    r = {x["name"]: x for x in json.loads(js.read_text())["results"]}["lora.adapter_base"]
    assert p.returncode == 1 and r["status"] == "fail" and "does not fit deepseek_v3" in r["summary"], r["summary"]


# ------------------------------------------------------------------ fused experts and routers (target_parameters)
#: peft's load error, one line per tensor whose saved shape the model's layer does not take
PEFT_MISMATCH = re.compile(r"size mismatch for base_model\.model\.(?P<module>\S+?)\.(?P<matrix>lora_[AB])\.default\.weight: "
                           r"copying a param with shape torch\.Size\(\[(?P<saved>[\d, ]+)\]\) from checkpoint, the shape "
                           r"in current model is torch\.Size\(\[(?P<want>[\d, ]+)\]\)")
GPT_OSS_TINY = dict(hidden_size=64, intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, num_local_experts=4, num_experts_per_tok=2, vocab_size=128,
                    max_position_embeddings=64, layer_types=["full_attention", "sliding_attention"])


def _config(kind: str, **changes):
    from transformers import DeepseekV3Config, GptOssConfig

    return (DeepseekV3Config(**{**lab.DSV3_TINY, **changes}) if kind == "dsv3"
            else GptOssConfig(**{**GPT_OSS_TINY, **changes}))


@pytest.fixture(scope="module")
def moe_lab(tmp_path_factory):
    """Real peft adapters of fused expert weights and a router (target_parameters), saved from tiny models:
    DeepSeek-V3's experts ``[E, out, in]`` (not transposed) and gpt-oss's ``[E, in, out]`` (``is_transposed``)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("moe_adapters")
    for kind, targets, params in (("dsv3", ["q_a_proj"], ["gate_up_proj", "down_proj", "gate.weight"]),
                                  ("gpt_oss", ["q_proj"], ["mlp.experts.gate_up_proj", "mlp.experts.down_proj"])):
        _config(kind).save_pretrained(root / f"{kind}_model")
        torch.manual_seed(0)
        model = get_peft_model(AutoModelForCausalLM.from_config(_config(kind)),
                               LoraConfig(r=4, target_modules=targets, target_parameters=params))
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.01)
        model.save_pretrained(root / f"{kind}_adapter")
    return root


def _peft_refuses(kind: str, model_dir: Path, adapter: Path) -> set[tuple[str, str, tuple, tuple]]:
    """What real peft says loading ``adapter`` on the model of ``model_dir``: (module, matrix, saved, model's)."""
    import warnings

    from peft import PeftModel
    from transformers import AutoConfig, AutoModelForCausalLM

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir))
        try:
            PeftModel.from_pretrained(model, adapter)
        except RuntimeError as exc:
            return {(m["module"], m["matrix"], tuple(int(x) for x in m["saved"].split(",")),
                     tuple(int(x) for x in m["want"].split(","))) for m in PEFT_MISMATCH.finditer(str(exc))}
    return set()


def _as_peft_keys(kind: str, found: dict) -> set[tuple[str, str]]:
    """Our mismatches as the (module template, matrix) of peft's keys: a wrapper's parameter becomes its depth (the
    module's last wrapped parameter outermost; DeepSeek-V3's experts register gate_up_proj, then down_proj)."""
    where = {"mlp.experts.down_proj": "mlp.experts", "mlp.experts.gate_up_proj": "mlp.experts.base_layer",
             "mlp.gate.weight": "mlp.gate"}
    out = set()
    for m in found["mismatched"]:
        name = m["module"].removeprefix("model.layers.*.")
        out.add((f"model.layers.*.{where.get(name, name)}", m["matrix"]))
    return out


@pytest.mark.parametrize("kind, change, said", [
    ("dsv3", {"n_routed_experts": 8}, "model.layers.*.mlp.experts.down_proj.lora_A [16, 32] (the model's r 4 x 8 "
                                      "experts: 32)"),
    ("dsv3", {"moe_intermediate_size": 16}, "model.layers.*.mlp.experts.down_proj.lora_A [16, 32] (the model's "
                                            "in-features: 16)"),
    ("dsv3", {"hidden_size": 32, "intermediate_size": 64}, "model.layers.*.mlp.experts.down_proj.lora_B [64, 16] (the "
                                                           "model's out-features: 32)"),
    ("gpt_oss", {"intermediate_size": 16}, "model.layers.*.mlp.experts.down_proj.lora_A [16, 32] (the model's "
                                           "in-features: 16)"),
])
def test_fused_expert_and_router_wrappers_are_held_to_the_models_experts_and_widths_as_peft_loads_them(
        moe_lab, tmp_path, kind, change, said):
    """An adapter of fused MoE experts (peft's ParamWrapper: lora_A [r x E, in], lora_B [out, r x E], in and out by
    the weight's layout) on a model of other experts or widths: real peft refuses it with 'size mismatch', and the
    check names the same tensors. They were 'not compared': an expert-only adapter of another model passed."""
    adapter = moe_lab / f"{kind}_adapter"
    case = AdapterCase.of(_facts(adapter))
    own = compare(case.layout, model_facts(moe_lab / f"{kind}_model"), case.config)
    assert own["mismatched"] == [] and own["not_compared"] == [] and own["absent"] == []
    wrapped = {"dsv3": ["mlp.experts.down_proj", "mlp.experts.gate_up_proj", "mlp.gate.weight"],
               "gpt_oss": ["mlp.experts.down_proj", "mlp.experts.gate_up_proj"]}[kind]
    assert {f"model.layers.*.{w}" for w in wrapped} <= set(own["compared"])
    assert _peft_refuses(kind, moe_lab / f"{kind}_model", adapter) == set()

    other = tmp_path / "other"
    _config(kind, **change).save_pretrained(other)
    refused = _peft_refuses(kind, other, adapter)
    assert refused, "peft loaded it"
    found = compare(case.layout, model_facts(other), case.config)
    peft_keys = {(template(module), matrix) for module, matrix, _s, _w in refused}
    assert _as_peft_keys(kind, found) == peft_keys, (found["mismatched"], refused)
    # each width we name is the one peft's layer has at that dimension
    for m in found["mismatched"]:
        (key,) = _as_peft_keys(kind, {"mismatched": [m]})
        wants = {w for module, matrix, _s, w in refused if (template(module), matrix) == key}
        assert all(w[m["dim"]] == m["want"] for w in wants), (m, wants)
    r = _check(tmp_path, [_facts(adapter)], other)
    assert r.status.value == "fail" and r.cause == "lora.adapter_base_mismatch", r.summary
    assert said in r.summary, r.summary
    assert paste_problems(r.remediation) == []


def test_without_a_config_the_wrappers_are_read_when_every_parameter_is_wrapped(moe_lab):
    """No adapter_config.json (a converted adapter's): DeepSeek-V3's experts hold two saved wrappers for their two
    parameters, so the nesting says which is which; gpt-oss's experts have four 2-D/3-D parameters (the biases too)
    for two wrappers: which two is the config's, so they are not compared."""
    dsv3 = compare(AdapterCase.of(_facts(moe_lab / "dsv3_adapter")).layout, model_facts(moe_lab / "dsv3_model"))
    assert "model.layers.*.mlp.experts.gate_up_proj" in dsv3["compared"] and dsv3["mismatched"] == []
    gpt = compare(AdapterCase.of(_facts(moe_lab / "gpt_oss_adapter")).layout, model_facts(moe_lab / "gpt_oss_model"))
    assert gpt["not_compared"] == ["model.layers.*.mlp.experts"] and gpt["mismatched"] == []


def test_the_model_probe_records_what_target_parameters_can_wrap_at_full_size(lab_dirs):
    """DeepSeek-V3 is built with 2 of its 256 routed experts; the parameters are recorded at full size, in the order
    the module registers them (the order peft nests their wrappers in)."""
    params = model_facts(lab_dirs / "dsv3")["module_params"]
    assert params["model.layers.*.mlp.experts"] == [
        {"name": "gate_up_proj", "shape": [256, 4096, 7168], "transposed": False},
        {"name": "down_proj", "shape": [256, 7168, 2048], "transposed": False}]
    assert params["model.layers.*.mlp.gate"] == [{"name": "weight", "shape": [256, 7168], "transposed": False}]


def test_an_invalid_rank_pattern_leaves_the_wrappers_rank_unknown_not_a_crash(moe_lab):
    """A rank_pattern peft cannot compile is the config rules' finding; the widths are still compared."""
    case = AdapterCase.of(_facts(moe_lab / "dsv3_adapter"))
    found = compare(case.layout, model_facts(moe_lab / "dsv3_model"), {**case.config, "rank_pattern": {"(": 8}})
    assert found["mismatched"] == [] and "model.layers.*.mlp.experts.down_proj" in found["compared"]
