"""lora.deepspeed_config, lora.targets and lora.output_dir through the CLI: the whole run on real models and
configs. Each check's tables are in its own file (test_lora_deepspeed_config.py, test_lora_targets.py,
test_lora_output_dir.py)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import test_lora_lab as lab
from lora_tables_lab import DATA, _cfg, model_dirs  # noqa: F401 (pytest fixtures)
from paste_lint import paste_problems

from dsv3_preflight.lora.dsconfig import GATHER_KEY

REPO = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------ the CLI run
def _run(*args, timeout=300):
    env = {k: v for k, v in os.environ.items()
           if k not in ("MODEL_PATH", "OUTPUT_DIR", "DEEPSPEED_CONFIG", "WORLD_SIZE", "NNODES", "NPROC_PER_NODE")}
    p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--profile", "cpu", "--only", "lora.*",
                        "--no-report", "--no-color", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, cwd=REPO, env={**env, "COLUMNS": "250"})
    return p


def _doc(tmp_path, *args):
    out = tmp_path / "result.json"
    p = _run(*args, "--json", out)
    doc = json.loads(out.read_text())
    return p, {r["name"]: r for r in doc["results"]} if "results" in doc else doc


@pytest.mark.slow
def test_run_reports_each_lora_check(tmp_path, model_dirs):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    p, results = _doc(tmp_path, "--deepspeed-config", DATA / "ds_z3_string_stage.json", "--model-path", model_dirs / "dsv3",
                      "--lora-targets", "q_proj,k_proj,v_proj,o_proj", "--lora-rank", "16", "--output-dir", out_dir)
    assert p.returncode == 1, p.stdout + p.stderr
    assert results["lora.deepspeed_config"]["status"] == "fail"
    assert "is the string '3'" in results["lora.deepspeed_config"]["summary"]
    p, results = _doc(tmp_path, "--deepspeed-config", DATA / "ds_z3_no_gather.json", "--model-path", model_dirs / "dsv3",
                      "--lora-targets", "q_proj,k_proj,v_proj,o_proj", "--lora-rank", "16", "--output-dir", out_dir)
    # without the flag: a warning here, where the installed Trainer gathers on its own (tests/lora/test_lora_zero3_save.py)
    assert results["lora.deepspeed_config"]["status"] == "warn", results["lora.deepspeed_config"]["summary"]
    assert GATHER_KEY in results["lora.deepspeed_config"]["remediation"]
    t = results["lora.targets"]
    assert t["status"] == "fail" and "q_proj, k_proj, v_proj match no module of deepseek_v3" in t["summary"]
    assert t["evidence"]["trainable_params"] == 22_986_752
    assert results["lora.output_dir"]["status"] == "pass"


def test_the_check_reads_an_auto_gather_flag_with_the_environment_the_run_inherits(tmp_path):
    cfg = _cfg("ds_z3_offload.json")
    cfg["zero_optimization"][GATHER_KEY] = "auto"
    path = tmp_path / "ds_auto.json"
    path.write_text(json.dumps(cfg))
    verdicts = {}
    for env in (None, "true"):
        p = subprocess.run([sys.executable, "-m", "dsv3_preflight", "run", "--profile", "cpu", "--only",
                            "lora.deepspeed_config", "--deepspeed-config", str(path), "--no-report", "--no-color",
                            "--json", str(tmp_path / "r.json")], capture_output=True, text=True, timeout=300, cwd=REPO,
                           env={**{k: v for k, v in os.environ.items() if k != "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL"},
                                **({"ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL": env} if env else {})})
        (r,) = json.loads((tmp_path / "r.json").read_text())["results"]
        verdicts[env] = (p.returncode, r["status"])
        if env is None:
            assert "ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL, unset in this environment" in r["summary"], r["summary"]
    # unset: false, so a warning where the installed Trainer gathers on its own (as here), else a failure
    assert verdicts == {None: (0, "warn"), "true": (0, "pass")}, verdicts


@pytest.mark.slow
def test_run_fails_clearly_on_paths_that_do_not_exist(tmp_path):
    p, results = _doc(tmp_path, "--deepspeed-config", tmp_path / "nope.json", "--model-path", tmp_path / "nomodel",
                      "--lora-targets", "o_proj", "--output-dir", tmp_path / "noout")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert {n: r["status"] for n, r in results.items()} == {"lora.deepspeed_config": "fail", "lora.targets": "fail",
                                                            "lora.output_dir": "pass", "lora.adapter_base": "skip"}
    assert results["lora.adapter_base"]["summary"] == "nothing to compare with the model: no output directory to scan"
    assert results["lora.deepspeed_config"]["summary"] == f"DeepSpeed config {tmp_path / 'nope.json'}: no such file"
    assert "does not exist" in results["lora.targets"]["summary"]
    # the trainer creates its output dir: a missing one under a writable parent is fine, and says so
    assert results["lora.output_dir"]["summary"].startswith(f"output_dir {tmp_path / 'noout'} does not exist yet; "
                                                            f"the trainer can create it in {tmp_path}")


def test_run_without_lora_paths_skips_and_stays_green(tmp_path):
    p, results = _doc(tmp_path)
    assert p.returncode == 0 and {r["status"] for r in results.values()} == {"skip"}


@pytest.mark.slow
def test_output_dir_with_an_empty_saved_adapter_fails(tmp_path):
    src = lab.write_adapter(tmp_path / "src", "llama", lab.QKVO)
    out = tmp_path / "out"
    lab.write_checkpoint(out, 50, src)
    lab.write_checkpoint(out, 100, lab.empty_header(src, tmp_path / "empty"))
    p, results = _doc(tmp_path, "--output-dir", out)
    r = results["lora.output_dir"]
    assert r["status"] == "fail" and "checkpoint-100" in r["summary"] and "empty adapter" in r["summary"]
    assert r["cause"] == "lora.gather_flag_off"  # shown under the same cause as lora.deepspeed_config's finding


def test_unreadable_deepspeed_config_fails(tmp_path):
    f = tmp_path / "ds.json"
    f.write_text('{"zero_optimization": {"stage": 3,}}')
    p, results = _doc(tmp_path, "--deepspeed-config", f)
    assert results["lora.deepspeed_config"]["status"] == "fail" and "not valid JSON" in results["lora.deepspeed_config"]["summary"]


def test_zero_optimization_that_is_not_an_object_fails_with_a_fix_and_never_errors(tmp_path):
    """DeepSpeed's own model check used to call .items() on it (an ERROR wherever deepspeed is installed)."""
    from dsv3_preflight.lora.probes.facts import _deepspeed_model_check

    assert _deepspeed_model_check({"zero_optimization": 3})["reason"] == "zero_optimization is a int, not an object"
    f = tmp_path / "ds.json"
    f.write_text('{"zero_optimization": 3}')
    p, results = _doc(tmp_path, "--deepspeed-config", f)
    r = results["lora.deepspeed_config"]
    assert r["status"] == "fail" and "zero_optimization is a int, not an object" in r["summary"]
    assert '"zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": true}' in r["remediation"]


