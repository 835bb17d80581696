"""Probes of the LoRA domain: the DeepSpeed config, the model's module names and the output directory."""
