"""Shared by the lora.* rule and check tables (test_lora_deepspeed_config.py, test_lora_output_dir.py,
test_lora_targets.py, test_lora_checks.py): the recorded configs in tests/data/lora/, the tiny real models
written once per session, and the check that a finding names who acts and that its fix pastes. Test modules
import the fixtures by name."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from paste_lint import paste_problems

from dsv3_preflight.result import Finding

DATA = Path(__file__).resolve().parents[1] / "data" / "lora"


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


def _cfg(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def _ds(name):
    return json.loads((DATA / name).read_text())


def _as_list(found) -> list[Finding]:
    return [] if found is None else [found] if isinstance(found, Finding) else list(found)


def _check_finding(f: Finding) -> None:
    assert f.actor is not None, f
    assert f.fix and paste_problems(f.fix) == [], (f.message, f.fix, paste_problems(f.fix))
