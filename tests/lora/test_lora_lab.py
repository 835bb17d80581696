"""Builders for the LoRA tests (no tests here): tiny Llama-like and DeepSeek-V3-like models built from
configs (no downloads), adapters written by real peft + safetensors, and the ways ZeRO-3 breaks them."""
from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

LLAMA_TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=128, max_position_embeddings=64)
DSV3_TINY = dict(hidden_size=64, intermediate_size=128, moe_intermediate_size=32, num_hidden_layers=2,
                 first_k_dense_replace=1, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
                 n_shared_experts=1, num_attention_heads=4, num_key_value_heads=4, q_lora_rank=32, kv_lora_rank=16,
                 qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, vocab_size=128, max_position_embeddings=64)
MLA_TARGETS = ["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"]
QKVO = ["q_proj", "k_proj", "v_proj", "o_proj"]


def tiny_model(kind: str):
    import torch
    from transformers import AutoModelForCausalLM, DeepseekV3Config, LlamaConfig

    torch.manual_seed(0)
    cfg = LlamaConfig(**LLAMA_TINY) if kind == "llama" else DeepseekV3Config(**DSV3_TINY)
    return AutoModelForCausalLM.from_config(cfg)


def write_adapter(out: Path, kind: str, targets: list[str] | str, r: int = 8, safe: bool = True, trained: bool = True,
                  **lora) -> Path:
    """Save a real peft LoRA adapter of a tiny model into ``out``; with ``trained`` lora_B is non-zero. ``lora`` holds
    more LoraConfig fields (exclude_modules, layers_to_transform, ...)."""
    import torch
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(tiny_model(kind), LoraConfig(r=r, lora_alpha=2 * r, target_modules=targets, **lora))
    if trained:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.01)
    model.save_pretrained(out, safe_serialization=safe)
    return out


def write_checkpoint(root: Path, step: int, src: Path) -> Path:
    """A checkpoint-<step>/ directory as the HF Trainer writes it, holding a copy of the adapter in ``src``."""
    ck = root / f"checkpoint-{step}"
    shutil.copytree(src, ck)
    (ck / "trainer_state.json").write_text(json.dumps({"global_step": step, "max_steps": 2000, "log_history": []}))
    return ck


def zero3_unGathered(src: Path, out: Path) -> Path:
    """The adapter as ZeRO-3 leaves it without gathering: the same keys, every tensor of shape [0]."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    shutil.copytree(src, out)
    with safe_open(str(src / "adapter_model.safetensors"), "pt") as st:
        keys, meta = list(st.keys()), st.metadata()
    save_file({k: torch.empty(0) for k in keys}, str(out / "adapter_model.safetensors"), metadata=meta)
    return out


def empty_header(src: Path, out: Path) -> Path:
    """Only metadata, no tensor: what the field saw when nothing was gathered."""
    from safetensors.torch import save_file

    shutil.copytree(src, out)
    save_file({}, str(out / "adapter_model.safetensors"), metadata={"format": "pt"})
    return out


def truncated(src: Path, out: Path, keep: float = 0.5) -> Path:
    shutil.copytree(src, out)
    f = out / "adapter_model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: int(len(data) * keep)])
    return out


def corrupt_header(src: Path, out: Path) -> Path:
    shutil.copytree(src, out)
    f = out / "adapter_model.safetensors"
    data = bytearray(f.read_bytes())
    (n,) = struct.unpack("<Q", data[:8])
    data[8:8 + n] = b"\x00not json" + b"#" * (n - 9)
    f.write_bytes(bytes(data))
    return out


def huge_header_length(src: Path, out: Path) -> Path:
    shutil.copytree(src, out)
    f = out / "adapter_model.safetensors"
    data = bytearray(f.read_bytes())
    data[:8] = struct.pack("<Q", 1 << 40)
    f.write_bytes(bytes(data))
    return out


def edit_config(adapter: Path, **changes) -> Path:
    f = adapter / "adapter_config.json"
    cfg = json.loads(f.read_text())
    cfg.update(changes)
    f.write_text(json.dumps(cfg))
    return adapter


def drop_keys(adapter: Path, contains: str) -> Path:
    """Rewrite the adapter without the tensors whose key contains ``contains`` (e.g. 'lora_B')."""
    from safetensors.torch import load_file, save_file

    f = adapter / "adapter_model.safetensors"
    state = load_file(str(f))
    save_file({k: v for k, v in state.items() if contains not in k}, str(f), metadata={"format": "pt"})
    return adapter
