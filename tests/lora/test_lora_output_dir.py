"""lora.output_dir (checks/lora_output_dir.py): every rule on the saved adapters it judges, on its own (it fires on
the problem it names, with an actor, a cause where one is shared, and a fix that pastes, and stays silent on a sound
adapter; facts come from real adapters written by peft, read by the probe, then changed in the one place each rule
looks at), and the output_dir rules and check on tables of facts. The runs through the CLI are in
test_lora_checks.py."""
from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import test_lora_lab as lab
from lora_tables_lab import _as_list, _check_finding, _ds
from paste_lint import paste_problems

from dsv3_preflight.checks.lora_output_dir import output_dir
from dsv3_preflight.lora import config_rules, dsconfig, file_rules, rules
from dsv3_preflight.lora.case import AdapterCase
from dsv3_preflight.lora.probes.adapter_files import read_adapter

DATA = Path(__file__).resolve().parents[1] / "data" / "lora"
PREFIX = "base_model.model."


@pytest.fixture(scope="module")
def sound(tmp_path_factory):
    """Facts of a sound Llama adapter (q,k,v,o at r=8) and of a DeepSeek-V3 MLA one, as the probe reads them."""
    root = tmp_path_factory.mktemp("rules")
    llama = lab.write_checkpoint(root / "out", 50, lab.write_adapter(root / "llama", "llama", lab.QKVO))
    dsv3 = lab.write_checkpoint(root / "out", 100, lab.write_adapter(root / "dsv3", "dsv3", lab.MLA_TARGETS))
    return {"llama": read_adapter(llama / "adapter_model.safetensors"),
            "dsv3": read_adapter(dsv3 / "adapter_model.safetensors")}


def _case(facts, config=None, tensors=None, **top) -> AdapterCase:
    f = copy.deepcopy(dict(facts))
    if config is not None:
        f["config"] = config(f["config"]) if callable(config) else config
    if tensors is not None:
        f["header"] = {**f["header"], "tensors": tensors(dict(f["header"]["tensors"])), "sha": None}
    f.update(top)
    return AdapterCase.of(f)


def _cfg(**changes):
    return lambda c: {**c, **changes}


def _rename(old, new):
    return lambda t: {k.replace(old, new): v for k, v in t.items()}


def _drop(part):
    return lambda t: {k: v for k, v in t.items() if part not in k}


def _add(name, dtype="F32", shape=(4, 4)):
    return lambda t: {**t, name: (dtype, shape)}


def _dtype(new):
    return lambda t: {k: (new, shape) for k, (_, shape) in t.items()}


def _shape(part, shape):
    return lambda t: {k: (d, shape if part in k else s) for k, (d, s) in t.items()}


