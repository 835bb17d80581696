"""``config``: DeepSpeed / accelerate / trainer configuration.

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from .record import S, Signature
from .shared import ALLREDUCE_FIX, DS_CONFIG_FIX, LOCAL_PATH

SIGNATURES: tuple[Signature, ...] = (
    S(id="nccl.graph_file_device_missing", cls="config", kind="cause", needles=(b"XML Import Channel",),
      pattern=r"XML Import Channel ?: dev (?P<dev>\d+) not found",
      title="NCCL's graph file names device {dev}, which this machine does not have",
      root_cause="NCCL_GRAPH_FILE (with NCCL_TOPO_FILE, often set by a cloud image for one machine size, in the environment or "
      "/etc/nccl.conf) describes channels over more GPUs or NICs than this machine has: NCCL cannot import it and "
      "its init fails.",
      fix="env | grep -E '^NCCL_(GRAPH|TOPO)_FILE='; grep -s -E 'NCCL_(GRAPH|TOPO)_FILE' /etc/nccl.conf ~/.nccl.conf\n"
      "unset NCCL_GRAPH_FILE    # or point it at the file for this machine's GPUs and NICs\n" + ALLREDUCE_FIX,
      check="dist.allreduce", tier=1,
      example="::16674:17023 [0] graph/search.cc:703 NCCL WARN XML Import Channel : dev 1 not found.",
      source="https://github.com/Azure/azhpc-images/issues/327 (NCCL src/graph/search.cc, 'XML Import Channel : dev %d not "
      "found.')"),
    # transformers/huggingface_hub take a local path that is not a directory with the files for a Hub repo id
    # (transformers/utils/hub.py, configuration_utils.py, tokenization_utils_base.py, modeling_utils.py;
    # huggingface_hub/utils/_validators.py): only paths that look local, a Hub id that fails is another story
    # peft looks for adapter_model.safetensors / .bin in the adapter directory; when neither is there it takes the
    # path for a Hub repo id, and the error is the same as for a model path that does not exist
    S(id="peft.adapter_weights_missing", cls="lora_empty", kind="cause", needles=(b"Repo id must be in the form", b"Incorrect path_or_model_id",
                                                                                 b"is not a local folder", b"does not appear to have a file named"),
      pattern=r"Repo id must be in the form 'repo_name' or 'namespace/repo_name': '(?P<path>" + LOCAL_PATH + r")'"
      r"|Incorrect path_or_model_id: '(?P<path2>" + LOCAL_PATH + r")'"
      r"|(?<![^\s'\"(])(?P<path3>" + LOCAL_PATH + r") is not a local folder and is not a valid model identifier"
      r"|(?<![^\s'\"(])(?P<path4>" + LOCAL_PATH + r") does not appear to have a file named",
      title="The adapter directory {path} holds no adapter weights (adapter_model.safetensors or .bin)",
      root_cause="peft read the adapter's config but found no adapter_model.safetensors or adapter_model.bin beside it, so it took "
      "the directory for a Hugging Face Hub repo id: the save wrote only the config (interrupted, a full disk, a "
      "ZeRO-3 save that never gathered the weights) or the weights were not copied with it.",
      fix="ls -la -- {path}    # adapter_config.json without adapter_model.safetensors / adapter_model.bin\n"
      "dsv3-preflight lora scan {path}    # judges every adapter there the way peft loads it\n"
      "dsv3-preflight run --only lora.output_dir,lora.deepspeed_config",
      check="lora.output_dir", tier=1,
      example="huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
      "'/out/checkpoint-100'. Use `repo_type` argument if needed.",
      source="peft/utils/save_and_load.py (load_peft_weights); produced here: PeftModel.from_pretrained on a directory "
      "holding only adapter_config.json", requires="peft_weights"),
    # transformers reading a model's config.json that is no JSON (a download cut short, a Git LFS pointer, a hand edit
    # such as the model_type change Kimi-K2 needs): configuration_utils.py's own words after the JSONDecodeError.
    # Produced here by AutoConfig.from_pretrained on a config.json cut mid-object
    S(id="hf.config_not_json", cls="config", kind="cause", needles=(b"is not a valid JSON file",),
      pattern=r"It looks like the config file at '(?P<path>[^'{}]+)' is not a valid JSON file",   # not the raise in the source
      title="The model's config file is not valid JSON: {path}",
      root_cause="transformers could not parse the model's config.json: the download was cut short, the file is a Git LFS pointer "
      "instead of the file, or an edit broke it. Every rank that builds the model fails the same way.",
      fix="python -m json.tool {path} >/dev/null    # names the line and column where it breaks\n"
      "head -c 300 {path}    # 'version https://git-lfs' is a pointer: git lfs pull in the model repo\n"
      "dsv3-preflight run --only lora.targets --model-path \"$(dirname -- {path})\" --lora-targets "
      "\"${LORA_TARGETS:?the lora_target of the run, e.g. q_a_proj,kv_b_proj}\"    # reads config.json as the run will",
      check="lora.targets", tier=1,
      example="OSError: It looks like the config file at '/models/DeepSeek-V3/config.json' is not a valid JSON file.",
      source="transformers configuration_utils.py (PretrainedConfig._get_config_dict); produced here with a cut config.json"),
    S(id="hf.local_path_missing", cls="config", kind="cause", needles=(b"Repo id must be in the form", b"Incorrect path_or_model_id",
                                                                       b"is the correct path to a directory", b"is not a local folder",
                                                                       b"does not appear to have a file named", b"Error no file named",
                                                                       b"Should have a `model_type` key"),
      pattern=r"Repo id must be in the form 'repo_name' or 'namespace/repo_name': '(?P<path>" + LOCAL_PATH + r")'"
      r"|Incorrect path_or_model_id: '(?P<path2>" + LOCAL_PATH + r")'"
      r"|make sure '(?P<path3>" + LOCAL_PATH + r")' is the correct path to a directory containing (?:a (?P<file>[\w.-]+\.\w+) file|all relevant files)"
      r"|(?<![^\s'\"(])(?P<path4>" + LOCAL_PATH + r") is not a local folder and is not a valid model identifier"
      r"|(?<![^\s'\"(])(?P<path5>" + LOCAL_PATH + r") does not appear to have a file named (?P<file2>[\w./-]+?)\.?(?= Checkout|$)"
      r"|Error no file named (?P<file3>.+?), found in directory (?P<path6>" + LOCAL_PATH + r"?)\.?$"
      r"|Unrecognized model in (?P<path7>" + LOCAL_PATH + r"?)\. Should have a `model_type` key",
      title="Local path {path} does not hold the files to load[[ ({file} missing)]]",
      root_cause="The job loads the model, its tokenizer or an adapter from a local path, but on this node that directory does not exist "
      "or lacks the file the library needs, so transformers took the path for a Hugging Face Hub repo id and failed. "
      "A multi-node job needs the directory at the same path on every node (shared storage, or the same copy), and "
      "a relative path resolves from the directory each node's launcher starts in.",
      fix="ls -la -- {path}    # on every node: the directory must exist with config.json, the tokenizer files and the weights\n"
      "dsv3-preflight run --all-nodes --only lora.targets --model-path {path} --lora-targets \"${LORA_TARGETS:?comma-separated module names}\"",
      check="lora.targets", tier=1,
      example="OSError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': './Model_TH/Bloom_6B4_zh/'. Use `repo_type` argument if needed.",
      source="https://github.com/X-jun-0130/LLM-Pretrain-FineTune/issues/4; transformers/utils/hub.py (cached_files), "
      "huggingface_hub/utils/_validators.py (validate_repo_id)",
      # peft chains its own error to the Hub's: the adapter directory is the more precise cause
      consequence_of=("peft.adapter_config_missing",)),
    S(id="deepspeed.batch_mismatch", cls="config", kind="cause", needles=(b"Check batch related parameters", b"train_batch_size is not equal to"),
      pattern=r"Check batch related parameters|train_batch_size is not equal to micro_batch_per_gpu",
      title="DeepSpeed batch sizes do not add up",
      root_cause="train_batch_size must equal micro_batch_per_gpu × gradient_accumulation_steps × world_size; the config was "
      "written for another number of GPUs (or the world size is not what the config assumes).",
      fix="# set train_batch_size and train_micro_batch_size_per_gpu to \"auto\" with the HF Trainer, or recompute them for this world size\n"
      + DS_CONFIG_FIX, check="lora.deepspeed_config", tier=1,
      example="[rank0]: AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size 8 != 2 * 1 * 1",
      source="https://github.com/deepspeedai/DeepSpeed/issues/6914 (deepspeed/runtime/config.py)"),
    S(id="deepspeed.config_check", cls="config", kind="cause", needles=(b"has to be greater than 0", b"needs to be provided", b"DeepSpeedConfig: ",
                                                                       b"cannot be simultaneously enabled", b"bfloat16 mode is only enabled",
                                                                       b"Duplicate keys in DeepSpeed config", b"untested ZeRO Optimizer",
                                                                       b"'max_grad_norm' is not supported", b"must be divisible by micro-batch",
                                                                       b"_master_weights_and_grads is only supported", b"Partial offloading only supported",
                                                                       b"Invalid communication_data_type", b"fp16 is not enabled but",
                                                                       b"requires dynamic loss scaling", b"ZeRO inference only makes sense",
                                                                       b"invalid tag_validation", b"loss_scale must be",
                                                                       b"is not a supported DeepSpeed Optimizer", b"not supported with Stage 3"),
      pattern=r"(?P<what>(?:Train batch size|Micro batch size per gpu|Gradient accumulation steps): -?\w+ has to be greater than 0"
      r"|Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"
      r"|DeepSpeedConfig: (?:\w+ is not defined|Maximum supported ZeRO stage is \d+)"
      r"|bfloat16 and fp16 modes cannot be simultaneously enabled|bfloat16 mode is only enabled for Zero"
      r"|Duplicate keys in DeepSpeed config|You are using an untested ZeRO Optimizer"
      r"|'max_grad_norm' is not supported as an optimizer parameter|Train batch size must be divisible by micro-batch data parallelism"
      r"|\w+_master_weights_and_grads is only supported with ZeRO|Partial offloading only supported for ZeRO Stage 3"
      r"|Invalid communication_data_type|(?:The )?fp16 is not enabled but (?:one or several model parameters have dtype of fp16|dtype on parameters not fp16)"
      r"|DeepSpeed \w+ optimizer requires dynamic loss scaling|ZeRO inference only makes sense with ZeRO Stage 3"
      r"|Checkpoint config contains invalid tag_validation|fp16\.\w+ must be [^.\n]+|\S+ is not a supported DeepSpeed Optimizer"
      r"|MoE not supported with Stage 3|Native DeepSpeed MoE is not supported with ZeRO Stage 3)",
      title="DeepSpeed refused a value of its config: {what}",
      root_cause="DeepSpeed's own consistency checks (deepspeed/runtime/config.py and engine.py) refused the JSON: a batch size "
      "that is 0 or missing, fp16 and bf16 both on, an option this ZeRO stage or this version does not support, an "
      "untested optimizer under ZeRO, or fp16 off while the model's weights are fp16.",
      fix="# correct the value DeepSpeed names above in the DeepSpeed JSON (\"auto\" lets the HF Trainer fill batch sizes and precision)\n"
      + DS_CONFIG_FIX, check="lora.deepspeed_config", tier=1,
      example="AssertionError: bfloat16 and fp16 modes cannot be simultaneously enabled",
      source="deepspeed/runtime/config.py (_batch_assertion, _do_error_check, DeepSpeedConfig.__init__); deepspeed/runtime/engine.py"),
    S(id="hf.deepspeed_mismatch", cls="config", kind="cause", needles=(b"DeepSpeed config values that mismatch",),
      pattern=r"Please correct the following DeepSpeed config values that mismatch",
      title="DeepSpeed config values contradict the TrainingArguments",
      root_cause="The DeepSpeed JSON hard-codes values (batch size, gradient accumulation, learning rate, fp16/bf16) that differ "
      "from the trainer's arguments (or accelerate's), sometimes only in type (\"8\" as a string against 8).",
      fix="# set the conflicting DeepSpeed values to \"auto\" (a number, not a string, where a number is meant)\n" + DS_CONFIG_FIX,
      check="lora.deepspeed_config", tier=1,
      example="ValueError: Please correct the following DeepSpeed config values that mismatch TrainingArguments values:",
      source="https://github.com/CarperAI/trlx/issues/376 (transformers/integrations/deepspeed.py; accelerate/utils/dataclasses.py "
      "'... that mismatch kwargs')"),
    S(id="deepspeed.config_validation", cls="config", kind="cause", needles=(b"validation error", b"extra fields not permitted", b"Extra inputs are not permitted",
                                                                            b"DeepSpeedConfig", b"ZeRORuntimeException", b"DeepSpeedConfigError"),
      pattern=r"validation errors? for (?P<model>DeepSpeed\w*|\w*Zero\w*Config|\w*Config)\b|extra fields not permitted|Extra inputs are not permitted"
      r"|DeepSpeedConfig: (?!vocabulary size|In FP16 mode|In FP32 mode|this format of ZeRO optimization setup is deprecated)"
      r"|DeepSpeedConfigError|ZeRORuntimeException",
      title="DeepSpeed rejected the config[[ ({model})]]",
      root_cause="The DeepSpeed JSON has keys this DeepSpeed version does not know (written for another version) or a "
      "combination it refuses (ZeRO-Offload with a client optimizer, ZeRO without fp16 on old versions).",
      fix="python -c 'import deepspeed; print(deepspeed.__version__)'\n"
      "# remove or rename the keys named above for this version; for ZeRO-Offload use DeepSpeedCPUAdam or set zero_force_ds_cpu_optimizer false\n"
      + DS_CONFIG_FIX, check="lora.deepspeed_config", tier=1,
      example="ValidationError: 3 validation errors for DeepSpeedZeroConfig",
      source="https://github.com/deepspeedai/DeepSpeed/issues/3827 (deepspeed/runtime/config_utils.py; the 'DeepSpeedConfig: ' "
      "lines DeepSpeed logs as warnings in config.py and zero/config.py are not errors)"),
    S(id="hf.zero3_device_map", cls="config", kind="cause", needles=(b"not compatible with `low_cpu_mem_usage", b"not compatible with passing a `device_map`"),
      pattern=r"Zero-3 is not compatible with (?:`low_cpu_mem_usage=True` or with )?passing a `device_map`",
      title="ZeRO-3 combined with device_map / low_cpu_mem_usage",
      root_cause="Under ZeRO-3 the model must be created by DeepSpeed's zero.Init, not placed with a device_map.",
      fix="# drop device_map / low_cpu_mem_usage from from_pretrained when training with ZeRO-3\n" + DS_CONFIG_FIX,
      check="lora.deepspeed_config", tier=1,
      example="ValueError: DeepSpeed Zero-3 is not compatible with `low_cpu_mem_usage=True` or with passing a `device_map`.",
      source="transformers/modeling_utils.py; transformers/integrations/accelerate.py (5.x wording)"),
    S(id="hf.precision_unsupported", cls="config", kind="cause", needles=(b"doesn't support bf16", b"--tf32 requires Ampere", b"can only be used on CUDA",
                                                                          b"is not supported on your device"),
      pattern=r"Your setup doesn't support bf16/gpu|--tf32 requires Ampere or a newer GPU arch"
      r"|FP16 Mixed precision training with AMP or APEX \(`--fp16`\) and FP16 half precision evaluation \(`--fp16_full_eval`\) can only be used on CUDA"
      r"|Type (?P<dtype>fp16|bf16) is not supported on your device",
      title="The precision asked for is not supported on this GPU[[ ({dtype})]]",
      root_cause="bf16 and tf32 need an Ampere or newer GPU (compute capability 8.0: A100, H100; not V100, T4 or RTX 20xx) and "
      "CUDA 11 or later; fp16 needs a CUDA device. The trainer (or DeepSpeed) refuses the precision on this hardware.",
      fix="nvidia-smi --query-gpu=name,compute_cap --format=csv    # bf16 and tf32 need compute capability 8.0 or newer\n"
      "# on older GPUs train with --fp16 (and fp16 in the DeepSpeed JSON) instead of --bf16, and drop --tf32\n"
      "dsv3-preflight run --only gpu.inventory",
      check="gpu.inventory", tier=1,
      example="ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, using Ampere GPU with cuda>=11.0",
      source="transformers/training_args.py (__post_init__); deepspeed/runtime/engine.py ('Type bf16 is not supported on your device.')"),
    S(id="hf.training_arguments_invalid", cls="config", kind="cause", needles=(b"--load_best_model_at_end requires", b"At most one of fp16 and bf16",
                                                                              b"requires non-zero --", b"requires either non-zero --", b"_steps must be an integer",
                                                                              b"requires an eval strategy", b"Expected value warmup_steps",
                                                                              b"--dataloader_prefetch_factor can only be set", b"as 'steps' requires a positive"),
      pattern=r"--load_best_model_at_end requires the (?:save and eval strategy to match|saving steps to be a (?:round )?multiple)"
      r"|At most one of fp16 and bf16 can be True|(?:evaluation|logging) strategy \S+ requires (?:either )?non-zero --\w+"
      r"|--(?:logging|eval|save)_steps must be an integer|lr_scheduler_type \w+ requires an eval strategy"
      r"|Expected value warmup_steps >= 0|--dataloader_prefetch_factor can only be set|Setting `strategy` as 'steps' requires a positive value",
      title="The trainer's arguments contradict each other",
      root_cause="transformers' TrainingArguments refuses the combination at start-up, before any GPU work: --load_best_model_at_end "
      "needs the same --eval_strategy and --save_strategy (and --save_steps a multiple of --eval_steps), only one of "
      "--fp16/--bf16, a step strategy needs its steps.",
      fix="# make the arguments named above agree (same eval and save strategy, save_steps a multiple of eval_steps, one of fp16/bf16)\n"
      "grep -n -E -e '--(eval|save|logging)_(strategy|steps)|--(fp16|bf16)' \"${LAUNCH_SCRIPT:?the script or YAML that starts training}\"",
      check=None, tier=1,
      example="ValueError: --load_best_model_at_end requires the save and eval strategy to match, but found",
      source="transformers/training_args.py (TrainingArguments.__post_init__)"),
    S(id="accelerate.deepspeed_batch_size_unknown", cls="config", kind="cause",
      needles=(b"requires you to pass at least one of training or evaluation dataloaders",),
      pattern=r"When using DeepSpeed,? `accelerate\.prepare\(\)` requires you to pass at least one of training or evaluation "
      r"dataloaders",
      title="accelerate cannot fill DeepSpeed's micro-batch size: prepare() got no dataloader and the config's "
      "train_micro_batch_size_per_gpu is not a number",
      root_cause="Under DeepSpeed, accelerate's prepare() takes train_micro_batch_size_per_gpu from a dataloader passed to it in "
      "the same call; the script prepared the model and optimizer without one, and the DeepSpeed config (or the "
      "accelerate config's deepspeed section) leaves the value \"auto\" or unset.",
      fix="grep -n 'train_micro_batch_size_per_gpu' \"${DS_CONFIG:?path of the DeepSpeed JSON}\"    # must be a number here\n"
      "# set it to the per-GPU batch size, or pass the train dataloader in the same accelerator.prepare(...) call\n"
      + DS_CONFIG_FIX,
      check="lora.deepspeed_config", tier=1,
      example="ValueError: When using DeepSpeed, `accelerate.prepare()` requires you to pass at least one of training or "
      "evaluation dataloaders with `batch_size` attribute returning an integer value or alternatively set an integer "
      "value in `train_micro_batch_size_per_gpu` in the deepspeed config file",
      source="accelerate/accelerator.py (_prepare_deepspeed); produced here with accelerate 1.15.0 and DeepSpeed 0.19.8 on "
      "the CPU accelerator (a DeepSpeedPlugin with \"auto\", prepare(model, optimizer))"),
    S(id="launcher.deepspeed_plugin_conflict", cls="config", kind="cause", needles=(b"following accelerate config variables will be ignored",
                                                                                   b"Please specify the ZeRO optimization config", b"when using DeepSpeed",
                                                                                   b"has `None` as batch size",
                                                                                   b"in the config file and in the code at the same time",
                                                                                   b"without specifying an optimizer", b"without specifying a scheduler",
                                                                                   b"customize device placements with DeepSpeed", b"`--mixed_precision` arg cannot be set",
                                                                                   b"in the DeepSpeed config", b"DeepSpeed does not support clipping",
                                                                                   b"DeepSpeed currently only supports", b"is not supported in DeepSpeed",
                                                                                   b"To use DeepSpeed you must pass", b"optimizer is supported with DeepSpeed"),
      pattern=r"When using `deepspeed_config_file`, the following accelerate config variables will be ignored"
      r"|Please specify the ZeRO optimization config in the DeepSpeed config"
      r"|You can't use same `Accelerator\(\)` instance with multiple models when using DeepSpeed"
      r"|has `None` as batch size\. Please set an integer value in `train_micro_batch_size_per_gpu`"
      r"|You cannot (?:specify an? (?:optimizer|scheduler) in the config file and in the code at the same time|create a `Dummy(?:Optim|Scheduler)` without specifying)"
      r"|You can't customize device placements with DeepSpeed|`--mixed_precision` arg cannot be set to"
      r"|Do not set `gradient_accumulation_steps` in the DeepSpeed config|DeepSpeed does not support clipping gradients by value"
      r"|DeepSpeed currently only supports single optimizer|Currently only one optimizer is supported with DeepSpeed"
      r"|is not supported in DeepSpeed\. `precision` must be one of|To use DeepSpeed you must pass in a DeepSpeed config",
      title="accelerate / Lightning refused this DeepSpeed setup",
      root_cause="The integration that drives DeepSpeed (accelerate's DeepSpeedPlugin, Lightning's DeepSpeedStrategy) found the "
      "DeepSpeed JSON contradicting the launch arguments or the code: a value set in both places, an optimizer or "
      "scheduler defined twice, or a precision it cannot hand to DeepSpeed.",
      fix="# keep each setting in one place: the DeepSpeed JSON (\"auto\" where the trainer decides) or the accelerate config / trainer arguments\n"
      + DS_CONFIG_FIX, check="lora.deepspeed_config", tier=1,
      example="ValueError: When using `deepspeed_config_file`, the following accelerate config variables will be ignored: "
      "['gradient_accumulation_steps', 'zero_stage'].",
      source="accelerate/utils/dataclasses.py (DeepSpeedPlugin); accelerate/accelerator.py; lightning/pytorch/strategies/deepspeed.py"),
    S(id="deepspeed.auto_unresolved", cls="config", kind="cause", needles=(b": 'auto'", b"without `auto`", b"fill out the following `auto` entries"),
      pattern=r"(?:could not convert string to float|invalid literal for int\(\) with base 10): 'auto'"
      r"|`(?P<key>[\w.]+)` not found in kwargs\. Please specify `[\w.]+` without `auto`"
      r"|not possible to automatically fill out the following `auto` entries",
      title="A DeepSpeed value is still \"auto\"[[ ({key})]]",
      root_cause="\"auto\" in a DeepSpeed JSON is filled in only by the HF Trainer (or accelerate) from their arguments; here "
      "DeepSpeed received the string itself: the JSON is used by a loop that calls deepspeed.initialize directly, by "
      "zero.Init before the Trainer filled it, or for a key nothing fills.",
      fix="grep -n '\"auto\"' \"${DS_CONFIG:?path of the DeepSpeed JSON}\"    # every value still auto\n"
      "# replace them with numbers when DeepSpeed is not driven by the HF Trainer / accelerate\n" + DS_CONFIG_FIX,
      check="lora.deepspeed_config", tier=1,
      example="ValueError: could not convert string to float: 'auto'",
      source="deepspeed/runtime/config.py reading numbers; accelerate/utils/dataclasses.py (fill_match); "
      "transformers/integrations/deepspeed.py (hidden_size auto entries)"),
    S(id="deepspeed.auto_compared", cls="config", kind="cause", needles=(b"not supported between instances of",),
      pattern=r"not supported between instances of '(?:str' and '(?:int|float)|(?:int|float)' and 'str)'",
      title="A DeepSpeed value is still \"auto\" (a string compared with a number)",
      root_cause="Inside DeepSpeed a config value is compared with a number but is a string: an HF-style \"auto\" that nothing "
      "filled in (a loop calling deepspeed.initialize directly, or zero.Init before the Trainer), or a number written "
      "in quotes.",
      fix="grep -n -E '\"auto\"|: \"[0-9.e-]+\"' \"${DS_CONFIG:?path of the DeepSpeed JSON}\"    # values that are strings\n"
      "# write numbers without quotes, and replace auto unless the HF Trainer / accelerate drives DeepSpeed\n" + DS_CONFIG_FIX,
      check="lora.deepspeed_config", tier=1,
      example="TypeError: '>' not supported between instances of 'str' and 'float'",
      source="deepspeed/runtime/engine.py (gradient_clipping() > 0.0 and friends on an unresolved \"auto\")",
      requires="ds_any"),
    S(id="config.ds_config_path", cls="config", kind="cause", needles=(b"Expected a string path to an existing deepspeed config",
                                                                      b"path to a DeepSpeed config but the path does not exist", b"No such file or directory"),
      pattern=r"Expected a string path to an existing deepspeed config, or a dictionary,? or a (?:base64 encoded string|valid base64)\.?"
      r"(?: Received: ?(?P<path>\S+))?|path to a DeepSpeed config but the path does not exist: (?P<path2>\S+)"
      r"|No such file or directory: '(?P<path3>[^']*(?:ds_config|deepspeed|zero\d?)[^']*\.json)'",
      title="The DeepSpeed config file does not exist[[ ({path})]]",
      root_cause="The path given with --deepspeed (or in the accelerate config) does not name an existing file from the "
      "process's working directory (a relative path started elsewhere, a typo, a file not shipped to every node), so "
      "the library tried to read it as JSON or base64 and failed.",
      fix="ls -l -- \"${DS_CONFIG:?the DeepSpeed JSON path as passed}\"    # from the directory the launcher starts in, on every node\n"
      "# pass an absolute path that exists on all nodes\n" + DS_CONFIG_FIX,
      check="lora.deepspeed_config", tier=1,
      example="ValueError: Expected a string path to an existing deepspeed config, or a dictionary, or a base64 encoded string. Received: ds_config.json",
      source="accelerate/utils/deepspeed.py (HfDeepSpeedConfig); deepspeed/runtime/config.py; lightning/pytorch/strategies/deepspeed.py"),
    S(id="config.ds_json_unreadable", cls="config", kind="cause", needles=(b"JSONDecodeError", b"Expecting value", b"Expecting property name",
                                                                          b"binascii.Error", b"Incorrect padding", b"UnicodeDecodeError",
                                                                          b"HjsonDecodeError"),
      pattern=r"(?:Hjson|JSON)DecodeError|Expecting (?:value|property name)|binascii\.Error|Incorrect padding|UnicodeDecodeError",
      title="The DeepSpeed/accelerate config file cannot be read",
      root_cause="The config file is not valid JSON (a typo, a trailing comma, an empty file), or the path given does not exist "
      "from the working directory, so the library read the string as base64 and failed.",
      fix="ls -l -- \"${DS_CONFIG:?path of the DeepSpeed JSON}\" && python -m json.tool \"${DS_CONFIG}\" > /dev/null    # shows the first syntax error\n"
      + DS_CONFIG_FIX, check="lora.deepspeed_config", tier=1,
      example="json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
      source="https://github.com/bowang-lab/BioReason/issues/10 (within accelerate/utils/deepspeed.py; its base64 fallback)",
      consequence_of=("config.ds_config_path",), requires="ds_config"),
    S(id="config.exception_in_config_code", cls="config", kind="cause", needles=(b"Error", b"Exception"),
      pattern=r"(?:^|[\s:\]])(?<!raise )(?:[\w.]+\.)?(?P<exc>AssertionError|ValueError|KeyError|TypeError|ValidationError|RuntimeError|Exception)(?::|\s*$)",
      title="Configuration rejected while DeepSpeed/transformers read it ({exc})",
      root_cause="The exception was raised inside DeepSpeed's or the trainer's configuration code: the DeepSpeed JSON or the "
      "arguments that feed it are invalid for this version or contradict each other.",
      fix=DS_CONFIG_FIX, check="lora.deepspeed_config", tier=1,
      example="ValueError: Invalid dtype for torch autocast: fp8",
      source="deepspeed/runtime/config.py (get_torch_autocast_dtype) format string",
      consequence_of=("deepspeed.batch_mismatch", "deepspeed.config_check", "hf.deepspeed_mismatch", "deepspeed.config_validation",
                      "hf.zero3_device_map", "hf.precision_unsupported", "hf.training_arguments_invalid",
                      "launcher.deepspeed_plugin_conflict", "deepspeed.auto_unresolved", "deepspeed.auto_compared",
                      "config.ds_config_path", "config.ds_json_unreadable"),
      requires="ds_config"),
    # torch 2.6 made torch.load(weights_only=True) the default; a checkpoint holding other Python objects (numpy arrays
    # in the Trainer's RNG state, DeepSpeed's loss scaler) is refused where the loading code predates it (a resume
    # under LLaMA-Factory, ms-swift, trl: transformers#40500). torch's message (serialization.py _get_wo_message):
    # "Weights only load failed. This file can still be loaded, ..." and, on its own line, "WeightsUnpickler error:
    # Unsupported global: GLOBAL numpy._core.multiarray._reconstruct was not an allowed global by default". The first
    # line is matched only without that second part, so the finding names the global. Produced here: torch 2.13 loading
    # a file holding numpy's RNG state
    S(id="torch.weights_only_refused", cls="version_drift", kind="cause", needles=(b"Weights only load failed", b"Unsupported global: GLOBAL "),
      pattern=r"WeightsUnpickler error: Unsupported global: GLOBAL (?P<glob>[\w.]+) was not an allowed global"
      r"|Weights only load failed\.(?! This file can still be loaded)",
      title="torch.load refused a checkpoint under weights_only (torch 2.6+'s default)[[: {glob} is not allowed]]",
      root_cause="Since torch 2.6, torch.load unpickles only tensors and an allowlist of types unless told otherwise. This "
      "checkpoint holds another Python object (numpy arrays in the Trainer's RNG state, DeepSpeed's loss scaler, a "
      "class of the script's), and the code loading it (a Trainer resume, DeepSpeed's load_checkpoint, the script) "
      "predates that default or does not allow it: the installed torch is newer than the code that loads the checkpoint.",
      fix="python -m pip list 2>/dev/null | grep -i -E '^(torch|transformers|deepspeed|accelerate|peft) '    # upgrade the "
      "library whose torch.load the traceback shows, or pin torch below 2.6 with it\n"
      "export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1    # or, for checkpoints your own runs wrote only: load them in full, as "
      "before torch 2.6",
      check=None, tier=1,
      example="\tWeightsUnpickler error: Unsupported global: GLOBAL numpy._core.multiarray._reconstruct was not an allowed global "
      "by default. Please use `torch.serialization.add_safe_globals([numpy._core.multiarray._reconstruct])`",
      source="torch/serialization.py (_get_wo_message, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD); "
      "https://github.com/huggingface/transformers/issues/40500; produced here by torch.load of numpy's RNG state"),
    # attn_implementation="flash_attention_2" (LLaMA-Factory's flash_attn: fa2) where flash_attn is missing, too old or
    # there is no CUDA device: transformers' modeling_utils.py says why after one fixed prefix (4.36+; 5.x: "the package
    # for FlashAttention2 doesn't seem to be installed", produced here on a CPU machine without flash_attn). A flash_attn
    # built for another torch fails earlier, on its own import: python.undefined_symbol
    S(id="hf.flash_attention_unavailable", cls="version_drift", kind="cause", needles=(b"FlashAttention2 has been toggled on",),
      pattern=r"FlashAttention2 has been toggled on, but it cannot be used due to the following error: (?P<why>[^.]+)",
      title="Flash Attention 2 was asked for and cannot be used: {why}",
      root_cause="The run sets attn_implementation=flash_attention_2 (LLaMA-Factory: flash_attn: fa2), and this environment "
      "cannot give it: the flash_attn package is not installed or too old for this transformers, or the process sees "
      "no CUDA device. Every rank stops while the model is built.",
      fix="python -c 'import flash_attn; print(flash_attn.__version__)'    # in the training environment, on every node\n"
      "python -m pip list 2>/dev/null | grep -i -E '^(torch|transformers|flash.attn) '    # flash_attn built for this "
      "torch and CUDA\n"
      "# or train without it: attn_implementation=sdpa (LLaMA-Factory: flash_attn: sdpa)",
      check=None, tier=1,
      example="ImportError: FlashAttention2 has been toggled on, but it cannot be used due to the following error: the package "
      "flash_attn seems to be not installed. Please refer to the documentation of "
      "https://huggingface.co/docs/transformers/perf_infer_gpu_one#flashattention-2 to install Flash Attention 2.",
      source="transformers modeling_utils.py (_check_and_adjust_attn_implementation, _flash_attn_2_can_dispatch); produced "
      "here by from_config(attn_implementation='flash_attention_2') without flash_attn"),
    # torchrun (or a launcher) started Python on a script path this node does not have: each rank exits with code 2 at
    # once, and torchrun's summary says only that. CPython's own line (Modules/main.c, pymain_run_file); produced here
    # by torchrun --nproc-per-node 1 on a missing script
    S(id="launch.script_missing", cls="config", kind="cause", needles=(b"can't open file",),
      pattern=r"can't open file '(?P<path>[^']+)': \[Errno 2\] No such file or directory",
      title="The training script is not there: {path}",
      root_cause="Python was started on a script this node does not have at that path: a relative path launched from another "
      "directory, a checkout or shared filesystem missing on this node, or a typo. Every rank on this node exits with "
      "code 2 at once; the other nodes then lose their peers.",
      fix="ls -l -- {path}    # on the node that printed it: the script must be at the same path on every node\n"
      "# dsv3-preflight launch refuses a training script that is not there, on each node (--all-nodes), before torchrun "
      "starts",
      check=None, tier=1,
      example="/usr/bin/python3: can't open file '/workspace/train.py': [Errno 2] No such file or directory",
      source="CPython Modules/main.c (pymain_run_file: \"%ls: can't open file %R: [Errno %d] %s\"); produced here by torchrun "
      "on a missing script"),
    S(id="launch.unrecognized_arguments", cls="config", kind="cause", needles=(b"unrecognized arguments", b"are not used by the HfArgumentParser"),
      pattern=r"error: unrecognized arguments: (?P<args>.+)|Some specified arguments are not used by the HfArgumentParser: (?P<args2>.+)",
      title="The script does not accept the arguments it was launched with[[ ({args})]]",
      root_cause="The launch command passes flags the script (or this version of it) does not define, e.g. torchrun's "
      "--local-rank to a script that expects --local_rank.",
      fix="# remove or rename the flags named above, or upgrade the script; torchrun sets LOCAL_RANK in the environment",
      check=None, tier=1,
      example="train.py: error: unrecognized arguments: --local-rank=0",
      source="argparse; transformers/hf_argparser.py"),
)
