"""``lora_empty``: LoRA adapters empty, targets not found, or weights files corrupt.

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from .record import S, Signature
from .shared import DS_CONFIG_FIX, LABELS

SIGNATURES: tuple[Signature, ...] = (
    S(id="lora.empty_tensor_on_load", cls="lora_empty", kind="cause", needles=(b"torch.Size([0]) from checkpoint",),
      pattern=r"size mismatch for (?P<param>\S+): copying a param with shape torch\.Size\(\[0\]\) from checkpoint",
      title="Saved weights are empty (shape [0])[[, e.g. {param}]]",
      root_cause="The adapter (or model) was saved under ZeRO-3 without gathering the partitioned parameters, so each rank "
      "wrote the empty placeholders of shape [0].",
      fix="# in the DeepSpeed config: \"zero_optimization\": {\"stage3_gather_16bit_weights_on_model_save\": true}\n"
      "# save with trainer.save_model() on all ranks, or gather with deepspeed.zero.GatheredParameters first\n" + DS_CONFIG_FIX,
      check="lora.deepspeed_config", tier=1,
      example="\tsize mismatch for base_model.model.model.layers.0.mlp.gate_proj.lora_B.default.weight: copying a param with "
      "shape torch.Size([0]) from checkpoint, the shape in current model is torch.Size([11008, 8]).",
      source="https://github.com/huggingface/peft/issues/2500"),
    S(id="peft.adapter_base_mismatch", cls="lora_empty", kind="cause", needles=(b"from checkpoint, the shape in current model is",),
      pattern=r"size mismatch for (?P<param>\S*lora_\S+?): copying a param with shape torch\.Size\(\[(?P<saved>[\d, ]+)\]\) "
      r"from checkpoint, the shape in current model is torch\.Size\(\[(?P<model>[\d, ]+)\]\)",
      title="The adapter does not fit this base model ({param}: saved [{saved}], the model has [{model}])",
      root_cause="The LoRA adapter was trained on another base model (another size or architecture: its A/B matrices take the "
      "layer widths of the model it was trained on; a different first number of lora_A is a different rank r), so its "
      "tensors do not fit this model's layers. The adapter's "
      "adapter_config.json names the model it was trained on (base_model_name_or_path).",
      fix="grep -E '\"base_model_name_or_path\"|\"r\"' \"${ADAPTER_DIR:?the adapter directory}/adapter_config.json\"    # the model it was trained on\n"
      "# load the adapter onto the base model it was trained on, or train one for this model; before a run:\n"
      "dsv3-preflight run --only lora.adapter_base --model-path \"${MODEL_DIR:?the base model directory}\" "
      "--output-dir \"${ADAPTER_DIR:?the adapter directory}\"    # compares every saved A/B matrix with the model's widths",
      check="lora.adapter_base", tier=1,
      example="\tsize mismatch for base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight: copying a param with "
      "shape torch.Size([4, 64]) from checkpoint, the shape in current model is torch.Size([4, 32]).",
      source="torch nn.Module.load_state_dict's message; produced here by peft's PeftModel.from_pretrained with an adapter "
      "trained on a model of hidden size 64 loaded onto one of hidden size 32"),
    S(id="deepspeed.not_gathered_on_save", cls="lora_empty", kind="cause", needles=(b"stage3_gather_16bit_weights_on_model_save",),
      pattern=r"(?:Did not save the model|not saving).{0,80}stage3_gather_16bit_weights_on_model_save(?:` is| is|=)\s*False",
      title="DeepSpeed did not save the 16-bit weights (stage3_gather_16bit_weights_on_model_save is false)",
      root_cause="Under ZeRO-3 the weights are partitioned; without gathering on save the adapter files are empty or missing.",
      fix="# in the DeepSpeed config: \"zero_optimization\": {\"stage3_gather_16bit_weights_on_model_save\": true}\n" + DS_CONFIG_FIX,
      check="lora.deepspeed_config", tier=1,
      example="Did not save the model /out/pytorch_model.bin because `stage3_gather_16bit_weights_on_model_save` is False",
      source="deepspeed/runtime/engine.py (save_16bit_model)"),
    S(id="peft.target_modules_not_found", cls="lora_empty", kind="cause", needles=(b"not found in the base model", b"specify `target_modules`",
                                                                                  b"is not supported. Currently, only"),
      pattern=r"Target modules? (?P<mods>.+?) not found in the base model|Please specify `target_modules` in `peft_config`"
      r"|Target module (?P<mod>.+?) is not supported\. Currently, only",
      title="LoRA target modules[[ {mods}]] not found in the base model",
      root_cause="lora_target names modules this model does not have (DeepSeek-V3 attention has q_a_proj, q_b_proj, "
      "kv_a_proj_with_mqa, kv_b_proj, o_proj; there is no q_proj/k_proj/v_proj), or the list is empty.",
      fix="dsv3-preflight run --only lora.targets    # lists the model's Linear modules that match\n"
      "# then pass only those names: --lora_target \"${LORA_TARGETS:?comma-separated module names}\"",
      check="lora.targets", tier=1,
      example="ValueError: Target modules {'q_proj', 'v_proj'} not found in the base model. Please check the target modules and try again.",
      source="https://github.com/linhduongtuan/BLOOM-LORA/issues/15 (peft/tuners/tuners_utils.py)"),
    S(id="peft.nothing_trainable", cls="lora_empty", kind="cause", needles=(b"trainable params: 0 ", b"trainable params: 0|"),
      pattern=r"trainable params: 0 \|\|",
      title="LoRA made no parameter trainable",
      root_cause="get_peft_model found no module to adapt (or the adapter was frozen): training changes nothing and saves an empty adapter.",
      fix="dsv3-preflight run --only lora.targets", check="lora.targets", tier=1,
      example="trainable params: 0 || all params: 6738415616 || trainable%: 0.0",
      source="peft/peft_model.py (print_trainable_parameters)"),
    S(id="peft.missing_adapter_keys", cls="lora_empty", kind="cause", needles=(b"missing adapter keys",),
      pattern=r"Found missing adapter keys while loading the checkpoint",
      title="The loaded adapter lacks weights the model expects",
      root_cause="The adapter file is empty or partial (saved under ZeRO-3 without gathering, or with other target modules).",
      fix="dsv3-preflight run --only lora.output_dir,lora.deepspeed_config", check="lora.output_dir", tier=1,
      example="UserWarning: Found missing adapter keys while loading the checkpoint: ['base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight']",
      source="peft/peft_model.py (load_adapter)"),
    S(id="safetensors.bad_file", cls="lora_empty", kind="cause", needles=(b"Error while deserializing header", b"failed reading zip archive",
                                                                         b"failed finding central directory", b"invalid load key", b"MetadataIncompleteBuffer",
                                                                         b"HeaderTooLarge", b"InvalidHeader", b"The file might be corrupted"),
      pattern=r"Error while deserializing header: (?P<err>\w+)|PytorchStreamReader failed reading zip archive: (?P<err2>.+)"
      r"|failed finding central directory|invalid load key, (?P<key>\S+)|MetadataIncompleteBuffer|HeaderTooLarge|InvalidHeader\w*"
      # torch.load of a legacy (non-zip) checkpoint cut inside a tensor's bytes (torch/csrc/serialization.cpp)
      r"|(?P<err3>unexpected EOF, expected \d+ more bytes)\. The file might be corrupted",
      title="Weights file unreadable[[ ({err})]]",
      root_cause="The .safetensors/.bin file is truncated, empty, or not a weights file at all[[ ({err})]]: a save interrupted "
      "by a crash or a full disk, or a Git LFS pointer instead of the weights.",
      fix="ls -l \"${ADAPTER_DIR:?the adapter or checkpoint dir}\"    # a few hundred bytes means an LFS pointer or an empty save\n"
      "dsv3-preflight run --only lora.output_dir    # checks the saved adapters' headers",
      check="lora.output_dir", tier=1,
      example="safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge",
      source="https://github.com/Comfy-Org/ComfyUI/issues/7510 (safetensors src/lib.rs)"),

    # torch.load of an empty or cut checkpoint that is no zip archive (an interrupted save, a zero-byte file): the
    # unpickler runs out of input. Bare, "EOFError" is any program's, so only under torch.load's own frames.
    # Produced here: torch 2.13's weights-only unpickler raises a bare "EOFError", the full pickle "EOFError: Ran out of
    # input"; a cut pickle "_pickle.UnpicklingError: pickle data was truncated"
    S(id="torch.checkpoint_truncated", cls="lora_empty", kind="cause", needles=(b"EOFError", b"pickle data was truncated"),
      pattern=r"^" + LABELS + r"(?:EOFError(?:: Ran out of input)?|(?:_pickle\.)?UnpicklingError: pickle data was truncated)\s*$",
      title="Weights file unreadable (empty or truncated: torch.load ran out of input)",
      root_cause="torch.load found less than a whole checkpoint: the file is empty or was cut short (a save interrupted by a crash, "
      "a full disk or a kill; a copy that stopped), so a resume or an evaluation cannot read it.",
      fix="ls -l \"${CHECKPOINT_DIR:?the checkpoint dir being loaded}\"    # a zero or short size: that save did not finish\n"
      "dsv3-preflight run --only lora.output_dir,host.resources    # the saved adapters' headers, and room to save",
      check="lora.output_dir", tier=1, example="EOFError: Ran out of input",
      source="torch/serialization.py (_legacy_load: pickle_module.load) and torch/_weights_only_unpickler.py (load: raise "
      "EOFError); produced here by torch.load of an empty file", requires="torch_load"),
    S(id="peft.adapter_config_missing", cls="lora_empty", kind="cause", needles=(b"Can't find 'adapter_config.json'",),
      pattern=r"Can't find 'adapter_config\.json' at '(?P<path>[^']+)'",
      title="No adapter at {path} (adapter_config.json missing)",
      root_cause="The directory the adapter is loaded from holds no saved adapter: the training run never saved one there "
      "(it failed or stopped before its save, or under ZeRO-3 rank 0 did not write the files), output_dir points "
      "elsewhere, or on a multi-node job the adapter was saved on another node.",
      fix="ls -la -- {path}    # adapter_config.json and adapter_model.safetensors must be there\n"
      "dsv3-preflight run --only lora.output_dir,lora.deepspeed_config    # the run's output dir and its ZeRO-3 save settings",
      check="lora.output_dir", tier=1,
      example="ValueError: Can't find 'adapter_config.json' at '/out/checkpoint-100'",
      source="peft/config.py (PeftConfigMixin.from_pretrained, _get_peft_type)"),
)