# (rule, how the facts change, a phrase the message holds, the cause it carries)
CONFIG_CASES = [
    (config_rules.config_readable, dict(config=None, config_error="adapter_config.json is missing"), "is missing",
     "lora.adapter_config_invalid"),
    (config_rules.config_object, dict(config=[]), "holds a JSON list, not an object", "lora.adapter_config_invalid"),
    (config_rules.peft_type, dict(config=_cfg(peft_type="LOHA")), "peft_type is 'LOHA', not LORA", None),
    (config_rules.peft_type, dict(config=_cfg(peft_type=None)), "has no peft_type", None),
    (config_rules.rank, dict(config=_cfg(r=None)), "r is null, not a positive integer", None),
    (config_rules.rank, dict(config=_cfg(r="x")), "r is 'x', not a positive integer", None),
    (config_rules.alpha, dict(config=_cfg(lora_alpha=None)), "lora_alpha is null, not a number", None),
    (config_rules.dropout, dict(config=_cfg(lora_dropout=2.0)), "not a probability", None),
    (config_rules.target_modules, dict(config=_cfg(target_modules=None), tensors=_drop("k_proj")),
     "target_modules is not set", None),
    (config_rules.target_modules, dict(config=_cfg(target_modules=[])), "target_modules is empty", None),
    (config_rules.target_modules, dict(config=_cfg(target_modules="(q_proj")), "not a valid regular expression", None),
    (config_rules.target_modules, dict(config=_cfg(target_modules=[5])), "holds 5 (int)", None),
    (config_rules.target_parameters, dict(config=_cfg(target_parameters="x")), "not a list of parameter names", None),
    (config_rules.exclude_modules, dict(config=_cfg(exclude_modules="(x")), "not a valid regular expression", None),
    (config_rules.rank_pattern, dict(config=_cfg(rank_pattern=[])), "rank_pattern is [], not an object", None),
    (config_rules.rank_pattern, dict(config=_cfg(rank_pattern={"(q": 4})), "not a valid regular expression", None),
    (config_rules.rank_pattern, dict(config=_cfg(rank_pattern={"q_proj": "x"})), "rank_pattern['q_proj'] is 'x'", None),
    (config_rules.alpha_pattern, dict(config=_cfg(alpha_pattern=[])), "alpha_pattern is [], not an object", None),
    (config_rules.modules_to_save, dict(config=_cfg(modules_to_save="lm_head")), "not a list of module names", None),
    (config_rules.modules_to_save, dict(config=_cfg(modules_to_save=["(x"])), "not a valid regular expression", None),
    (config_rules.layers, dict(config=_cfg(layers_pattern="layers", layers_to_transform=None)),
     "layers_pattern is set without layers_to_transform", None),
    (config_rules.layers, dict(config=_cfg(target_modules=".*q_proj", layers_to_transform=[0])),
     "cannot be used when target_modules is a regex", None),
    (config_rules.bias, dict(config=_cfg(bias="x")), "bias is 'x'", None),
    (config_rules.task_type, dict(config=_cfg(task_type="X")), "task_type is 'X'", None),
    (config_rules.init_weights, dict(config=_cfg(init_lora_weights="x")), "init_lora_weights is 'x'", None),
    (config_rules.variants, dict(config=_cfg(use_dora=True, lora_bias=True)), "use_dora and lora_bias are both true", None),
    (config_rules.peft_rejects, dict(peft_check={"available": True, "error": "ValueError: no"}),
     "peft's own config class rejects it: ValueError: no", "lora.adapter_config_invalid"),
]
WEIGHT_CASES = [
    (file_rules.directory_unreadable, dict(dir_error="Permission denied", format="unreadable"), "cannot list this directory",
     "lora.adapter_unreadable"),
    (file_rules.unreadable, dict(header={"kind": "unreadable", "error": "x: is a FIFO (named pipe)"}), "is a FIFO",
     "lora.adapter_unreadable"),
    (file_rules.truncated, dict(header={"kind": "truncated", "error": "truncated: 8 bytes", "tensors": {}}), "truncated",
     "lora.adapter_corrupt"),
    (file_rules.corrupt, dict(header={"kind": "corrupt", "error": "the header is not UTF-8"}), "corrupt header",
     "lora.adapter_corrupt"),
    (file_rules.weights_missing, dict(format="missing", header=None), "without adapter weights", "lora.adapter_corrupt"),
    (rules.empty_adapter, dict(tensors=lambda t: {}), "empty adapter", "lora.gather_flag_off"),
    (rules.zero_element, dict(tensors=lambda t: {k: (d, (0,)) for k, (d, s) in t.items()}),
     "have zero elements (every tensor)", "lora.gather_flag_off"),
    (rules.weight_dtypes, dict(tensors=_dtype("I16")), "not floating point (I16", "lora.adapter_keys_invalid"),
    (rules.weight_dtypes, dict(tensors=_dtype("F8_E4M3")), "8-bit floats", "lora.adapter_keys_invalid"),
    (rules.keys_without_prefix, dict(tensors=lambda t: {k.removeprefix(PREFIX): v for k, v in t.items()}),
     "lack peft's 'base_model.model.' prefix", "lora.adapter_keys_invalid"),
    (rules.keys_not_peft, dict(tensors=_rename(".lora_A.", ".lora_X.")), "keys are not LoRA parameters",
     "lora.adapter_keys_invalid"),
    (rules.keys_not_peft, dict(tensors=_add(PREFIX + "model.norm.weight", shape=(64,))), "model.norm.weight",
     "lora.adapter_keys_invalid"),
    (rules.keys_other_adapter, dict(tensors=_rename(".weight", ".mine.weight")), "carry the adapter name 'mine'",
     "lora.adapter_keys_invalid"),
    (rules.unpaired, dict(tensors=_drop("layers.1.self_attn.v_proj.lora_B")), "v_proj.lora_A without its lora_B",
     "lora.adapter_keys_invalid"),
    (rules.ranks, dict(config=_cfg(r=4)), "adapter_config.json r=4", "lora.adapter_keys_invalid"),
    (rules.ranks, dict(tensors=_shape("layers.0.self_attn.q_proj.lora_B", (64, 4))), "lora_A r=8, lora_B r=4",
     "lora.adapter_keys_invalid"),
    (rules.shapes_consistent, dict(tensors=_shape("layers.0.self_attn.q_proj.lora_A", (8, 32))),
     "LoRA shapes differ between layers", "lora.adapter_keys_invalid"),
    (rules.dora_keys, dict(config=_cfg(use_dora=True)), "no lora_magnitude_vector", "lora.adapter_keys_invalid"),
    (rules.dora_keys, dict(tensors=_add(PREFIX + "model.layers.0.self_attn.q_proj.lora_magnitude_vector", shape=(64,))),
     "use_dora is not true", "lora.adapter_keys_invalid"),
    (rules.bias_keys, dict(config=_cfg(lora_bias=True)), "no lora_B.bias", "lora.adapter_keys_invalid"),
    (rules.keys_collide, dict(tensors=_add(PREFIX + "model.layers.0.self_attn.q_proj.lora_A.default.weight", shape=(2, 2))),
     "saved under two keys of different shapes", "lora.adapter_keys_invalid"),
    (rules.saved_modules_present, dict(config=_cfg(modules_to_save=["lm_head"])), "no weights of it were saved",
     "lora.adapter_keys_invalid"),
    (rules.target_coverage, dict(config=_cfg(target_modules=["q_proj", "k_proj"])), "not selected by target_modules",
     "lora.adapter_keys_invalid"),
    (rules.target_coverage, dict(config=_cfg(target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "up_proj"])),
     "target_modules up_proj are covered by no key", "lora.targets_missing"),
    (rules.target_coverage, dict(config=_cfg(target_modules=r".*\.(q|k|v|o|gate)_proj")), "also selects gate_proj",
     "lora.targets_missing"),
    (rules.layers_transform, dict(config=_cfg(layers_to_transform=[0])), "outside layers_to_transform [0]",
     "lora.adapter_keys_invalid"),
    (rules.wrapper_options, dict(config=_cfg(target_modules=["k_proj", "v_proj", "o_proj"],
                                             target_parameters=["q_proj.weight"], lora_dropout=0.05)),
     "lora_dropout=0.05, which peft's ParamWrapper refuses", "lora.adapter_config_invalid"),
    (file_rules.deep_readable, dict(deep={"error": "cannot stream the tensor data: x"}), "--deep: cannot stream",
     "lora.adapter_corrupt"),
    (file_rules.nan_inf, dict(deep={"nan_inf": [PREFIX + "model.layers.0.self_attn.q_proj.lora_A.weight"]}),
     "hold NaN or Inf", None),
    (file_rules.zero_lora_b, dict(deep={"zero_lora_b": ["b"] * 8, "lora_b": 8}, trainer_step=50),
     "every lora_B (8) all zeros after 50 training steps", None),
]


