"""Root-cause keys of the LoRA domain, shared by every check (and every adapter verdict) that can fail for the
same reason, so a report shows the cause once with the checks it blocks."""
from __future__ import annotations

#: ZeRO-3 without stage3_gather_16bit_weights_on_model_save: every save holds empty/partitioned tensors
#: (lora.deepspeed_config; lora.output_dir and `lora scan` on the empty adapters it wrote)
GATHER_FLAG_OFF = "lora.gather_flag_off"
#: lora_target names modules the model lacks (DeepSeek-V3's MLA has no q_proj/k_proj/v_proj)
#: (lora.targets; `lora scan` when target_modules are covered by no saved key)
TARGETS_MISSING = "lora.targets_missing"
#: the DeepSpeed config cannot be read (missing, not a file, not JSON)
DEEPSPEED_CONFIG_UNREADABLE = "lora.deepspeed_config_unreadable"
#: the DeepSpeed config contradicts itself or the trainer (batch arithmetic, bf16 and fp16 both on, stage)
DEEPSPEED_CONFIG_INVALID = "lora.deepspeed_config_invalid"
#: the model directory's config.json cannot be read or built
MODEL_CONFIG_UNREADABLE = "lora.model_config_unreadable"
#: the output directory cannot be written (or created) by the job
OUTPUT_DIR_UNWRITABLE = "lora.output_dir_unwritable"
#: the output directory lies on a network filesystem
OUTPUT_DIR_NETWORK_FS = "lora.output_dir_network_fs"
#: an adapter already saved in the output directory is bad (a resumed run would start from it)
SAVED_ADAPTER_BAD = "lora.saved_adapter_bad"
#: the adapter file is damaged (truncated, corrupt header, a pickle torch refuses)
ADAPTER_CORRUPT = "lora.adapter_corrupt"
#: adapter_config.json is missing or peft cannot use it
ADAPTER_CONFIG_INVALID = "lora.adapter_config_invalid"
#: the saved keys or tensors are not what peft loads into the model (names, pairs, ranks, dtypes)
ADAPTER_KEYS_INVALID = "lora.adapter_keys_invalid"
#: the adapter cannot be read at all (permission, not a regular file)
ADAPTER_UNREADABLE = "lora.adapter_unreadable"
#: an adapter was trained on another base model: its LoRA matrices do not take this model's widths (lora.adapter_base)
ADAPTER_BASE_MISMATCH = "lora.adapter_base_mismatch"
