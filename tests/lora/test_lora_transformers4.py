"""The LoRA checks where the training pins transformers 4 (the field notes pin ``transformers==4.52.4`` inside
LLaMA-Factory's container). Real transformers 4.52.4 in a sealed environment of its own: a virtual environment
holding exactly tests/envs/transformers4.txt (transformers 4.52.4 and the huggingface_hub, tokenizers, torch and peft
it imports beside, locked by ``bash scripts/lock.sh``) and the preflight from this checkout, and nothing of this
environment's site-packages, so a release upstream cannot change what it imports. There DeepSeek-V3's routed experts
are Linear modules of their own (``mlp.experts.17.gate_proj``); with transformers 5 they are fused weights.

- ``lora.targets`` run under transformers 4.52.4 counts the per-expert modules peft adapts, and the figure
  transformers 5's run gives for "transformers<5" is that count;
- an adapter peft saved under transformers 4.52.4 is converted by peft under transformers 5 as it loads it, and
  ``lora.adapter_base`` holds its converted experts to the model's experts and widths, as real peft's load does.

When that environment cannot be installed (the registry lacks a pinned release), the tests fail and say why."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path

import pytest
import test_lora_lab as lab
from test_lora_targets_peft import dense_mlp_params

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]
DATA = TESTS / "data" / "lora"
TF4 = "4.52.4"
LOCK = TESTS / "envs" / "transformers4.txt"
MLP = ["gate_proj", "up_proj", "down_proj"]


#: the sealed environment's processes write their own bytecode as they import (PYTHONDONTWRITEBYTECODE, which these
#: machines set, is dropped for them): the first import of torch and transformers compiles only the modules it loads,
#: and the next ones reuse them, instead of `uv --compile-bytecode` compiling all of torch at install (21 CPU-s here)
SEALED_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _uv_pip(python: Path, *args: str) -> subprocess.CompletedProcess:
    wheels = os.environ.get("DSV3_WHEELS", "/opt/wheels")  # where these machines keep torch 2.13.0+cpu (scripts/_env.sh)
    scratch = python.parent.parent / "uv-tmp"   # uv's scratch files (uv-setuptools-*.lock) stay in the environment
    scratch.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "uv", "pip", args[0], "--python", str(python), "--quiet",
                           "--find-links", wheels, *args[1:]], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "TMPDIR": str(scratch)})


@pytest.fixture(scope="module")
def tf4(tmp_path_factory) -> Path:
    """The python of a sealed environment: exactly tests/envs/transformers4.txt, and this checkout's preflight
    installed editable into it. Nothing of this environment's site-packages is on its path."""
    root = tmp_path_factory.mktemp("transformers4")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120,
                   capture_output=True)
    python = root / "bin" / "python"
    for step in (("sync", str(LOCK)), ("install", "--no-deps", "--no-build-isolation", "-e", str(TESTS.parent))):
        proc = _uv_pip(python, *step)
        if proc.returncode != 0:
            pytest.fail(f"the sealed transformers {TF4} environment could not be made (uv pip {step[0]} "
                        f"{LOCK.relative_to(TESTS.parent)}): {proc.stderr.strip()[-1500:]}", pytrace=False)
    got = subprocess.run([str(python), "-c", "import json, sys, transformers, peft, torch, dsv3_preflight; "
                          "print(json.dumps([transformers.__version__, sys.path]))"],
                         capture_output=True, text=True, timeout=120, cwd=root, env=SEALED_ENV)
    assert got.returncode == 0, got.stderr[-2000:]
    version, path = json.loads(got.stdout)
    assert version == TF4
    ours = sysconfig.get_paths()["purelib"]
    assert not [p for p in path if p.startswith((ours, sys.prefix + "/"))], path  # sealed: none of this env
    return python


def _run(python: Path, tmp_path: Path, *args: str) -> dict:
    out = tmp_path / f"r{len(list(tmp_path.glob('r*.json')))}.json"
    proc = subprocess.run([str(python), "-m", "dsv3_preflight", "run", "--profile", "cpu", "--no-report", "--no-color",
                           "--json", str(out), *args], capture_output=True, text=True, timeout=300, env=SEALED_ENV)
    assert out.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    return {r["name"]: r for r in json.loads(out.read_text())["results"]}