@pytest.mark.parametrize("rule, change, phrase, cause", CONFIG_CASES + WEIGHT_CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(CONFIG_CASES + WEIGHT_CASES)])
def test_each_rule_names_its_problem_with_an_actor_and_a_fix_that_pastes(sound, rule, change, phrase, cause):
    change = dict(change)
    unread = "config" in change and change["config"] is None  # the config could not be read at all
    case = _case(sound["llama"], config=change.pop("config", None), tensors=change.pop("tensors", None), **change)
    if unread:
        case.facts["config"] = None
    found = _as_list(rule(case))
    assert found, f"{rule.__name__} found nothing"
    assert any(phrase in f.message for f in found), [f.message for f in found]
    for f in found:
        _check_finding(f)
    if cause:
        assert any(f.cause == cause for f in found), [f.cause for f in found]


@pytest.mark.parametrize("rule", [*file_rules.READ_RULES, *config_rules.RULES, *rules.WEIGHT_RULES, *file_rules.DATA_RULES],
                         ids=lambda r: r.__name__)
def test_each_rule_is_silent_on_sound_peft_adapters(sound, rule):
    for name in ("llama", "dsv3"):
        assert _as_list(rule(AdapterCase.of(sound[name]))) == [], (name, rule.__name__)


def test_every_rule_has_a_case_that_fires():
    fired = {c[0] for c in CONFIG_CASES + WEIGHT_CASES}
    missing = [r.__name__ for r in (*file_rules.READ_RULES, *config_rules.RULES, *rules.WEIGHT_RULES, *file_rules.DATA_RULES)
               if r not in fired and r is not file_rules.pickle_format]
    assert not missing, missing


