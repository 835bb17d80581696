"""The doctor recognises the errors the libraries really raise, produced here by the libraries themselves (torch's
TCPStore and env:// rendezvous on 127.0.0.1, transformers' TrainingArguments, accelerate's HfDeepSpeedConfig,
DeepSpeed's config object with config errors,
transformers and peft loading a model or adapter from a path without its files, adapters saved empty or cut short
with safetensors, Gloo on an interface this machine lacks, saves onto a full, a read-only or another user's
filesystem, torch.load of an empty or cut checkpoint),
not typed from memory: a signature written from a thread's excerpt must also match the current library's wording.

One child process provokes every error and writes each traceback to its own file (tracebacks as a user's log
holds them); the doctor diagnoses each file on its own."""
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest
from conftest import python_cli
from paste_lint import paste_problems

from dsv3_preflight.doctor import triage
from dsv3_preflight.doctor.signatures import SIGNATURES

CHILD = textwrap.dedent(r'''
    import datetime, os, socket, sys, tempfile, traceback
    out = sys.argv[1]

    def case(name, fn):
        try:
            fn()
        except BaseException as e:
            err = e
        else:
            raise SystemExit(f"{name}: no error raised")
        # A Python signal handler may raise while the traceback is being formatted: torch's SIGCHLD handler for
        # DataLoader workers did so in CI. The later error chains the first, as a user's log would show it.
        for _ in range(5):
            try:
                text = "".join(traceback.format_exception(err))
                break
            except BaseException as again:
                again.__context__ = again.__context__ or err
                err = again
        with open(os.path.join(out, name + ".log"), "w") as f:
            f.write(text)

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
    import torch
    case("process_group_not_initialized", lambda: dist.all_reduce(torch.ones(1)))   # plain python, no init

    from transformers import TrainingArguments
    with tempfile.TemporaryDirectory() as d:
        case("trainer_strategies_differ", lambda: TrainingArguments(
            output_dir=d, load_best_model_at_end=True, eval_strategy="epoch", save_strategy="steps"))
        case("trainer_bf16_without_gpu", lambda: TrainingArguments(output_dir=d, bf16=True))
        case("trainer_fp16_and_bf16", lambda: TrainingArguments(output_dir=d, fp16=True, bf16=True, use_cpu=True))

    from accelerate.utils.deepspeed import HfDeepSpeedConfig
    case("ds_config_missing", lambda: HfDeepSpeedConfig("no_such_dir/ds_config_zero3.json"))

    # a model or adapter path that is not a directory with the files (HF_HUB_OFFLINE: nothing leaves this machine)
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
    from peft import LoraConfig, PeftConfig, PeftModel, get_peft_model
    from safetensors.torch import load_file, save_file
    tiny = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                       num_attention_heads=2, num_key_value_heads=2)
    work = tempfile.mkdtemp(dir=out)
    case("model_path_missing", lambda: AutoConfig.from_pretrained(os.path.join(work, "DeepSeek-V3")))
    config_only = os.path.join(work, "config_only")
    tiny.save_pretrained(config_only)
    case("model_weights_missing", lambda: AutoModelForCausalLM.from_pretrained(config_only))
    case("adapter_config_missing", lambda: PeftConfig.from_pretrained(config_only))
    # DeepSeek-V3's attention names on a model that has q_proj/k_proj/v_proj (and the reverse in the field)
    case("lora_targets_missing", lambda: get_peft_model(LlamaForCausalLM(tiny), LoraConfig(
        target_modules=["q_a_proj", "kv_a_proj_with_mqa"])))
    adapter = os.path.join(work, "adapter")
    get_peft_model(LlamaForCausalLM(tiny), LoraConfig(target_modules=["q_proj", "v_proj"], r=4)).save_pretrained(adapter)
    # a save that wrote only the config (peft then takes the directory for a Hub repo id)
    import shutil
    config_only_adapter = os.path.join(work, "adapter_config_only")
    os.makedirs(config_only_adapter)
    shutil.copy(os.path.join(adapter, "adapter_config.json"), config_only_adapter)
    case("adapter_weights_missing", lambda: PeftModel.from_pretrained(LlamaForCausalLM(tiny), config_only_adapter))
    # the adapter loaded onto another base model (twice the hidden size): its A/B matrices do not fit
    wider = LlamaConfig(**{**tiny.to_dict(), "hidden_size": 64, "intermediate_size": 128})
    case("adapter_wrong_base", lambda: PeftModel.from_pretrained(LlamaForCausalLM(wider), adapter))
    weights = os.path.join(adapter, "adapter_model.safetensors")
    saved = load_file(weights)
    save_file({k: torch.empty(0) for k in saved}, weights)   # what ZeRO-3 writes without gathering: shape [0]
    case("adapter_saved_empty", lambda: PeftModel.from_pretrained(LlamaForCausalLM(tiny), adapter))
    with open(weights, "r+b") as f:   # a save cut short (a crash or a full disk while writing)
        f.truncate(20)
    case("adapter_truncated", lambda: PeftModel.from_pretrained(LlamaForCausalLM(tiny), adapter))

    # a CPU-only torch (the wheel pip picks by default on some indexes) asked for a GPU or for NCCL
    import torch
    if torch.version.cuda is None:
        case("torch_cpu_build_cuda", lambda: torch.zeros(1).cuda())
        case("torch_cpu_build_set_device", lambda: torch.cuda.set_device(0))
        case("torch_cpu_build_nccl", lambda: dist.init_process_group(
            "nccl", init_method="file://" + os.path.join(work, "nccl_store"), rank=0, world_size=1, timeout=T))

    # Gloo told to use an interface this machine does not have (GLOO_SOCKET_IFNAME from another node's setup)
    os.environ["GLOO_SOCKET_IFNAME"] = "dsv3nosuch0"
    case("gloo_interface_missing", lambda: dist.init_process_group(
        "gloo", init_method="file://" + os.path.join(work, "store"), rank=0, world_size=1, timeout=T))

    # a DataLoader worker killed with SIGKILL (what the kernel's OOM killer does), last: torch's SIGCHLD handler stays
    # installed after it. One worker that dies on its first item: it never hands a batch's shared memory to this
    # process (a worker that died in mid-hand-over made the error a ConnectionResetError first; the doctor's
    # recorded test below has that log).
    import signal
    from torch.utils.data import DataLoader, Dataset

    class Dies(Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            if i == 0:
                os.kill(os.getpid(), signal.SIGKILL)
            return torch.ones(2)

    case("dataloader_worker_killed", lambda: [b for b in DataLoader(Dies(), num_workers=1, batch_size=2)])

    # host RAM that cannot be had (64 TiB): torch's CPU allocator and numpy's array, not the GPU's memory
    import numpy
    case("cpu_tensor_too_large", lambda: torch.empty(1 << 46, dtype=torch.uint8))
    case("numpy_array_too_large", lambda: numpy.empty(1 << 43))
''')

