"""The doctor recognises the errors the libraries really raise, produced here by the libraries themselves (torch's
TCPStore and env:// rendezvous on 127.0.0.1, transformers' TrainingArguments, accelerate's HfDeepSpeedConfig),
not typed from memory: a signature written from a thread's excerpt must also match the current library's wording.

One child process provokes every error and writes each traceback to its own file (tracebacks as a user's log
holds them); the doctor diagnoses each file on its own."""
import subprocess
import sys
import textwrap

import pytest

from dsv3_preflight.doctor import triage

CHILD = textwrap.dedent(r'''
    import datetime, os, socket, sys, tempfile, traceback
    out = sys.argv[1]

    def case(name, fn):
        try:
            fn()
        except BaseException:
            with open(os.path.join(out, name + ".log"), "w") as f:
                f.write(traceback.format_exc())
        else:
            raise SystemExit(f"{name}: no error raised")

    import torch.distributed as dist
    T = datetime.timedelta(seconds=1)
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    case("port_held", lambda: dist.TCPStore("127.0.0.1", held.getsockname()[1], 1, True, timeout=T))
    held.close()
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    closed_port = free.getsockname()[1]
    free.close()
    case("master_not_listening", lambda: dist.TCPStore("127.0.0.1", closed_port, 2, False, timeout=T))
    case("workers_never_join", lambda: dist.TCPStore("127.0.0.1", 0, 2, True, timeout=T, wait_for_workers=True))
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=T)
    case("store_key_never_set", lambda: store.wait(["never_set"]))
    del store
    for var in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        os.environ.pop(var, None)
    case("env_vars_missing", lambda: dist.init_process_group("gloo", init_method="env://", rank=0, world_size=1))

    from transformers import TrainingArguments
    with tempfile.TemporaryDirectory() as d:
        case("trainer_strategies_differ", lambda: TrainingArguments(
            output_dir=d, load_best_model_at_end=True, eval_strategy="epoch", save_strategy="steps"))
        case("trainer_bf16_without_gpu", lambda: TrainingArguments(output_dir=d, bf16=True))
        case("trainer_fp16_and_bf16", lambda: TrainingArguments(output_dir=d, fp16=True, bf16=True, use_cpu=True))

    from accelerate.utils.deepspeed import HfDeepSpeedConfig
    case("ds_config_missing", lambda: HfDeepSpeedConfig("no_such_dir/ds_config_zero3.json"))
''')

# case → (class, headline signature)
EXPECTED = {
    "port_held": ("port_rendezvous", "c10d.address_in_use"),
    "master_not_listening": ("port_rendezvous", "c10d.store_timeout"),
    "workers_never_join": ("port_rendezvous", "c10d.store_timeout"),
    "store_key_never_set": ("port_rendezvous", "c10d.store_timeout"),
    "env_vars_missing": ("port_rendezvous", "c10d.env_var_missing"),
    "trainer_strategies_differ": ("config", "hf.training_arguments_invalid"),
    "trainer_bf16_without_gpu": ("config", "hf.precision_unsupported"),
    "trainer_fp16_and_bf16": ("config", "hf.training_arguments_invalid"),
    "ds_config_missing": ("config", "config.ds_config_path"),
}


@pytest.fixture(scope="module")
def library_logs(tmp_path_factory):
    out = tmp_path_factory.mktemp("library_errors")
    p = subprocess.run([sys.executable, "-c", CHILD, str(out)], capture_output=True, text=True, timeout=240,
                       cwd=str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    return out


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_doctor_names_the_cause_of_an_error_the_library_raised_here(library_logs, name):
    log = library_logs / f"{name}.log"
    doc = triage([str(log)])
    want_class, want_id = EXPECTED[name]
    assert doc["exit_code"] == 1 and doc["cause_recognised"], (doc["summary"], log.read_text()[-800:])
    top = doc["findings"][0]
    assert (doc["cause_class"], top["id"]) == (want_class, want_id), (doc["summary"], log.read_text()[-800:])
