"""What a ZeRO-3 LoRA save really holds, beside what lora.deepspeed_config says of the same config: a real 2-rank run
of the HF Trainer + peft + DeepSpeed on CPU (gloo), which saves a checkpoint (tests/data/lora/zero3_trainer_save.py).

- The Trainer of transformers 4.37+ (huggingface/transformers#27825) gathers a PEFT model's weights itself when it
  saves under ZeRO-3 (DeepSpeed's exclude_frozen_parameters, deepspeedai/DeepSpeed#3953): its saves are whole without
  stage3_gather_16bit_weights_on_model_save, so the check warns (other saves are not) instead of failing the launch.
- A stage written as the string "3" is ZeRO-3 to DeepSpeed but not to transformers (== 3): the Trainer saves the
  partitioned tensors, every one of shape [0], whatever the gather flag says; the check fails it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dsv3_preflight.lora.probes.facts import trainer_save_path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).resolve().parents[1] / "data" / "lora" / "zero3_trainer_save.py"
pytestmark = pytest.mark.slow


def _config(**zero) -> dict:
    return {"zero_optimization": {"stage3_param_persistence_threshold": 0, **zero},
            "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto", "gradient_clipping": "auto"}


def _train(tmp_path: Path, config: dict) -> dict:
    path = tmp_path / "ds.json"
    path.write_text(json.dumps(config))
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # TMPDIR: torchrun leaves $TMPDIR/torchelastic_* behind without --log-dir; keep it in the test's own dir
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
                        f"--master_port={port}", str(SCRIPT), str(path), str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, "TMPDIR": str(tmp)})
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(next(line[len("RESULT "):] for line in p.stdout.splitlines() if line.startswith("RESULT ")))


def _check(tmp_path: Path, config: dict) -> tuple[int, dict]:
    path = tmp_path / "ds_check.json"
    path.write_text(json.dumps(config))
    p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--profile", "cpu", "--only",
                        "lora.deepspeed_config", "--deepspeed-config", str(path), "--no-report", "--no-color", "--json",
                        str(tmp_path / "r.json")], capture_output=True, text=True, timeout=300, cwd=REPO)
    (r,) = json.loads((tmp_path / "r.json").read_text())["results"]
    return p.returncode, r


def test_the_trainer_saves_whole_adapters_without_the_gather_flag_and_the_check_warns_instead_of_failing(tmp_path):
    assert trainer_save_path()["gathers"] is True   # the transformers and DeepSpeed installed here have that path
    config = _config(stage=3)
    run = _train(tmp_path, config)
    assert run["stage"] == 3 and run["gather_flag"] is False
    lora_b = [t for k, t in run["tensors"].items() if "lora_B" in k]
    assert run["tensors"] and all(t["shape"] and 0 not in t["shape"] for t in run["tensors"].values()), run
    assert lora_b and sum(t["abs_sum"] for t in lora_b) > 0   # trained, gathered weights
    code, r = _check(tmp_path, config)
    assert (code, r["status"], r["cause"]) == (0, "warn", "lora.gather_flag_off"), r
    assert "gathers a PEFT model's weights itself" in r["summary"] and "save_pretrained" in r["summary"]


def test_a_stage_written_as_a_string_saves_empty_adapters_and_the_check_fails(tmp_path):
    config = _config(stage="3", stage3_gather_16bit_weights_on_model_save=True)
    run = _train(tmp_path, config)
    assert run["stage"] == 3 and run["gather_flag"] is True   # DeepSpeed ran ZeRO-3, gathering on
    assert run["tensors"] and all(0 in t["shape"] for t in run["tensors"].values()), run   # every tensor empty
    code, r = _check(tmp_path, config)
    assert (code, r["status"]) == (1, "fail"), r
    assert "is the string '3'" in r["summary"] and "transformers" in r["summary"]