# case → (class, headline signature)
EXPECTED = {
    "port_held": ("port_rendezvous", "c10d.address_in_use"),
    "master_not_listening": ("port_rendezvous", "c10d.store_timeout"),
    "workers_never_join": ("port_rendezvous", "c10d.store_timeout"),
    "store_key_never_set": ("port_rendezvous", "c10d.store_timeout"),
    "env_vars_missing": ("port_rendezvous", "c10d.env_var_missing"),
    "process_group_not_initialized": ("config", "c10d.not_initialized"),
    "trainer_strategies_differ": ("config", "hf.training_arguments_invalid"),
    "trainer_bf16_without_gpu": ("config", "hf.precision_unsupported"),
    "trainer_fp16_and_bf16": ("config", "hf.training_arguments_invalid"),
    "ds_config_missing": ("config", "config.ds_config_path"),
    "model_path_missing": ("config", "hf.local_path_missing"),
    "model_weights_missing": ("config", "hf.local_path_missing"),
    "adapter_config_missing": ("lora_empty", "peft.adapter_config_missing"),
    "lora_targets_missing": ("lora_empty", "peft.target_modules_not_found"),
    "adapter_saved_empty": ("lora_empty", "lora.empty_tensor_on_load"),
    "adapter_truncated": ("lora_empty", "safetensors.bad_file"),
    "adapter_wrong_base": ("lora_empty", "peft.adapter_base_mismatch"),
    "adapter_weights_missing": ("lora_empty", "peft.adapter_weights_missing"),
    "gloo_interface_missing": ("nic_iface", "gloo.no_address_for_interface"),
    "dataloader_worker_killed": ("host_resources", "host.dataloader_worker_killed"),
    "cpu_tensor_too_large": ("host_resources", "host.cpu_memory"),
    "numpy_array_too_large": ("host_resources", "host.cpu_memory"),
    "torch_cpu_build_cuda": ("version_drift", "torch.cpu_build"),
    "torch_cpu_build_set_device": ("version_drift", "torch.cpu_build"),
    "torch_cpu_build_nccl": ("version_drift", "torch.cpu_build"),
}
CPU_BUILD_ONLY = {"torch_cpu_build_cuda", "torch_cpu_build_set_device", "torch_cpu_build_nccl"}


