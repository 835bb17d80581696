"""lora.deepspeed_config judges what the installed transformers, accelerate and DeepSpeed make of the config on the
HF Trainer's way to the engine (dsv3_preflight/lora/probes/trainer_chain.py runs their own code): the refusals that
come after the model has loaded (minutes into a DeepSeek-V3 run), and what they change silently.

Each case's verdict is the libraries' own (their error text is asserted); each failure's fix is pasted into bash on a
copy of the config and the libraries then accept it. The cases are those an audit of this check found it passed
(an audit of DeepSpeed configs, cases D4, D5, D6, D8, D9): ``lint(..., library=False)`` is the check as it was, and passes
each of them.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paste_lint import paste_problems

from dsv3_preflight.lora.dsconfig import GATHER_KEY, Context, lint
from dsv3_preflight.lora.probes.trainer_chain import run_chain

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data" / "lora"
ZERO3 = {"stage": 3, GATHER_KEY: True}
AUTO_BATCH = {"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"}


@pytest.fixture(autouse=True)
def _no_process_wide_deepspeed_config():
    """HfTrainerDeepSpeedConfig registers itself process-wide (is_deepspeed_zero3_enabled); this test process runs
    the chain in-process, so it is unregistered after each case (the probe runs it in a child)."""
    yield
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    unset_hf_deepspeed_config()


def _judge(config, *, path="ds.json", world_size=4, micro_batch=None, grad_accum=None, mixed_precision=None):
    chain = run_chain({"config": config, "world_size": world_size, "micro_batch": micro_batch,
                       "grad_accum": grad_accum, "mixed_precision": mixed_precision})
    ctx = Context(path=str(path), world_size=world_size, micro_batch=micro_batch, grad_accum=grad_accum,
                  mixed_precision=mixed_precision, trainer_chain=chain)
    return lint(config, ctx), lint(config, ctx, library=False), chain


# config, trainer values, the library's words in the failure (None: the check passes)
CASES = {
    "accumulation absent, --gradient_accumulation_steps 4": (
        {"zero_optimization": ZERO3, "train_micro_batch_size_per_gpu": "auto"},
        {"micro_batch": 2, "grad_accum": 4},
        "its engine steps with gradient_accumulation_steps 1 (the config has no gradient_accumulation_steps, so "
        "accelerate's DeepSpeedPlugin inserts 1): a train batch of 8 where the trainer counts on 32"),
    "accumulation absent, train_batch_size auto": (
        {"zero_optimization": ZERO3, "train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto"},
        {"micro_batch": 2, "grad_accum": 4},
        "AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
        "gradient_acc_step * world_size 32 != 2 * 1 * 4"),
    "no batch key at all": (
        {"zero_optimization": ZERO3},
        {},
        "AssertionError: Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"),
    "zero_optimization absent": (
        dict(AUTO_BATCH),
        {},
        "ValueError: Please specify the ZeRO optimization config in the DeepSpeed config."),
    "auto on a key nobody fills": (
        {"zero_optimization": {**ZERO3, "stage3_max_live_parameters": "auto"}, **AUTO_BATCH},
        {},
        "ValueError: `zero_optimization.stage3_max_live_parameters` not found in kwargs."),
    "a block DeepSpeed removed": (
        {"zero_optimization": ZERO3, **AUTO_BATCH, "elasticity": {"enabled": False}},
        {},
        "DeepSpeedConfigError: Elastic training has been removed"),
    "bf16 on, the trainer without --bf16": (
        {"zero_optimization": ZERO3, **AUTO_BATCH, "bf16": {"enabled": True}},
        {"mixed_precision": "no"},
        "ds bf16.enabled=True vs hf bf16|bf16_full_eval=False"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_what_the_trainers_own_setup_refuses_or_changes_fails_and_the_pasted_fix_satisfies_it(name, tmp_path):
    config, trainer, words = CASES[name]
    path = tmp_path / "ds config.json"
    path.write_text(json.dumps(config))
    found, before, chain = _judge(config, path=path, **trainer)
    assert not before.failures, f"the check before the libraries' chain already failed {name}"
    (f,) = found.failures
    assert words in f.message, f.message
    assert f.cause == "lora.deepspeed_config_invalid" and f.actor.value == "job"
    assert paste_problems(f.fix) == [] and str(path) in f.fix
    lines = [line for line in f.fix.splitlines() if not line.startswith("dsv3-preflight ")]   # the re-check
    subprocess.run(["bash", "-c", "\n".join(lines)], check=True, capture_output=True, timeout=30)
    fixed, _, chain = _judge(json.loads(path.read_text()), path=path, **trainer)
    assert not fixed.failures and chain["step"] == "done", (list(fixed), chain)


def test_a_refusal_says_when_in_the_run_it_would_come():
    found, _, chain = _judge({"zero_optimization": {**ZERO3, "sub_group_size": "auto"}, **AUTO_BATCH})
    assert chain["step"] == "prepare" and chain["unfilled_auto"] == ["zero_optimization.sub_group_size"]
    (f,) = found.failures
    assert f.message.startswith("the HF Trainer's run would stop at accelerator.prepare (accelerate's "
                                "_prepare_deepspeed), after the model has loaded: ")
    assert "transformers 5." in f.message and "deepspeed 0." in f.message   # the versions that said it


@pytest.mark.parametrize("config, trainer", [
    ({"zero_optimization": ZERO3, **AUTO_BATCH, "bf16": {"enabled": "auto"}}, {"micro_batch": 2, "grad_accum": 4,
                                                                              "mixed_precision": "bf16"}),
    # unknown trainer values are taken as agreeing with the config: an explicit 48 over 24 ranks is 2 × 1 or 1 × 2
    ({"zero_optimization": ZERO3, **AUTO_BATCH, "train_batch_size": 48}, {}),
    ({"zero_optimization": ZERO3, "train_batch_size": 48}, {}),
    ({"zero_optimization": ZERO3, "train_micro_batch_size_per_gpu": "auto"}, {"grad_accum": 1}),
    ({"zero_optimization": ZERO3, **AUTO_BATCH, "bf16": {"enabled": True}}, {}),
])
def test_configs_the_libraries_accept_pass(config, trainer):
    found, _, chain = _judge(config, world_size=24, **trainer)
    assert chain["step"] == "done" and not found.failures, (list(found), chain)


def test_the_field_configs_pass_with_the_fields_own_trainer_values():
    """The field notes (Part 2: torchrun and DeepSpeed ZeRO-3): the offload config under --per_device_train_batch_size 1 --gradient_accumulation_steps 1
    --bf16; the no-offload one (accumulation 16) under the same values is a mismatch the lint names first."""
    found, _, chain = _judge(json.loads((DATA / "ds_z3_offload.json").read_text()), world_size=24, micro_batch=1,
                             grad_accum=1, mixed_precision="bf16")
    assert chain["engine"] == {"micro_batch": 1, "gradient_accumulation_steps": 1, "train_batch_size": 24,
                               "world_size": 24, "bf16": True, "fp16": False, "stage": 3}
    assert not found.failures
    found, _, chain = _judge(json.loads((DATA / "ds_z3_no_offload.json").read_text()), world_size=24, micro_batch=1,
                             grad_accum=1, mixed_precision="bf16")
    assert [f.rule for f in found.failures] == ["trainer_batch_agrees"]   # root cause first, the libraries agree:
    assert chain["mismatches"] == ["ds gradient_accumulation_steps=16 vs hf gradient_accumulation_steps=1"]


@pytest.mark.parametrize("precision, tail", [("no", "this run trains in fp32, not bf16"),
                                             (None, "bf16 training needs --bf16 on the training command"),
                                             ("bf16", "DeepSpeed reads bf16 first")])
def test_the_old_bfloat16_name_is_a_warning_saying_what_the_run_trains_in(precision, tail):
    config = {"zero_optimization": ZERO3, **AUTO_BATCH, "bfloat16": {"enabled": True}}
    found, before, chain = _judge(config, mixed_precision=precision)
    (w,) = found.warnings
    assert w.message.endswith(tail) and not found.failures
    assert chain["engine"]["bf16"] is (precision != "no")   # the libraries: the bfloat16 block decides nothing


def test_a_chain_that_could_not_run_is_a_warning_and_libraries_not_installed_leave_the_rules_alone(monkeypatch):
    from dsv3_preflight.lora.probes import facts
    from dsv3_preflight.profile import resolve_profile

    config = {"zero_optimization": ZERO3, **AUTO_BATCH}
    # the real child, given no time to import transformers: killed at the deadline, and not remembered
    monkeypatch.setattr(facts, "TRAINER_CHAIN_TIMEOUT_S", 0.2)
    remembered = dict(facts._CHAIN)
    timed_out = facts.trainer_chain(config, resolve_profile(profile_name="cpu", cli={"world_size": 4}))
    assert timed_out["timed_out"] and timed_out["available"] is None and facts._CHAIN == remembered
    (w,) = lint(config, Context(trainer_chain=timed_out)).warnings
    assert "could not be run on the config here: the Trainer's set-up did not finish in 0 s" in w.message
    assert w.fix.splitlines()[-1].startswith("dsv3-preflight run --only lora.deepspeed_config")
    # what the child answers where an import fails (run_chain's own shape): the rules judge alone
    assert not lint(config, Context(trainer_chain={"available": False, "reason": "ModuleNotFoundError: accelerate"}))


def test_run_judges_the_chain_in_a_child_with_the_trainer_values_it_was_given(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({"zero_optimization": ZERO3, "train_micro_batch_size_per_gpu": "auto"}))
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--profile", "cpu", "--only",
                        "lora.deepspeed_config", "--deepspeed-config", str(path), "--per-device-train-batch-size", "2",
                        "--gradient-accumulation-steps", "4", "--no-report", "--no-color", "--json", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=REPO,
                       env={k: v for k, v in os.environ.items() if not k.startswith("ACCELERATE_")})
    (r,) = json.loads(out.read_text())["results"]
    assert p.returncode == 1 and r["status"] == "fail", (p.stdout, p.stderr)
    assert "--gradient_accumulation_steps 4 is silently not what DeepSpeed runs" in r["summary"]
    chain = r["evidence"]["trainer_chain"]
    assert chain["engine"]["gradient_accumulation_steps"] == 1 and chain["known"] == {"micro_batch": 2,
                                                                                      "grad_accum": 4, "batch": True}
