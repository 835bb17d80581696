"""A real LoRA run through the HF Trainer under DeepSpeed (config from argv[1]) on CPU with gloo, 2 steps, one
checkpoint: what the Trainer's own save writes under that config (tests/lora/test_lora_zero3_save.py).

    python -m torch.distributed.run --nproc_per_node=2 zero3_trainer_save.py CONFIG.json OUTDIR

Prints one line on rank 0, "RESULT " and JSON: the ZeRO stage the engine ran, DeepSpeed's gather flag, and every saved adapter
tensor's shape and the sum of |lora_B|."""
import glob
import json
import os
import sys

import torch

# Stand-ins for the GPUs this machine lacks (third-party code only): accelerate picks no distributed backend without
# CUDA, so give it gloo as a multi-GPU launch would have NCCL; and skip DeepSpeed's shared-memory comm kernel,
# which it compiles for a CPU run (tens of seconds, nothing to do with saving).
from accelerate.state import PartialState
from accelerate.utils import DistributedType
import importlib

# by its module name: `import deepspeed.comm.torch as m` binds torch itself (deepspeed.comm has an attribute "torch")
ds_comm = importlib.import_module("deepspeed.comm.torch")

_prepare = PartialState._prepare_backend


def _gloo(self, cpu=False, sagemaker_dp=False, backend=None):
    if int(os.environ.get("LOCAL_RANK", -1)) != -1 and not cpu:
        return "gloo", DistributedType.MULTI_CPU
    return _prepare(self, cpu, sagemaker_dp, backend)


PartialState._prepare_backend = _gloo
ds_comm.build_shm_op = lambda: None

from peft import LoraConfig, get_peft_model  # noqa: E402
from safetensors import safe_open  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments  # noqa: E402

config_path, out = sys.argv[1], sys.argv[2]
args = TrainingArguments(output_dir=out, per_device_train_batch_size=1, gradient_accumulation_steps=1, max_steps=2,
                         save_steps=2, save_strategy="steps", logging_steps=1, report_to=[], deepspeed=config_path,
                         learning_rate=1e-3)
torch.manual_seed(0)
model = LlamaForCausalLM(LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64))
model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        ids = torch.randint(0, 128, (16,))
        return {"input_ids": ids, "labels": ids.clone(), "attention_mask": torch.ones(16, dtype=torch.long)}


trainer = Trainer(model=model, args=args, train_dataset=Tokens())
trainer.train()
if int(os.environ.get("RANK", 0)) == 0:
    tensors = {}
    for path in sorted(glob.glob(os.path.join(out, "checkpoint-*", "adapter_model.safetensors"))):
        with safe_open(path, "pt") as f:
            for k in f.keys():
                t = f.get_tensor(k)
                tensors[k] = {"shape": list(t.shape), "abs_sum": float(t.float().abs().sum())}
    print("RESULT " + json.dumps({"stage": trainer.deepspeed.zero_optimization_stage(),
                      "gather_flag": trainer.deepspeed.zero_gather_16bit_weights_on_model_save(), "tensors": tensors}))
# Tear the process group down before the interpreter exits: left to exit, a rank now and then aborted there ("terminate
# called without an active exception", SIGABRT after its RESULT line; 1 run in 36 here, 3 at a time), which fails the run
torch.distributed.barrier()
torch.distributed.destroy_process_group()
