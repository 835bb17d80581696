"""lora scan on real adapters written by peft + safetensors from tiny Llama-like and DeepSeek-V3-like models."""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

import pytest
import test_lora_lab as lab
from paste_lint import paste_problems

from dsv3_preflight.lora.probes.adapter_files import find_adapters, read_header
from dsv3_preflight.lora.probes.scan import judge_path, scan_paths

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def adapters():
    """Every adapter variant, built once per session (a few seconds)."""
    root = Path(tempfile.mkdtemp(prefix="lora-scan-"))
    a = {}
    a["llama"] = lab.write_adapter(root / "llama", "llama", lab.QKVO)
    a["dsv3_mla"] = lab.write_adapter(root / "dsv3_mla", "dsv3", lab.MLA_TARGETS)
    a["dsv3_qkvo"] = lab.write_adapter(root / "dsv3_qkvo", "dsv3", lab.QKVO)
    a["pickle"] = lab.write_adapter(root / "pickle", "llama", lab.QKVO, safe=False)
    a["zero3"] = lab.zero3_unGathered(a["llama"], root / "zero3")
    a["empty"] = lab.empty_header(a["llama"], root / "empty")
    a["truncated"] = lab.truncated(a["llama"], root / "truncated")
    a["corrupt"] = lab.corrupt_header(a["llama"], root / "corrupt")
    a["huge"] = lab.huge_header_length(a["llama"], root / "huge")
    a["rank"] = lab.edit_config(shutil.copytree(a["llama"], root / "rank"), r=4)
    a["unpaired"] = lab.drop_keys(shutil.copytree(a["llama"], root / "unpaired"), "layers.1.self_attn.v_proj.lora_B")
    a["no_config"] = shutil.copytree(a["llama"], root / "no_config")
    (a["no_config"] / "adapter_config.json").unlink()
    a["bad_config"] = shutil.copytree(a["llama"], root / "bad_config")
    (a["bad_config"] / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 8, ')
    a["root"] = root
    yield a
    shutil.rmtree(root, ignore_errors=True)


def _scan(path: Path, **kw):
    return judge_path(path / "adapter_model.safetensors", **kw)


def _rules(verdict):
    return {f["rule"] for f in verdict["findings"]}


def test_good_peft_adapters_pass_with_their_rank(adapters):
    for name in ("llama", "dsv3_mla"):
        v = _scan(adapters[name])
        assert v["status"] == "pass", v["findings"]
        assert v["ranks"] == [8] and v["config_r"] == 8
    assert _scan(adapters["llama"])["lora_modules"] == 2 * 4  # 2 layers × q,k,v,o
    assert _scan(adapters["dsv3_mla"])["lora_modules"] == 2 * 5


def test_zero3_ungathered_adapter_fails_naming_the_zero_element_tensors_and_the_gather_cause(adapters):
    v = _scan(adapters["zero3"])
    assert v["status"] == "fail" and "zero_element" in _rules(v)
    f = next(f for f in v["findings"] if f["rule"] == "zero_element")
    assert "16 of 16 tensors have zero elements (every tensor)" in f["message"] and "[0]" in f["message"]
    assert "lora_A" in f["message"]
    assert f["cause"] == "lora.gather_flag_off" and f["actor"] == "job"


def test_header_with_only_metadata_is_an_empty_adapter(adapters):
    v = _scan(adapters["empty"])
    assert v["status"] == "fail" and _rules(v) == {"empty_adapter"} and v["tensors"] == 0
    assert v["summary"].startswith("empty adapter")


def test_truncated_file_is_corrupt_not_a_crash(adapters):
    v = _scan(adapters["truncated"])
    assert v["status"] == "fail" and _rules(v) == {"truncated"}
    assert "corrupt" in v["summary"] and "truncated" in v["summary"]


def test_garbage_header_is_corrupt(adapters):
    v = _scan(adapters["corrupt"])
    assert v["status"] == "fail" and _rules(v) == {"corrupt"} and "header" in v["summary"]


def test_huge_declared_header_length_is_refused_without_reading_it(adapters):
    v = _scan(adapters["huge"], cap=1 << 20)
    assert v["status"] == "fail" and _rules(v) == {"corrupt"}
    assert "beyond the cap" in v["summary"] and f"{1 << 40:,}" in v["summary"]
    assert v["bytes_read"] == 8


def test_rank_disagreeing_with_adapter_config_fails_with_a_fix_setting_the_saved_rank(adapters):
    v = _scan(adapters["rank"])
    assert _rules(v) == {"ranks"}
    f = v["findings"][0]
    assert "adapter_config.json r=4" in f["message"]
    assert 'c["r"] = 8' in f["fix"] and str(adapters["rank"] / "adapter_config.json") in f["fix"]
    assert paste_problems(f["fix"]) == []


def test_lora_a_without_its_lora_b_fails_naming_the_module(adapters):
    v = _scan(adapters["unpaired"])
    assert _rules(v) == {"unpaired"}
    assert "layers.1.self_attn.v_proj.lora_A without its lora_B" in v["summary"]


def test_deepseek_v3_with_qkvo_targets_fails_listing_the_uncovered_targets_and_the_mla_list(adapters):
    """peft silently adapts only o_proj on DeepSeek-V3's MLA attention; the saved keys show it."""
    v = _scan(adapters["dsv3_qkvo"])
    assert v["status"] == "fail" and _rules(v) == {"target_coverage"}
    assert "k_proj, q_proj, v_proj are covered by no key" in v["summary"] and "only o_proj" in v["summary"]
    f = v["findings"][0]
    assert f["cause"] == "lora.targets_missing"
    assert "--lora-targets q_a_proj,q_b_proj,kv_a_proj_with_mqa,kv_b_proj,o_proj" in f["fix"]


def test_missing_adapter_config_fails(adapters):
    v = _scan(adapters["no_config"])
    assert "config_readable" in _rules(v) and "adapter_config.json is missing" in v["summary"]


def test_invalid_adapter_config_fails_with_the_json_error(adapters):
    v = _scan(adapters["bad_config"])
    assert "config_readable" in _rules(v) and "not valid JSON" in v["summary"]


def test_adapter_config_of_another_peft_type_fails(adapters, tmp_path):
    bad = lab.edit_config(shutil.copytree(adapters["llama"], tmp_path / "a"), peft_type="NOT_A_METHOD")
    v = _scan(bad)
    assert _rules(v) == {"peft_type"} and "peft_type is 'NOT_A_METHOD', not LORA" in v["summary"]


def test_keys_that_are_not_lora_pairs_fail(adapters, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    a = shutil.copytree(adapters["llama"], tmp_path / "a")
    state = load_file(str(a / "adapter_model.safetensors"))
    state["base_model.model.model.layers.0.self_attn.q_proj.weight"] = torch.zeros(4, 4)
    save_file(state, str(a / "adapter_model.safetensors"))
    v = _scan(a)
    assert _rules(v) == {"keys_not_peft"} and "q_proj.weight" in v["summary"]


def test_pickle_adapter_is_recognised_and_judged(adapters):
    v = judge_path(adapters["pickle"] / "adapter_model.bin")
    assert v["format"] == "pickle" and v["status"] == "warn" and _rules(v) == {"pickle_format"}
    assert v["tensors"] == 16 and v["ranks"] == [8]


def test_pickle_with_code_is_refused_by_weights_only(tmp_path, adapters):
    import pickle

    d = shutil.copytree(adapters["pickle"], tmp_path / "evil")

    class Boom:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    import torch

    torch.save({"x": Boom()}, d / "adapter_model.bin", pickle_module=pickle)
    v = judge_path(d / "adapter_model.bin")
    assert v["status"] == "fail" and "weights_only=True" in v["summary"]
    assert not (tmp_path / "pwned").exists()
    # the finding names what was refused, and never repeats torch's hint to re-run with weights_only=False
    assert "posix.system" in v["summary"] and "will likely succeed" not in v["summary"], v["summary"]
    assert "do not load it with weights_only=False" in v["summary"]


def test_checkpoint_tree_is_found_in_step_order(adapters, tmp_path):
    for step in (100, 50, 1000):
        lab.write_checkpoint(tmp_path, step, adapters["llama"])
    (tmp_path / "checkpoint-50" / "global_step50").mkdir()  # DeepSpeed's shard dir holds no adapter
    found, missing, unreadable = find_adapters([tmp_path])
    assert [f.parent.name for f in found] == ["checkpoint-50", "checkpoint-100", "checkpoint-1000"]
    assert not missing and not unreadable
    doc, _ = scan_paths([tmp_path])
    assert [a["step"] for a in doc["adapters"]] == [50, 100, 1000] and doc["exit_code"] == 0


def test_deep_flags_all_zero_lora_b_after_training_steps(adapters, tmp_path):
    untrained = lab.write_adapter(tmp_path / "untrained", "llama", lab.QKVO, trained=False)
    ck = lab.write_checkpoint(tmp_path / "out", 50, untrained)
    assert _scan(ck)["status"] == "pass"  # the header cannot tell
    v = _scan(ck, deep=True)
    assert "zero_lora_b" in _rules(v) and "every lora_B (8) all zeros after 50 training steps" in v["summary"]
    trained = lab.write_checkpoint(tmp_path / "out", 100, adapters["llama"])
    assert _scan(trained, deep=True)["status"] == "pass"


def test_deep_flags_nan_and_inf(adapters, tmp_path):
    from safetensors.torch import load_file, save_file

    a = shutil.copytree(adapters["llama"], tmp_path / "a")
    state = load_file(str(a / "adapter_model.safetensors"))
    k = next(k for k in state if "lora_A" in k)
    state[k][0, 0] = float("nan")
    save_file(state, str(a / "adapter_model.safetensors"), metadata={"format": "pt"})
    v = _scan(a, deep=True)
    assert _rules(v) == {"nan_inf"} and k.removeprefix("base_model.model.") in v["summary"]


def test_sparse_terabyte_file_with_huge_header_is_judged_in_bounded_memory(tmp_path):
    f = tmp_path / "adapter_model.safetensors"
    with open(f, "wb") as fh:
        fh.write(struct.pack("<Q", (1 << 40) - 16))
        fh.truncate(1 << 40)  # sparse: 1 TiB declared, nothing on disk
    tracemalloc.start()
    h = read_header(f)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert h["error"] and "beyond" in h["error"] and h["bytes_read"] == 8
    assert peak < 1 << 20


def test_keys_saved_from_a_raw_state_dict_with_the_default_adapter_name_are_lora_pairs(adapters, tmp_path):
    """A hand-rolled ZeRO-3 save patch (the field's sitecustomize) may keep peft's adapter name: lora_A.default.weight
    still loads into peft's default adapter; another adapter name does not."""
    from safetensors.torch import load_file, save_file

    a = shutil.copytree(adapters["llama"], tmp_path / "a")
    state = load_file(str(a / "adapter_model.safetensors"))
    save_file({k.replace(".weight", ".default.weight"): v for k, v in state.items()},
              str(a / "adapter_model.safetensors"), metadata={"format": "pt"})
    v = _scan(a)
    assert v["status"] == "pass" and v["lora_modules"] == 8, v["findings"]
    save_file({k.replace(".weight", ".mine.weight"): v for k, v in state.items()},
              str(a / "adapter_model.safetensors"), metadata={"format": "pt"})
    v = _scan(a)
    assert "keys_other_adapter" in _rules(v) and "'mine'" in v["summary"]


def test_adapter_config_without_weights_is_reported(adapters, tmp_path):
    d = tmp_path / "checkpoint-50"
    d.mkdir()
    shutil.copy(adapters["llama"] / "adapter_config.json", d)
    doc, _ = scan_paths([tmp_path])
    (a,) = doc["adapters"]
    assert a["format"] == "missing" and "without adapter weights" in a["summary"] and a["status"] == "fail"


def _cli(*args, timeout=120, env=None):
    return subprocess.run([sys.executable, "-m", "dsv3_preflight", "lora", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO, env={**os.environ, "COLUMNS": "200", **(env or {})})


@pytest.mark.slow
def test_cli_scan_json_and_exit_codes(adapters, tmp_path):
    root = tmp_path / "out"
    lab.write_checkpoint(root, 50, adapters["llama"])
    lab.write_checkpoint(root, 100, adapters["zero3"])
    p = _cli("scan", root, "--json")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert [(a["step"], a["status"]) for a in doc["adapters"]] == [(50, "pass"), (100, "fail")]
    assert doc["adapters"][1]["findings"][0]["rule"] == "zero_element" and doc["verdict"] == "NO-GO"
    ok = _cli("scan", root / "checkpoint-50")
    assert ok.returncode == 0 and "1 adapters: 0 bad" in ok.stdout
    (tmp_path / "empty_dir").mkdir()
    assert _cli("scan", tmp_path / "empty_dir").returncode == 5


def test_cli_scan_of_a_missing_path_is_a_usage_error_naming_it_with_no_table(adapters, tmp_path):
    """Issue 16.8: it printed an empty table and '1 adapters'."""
    p = _cli("scan", tmp_path / "nope", adapters["llama"])
    assert p.returncode == 4, p.stdout + p.stderr
    assert f"{tmp_path / 'nope'}: no such file or directory" in p.stderr
    assert p.stdout == "" and "adapters" not in p.stderr


def test_help_does_not_import_torch_peft_or_transformers():
    code = ("import sys, contextlib, io\nfrom dsv3_preflight.cli import main\n"
            "for argv in (['--help'], ['lora', '--help'], ['lora', 'scan', '--help'], ['lora', 'watch', '--help']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "        main(argv)\n"
            "print(sorted(m for m in ('torch', 'peft', 'transformers') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.stdout.strip().splitlines()[-1] == "[]", p.stdout + p.stderr


def test_scan_reads_adapter_config_without_importing_peft_torch_or_transformers(adapters):
    """Issue 15.7: the scan parsed adapter_config.json with peft's class (6 s of imports before the first header)."""
    code = ("import sys, contextlib, io\nfrom dsv3_preflight.cli import main\n"
            f"with contextlib.redirect_stdout(io.StringIO()):\n    code = main(['lora', 'scan', {str(adapters['root'] / 'llama')!r}])\n"
            "print(code, sorted(m for m in ('torch', 'peft', 'transformers', 'safetensors') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.stdout.strip().splitlines()[-1] == "0 []", p.stdout + p.stderr


def test_cli_usage_errors_exit_4():
    from dsv3_preflight.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["lora", "scan"])
    assert exc.value.code == 4
    assert main(["lora"]) == 4


def test_cli_scan_of_a_device_file_says_what_it_is_not():
    p = _cli("scan", "/dev/null")
    assert p.returncode == 4 and "/dev/null: not a regular file or directory" in p.stderr, p.stderr


# ------------------------------------------------------------------------------ hostile trees (issue 21)
def test_fifos_named_like_adapter_files_are_failures_not_hangs(adapters, tmp_path):
    """A FIFO named adapter_model.safetensors / adapter_config.json, or a symlink to one, hung the scan."""
    root = tmp_path / "out"
    weights = lab.write_checkpoint(root, 10, adapters["llama"])
    os.unlink(weights / "adapter_model.safetensors")
    os.mkfifo(weights / "adapter_model.safetensors")
    config = lab.write_checkpoint(root, 20, adapters["llama"])
    os.unlink(config / "adapter_config.json")
    os.mkfifo(config / "adapter_config.json")
    linked = lab.write_checkpoint(root, 30, adapters["llama"])
    os.mkfifo(tmp_path / "elsewhere.fifo")
    os.unlink(linked / "adapter_model.safetensors")
    os.symlink(tmp_path / "elsewhere.fifo", linked / "adapter_model.safetensors")
    state = lab.write_checkpoint(root, 40, adapters["llama"])
    os.unlink(state / "trainer_state.json")
    os.mkfifo(state / "trainer_state.json")
    p = _cli("scan", root, "--json", "--deep", timeout=60)
    doc = json.loads(p.stdout)
    by_step = {a["step"]: a for a in doc["adapters"]}
    assert p.returncode == 1, p.stderr
    assert "FIFO" in by_step[10]["summary"] and by_step[10]["status"] == "fail"
    assert "adapter config" in by_step[20]["summary"] and "FIFO" in by_step[20]["summary"]
    assert "FIFO" in by_step[30]["summary"]
    assert by_step[40]["status"] == "pass"  # --deep reads trainer_state.json only through the bounded reader


def _as_other_user() -> list[str] | None:
    """argv prefix running a command without the capability to bypass file permissions (root reads everything)."""
    setpriv = shutil.which("setpriv")
    if not setpriv:
        return None
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]


def test_an_unreadable_checkpoint_dir_beside_a_good_one_is_reported_unreadable(adapters):
    """Issue 21.7: it gave '1 adapters … 1 ok', exit 0."""
    prefix = _as_other_user()
    if prefix is None:
        pytest.skip("setpriv (util-linux) is needed to scan as an unprivileged user")
    top = Path(tempfile.mkdtemp(prefix="lora-unreadable-"))  # pytest's tmp_path is private to root
    try:
        root = top / "out"
        lab.write_checkpoint(root, 50, adapters["llama"])
        hidden = lab.write_checkpoint(root, 100, adapters["llama"])
        for d, _, files in os.walk(top):
            os.chmod(d, 0o755)
            for f in files:
                os.chmod(os.path.join(d, f), 0o644)
        hidden.chmod(0o700)  # owned by root: the unprivileged user cannot list it
        p = subprocess.run([*prefix, sys.executable, "-m", "dsv3_preflight", "lora", "scan", str(root), "--json"],
                           capture_output=True, text=True, timeout=60, cwd="/")
    finally:
        shutil.rmtree(top, ignore_errors=True)
    assert p.returncode == 1, p.stdout + p.stderr
    doc = json.loads(p.stdout)
    assert [(a["step"], a["status"]) for a in doc["adapters"]] == [(50, "pass"), (100, "fail")]
    assert "cannot list this directory: Permission denied" in doc["adapters"][1]["summary"]


# -- held to peft's own load (issue 46.3) ------------------------------------------------------------------------
def _peft_load(adapter: Path, kind: str = "llama"):
    """peft's PeftModel.from_pretrained on the tiny model: ("refused", message) or ("loaded", {saved key: intact?})."""
    import warnings

    import torch
    from peft import PeftModel
    from safetensors.torch import load_file

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pm = PeftModel.from_pretrained(lab.tiny_model(kind), str(adapter))
    except Exception as exc:  # noqa: BLE001 - the refusal is the answer
        return "refused", str(exc)
    loaded = pm.state_dict()
    saved = load_file(str(adapter / "adapter_model.safetensors"))
    intact = {}
    for key, value in saved.items():
        if ".default." in key or "lora_" not in key or "magnitude" in key:
            continue
        model_key = key.replace(".weight", ".default.weight")
        intact[key] = model_key in loaded and torch.equal(loaded[model_key], value)
    return "loaded", intact


def _add_tensor(adapter: Path, key: str, tensor, rename=None) -> Path:
    from safetensors.torch import load_file, save_file

    f = adapter / "adapter_model.safetensors"
    state = load_file(str(f))
    if rename:
        state = {rename(k): v for k, v in state.items()}
    save_file({**state, key: tensor}, str(f), metadata={"format": "pt"})
    return adapter


Q0 = "base_model.model.model.layers.0.self_attn.q_proj.lora_A"


def test_two_keys_for_one_parameter_fail_since_peft_loads_whichever_its_key_order_puts_last(adapters, tmp_path):
    """peft maps lora_A.weight and lora_A.default.weight onto one parameter and keeps the later key: with the wrong
    shape last, peft refuses the adapter (size mismatch); the field's file (the extra key first) passed the scan."""
    import torch

    # the field's case: an extra F32 [2,2] lora_A.default.weight beside a valid adapter
    field = _add_tensor(shutil.copytree(adapters["llama"], tmp_path / "field"), f"{Q0}.default.weight", torch.zeros(2, 2))
    v = _scan(field)
    assert v["status"] == "fail" and "keys_collide" in _rules(v), v["findings"]
    assert "saved under two keys of different shapes" in v["summary"] and "[2, 2]" in v["summary"]
    # the same collision with the wrong shape where peft's order puts it last: peft's own refusal
    last = _add_tensor(shutil.copytree(adapters["llama"], tmp_path / "last"), f"{Q0}.weight", torch.zeros(2, 2),
                       rename=lambda k: k.replace(".weight", ".default.weight"))
    outcome, said = _peft_load(last)
    assert outcome == "refused" and "size mismatch" in said, said
    v = _scan(last)
    assert v["status"] == "fail" and "keys_collide" in _rules(v), v["findings"]
    # of the same shape: peft loads (one of the two), the scan warns
    same = _add_tensor(shutil.copytree(adapters["llama"], tmp_path / "same"), f"{Q0}.default.weight",
                       torch.ones(8, 64))
    assert _peft_load(same)[0] == "loaded"
    v = _scan(same)
    assert v["status"] == "warn" and "saved twice with the same shape" in v["summary"], v["findings"]


def test_a_stray_dora_magnitude_without_use_dora_is_ignored_by_peft_so_it_warns_not_fails(adapters, tmp_path):
    import torch

    a = _add_tensor(shutil.copytree(adapters["llama"], tmp_path / "a"),
                    "base_model.model.model.layers.0.self_attn.o_proj.lora_magnitude_vector", torch.ones(64))
    outcome, intact = _peft_load(a)
    assert outcome == "loaded" and intact and all(intact.values()), intact
    v = _scan(a)
    assert v["status"] == "warn", v["findings"]
    assert "peft ignores them" in v["summary"] and "peft drops them" not in v["summary"]


def test_null_target_modules_is_judged_by_what_peft_fills_in_for_the_model_type(tmp_path):
    """peft fills a null target_modules with its default targets for the base model's type (Llama: q_proj, v_proj):
    an adapter of exactly those modules loads intact (not a FAIL); of others it loads wrong (a FAIL)."""
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING
    from transformers import LlamaConfig

    from dsv3_preflight.lora.peft_defaults import DEFAULT_TARGETS

    assert DEFAULT_TARGETS == TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING   # the data is the installed peft's
    base = tmp_path / "llama-base"
    LlamaConfig(**lab.LLAMA_TINY).save_pretrained(base)
    qv = lab.edit_config(lab.write_adapter(tmp_path / "qv", "llama", ["q_proj", "v_proj"]), target_modules=None)
    outcome, intact = _peft_load(qv)
    assert outcome == "loaded" and len(intact) == 8 and all(intact.values()), intact
    v = _scan(qv)
    assert v["status"] == "warn" and "loads intact" in v["summary"] and "llama" in v["summary"], v["findings"]
    lab.edit_config(qv, base_model_name_or_path=str(base))   # the base model known: its type decides
    v = _scan(qv)
    assert v["status"] == "warn" and "default targets for llama" in v["summary"], v["findings"]
    # q,k,v,o on a Llama base: peft builds only q_proj and v_proj, k_proj's and o_proj's weights are dropped
    qkvo = lab.edit_config(lab.write_adapter(tmp_path / "qkvo", "llama", lab.QKVO), target_modules=None,
                           base_model_name_or_path=str(base))
    outcome, intact = _peft_load(qkvo)
    assert outcome == "loaded" and not all(intact.values()), intact
    v = _scan(qkvo)
    assert v["status"] == "fail" and "peft's default targets for llama are q_proj, v_proj" in v["summary"], v
    # modules that are no model type's defaults: a FAIL whatever the base
    qk = lab.edit_config(lab.write_adapter(tmp_path / "qk", "llama", ["q_proj", "k_proj"]), target_modules=None)
    assert _peft_load(qk)[0] == "loaded" and not all(_peft_load(qk)[1].values())
    assert _scan(qk)["status"] == "fail"