def test_pickle_format_warns_and_names_entries_that_are_not_tensors(sound):
    case = _case(sound["llama"], format="pickle", header=None,
                 pickle={"tensors": dict(sound["llama"]["header"]["tensors"]), "non_tensors": ["step (int)"]})
    found = file_rules.pickle_format(case)
    assert [f.status.value for f in found] == ["warn", "fail"] and "step (int)" in found[1].message
    for f in found:
        _check_finding(f)


def test_deep_asks_peft_itself_about_the_config(sound):
    from dsv3_preflight.lora.probes.peft_check import peft_config_facts

    assert peft_config_facts(sound["dsv3"]["config"]) == {"available": True, "error": None}
    bad = peft_config_facts({**sound["dsv3"]["config"], "layers_pattern": "layers", "layers_to_transform": None})
    assert bad["error"].startswith("ValueError: When `layers_pattern` is specified")


def test_a_catastrophic_regex_is_a_failure_in_bounded_time(sound):
    """Issue 21.7: target_modules "(a|aa)+" against a 44-character module name took 110 s."""
    import time

    name = "a" * 43 + "!"
    case = _case(sound["llama"], config=_cfg(target_modules="(a|aa)+"),
                 tensors=lambda t: {k.replace("model.layers.0.self_attn.q_proj", name): v for k, v in t.items()})
    started = time.monotonic()
    (f,) = _as_list(config_rules.target_modules(case))
    assert time.monotonic() - started < 5
    assert "catastrophic backtracking" in f.message and name in f.message


def test_the_rank_fix_sets_the_saved_rank_in_the_users_file(sound, tmp_path):
    d = tmp_path / "checkpoint-7"
    shutil.copytree(Path(sound["llama"]["dir"]), d)
    cfg = json.loads((d / "adapter_config.json").read_text())
    (d / "adapter_config.json").write_text(json.dumps({**cfg, "r": None}))
    facts = read_adapter(d / "adapter_model.safetensors")
    (f,) = _as_list(config_rules.rank(AdapterCase.of(facts)))
    subprocess.run(["bash", "-c", f.fix], check=True, capture_output=True, timeout=30)
    assert json.loads((d / "adapter_config.json").read_text())["r"] == 8
    assert config_rules.rank(AdapterCase.of(read_adapter(d / "adapter_model.safetensors"))) is None


def test_the_gather_cause_is_shared_by_the_config_rule_and_the_empty_adapter_rules(sound):
    ds = _as_list(dsconfig.gather_flag(_ds("ds_z3_no_gather.json"), dsconfig.Context()))
    empty = _as_list(rules.empty_adapter(_case(sound["llama"], tensors=lambda t: {})))
    assert ds[0].cause == empty[0].cause == "lora.gather_flag_off"


# ------------------------------------------------------------------------------------------------ lora.output_dir
def test_output_dir_rules_each_name_who_acts_and_paste(tmp_path):
    from dsv3_preflight.lora import output_dir_rules as od

    base = {"configured": True, "path": "/data/run/out", "setting": "output_dir", "exists": False, "is_dir": False,
            "parent": "/data", "parent_is_dir": True, "parent_writable": False, "write_error": "Permission denied",
            "mount": {"fstype": "ext4", "device": "/dev/nvme0n1p1", "mountpoint": "/data"}, "network_fs": False}
    cases = [
        (od.can_be_created, base, "cannot be created: /data is not writable", "node"),
        (od.can_be_created, {**base, "parent": "/proc", "write_error": "No such file or directory",
                             "mount": {"fstype": "proc", "device": "proc", "mountpoint": "/proc"}},
         "cannot be created: /proc is not writable", "job"),
        (od.can_be_created, {**base, "parent_is_dir": False}, "/data is not a directory", "job"),
        (od.is_writable_dir, {**base, "exists": True, "is_dir": True, "writable": False,
                              "write_error": "Read-only file system"}, "is not writable", "job"),
        (od.node_local, {**base, "parent_writable": True, "network_fs": True,
                         "mount": {"fstype": "nfs4", "device": "srv:/x", "mountpoint": "/data"}}, "is on nfs4", "job"),
    ]
    for rule, facts, phrase, actor in cases:
        (f,) = _as_list(rule(facts))
        assert phrase in f.message and f.actor.value == actor, (f.message, f.actor)
        _check_finding(f)
    # /proc is a kernel filesystem: never 'chown /proc'
    assert "chown" not in od.can_be_created(cases[1][1]).fix
    # a node-local disk for a multi-node ZeRO-3 run: every node must save its own whole checkpoint to resume from it
    network_fix = od.node_local(cases[-1][1]).fix
    assert "--save_on_each_node true" in network_fix and "use_node_local_storage" in network_fix, network_fix
    # the key is shown as the facts name it, and never as a masked value
    assert od.can_be_created({**base, "key": "***"}).message.startswith("output_dir /data/run/out")


