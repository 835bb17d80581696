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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import test_lora_lab as lab
from dsv3_preflight.lora.header import read_header
from dsv3_preflight.lora.scan import find_adapters, scan_adapter, scan_paths

REPO = Path(__file__).resolve().parent.parent


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
    return scan_adapter(path / "adapter_model.safetensors", **kw)


def _codes(report):
    return {f.code for f in report.findings}


def test_good_peft_adapters_pass_with_their_rank(adapters):
    for name in ("llama", "dsv3_mla"):
        r = _scan(adapters[name])
        assert r.status == "ok", r.findings
        assert r.ranks == [8] and r.config_r == 8
    assert _scan(adapters["llama"]).lora_modules == 2 * 4  # 2 layers × q,k,v,o
    assert _scan(adapters["dsv3_mla"]).lora_modules == 2 * 5


def test_zero3_ungathered_adapter_fails_naming_the_zero_element_tensors(adapters):
    r = _scan(adapters["zero3"])
    assert r.status == "fail" and "zero_element" in _codes(r)
    msg = next(f.message for f in r.findings if f.code == "zero_element")
    assert "16 of 16 tensors have zero elements (every tensor)" in msg and "[0]" in msg
    assert "lora_A" in msg


def test_header_with_only_metadata_is_an_empty_adapter(adapters):
    r = _scan(adapters["empty"])
    assert r.status == "fail" and _codes(r) == {"empty_adapter"} and r.tensors == 0
    assert r.summary.startswith("empty adapter")


def test_truncated_file_is_corrupt_not_a_crash(adapters):
    r = _scan(adapters["truncated"])
    assert r.status == "fail" and _codes(r) == {"truncated"}
    assert "corrupt" in r.summary


def test_garbage_header_is_corrupt(adapters):
    r = _scan(adapters["corrupt"])
    assert r.status == "fail" and _codes(r) == {"corrupt"} and "header" in r.summary


def test_huge_declared_header_length_is_refused_without_reading_it(adapters):
    r = _scan(adapters["huge"], cap=1 << 20)
    assert r.status == "fail" and _codes(r) == {"corrupt"}
    assert "beyond the cap" in r.summary and str(1 << 40) in r.summary
    assert r.bytes_examined == 8


def test_rank_disagreeing_with_adapter_config_fails(adapters):
    r = _scan(adapters["rank"])
    assert "rank_mismatch" in _codes(r)
    assert "adapter_config r=4" in next(f.message for f in r.findings if f.code == "rank_mismatch")


def test_lora_a_without_its_lora_b_fails_naming_the_module(adapters):
    r = _scan(adapters["unpaired"])
    assert _codes(r) == {"unpaired"}
    assert "layers.1.self_attn.v_proj.lora_A without its lora_B" in r.summary


def test_deepseek_v3_with_qkvo_targets_fails_listing_the_uncovered_targets(adapters):
    """peft silently adapts only o_proj on DeepSeek-V3's MLA attention; the saved keys show it."""
    r = _scan(adapters["dsv3_qkvo"])
    assert r.status == "fail" and _codes(r) == {"target_uncovered"}
    assert "k_proj, q_proj, v_proj are covered by no key" in r.summary and "only o_proj" in r.summary


def test_missing_adapter_config_fails(adapters):
    r = _scan(adapters["no_config"])
    assert "config" in _codes(r) and "adapter_config.json is missing" in r.summary


def test_invalid_adapter_config_fails_with_the_json_error(adapters):
    r = _scan(adapters["bad_config"])
    assert "config" in _codes(r) and "not valid JSON" in r.summary


def test_adapter_config_rejected_by_peft_fails(adapters, tmp_path):
    bad = lab.edit_config(shutil.copytree(adapters["llama"], tmp_path / "a"), peft_type="NOT_A_METHOD")
    r = _scan(bad)
    assert "config" in _codes(r) and "rejected by peft" in r.summary


