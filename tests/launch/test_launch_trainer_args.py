"""`launch` reads the training command's own arguments (HF Trainer / LLaMA-Factory flags, or a YAML/JSON
trainer config) so the LoRA checks judge what will run: the field's --lora_target q_proj,k_proj,v_proj,o_proj
and a ZeRO-3 config without gather-on-save keep the gate closed with no path repeated in the profile."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dsv3_preflight.launch.trainer_args import contradictions, trainer_values
from dsv3_preflight.profile import ConfigError, resolve_profile

DATA = Path(__file__).resolve().parents[1] / "data" / "lora"
MLA = "self_attn.q_a_proj,self_attn.q_b_proj,self_attn.kv_a_proj_with_mqa,self_attn.kv_b_proj,self_attn.o_proj"

# the training command of the field notes "Part 7: Ray-Orchestrated Training (torchrun under Ray)",
# after torchrun's own flags (paths made local)
FIELD = ["src/train.py", "--stage", "sft", "--do_train", "--model_name_or_path", "/nfs/DeepSeek-V3-bf16",
         "--finetuning_type", "lora", "--overwrite_cache", "false", "--lora_target", MLA, "--lora_rank", "16",
         "--lora_alpha", "32", "--output_dir", "/scratch/out", "--overwrite_output_dir",
         "--per_device_train_batch_size", "1", "--gradient_accumulation_steps", "1", "--bf16",
         "--deepspeed", "ds_z3.json", "--save_steps", "50"]


def test_the_field_command_gives_every_lora_path_and_the_batch_arguments():
    found = trainer_values(FIELD)
    assert found.values == {"model_path": "/nfs/DeepSeek-V3-bf16", "lora_targets": MLA, "lora_rank": "16",
                            "output_dir": "/scratch/out", "per_device_train_batch_size": "1",
                            "gradient_accumulation_steps": "1", "deepspeed_config": os.path.abspath("ds_z3.json"),
                            "mixed_precision": "bf16"}
    assert found.origins["deepspeed_config"] == "--deepspeed" and found.notes == []


def test_equals_form_dash_aliases_and_boolean_flags_before_a_key():
    found = trainer_values(["t.py", "--bf16", "--deepspeed=ds.json", "--per-device-train-batch-size", "4",
                            "--do_train", "--output_dir", "--lora_r", "8"])
    # --output_dir followed by another flag has no value: not taken (the trainer would reject it anyway)
    assert found.values == {"deepspeed_config": os.path.abspath("ds.json"), "per_device_train_batch_size": "4",
                            "lora_rank": "8", "mixed_precision": "bf16"}


def test_the_trainers_precision_flags_read_as_hfargumentparser_reads_them():
    def mp(*args):
        return trainer_values(["t.py", *args]).values.get("mixed_precision")

    assert mp("--bf16") == "bf16" and mp("--bf16", "--do_train") == "bf16"   # a bare flag is true
    assert mp("--fp16", "True") == "fp16" and mp("--bf16=false") == "no"
    assert mp("--fp16", "true", "--bf16", "false") == "fp16"   # one dtype on, the other off: the one on
    assert mp("--bf16", "--bf16", "false") == "no"   # the last word on one flag wins, as argparse's
    assert mp("--deepspeed", "ds.json") is None   # neither flag: not known (a script may set bf16=True itself)
    odd = trainer_values(["t.py", "--bf16=maybe"])
    assert "mixed_precision" not in odd.values and "is not a boolean" in odd.notes[0]


def test_hub_ids_and_inline_json_are_left_to_the_profile_with_a_note():
    found = trainer_values(["t.py", "--model_name_or_path", "deepseek-ai/DeepSeek-V3", "--deepspeed",
                            '{"zero_optimization": {"stage": 3}}', "--lora_target", "all"])
    assert found.values == {"lora_targets": "all"}  # every linear layer: lora.targets knows it
    assert [n.split(":")[0] for n in found.notes] == ["--model_name_or_path", "--deepspeed"]
    assert "needs --model-path DIR" in found.notes[0]


def test_a_yaml_trainer_config_then_flags_override_it(tmp_path):
    cfg = tmp_path / "dsv3_lora_sft.yaml"
    cfg.write_text("model_name_or_path: /nfs/DeepSeek-V3-bf16\nlora_target: q_proj,v_proj\nlora_rank: 8\n"
                   "deepspeed: examples/deepspeed/ds_z3_config.json\ngradient_accumulation_steps: 4\n")
    found = trainer_values(["src/train.py", str(cfg), "--lora_rank", "16"])
    assert found.values["lora_targets"] == "q_proj,v_proj" and found.values["lora_rank"] == "16"
    assert found.origins["lora_targets"] == f"{cfg} [lora_target]" and found.origins["lora_rank"] == "--lora_rank"
    assert found.values["gradient_accumulation_steps"] == 4
    listed = tmp_path / "listed.yaml"
    listed.write_text("lora_target: [q_a_proj, o_proj]\n")
    assert trainer_values(["t.py", str(listed)]).values == {"lora_targets": "q_a_proj,o_proj"}
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert trainer_values(["t.py", str(broken)]).notes[0].startswith(f"training config {broken}: not valid JSON")


def test_contradictions_name_both_sources_and_the_default_is_not_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    found = trainer_values(["t.py", "--deepspeed", "ds_z3.json", "--lora_rank", "16", "--output_dir", "out"])
    profile = resolve_profile(cli={"deepspeed_config": "other.json"}, environ={"OUTPUT_DIR": f"{tmp_path}/out"},
                              profile_name="cpu")
    assert contradictions(found, profile) == [  # out and {tmp_path}/out are one directory: no contradiction
        f"the training command has --deepspeed {tmp_path}/ds_z3.json but --deepspeed-config says other.json: "
        "the preflight checks the training command's deepspeed_config"]


def test_training_values_win_in_the_profile_and_a_bad_one_is_a_config_error():
    profile = resolve_profile(cli={"lora_rank": 4}, environ={}, profile_name="cpu",
                              training={"lora_rank": ("16", "--lora_rank")})
    assert profile.lora_rank == 16 and profile.sources["lora_rank"] == "training command --lora_rank"
    with pytest.raises(ConfigError, match="training command --lora_rank"):
        resolve_profile(environ={}, profile_name="cpu", training={"lora_rank": ("sixteen", "--lora_rank")})


# ------------------------------------------------------------------------------------ end to end
def _launch(tmp_path, *training, extra=()):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MODEL_PATH", "OUTPUT_DIR", "DEEPSPEED_CONFIG", "WORLD_SIZE", "NNODES", "NPROC_PER_NODE",
                        "NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "MASTER_ADDR", "MASTER_PORT", "RANK")}
    argv = [sys.executable, "-m", "dsv3_preflight", "launch", "--profile", "cpu", "--only", "lora.*", "--no-color",
            "--no-report", "--json", str(tmp_path / "report.json"), "--launch-log", str(tmp_path / "launch.log"),
            *extra, "--dry-run", "--", *map(str, training)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path, env={**env, "COLUMNS": "250"})
    doc = json.loads((tmp_path / "report.json").read_text())
    return p, {r["name"]: r for r in doc["results"]}, doc


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "DeepSeek-V3").mkdir()  # the published config.json, no weights
    shutil.copy(DATA / "deepseek_v3_config.json", tmp_path / "DeepSeek-V3" / "config.json")
    for name in ("ds_z3_no_gather.json", "ds_z3_string_stage.json", "ds_z3_offload.json", "ds_z3_no_offload.json"):
        shutil.copy(DATA / name, tmp_path / name)
    return tmp_path


@pytest.mark.slow
def test_the_field_failure_from_the_training_command_keeps_the_gate_closed(workdir):
    p, results, doc = _launch(workdir, "src/train.py", "--model_name_or_path", "./DeepSeek-V3",
                              "--lora_target", "q_proj,v_proj,k_proj,o_proj", "--lora_rank", "16",
                              "--output_dir", "out", "--deepspeed", "ds_z3_string_stage.json")
    # a config whose saves are empty on any node (the stage the string "3": tests/lora/test_lora_zero3_save.py)
    assert p.returncode == 1, p.stderr
    assert results["lora.deepspeed_config"]["status"] == "fail"
    assert "zero_optimization.stage is the string '3'" in results["lora.deepspeed_config"]["summary"]
    # issue 46.11: targets matching no module of DeepSeek-V3 close the gate by themselves too
    assert results["lora.targets"]["status"] == "fail" and "o_proj" in results["lora.targets"]["summary"]
    assert results["lora.output_dir"]["status"] == "pass"
    assert doc["profile"]["sources"]["deepspeed_config"] == "training command --deepspeed"
    line = next(x for x in p.stderr.splitlines() if x.startswith("from the training command: "))
    assert f"deepspeed_config={workdir}/ds_z3_string_stage.json (--deepspeed)" in line and "lora_rank=16 (--lora_rank)" in line
    log = (workdir / "launch.log").read_text()
    assert f"# {line}" in log and "# NO-GO: torchrun not started" in log
    assert p.stdout == ""


@pytest.mark.slow
def test_the_corrected_command_is_green_and_the_batch_arguments_are_checked(workdir):
    common = ["src/train.py", "--model_name_or_path", "./DeepSeek-V3", "--lora_target", MLA, "--lora_rank", "16",
              "--per_device_train_batch_size", "1", "--gradient_accumulation_steps", "1"]
    p, results, _ = _launch(workdir, *common, "--deepspeed", "ds_z3_offload.json")
    assert p.returncode == 0, p.stderr
    assert {r["status"] for r in results.values()} == {"pass", "skip"}  # output_dir: not given
    assert "97,006,592" in results["lora.targets"]["summary"]
    assert p.stdout.rstrip().endswith("--deepspeed ds_z3_offload.json")
    # ds_z3_no_offload.json says gradient_accumulation_steps 16; the trainer is told 1
    p, results, _ = _launch(workdir, *common, "--deepspeed", "ds_z3_no_offload.json")
    assert p.returncode == 1
    assert results["lora.deepspeed_config"]["summary"].endswith(
        "gradient_accumulation_steps is 16 in the DeepSpeed config but the trainer has --gradient_accumulation_steps 1")
    assert results["lora.deepspeed_config"]["evidence"]["trainer_arguments"]["gradient_accumulation_steps"] == {
        "value": 1, "source": "training command --gradient_accumulation_steps"}


@pytest.mark.slow
def test_a_profile_value_the_training_command_contradicts_is_a_warning(workdir):
    p, results, _ = _launch(workdir, "src/train.py", "--deepspeed", "ds_z3_string_stage.json",
                            extra=["--deepspeed-config", "ds_z3_offload.json"])
    assert p.returncode == 1  # the training command's config is the one judged
    assert (f"warning: the training command has --deepspeed {workdir}/ds_z3_string_stage.json but --deepspeed-config says "
            "ds_z3_offload.json: the preflight checks the training command's deepspeed_config") in p.stderr.splitlines()


def test_run_takes_the_trainer_batch_arguments_as_profile_flags(tmp_path):
    shutil.copy(DATA / "ds_z3_no_offload.json", tmp_path / "ds.json")
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--profile", "cpu", "--only",
                        "lora.deepspeed_config", "--no-report", "--json", str(out), "--deepspeed-config",
                        str(tmp_path / "ds.json"), "--per-device-train-batch-size", "1",
                        "--gradient-accumulation-steps", "1"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    summary = json.loads(out.read_text())["results"][0]["summary"]
    assert "the trainer has --gradient_accumulation_steps 1" in summary


def test_trust_remote_code_is_read_as_the_trainer_reads_it(tmp_path):
    """The run builds a model whose config.json has an auto_map with the repo's own code when the trainer trusts it
    (the repo's examples/llamafactory YAML does): lora.targets then judges the experts as that code's."""
    def trc(*args):
        return trainer_values(["t.py", *args]).values.get("trust_remote_code")

    assert trc("--trust_remote_code") == "true" and trc("--trust_remote_code", "--do_train") == "true"
    assert trc("--trust-remote-code=False") == "false" and trc("--trust_remote_code", "true") == "true"
    assert trc("--bf16") is None
    example = Path(__file__).resolve().parents[2] / "examples" / "llamafactory" / "deepseek_v3_lora_sft.yaml"
    assert trainer_values(["src/train.py", str(example)]).values["trust_remote_code"] == "true"
    profile = resolve_profile(profile_name="cpu", training={"trust_remote_code": ("true", "--trust_remote_code")})
    assert profile.trust_remote_code is True
    # the same value given on the command line is no contradiction; the opposite one is
    said = trainer_values(["t.py", "--trust_remote_code"])
    assert contradictions(said, resolve_profile(profile_name="cpu", cli={"trust_remote_code": True})) == []
    assert "--trust_remote_code true but" in contradictions(said, resolve_profile(profile_name="cpu",
                                                                                cli={"trust_remote_code": False}))[0]