def test_output_dir_probe_judges_the_nearest_existing_parent(tmp_path):
    from dsv3_preflight.host.probes.storage import output_dir as probe_output_dir
    from dsv3_preflight.profile import resolve_profile

    deep = tmp_path / "a" / "b" / "out"
    facts = probe_output_dir.gather(resolve_profile(profile_name="cpu", cli={"output_dir": str(deep)}))
    assert facts["exists"] is False and facts["parent"] == str(tmp_path) and facts["parent_writable"] is True
    assert output_dir(facts, {}).status.value == "pass"
    (tmp_path / "file").write_text("x")
    facts = probe_output_dir.gather(resolve_profile(profile_name="cpu", cli={"output_dir": str(tmp_path / "file" / "out")}))
    r = output_dir(facts, {})
    assert r.status.value == "fail" and "is not a directory" in r.summary


@pytest.mark.parametrize("error, fix", [
    ("Permission denied", 'sudo chown -R "$(id -u):$(id -g)" /data   # then the trainer creates /data/run/out'),
    ("Read-only file system", "# /data is on a read-only filesystem: point output_dir at a writable node-local disk"),
])
def test_output_dir_that_cannot_be_created_names_the_parent_and_a_fix_that_helps(error, fix):
    facts = {"configured": True, "path": "/data/run/out", "setting": "output_dir", "exists": False, "is_dir": False,
             "parent": "/data", "parent_is_dir": True, "parent_writable": False, "write_error": error,
             "mount": {"fstype": "ext4", "device": "/dev/nvme0n1p1", "mountpoint": "/data"}, "network_fs": False}
    r = output_dir(facts, {})
    assert r.status.value == "fail" and r.cause == "lora.output_dir_unwritable"
    assert r.summary == f"output_dir /data/run/out does not exist and cannot be created: /data is not writable ({error})"
    assert r.remediation.startswith(fix) and paste_problems(r.remediation) == []


def test_missing_output_dir_on_nfs_still_warns():
    facts = {"configured": True, "path": "/nfs/run/out", "setting": "output_dir", "exists": False, "is_dir": False,
             "parent": "/nfs", "parent_is_dir": True, "parent_writable": True,
             "mount": {"fstype": "nfs4", "device": "srv:/export", "mountpoint": "/nfs"}, "network_fs": True}
    r = output_dir(facts, {})
    assert r.status.value == "warn" and "nfs4" in r.summary and paste_problems(r.remediation) == []


def test_a_full_output_dir_gives_its_free_bytes_and_a_fix_that_frees_space():
    """Issue 46.13b: a full output dir read 'not writable: No space left on device' without the free bytes, and its
    only fix moved the directory."""
    facts = {"configured": True, "path": "/data/run/out", "setting": "output_dir", "exists": True, "is_dir": True,
             "writable": False, "write_error": "No space left on device",
             "mount": {"fstype": "ext4", "device": "/dev/nvme0n1p1", "mountpoint": "/data"}, "network_fs": False,
             "free_bytes": 0, "total_bytes": 1000 * 2**30}
    r = output_dir(facts, {})
    assert r.status.value == "fail" and r.cause == "lora.output_dir_unwritable" and r.actor.value == "job"
    assert r.summary == ("output_dir /data/run/out is not writable: No space left on device (0 B free of 1000.0 GiB "
                         "on /dev/nvme0n1p1, mounted at /data)")
    lines = r.remediation.splitlines()
    assert lines[0] == "df -h /data/run/out   # 0 B free of 1000.0 GiB"
    assert any(line.startswith("du -xsh /data/run/out/*") for line in lines)
    assert any("checkpoint-*" in line for line in lines) and "--save_total_limit" in r.remediation
    assert lines[-1].startswith('mkdir -p "${OUTPUT_DIR:?')   # moving it stays, beside freeing space
    assert paste_problems(r.remediation) == [] and r.evidence["free_bytes"] == 0
    # the directory not created yet, on a full parent: the same, for the parent
    missing = {**facts, "exists": False, "is_dir": False, "writable": None, "parent": "/data/run",
               "parent_is_dir": True, "parent_writable": False}
    r = output_dir(missing, {})
    assert "is not writable (No space left on device) (0 B free of 1000.0 GiB" in r.summary
    assert r.remediation.startswith("df -h /data/run   # 0 B free")