def test_keys_that_are_not_lora_pairs_fail(adapters, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    a = shutil.copytree(adapters["llama"], tmp_path / "a")
    state = load_file(str(a / "adapter_model.safetensors"))
    state["base_model.model.model.layers.0.self_attn.q_proj.weight"] = torch.zeros(4, 4)
    save_file(state, str(a / "adapter_model.safetensors"))
    r = _scan(a)
    assert _codes(r) == {"not_lora"} and "q_proj.weight" in r.summary


def test_pickle_adapter_is_recognised_and_judged(adapters):
    r = scan_adapter(adapters["pickle"] / "adapter_model.bin")
    assert r.format == "pickle" and r.status == "warn" and _codes(r) == {"pickle"}
    assert r.tensors == 16 and r.ranks == [8]


def test_pickle_with_code_is_refused_by_weights_only(tmp_path, adapters):
    import pickle

    d = shutil.copytree(adapters["pickle"], tmp_path / "evil")

    class Boom:
        def __reduce__(self):
            return (os.system, ("echo pwned > " + str(tmp_path / "pwned"),))

    import torch

    torch.save({"x": Boom()}, d / "adapter_model.bin", pickle_module=pickle)
    r = scan_adapter(d / "adapter_model.bin")
    assert r.status == "fail" and "weights_only=True" in r.summary
    assert not (tmp_path / "pwned").exists()
    # the finding names what was refused, and never repeats torch's hint to re-run with weights_only=False
    assert "posix.system" in r.summary and "will likely succeed" not in r.summary, r.summary
    assert "do not load it with weights_only=False" in r.summary


def test_checkpoint_tree_is_found_in_step_order(adapters, tmp_path):
    for step in (100, 50, 1000):
        lab.write_checkpoint(tmp_path, step, adapters["llama"])
    (tmp_path / "checkpoint-50" / "global_step50").mkdir()  # DeepSpeed's shard dir holds no adapter
    found, missing = find_adapters([tmp_path])
    assert [f.parent.name for f in found] == ["checkpoint-50", "checkpoint-100", "checkpoint-1000"] and not missing
    reports, _ = scan_paths([tmp_path])
    assert [r.step for r in reports] == [50, 100, 1000]


def test_deep_flags_all_zero_lora_b_after_training_steps(adapters, tmp_path):
    untrained = lab.write_adapter(tmp_path / "untrained", "llama", lab.QKVO, trained=False)
    ck = lab.write_checkpoint(tmp_path / "out", 50, untrained)
    assert _scan(ck).status == "ok"  # the header cannot tell
    r = _scan(ck, deep=True)
    assert "zero_lora_b" in _codes(r) and "every lora_B (8) all zeros after 50 training steps" in r.summary
    trained = lab.write_checkpoint(tmp_path / "out", 100, adapters["llama"])
    assert _scan(trained, deep=True).status == "ok"


def test_deep_flags_nan_and_inf(adapters, tmp_path):
    from safetensors.torch import load_file, save_file

    a = shutil.copytree(adapters["llama"], tmp_path / "a")
    state = load_file(str(a / "adapter_model.safetensors"))
    k = next(k for k in state if "lora_A" in k)
    state[k][0, 0] = float("nan")
    save_file(state, str(a / "adapter_model.safetensors"), metadata={"format": "pt"})
    r = _scan(a, deep=True)
    assert _codes(r) == {"nan_inf"} and k.removeprefix("base_model.model.") in r.summary


def test_sparse_terabyte_file_with_huge_header_is_judged_in_bounded_memory(tmp_path):
    f = tmp_path / "adapter_model.safetensors"
    with open(f, "wb") as fh:
        fh.write(struct.pack("<Q", (1 << 40) - 16))
        fh.truncate(1 << 40)  # sparse: 1 TiB declared, nothing on disk
    tracemalloc.start()
    h = read_header(f)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert h.error and "beyond the cap" in h.error and h.bytes_examined == 8
    assert peak < 1 << 20


CAP = 4096


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(
    st.binary(max_size=300),
    st.tuples(st.integers(0, 1 << 64 - 1), st.binary(max_size=300)).map(lambda t: struct.pack("<Q", t[0]) + t[1]),
    st.tuples(st.integers(0, 400), st.text(max_size=200), st.binary(max_size=100)).map(
        lambda t: struct.pack("<Q", t[0]) + t[1].encode() + t[2]),
    st.tuples(st.integers(CAP + 1, 1 << 63), st.binary(max_size=50)).map(lambda t: struct.pack("<Q", t[0]) + t[1]),
))
def test_arbitrary_bytes_never_raise_and_never_read_beyond_the_cap(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("fuzz")
    f = d / "adapter_model.safetensors"
    f.write_bytes(data)
    h = read_header(f, cap=CAP)
    assert h.bytes_examined <= 8 + CAP
    if len(data) >= 8 and struct.unpack("<Q", data[:8])[0] > CAP:
        assert h.error and "beyond the cap" in h.error and h.bytes_examined == 8
    report = scan_adapter(f, cap=CAP)  # no adapter_config.json: a finding, never an exception
    assert report.status in ("fail", "ok", "warn")
    shutil.rmtree(d)


def _cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "dsv3_preflight", "lora", *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=REPO, env={**os.environ, "COLUMNS": "200"})