def _provoke(tmp_path_factory, child: str, name: str, **env: str):
    """Run ``child``, which writes one traceback file per provoked error into the returned directory."""
    out = tmp_path_factory.mktemp(name)
    # TMPDIR: the DataLoader's multiprocessing makes a pymp-* dir there, left behind when a worker is SIGKILLed
    p = subprocess.run([sys.executable, "-c", child, str(out)], capture_output=True, text=True, timeout=300,
                       cwd=str(out), env={**os.environ, "TMPDIR": str(out), **env})
    assert p.returncode == 0, p.stderr[-3000:]
    return out


def _assert_diagnosed(log, want_class: str, want_id: str) -> None:
    doc = triage([str(log)])
    assert doc["exit_code"] == 1 and doc["cause_recognised"], (doc["summary"], log.read_text()[-800:])
    assert (doc["cause_class"], doc["findings"][0]["id"]) == (want_class, want_id), (doc["summary"], log.read_text()[-800:])


@pytest.fixture(scope="module")
def library_logs(tmp_path_factory):
    return _provoke(tmp_path_factory, CHILD, "library_errors", HF_HUB_OFFLINE="1")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_doctor_names_the_cause_of_an_error_the_library_raised_here(library_logs, name):
    log = library_logs / f"{name}.log"
    if name in CPU_BUILD_ONLY and not log.exists():
        pytest.skip("the torch here is a CUDA build: it raises no CPU-build error")
    _assert_diagnosed(log, *EXPECTED[name])


def _diagnose_what_it_printed(tmp_path, name: str, argv: list[str], want: str, **env: str) -> tuple[dict, str]:
    """Run ``argv``, which must fail printing ``want``; the doctor's document on what it printed (as ``name``.log).
    A private mount (``_in_private_mount``) the machine refuses skips the test with the reason."""
    p = subprocess.run(argv, capture_output=True, text=True, timeout=180, env={**os.environ, **env})
    if argv[0] == "unshare" and "mount" in p.stderr and "Traceback" not in p.stderr:
        pytest.skip(f"no private mount here: {p.stderr.strip()[-200:]}")
    assert p.returncode != 0 and want in p.stderr, p.stderr[-2000:]
    log = tmp_path / f"{name}.log"
    log.write_text(p.stderr)
    return triage([str(log)]), p.stderr


