"""LoRA save safety: the adapter scanner, the save watcher, the DeepSpeed config lint and the lora_target resolver.

``probes/`` reads the system (adapter files, configs, the model's modules, the output dir's saves); every other
module is pure: the safetensors header rules, the key layout, the adapter and config rules, the verdict, the
DeepSpeed and target rules, the fixes. Module level imports stay light; torch/peft/transformers load inside the
functions that need them (``--deep``, pickles, the model's module map)."""
