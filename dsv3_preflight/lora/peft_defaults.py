"""peft's default LoRA targets by model type: what ``PeftModel.from_pretrained`` fills in when an adapter's
``target_modules`` is null (``TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING``, peft/utils/constants.py).

Data, copied from peft 0.21.2 and unchanged in 0.22.0 (the lock's pin); tests/lora/test_lora_scan.py holds it equal to the installed peft's
table, so a peft upgrade that changes it fails a test rather than a verdict. One model type a line.
"""
from __future__ import annotations

#: model type -> the module names (a list) or the regex peft targets by default
DEFAULT_TARGETS: dict[str, list[str] | str] = {
    't5': ["q", "v"],
    'mt5': ["q", "v"],
    'bart': ["q_proj", "v_proj"],
    'gpt2': ["c_attn"],
    'bloom': ["query_key_value"],
    'blip-2': ["q", "v", "q_proj", "v_proj"],
    'opt': ["q_proj", "v_proj"],
    'gptj': ["q_proj", "v_proj"],
    'gpt_neox': ["query_key_value"],
    'gpt_neo': ["q_proj", "v_proj"],
    'bert': ["query", "value"],
    'roberta': ["query", "value"],
    'xlm-roberta': ["query", "value"],
    'electra': ["query", "value"],
    'deberta-v2': ["query_proj", "value_proj"],
    'deberta': ["in_proj"],
    'layoutlm': ["query", "value"],
    'llama': ["q_proj", "v_proj"],
    'llama4': ["q_proj", "v_proj"],
    'chatglm': ["query_key_value"],
    'gpt_bigcode': ["c_attn"],
    'mpt': ["Wqkv"],
    'RefinedWebModel': ["query_key_value"],
    'RefinedWeb': ["query_key_value"],
    'falcon': ["query_key_value"],
    'btlm': ["c_proj", "c_attn"],
    'codegen': ["qkv_proj"],
    'mistral': ["q_proj", "v_proj"],
    'mixtral': ["q_proj", "v_proj"],
    'stablelm': ["q_proj", "v_proj"],
    'phi': ["q_proj", "v_proj", "fc1", "fc2"],
    'gemma': ["q_proj", "v_proj"],
    'gemma2': ["q_proj", "v_proj"],
    'gemma3_text': ["q_proj", "v_proj"],
    'gemma4': '.*language_model\\..*\\.(q_proj|v_proj)',
    'qwen2': ["q_proj", "v_proj"],
    'qwen3': ["q_proj", "v_proj"],
    'nemotron_h': ["q_proj", "k_proj", "v_proj", "o_proj"],
    'rwkv': ["key", "value", "receptance", "output"],
    'rwkv7': ["r_proj", "k_proj", "v_proj", "o_proj", "key", "value"],
}


def model_types_defaulting_to(leaf_names: set[str]) -> list[str]:
    """The model types whose default targets are exactly these module names: on a base model of one of them, an
    adapter saved for these modules and a null target_modules loads intact."""
    return [t for t, names in DEFAULT_TARGETS.items() if isinstance(names, list) and set(names) == set(leaf_names)]