def _in_private_mount(mount: str) -> list[str]:
    """argv prefix running the rest of argv in a private mount namespace once ``mount`` (a shell command) succeeded:
    what it mounts exists for that one command and nobody else sees it."""
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", f'{mount} && exec "$@"', "sh"]


def _as_user(uid: int) -> list[str]:
    """argv prefix running this interpreter as ``uid``; skips when that user cannot import torch from it."""
    argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", sys.executable]
    if subprocess.run([*argv, "-c", "import torch, safetensors"], capture_output=True, timeout=120).returncode:
        pytest.skip(f"uid {uid} cannot run {sys.executable} with torch (its directories are not readable to others)")
    return argv


SAVE_ON_FULL_DISK = textwrap.dedent(r'''
    import sys, torch
    from safetensors.torch import save_file
    weights = {"w": torch.zeros(1024, 1024)}   # 4 MiB onto a 1 MiB filesystem
    if sys.argv[1] == "torch":
        torch.save(weights, sys.argv[2] + "/checkpoint.pt")
    elif sys.argv[1] == "numpy":   # numpy's fwrite comes up short: "OSError: 524288 requested and 131056 written"
        import numpy as np
        np.save(sys.argv[2] + "/tokens.npy", np.zeros(512 * 1024))
    elif sys.argv[1] == "numpy_large":   # 16 MiB or more: numpy asks for the space first (fallocate: ENOSPC)
        import numpy as np
        np.save(sys.argv[2] + "/tokens.npy", np.zeros(5_000_000))
    elif sys.argv[1] == "numpy_strided":   # a non-contiguous array, written element by element
        import numpy as np
        np.zeros(1024 * 1024)[::2].tofile(sys.argv[2] + "/tokens.bin")
    elif sys.argv[1] == "torch_legacy":   # torch's raw storage writer: "write(): fd 3 failed with <strerror>"
        torch.save(weights, sys.argv[2] + "/best_model.pt", _use_new_zipfile_serialization=False)
    else:
        save_file(weights, sys.argv[2] + "/adapter_model.safetensors")
''')


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
@pytest.mark.parametrize("writer, want_id", [("torch", "host.checkpoint_write_failed"), ("safetensors", "host.disk_full"),
                                             ("torch_legacy", "host.disk_full"),
                                             ("numpy", "host.array_write_failed"),
                                             ("numpy_large", "host.array_write_failed"),
                                             ("numpy_strided", "host.array_write_failed")])
def test_a_save_onto_a_full_filesystem_is_a_host_resource_cause(tmp_path, writer, want_id):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    argv = [*_in_private_mount(f"mount -t tmpfs -o size=1m tmpfs {mnt}"), sys.executable, "-c", SAVE_ON_FULL_DISK,
            writer, str(mnt)]
    doc, err = _diagnose_what_it_printed(tmp_path, writer, argv, "Traceback")
    top = doc["findings"][0]
    assert (doc["cause_class"], top["id"]) == ("host_resources", want_id), (doc["summary"], err[-800:])
    if writer == "torch_legacy":   # the raw writer's wording, which another errno takes too ("... failed with
        # Input/output error", a field log of torch 1.0): the checkpoint-write signature reads it
        write_failed = next(s for s in SIGNATURES if s.id == "host.checkpoint_write_failed")
        m = write_failed.regex.search(err)
        assert m and m.group("why") == "No space left on device", err[-800:]
    if writer == "numpy":   # the counts numpy gave: how much of the write was refused
        assert top["title"].startswith("A file write came up short (numpy): ") and "of 524288 bytes written" in top["title"]