def test_mlp_targets_count_the_per_expert_modules_of_transformers4_as_transformers5_estimates_them(tf4, tmp_path):
    """DeepSeek-V3 (61 layers, 3 dense, 256 routed experts): under transformers 4.52.4 gate_proj/up_proj/down_proj
    adapt every expert's Linear modules, 44,727 of them; under transformers 5 peft adapts the fused weights, and the
    check's "with transformers<5 the same targets give N" (name matching over per-expert modules) is that real
    count."""
    model = tmp_path / "dsv3"
    model.mkdir()
    (model / "config.json").write_text((DATA / "deepseek_v3_config.json").read_text())
    args = ("--only", "lora.targets", "--model-path", str(model), "--lora-rank", "16")
    old = _run(tf4, tmp_path, *args, "--lora-targets", ",".join(MLP))["lora.targets"]
    new = _run(Path(sys.executable), tmp_path, *args, "--lora-targets", ",".join(MLP))["lora.targets"]
    assert old["status"] == "pass" and old["summary"].startswith("3 lora_targets adapt 44727 modules"), old["summary"]
    assert old["evidence"]["trainable_params"] == new["evidence"]["trainable_params_unfused_experts"] == 6_597_623_808
    # transformers 5: peft adapts the fused weights of the routed experts, and (peft 0.22) the dense and shared experts'
    assert new["evidence"]["trainable_params"] == 7_541_358_592 + dense_mlp_params(16)
    assert "with transformers<5 (per-expert Linear modules) the same targets give 6,597,623,808" in new["summary"]


def _peft_loads(adapter: Path, **change) -> str | None:
    """None when real peft (this environment's, transformers 5) loads the adapter on the tiny model, else its error."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, DeepseekV3Config

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = AutoModelForCausalLM.from_config(DeepseekV3Config(**{**lab.DSV3_TINY, **change}))
        try:
            PeftModel.from_pretrained(model, adapter)
        except RuntimeError as exc:
            return str(exc)
    return None


def test_an_adapter_saved_under_transformers4_is_converted_and_held_to_the_models_experts(tf4, tmp_path):
    adapter = tmp_path / "out" / "checkpoint-10"
    script = ("import sys; sys.path.insert(0, sys.argv[1]); import test_lora_lab as lab; from pathlib import Path; "
              "lab.write_adapter(Path(sys.argv[2]), 'dsv3', lab.MLA_TARGETS + sys.argv[3].split(','), r=4)")
    proc = subprocess.run([str(tf4), "-c", script, str(TESTS / "lora"), str(adapter), ",".join(MLP)], capture_output=True,
                          text=True, timeout=300, env=SEALED_ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    from safetensors import safe_open

    with safe_open(adapter / "adapter_model.safetensors", "pt") as f:
        assert any(".mlp.experts.3.down_proj.lora_A" in k for k in f.keys())   # per-expert modules, as 4.52.4 saved

    from transformers import DeepseekV3Config

    # (another expert width is held to peft for native saves in test_lora_adapter_base.py)
    for name, change in (("same", {}), ("experts8", {"n_routed_experts": 8})):
        DeepseekV3Config(**{**lab.DSV3_TINY, **change}).save_pretrained(tmp_path / name)
    args = ("--only", "lora.adapter_base", "--output-dir", str(tmp_path / "out"))
    same = _run(Path(sys.executable), tmp_path, *args, "--model-path", str(tmp_path / "same"))["lora.adapter_base"]
    assert _peft_loads(adapter) is None
    assert same["status"] == "pass" and "converts checkpoint-10/adapter_model.safetensors" in same["summary"], same
    (a,) = same["evidence"]["adapters"]
    assert {"model.layers.*.mlp.experts.gate_up_proj", "model.layers.*.mlp.experts.down_proj"} <= set(a["compared"])
    for name, change, said in (
            ("experts8", {"n_routed_experts": 8}, "model.layers.*.mlp.experts.down_proj.lora_A [16, 32] (the model's "
                                                  "r 4 x 8 experts: 32)"),):
        refused = _peft_loads(adapter, **change)
        assert refused and "size mismatch for base_model.model.model.layers.1.mlp.experts.lora_A" in refused
        r = _run(Path(sys.executable), tmp_path, *args, "--model-path", str(tmp_path / name))["lora.adapter_base"]
        assert r["status"] == "fail" and said in r["summary"], r["summary"]