@pytest.mark.slow
def test_cli_scan_json_and_exit_codes(adapters, tmp_path):
    root = tmp_path / "out"
    lab.write_checkpoint(root, 50, adapters["llama"])
    lab.write_checkpoint(root, 100, adapters["zero3"])
    p = _cli("scan", root, "--json")
    assert p.returncode == 1, p.stderr
    doc = json.loads(p.stdout)
    assert [(a["step"], a["status"]) for a in doc["adapters"]] == [(50, "ok"), (100, "fail")]
    assert doc["adapters"][1]["findings"][0]["code"] == "zero_element"
    ok = _cli("scan", root / "checkpoint-50")
    assert ok.returncode == 0 and "1 adapters: 0 bad" in ok.stdout
    assert _cli("scan", tmp_path / "nope").returncode == 4
    (tmp_path / "empty_dir").mkdir()
    assert _cli("scan", tmp_path / "empty_dir").returncode == 5


def test_help_does_not_import_torch_peft_or_transformers():
    code = ("import sys, contextlib, io\nfrom dsv3_preflight.cli import main\n"
            "for argv in (['--help'], ['lora', '--help'], ['lora', 'scan', '--help'], ['lora', 'watch', '--help']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
            "        main(argv)\n"
            "print(sorted(m for m in ('torch', 'peft', 'transformers') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert p.stdout.strip().splitlines()[-1] == "[]", p.stdout + p.stderr


def test_keys_saved_from_a_raw_state_dict_with_the_adapter_name_are_lora_pairs(adapters, tmp_path):
    """A hand-rolled ZeRO-3 save patch (the field's sitecustomize) may keep peft's adapter name: lora_A.default.weight."""
    from safetensors.torch import load_file, save_file

    a = shutil.copytree(adapters["llama"], tmp_path / "a")
    state = load_file(str(a / "adapter_model.safetensors"))
    renamed = {k.replace(".weight", ".default.weight"): v for k, v in state.items()}
    save_file(renamed, str(a / "adapter_model.safetensors"), metadata={"format": "pt"})
    r = _scan(a)
    assert r.status == "ok" and r.lora_modules == 8, r.findings


def test_adapter_config_without_weights_is_reported(adapters, tmp_path):
    d = tmp_path / "checkpoint-50"
    d.mkdir()
    shutil.copy(adapters["llama"] / "adapter_config.json", d)
    reports, _ = scan_paths([tmp_path])
    assert len(reports) == 1 and reports[0].format == "missing" and "without adapter weights" in reports[0].summary


def test_cli_usage_errors_exit_4():
    from dsv3_preflight.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["lora", "scan"])
    assert exc.value.code == 4
    assert main(["lora"]) == 4


def test_cli_scan_of_a_device_file_says_what_it_is_not():
    p = _cli("scan", "/dev/null")
    assert p.returncode == 4 and "/dev/null: not a regular file or directory" in p.stderr, p.stderr