WRITE_REFUSED = textwrap.dedent(r'''
    import os, sys, torch
    from safetensors.torch import save_file
    writer, where = sys.argv[1], sys.argv[2]
    if writer == "torch":
        torch.save({"w": torch.zeros(4)}, where + "/checkpoint.pt")
    elif writer == "safetensors":
        save_file({"w": torch.zeros(4)}, where + "/adapter_model.safetensors")
    else:   # the Trainer makes each checkpoint's directory first
        os.makedirs(where + "/checkpoint-50")
''')
WRITERS = ("torch", "safetensors", "makedirs")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a read-only tmpfs needs root")
@pytest.mark.parametrize("writer", WRITERS)
def test_a_save_onto_a_read_only_filesystem_names_the_read_only_mount(tmp_path, writer):
    mnt = tmp_path / "ro"
    mnt.mkdir()
    argv = [*_in_private_mount(f"mount -t tmpfs -o size=1m,ro tmpfs {mnt}"), sys.executable, "-c", WRITE_REFUSED,
            writer, str(mnt)]
    doc, err = _diagnose_what_it_printed(tmp_path, writer, argv, "Read-only file system")
    top = doc["findings"][0]
    assert (doc["cause_class"], top["id"], top["check"]) == ("host_resources", "host.read_only_filesystem",
                                                             "lora.output_dir"), (doc["summary"], err[-800:])
    # the job's, as lora.output_dir judges a read-only output dir; the text names a :ro volume and a remounted disk
    assert top["actor"] == "job" and ":ro" in top["root_cause"] and "remounted" in top["root_cause"], top
    if writer == "makedirs":   # Python names the path it could not create
        assert top["title"].endswith(f"read-only: {mnt}/checkpoint-50"), top["title"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="running as another user needs root and setpriv (util-linux)")
@pytest.mark.parametrize("writer", WRITERS)
def test_a_save_into_another_users_directory_is_permission_denied_with_the_path(tmp_path, writer):
    # nobody writes into root's directory: one nobody can reach (pytest's own tmp_path is behind a 0700 directory,
    # where torch says "Parent directory ... does not exist" instead), removed at the end
    as_nobody = _as_user(65534)
    out = Path(tempfile.mkdtemp(prefix="dsv3pf-perm-", dir="/tmp"))
    try:
        out.chmod(0o755)
        doc, err = _diagnose_what_it_printed(tmp_path, writer, [*as_nobody, "-c", WRITE_REFUSED, writer, str(out)],
                                             "Permission denied")
    finally:
        shutil.rmtree(out)
    top = doc["findings"][0]
    assert (doc["cause_class"], top["id"], top["actor"]) == ("host_resources", "host.permission_denied", "job"), (
        doc["summary"], err[-800:])
    assert paste_problems(top["fix"]) == [], top["fix"]
    if writer == "makedirs":
        assert f"{out}/checkpoint-50" in top["title"] and f"ls -ld -- {out}/checkpoint-50" in top["fix"], top


LOAD_CUT = textwrap.dedent(r'''
    import sys, torch
    how, path = sys.argv[1], sys.argv[2]
    if how.startswith("cut_"):   # a legacy (non-zip) checkpoint cut short by an interrupted save
        torch.save({"w": torch.zeros(1024)}, path, _use_new_zipfile_serialization=False)
        data = open(path, "rb").read()
        open(path, "wb").write(data[: 100 if how == "cut_pickle" else len(data) // 2])
    else:                        # a zero-byte checkpoint: the save never wrote
        open(path, "wb").close()
    torch.load(path, weights_only=(how == "empty_weights_only"))
''')


@pytest.mark.parametrize("how, want_id", [("empty_weights_only", "torch.checkpoint_truncated"),   # bare "EOFError"
                                          ("empty", "torch.checkpoint_truncated"),   # "EOFError: Ran out of input"
                                          ("cut_pickle", "torch.checkpoint_truncated"),   # "pickle data was truncated"
                                          ("cut_storage", "safetensors.bad_file")])   # "unexpected EOF, expected N more bytes"