@pytest.mark.parametrize("kind", ["fifo", "directory", "binary"])
def test_a_deepspeed_config_that_is_no_json_file_fails_at_once_naming_it(tmp_path, kind):
    """Issue 21.2: DeepSpeed and model configs are read through the one bounded reader (a FIFO hung the run)."""
    import threading

    from dsv3_preflight.checks.lora_deepspeed_config import deepspeed_config
    from dsv3_preflight.lora.probes.facts import lora_deepspeed_config
    from dsv3_preflight.profile import resolve_profile

    path = tmp_path / "ds.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.write_bytes(b"\xff\xfe\x00{")
    profile = resolve_profile(profile_name="cpu", cli={"deepspeed_config": str(path)})
    got: list = []
    reader = threading.Thread(target=lambda: got.append(lora_deepspeed_config.gather(profile)), daemon=True)
    reader.start()
    reader.join(20)
    assert got, "the probe blocked"
    expected = {"fifo": "is a FIFO (named pipe), not a regular file", "directory": "is a directory",
                "binary": "not UTF-8 text"}[kind]
    assert got[0]["error"].startswith(f"DeepSpeed config {path}: ") and expected in got[0]["error"]
    r = deepspeed_config(got[0], profile, {})
    assert r.status.value == "fail" and r.actor.value == "job" and r.cause == "lora.deepspeed_config_unreadable"
    assert paste_problems(r.remediation) == []


def test_deepspeeds_own_config_model_rejects_a_misspelled_zero_key_and_accepts_a_sound_config(tmp_path):
    """The check asks the installed DeepSpeed's config model (pydantic, extra keys forbidden) about zero_optimization:
    a misspelled key DeepSpeed would refuse at deepspeed.initialize is a failure before launch."""
    pytest.importorskip("deepspeed.runtime.zero.config")
    zero = {"stage": 3, "stage3_gather_16bit_weights_on_model_save": True, "stage3_prefetch_bucket_sz": 50000000}
    f = tmp_path / "ds.json"
    f.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": zero}))
    p, results = _doc(tmp_path, "--deepspeed-config", f)
    r = results["lora.deepspeed_config"]
    assert r["status"] == "fail" and r["summary"].startswith("DeepSpeed's own config model rejects zero_optimization")
    assert "stage3_prefetch_bucket_sz" in r["summary"] and r["evidence"]["deepspeed_model"]["available"] is True
    assert paste_problems(r["remediation"]) == []
    zero["stage3_prefetch_bucket_size"] = zero.pop("stage3_prefetch_bucket_sz")
    zero["reduce_bucket_size"] = "auto"   # HF's "auto" values are filled by the trainer, not judged here
    f.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": zero}))
    p, results = _doc(tmp_path, "--deepspeed-config", f)
    r = results["lora.deepspeed_config"]
    assert r["status"] == "pass" and r["evidence"]["deepspeed_model"] == {"available": True, "error": None, "offload": {}}, r["summary"]


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
def test_a_real_full_disk_under_output_dir_is_reported_with_its_room(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    fill = f"mount -t tmpfs -o size=1m tmpfs {mnt} && mkdir {mnt}/out && (head -c 2M /dev/zero > {mnt}/out/fill || true)"
    out = tmp_path / "r.json"
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{fill} && exec "$@"', "sh",
            sys.executable, "-m", "dsv3_preflight", "run", "--profile", "cpu", "--only", "lora.output_dir",
            "--output-dir", str(mnt / "out"), "--no-report", "--no-color", "--json", str(out)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO)
    if not out.exists() and "mount" in p.stderr:
        pytest.skip(f"no private mount here: {p.stderr.strip()[-200:]}")
    [r] = json.loads(out.read_text())["results"]
    assert r["status"] == "fail" and "No space left on device (0 B free of 1.0 MiB" in r["summary"], r["summary"]
    assert f"du -xsh {mnt}/out/*" in r["remediation"]
