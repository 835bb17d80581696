"""LoRA save safety: the adapter scanner, the checkpoint watcher, the DeepSpeed config lint and the
lora_target resolver. Module level imports stay light; torch/peft/transformers load inside functions."""