def test_torch_load_of_an_empty_or_cut_checkpoint_is_an_unreadable_weights_file(tmp_path, how, want_id):
    doc, err = _diagnose_what_it_printed(tmp_path, "load", [sys.executable, "-c", LOAD_CUT, how, str(tmp_path / "ck.pt")],
                                         "Traceback")
    assert (doc["cause_class"], doc["findings"][0]["id"]) == ("lora_empty", want_id), (doc["summary"], err[-800:])


def test_an_eoferror_outside_torch_load_is_not_called_a_cut_checkpoint(tmp_path):
    # a bare EOFError is any program's: only under torch.load's own frames is it a checkpoint that ran out
    doc, _ = _diagnose_what_it_printed(tmp_path, "other", [sys.executable, "-c",
                                       "def read_header():\n    raise EOFError\nread_header()"], "EOFError")
    assert doc["exit_code"] == 1 and not doc["cause_recognised"], doc["summary"]


DEEPSPEED_CHILD = textwrap.dedent(r'''
    import os, sys, traceback
    # the config object deepspeed.initialize builds first; no process group, so DeepSpeed's CPU accelerator does not
    # compile its shared-memory op (a C++ build of ~30 s into ~/.cache/torch_extensions)
    from deepspeed.runtime.config import DeepSpeedConfig
    out = sys.argv[1]
    ADAM = {"type": "Adam", "params": {"lr": 0.001}}
    cases = {
        # train_batch_size that micro batch x accumulation x world size does not make
        "ds_batch_arithmetic": {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 8,
                                "gradient_accumulation_steps": 1, "optimizer": ADAM},
        # a misspelled ZeRO key: DeepSpeed's pydantic model forbids extra keys
        "ds_zero_key_misspelled": {"train_micro_batch_size_per_gpu": 1, "optimizer": ADAM,
                                   "zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_sav": True}},
        # an HF "auto" value handed to DeepSpeed without the trainer that fills it
        "ds_auto_unfilled": {"train_micro_batch_size_per_gpu": "auto", "optimizer": ADAM},
    }
    for name, config in cases.items():
        try:
            DeepSpeedConfig(config)
        except BaseException:
            with open(os.path.join(out, name + ".log"), "w") as f:
                f.write(traceback.format_exc())
        else:
            raise SystemExit(f"{name}: no error raised")
''')

DEEPSPEED_EXPECTED = {
    "ds_batch_arithmetic": ("config", "deepspeed.batch_mismatch"),
    "ds_zero_key_misspelled": ("config", "deepspeed.config_validation"),
    "ds_auto_unfilled": ("config", "deepspeed.auto_compared"),
}


@pytest.fixture(scope="module")
def deepspeed_logs(tmp_path_factory):
    pytest.importorskip("deepspeed")
    return _provoke(tmp_path_factory, DEEPSPEED_CHILD, "deepspeed_errors", DS_ACCELERATOR="cpu")


@pytest.mark.parametrize("name", sorted(DEEPSPEED_EXPECTED))
def test_doctor_names_the_deepspeed_config_error_deepspeed_raised_here(deepspeed_logs, name):
    _assert_diagnosed(deepspeed_logs / f"{name}.log", *DEEPSPEED_EXPECTED[name])


GLOO_FAMILY_RANK = textwrap.dedent(r'''
    import datetime, sys
    import torch.distributed as dist
    from torch.distributed import ProcessGroupGloo
    rank, port = int(sys.argv[1]), int(sys.argv[2])
    store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, timeout=datetime.timedelta(seconds=30))
    opts = ProcessGroupGloo._Options()
    opts._timeout = datetime.timedelta(seconds=20)
    # rank 1's host name resolves to an IPv6 address, rank 0's to IPv4 (here: the two loopbacks)
    opts._devices = [ProcessGroupGloo.create_device(hostname="127.0.0.1" if rank == 0 else "::1")]
    ProcessGroupGloo(store, rank, 2, opts)
''')


def _ipv6_loopback() -> bool:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here")
def test_gloo_ranks_on_ipv4_and_ipv6_addresses_are_an_interface_cause(tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "rank.py"
    script.write_text(GLOO_FAMILY_RANK)
    procs = [subprocess.Popen([sys.executable, str(script), str(r), str(port)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    logs = []
    for r, p in enumerate(procs):
        out, _ = p.communicate(timeout=120)
        assert p.returncode != 0, out
        logs.append(tmp_path / f"rank{r}.log")
        logs[-1].write_text(out)
    doc = triage([str(log) for log in logs])
    top = doc["findings"][0]
    assert (doc["cause_class"], top["id"], top["count"]) == ("nic_iface", "gloo.address_family_mismatch", 2), doc["summary"]
    assert top["title"] == "Gloo ranks published addresses of different families (IPv4 and IPv6: 2 vs 10)"


def test_torchrun_on_a_script_this_node_does_not_have_names_the_script_and_its_exit_is_a_consequence(tmp_path):
    # what a node prints when its checkout lacks the training script (or a relative path met another directory):
    # every rank exits with code 2 and torchrun's summary says only that
    missing = tmp_path / "src" / "train.py"
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "1", str(missing)],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert p.returncode != 0, p.stderr[-2000:]
    log = tmp_path / "node1.log"
    log.write_text(p.stdout + p.stderr)
    doc = triage([str(log)])
    head = doc["findings"][0]
    assert (doc["cause_class"], head["id"], head["actor"]) == ("config", "launch.script_missing", "job"), doc["summary"]
    assert head["title"] == f"The training script is not there: {missing}" and f"ls -l -- {missing}" in head["fix"]
    roles = {f["id"]: f["role"] for f in doc["findings"]}
    assert [i for i, r in roles.items() if r == "root_cause"] == ["launch.script_missing"], roles
    assert all(r == "consequence" for i, r in roles.items() if i != "launch.script_missing"), roles


SHM_LOADER = textwrap.dedent(r'''
    import torch
    from torch.utils.data import DataLoader, Dataset
    class Batches(Dataset):
        def __len__(self):
            return 8
        def __getitem__(self, i):   # 4 MiB a sample, through /dev/shm from the workers
            return torch.zeros(1024, 1024)
    for batch in DataLoader(Batches(), batch_size=2, num_workers=2):
        pass
''')


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small /dev/shm needs root")
def test_dataloader_workers_on_a_small_dev_shm_are_shared_memory_not_a_full_disk(tmp_path):
    # docker's 64 MB /dev/shm, here 1 MiB in a private mount namespace: torch says "No space left on device (28)" for
    # the shared memory file, which is no disk of the run's
    argv = [*_in_private_mount("mount -t tmpfs -o size=1m tmpfs /dev/shm"), sys.executable, "-c", SHM_LOADER]
    doc, _ = _diagnose_what_it_printed(tmp_path, "train", argv, "shared memory", TMPDIR=str(tmp_path))
    assert (doc["cause_class"], doc["findings"][0]["id"]) == ("host_resources", "host.shared_memory"), doc["summary"]
    assert "--shm-size" in doc["findings"][0]["fix"]


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="running as another user needs root and setpriv (util-linux)")
def test_torchs_openmp_threads_under_a_low_thread_limit_are_a_ulimit_cause(tmp_path):
    # a container's pids limit or ulimit -u: libgomp cannot start torch's threads at the first parallel op. A uid of
    # its own (no other process counts against its RLIMIT_NPROC)
    child = ("import resource; resource.setrlimit(resource.RLIMIT_NPROC, (4, 4)); import torch; torch.set_num_threads(8)"
             "; print((torch.ones(512, 512) @ torch.ones(512, 512)).sum())")
    doc, _ = _diagnose_what_it_printed(tmp_path, "rank0", [*_as_user(64999), "-c", child],
                                       "libgomp: Thread creation failed", HOME=str(tmp_path))
    assert (doc["cause_class"], doc["findings"][0]["id"]) == ("host_resources", "host.ulimit"), doc["summary"]


RNG_RESUME = textwrap.dedent(r'''
    import sys, numpy as np, torch
    path = sys.argv[1] + "/rng_state.pth"
    torch.save({"python": None, "numpy": np.random.get_state()}, path)   # as the Trainer saves its RNG state
    torch.load(path)                                                      # a resume that passes no weights_only
''')


def test_a_checkpoint_torch_refuses_under_weights_only_names_the_global_and_the_fix_loads_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_FORCE_")}
    argv = [sys.executable, "-c", RNG_RESUME, str(tmp_path)]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode != 0 and "Weights only load failed" in p.stderr, p.stderr[-2000:]
    log = tmp_path / "resume.log"
    log.write_text(p.stderr)
    doc = triage([str(log)])
    head = doc["findings"][0]
    assert (doc["cause_class"], head["id"], head["actor"]) == ("version_drift", "torch.weights_only_refused", "job"), (
        doc["summary"])
    assert head["title"].endswith(": numpy._core.multiarray._reconstruct is not allowed"), head["title"]
    assert [f["id"] for f in doc["findings"] if f["role"] == "root_cause"] == ["torch.weights_only_refused"]
    # the fix's variable, for a checkpoint of one's own run: the same load then succeeds
    assert "export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1" in head["fix"]
    fixed = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                           env={**env, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
    assert fixed.returncode == 0, fixed.stderr[-2000:]


def test_a_model_config_that_is_not_json_is_named_and_the_fixs_check_fails_on_it(tmp_path):
    # a config.json cut mid-object (a download cut short, a hand edit): transformers' own words, then the check the fix
    # names, which must fail on the same directory
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "deepseek_v3", "hidden_size": 16,\n')
    doc, _ = _diagnose_what_it_printed(tmp_path, "rank0", [sys.executable, "-c", "import sys\nfrom transformers import "
                                       "AutoConfig\nAutoConfig.from_pretrained(sys.argv[1])", str(model)],
                                       "is not a valid JSON file", HF_HUB_OFFLINE="1")
    head = doc["findings"][0]
    assert (doc["cause_class"], head["id"]) == ("config", "hf.config_not_json"), doc["summary"]
    assert head["title"] == f"The model's config file is not valid JSON: {model}/config.json", head["title"]
    check = subprocess.run(python_cli("run", "--profile", "cpu", "--only", head["check"], "--model-path", str(model),
                                      "--lora-targets", "q_a_proj", "--no-report"), capture_output=True, text=True,
                           timeout=300)
    assert check.returncode == 1 and "not valid JSON" in check.stdout, check.stdout[-2000:]


def test_flash_attention_asked_for_where_it_cannot_run_is_a_version_drift_cause(tmp_path):
    # attn_implementation="flash_attention_2" on this machine (no flash_attn, no CUDA device): transformers refuses
    # while it builds the model; transformers' own reason is kept in the title
    child = ("import sys\nfrom transformers import AutoConfig, AutoModelForCausalLM\n"
             "cfg = AutoConfig.from_pretrained(sys.argv[1])\n"
             "AutoModelForCausalLM.from_config(cfg, attn_implementation='flash_attention_2')")
    config = Path(__file__).parents[1] / "data" / "lora" / "deepseek_v3_tiny_config.json"
    doc, err = _diagnose_what_it_printed(tmp_path, "rank0", [sys.executable, "-c", child, str(config)],
                                         "FlashAttention2 has been toggled on", HF_HUB_OFFLINE="1")
    head = doc["findings"][0]
    assert (doc["cause_class"], head["id"], head["actor"]) == ("version_drift", "hf.flash_attention_unavailable", "job")
    why = err.split("due to the following error: ")[1].split(".")[0]
    assert head["title"] == f"Flash Attention 2 was asked for and cannot be used: {why}", head["title"]
    assert "attn_implementation=sdpa" in head["fix"]
