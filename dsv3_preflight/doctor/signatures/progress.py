"""Progress: signs that the run was working, set up, or finished.

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from .record import S, Signature

SIGNATURES: tuple[Signature, ...] = (
    # torchrun's agent once every local worker exited 0 (elastic/agent/server/api.py _invoke_run, _exit_barrier): the
    # workers' exit-time lines printed before it are teardown noise of that node (workers_done)
    S(id="elastic.workers_succeeded", cls=None, kind="progress", needles=(b"worker group successfully finished", b"Local worker group finished (",
                                                                           b"Done waiting for other agents"),
      pattern=r"\[[\w-]+\] worker group successfully finished|Local worker group finished \((?:WorkerState\.)?SUCCEEDED\)"
      r"|Done waiting for other agents",
      title="torchrun: this node's workers all exited 0", ends_run=True, succeeded=True, workers_done=True,
      example="INFO:torch.distributed.elastic.agent.server.api:[default] worker group successfully finished. Waiting "
              "300 seconds for other agents to finish.",
      source="torch/distributed/elastic/agent/server/api.py (_invoke_run on WorkerState.SUCCEEDED, _exit_barrier)"),
    # nccl-tests' last line: the test ran to its end, but a run with wrong results ("Out of bounds values : 24 FAILED")
    # prints it too, so it is no sign that the work succeeded
    S(id="nccltests.finished", cls=None, kind="progress", needles=(b"Avg bus bandwidth",), pattern=r"Avg bus bandwidth\s*:\s*[\d.]+",
      title="nccl-tests ran to its end", ends_run=True,
      example="# Avg bus bandwidth    : 95.7821",
      source="nccl-tests src/common.cu (printed after every size, whatever the '#wrong' columns say)"),
    S(id="train.completed", cls=None, kind="progress", needles=(b"exits successfully", b"raining finished", b"raining complete", b"Finished training",
                                                              b"train_runtime", b"Trainer.fit` stopped", b"Reached max steps",
                                                              b"train metrics", b"after training is done"),
      # DeepSpeed's launcher names the process ("Process 1555224 exits successfully."); bare, the words are prose too
      # (a changelog's "now prints more information and exits successfully")
      pattern=r"Process \d+ exits successfully|[Tt]raining (?:finished|completed?)\b(?! iteration)|Finished training|train_runtime"
      r"|Trainer\.fit` stopped"
      r"|Reached max steps|\*{3,} train metrics \*{3,}|\[after training is done\]",
      title="the run finished", ends_run=True, succeeded=True,
      example="work-1: [2023-08-06 05:27:07,537] [INFO] [launch.py:347:main] Process 1555224 exits successfully.",
      source="https://github.com/hiyouga/LlamaFactory/issues/381 (deepspeed/launcher/launch.py); transformers Trainer "
             "(train_runtime, '***** train metrics *****'); Lightning ('`Trainer.fit` stopped'); "
             "Megatron-LM training.py ('[after training is done]')"),
    # printed by ProcessGroupNCCL's destructor when the interpreter exits normally (torch 2.4+): the process reached
    # its end; a rank that crashed also prints it, after its traceback (an error line, so never healthy)
    S(id="torch.exit_without_destroy", cls=None, kind="progress", needles=(b"destroy_process_group() was not called before program exit",
                                                                          b"process group has NOT been destroyed"),
      pattern=r"destroy_process_group\(\) was not called before program exit|process group has NOT been destroyed before we destruct",
      title="a rank exited normally (torch's exit warning: destroy_process_group() was not called)", ends_run=True,
      example="[rank0]:[W825 13:09:39.967659278 ProcessGroupNCCL.cpp:1538] Warning: WARNING: destroy_process_group() was "
              "not called before program exit, which can leak resources. For more info, please see "
              "https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())",
      source="https://github.com/pytorch/examples/pull/1387; torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp "
             "(~ProcessGroupNCCL; torch 2.4-2.5 wording 'process group has NOT been destroyed before we destruct "
             "ProcessGroupNCCL')"),
    # wandb.finish() (at a script's exit) reports the exit code: "(success)" for 0, "(failed N)" otherwise (an error
    # line); wandb <= 0.10 printed "Program ended successfully."
    S(id="train.wandb_finished", cls=None, kind="progress", needles=(b"W&B process to finish", b"Program ended successfully"),
      pattern=r"Waiting for W&B process to finish\.\.\. \(success\)|wandb: Program ended successfully",
      title="the script exited with code 0 (wandb's exit status)", ends_run=True, succeeded=True,
      example="wandb: Waiting for W&B process to finish... (success).",
      source="wandb sdk/wandb_run.py (_display_exit_status: '(success)' when the exit code is 0, else '(failed N)')"),
    # ncclCommDestroy's last line; an abort ends "- Abort COMPLETE" instead (src/init.cc)
    S(id="nccl.destroy_complete", cls=None, kind="progress", needles=(b"Destroy COMPLETE",), pattern=r" - Destroy COMPLETE",
      title="NCCL communicator destroyed in order (destroy_process_group: the rank finished)", ends_run=True,
      example="gpu-a:4242:4242 [0] NCCL INFO comm 0x55d1e0a0 rank 0 nranks 16 cudaDev 0 busId 18000 - Destroy COMPLETE",
      source="NCCL src/init.cc (commDestroy/commReclaim: '%s COMPLETE', Destroy or Abort)"),
    # a multi-node inference server that came up: its engine (and NCCL across the nodes) initialised. SGLang prints its
    # line after a warm-up request succeeded; uvicorn's after the app's start-up (vLLM's OpenAI server) finished
    S(id="serve.ready", cls=None, kind="progress", needles=(b"fired up and ready to roll", b"Application startup complete"),
      pattern=r"The server is fired up and ready to roll!|INFO:\s+Application startup complete\.",
      title="the inference server came up and serves",
      example="[2025-01-08 10:12:41] The server is fired up and ready to roll!",
      source="SGLang srt/entrypoints/http_server.py (_wait_and_warmup, after the warm-up request); uvicorn "
             "lifespan/on.py ('Application startup complete.'), vLLM's OpenAI-compatible server"),
    # vLLM's engine came up: its KV-cache profiling ran the model (a forward over every tensor-parallel rank, their
    # all-reduces included) and the cache was allocated; CUDA graphs were captured. Set-up, before any request
    S(id="vllm.engine_ready", cls=None, kind="progress", needles=(b"blocks: ", b"GPU KV cache size:", b"init engine (profile", b"Graph capturing finished"),
      pattern=r"# (?:GPU|cuda|CUDA|NPU|XPU|HPU) blocks: \d+, # CPU blocks: \d+|GPU KV cache size: [\d,]+ tokens"
      r"|init engine \(profile, create kv cache, warmup model\) took [\d.]+ seconds|Graph capturing finished in [\d.]+ secs",
      title="vLLM's engine came up (the model ran across its ranks, the KV cache was allocated)",
      example="INFO 10-17 09:12:44 distributed_gpu_executor.py:57] # GPU blocks: 27668, # CPU blocks: 4681",
      source="vLLM 0.6 executor/gpu_executor.py and distributed_gpu_executor.py ('# GPU blocks: %d, # CPU blocks: %d'), "
             "worker/model_runner.py ('Graph capturing finished in %.0f secs.'); vLLM v1 kv_cache_utils.py ('GPU KV cache "
             "size: %s tokens') and engine/core.py ('init engine (profile, create kv cache, warmup model) took %.2f seconds')",
      setup=True),
    # DDP logs it at the forward after the first backward (torch/nn/parallel/distributed.py, logger.info): a first
    # step, its gradient all-reduce included, finished
    S(id="ddp.buckets_rebuilt", cls=None, kind="progress", needles=(b"Reducer buckets have been rebuilt",),
      pattern=r"Reducer buckets have been rebuilt in this iteration",
      title="DDP finished its first step (its gradient buckets were rebuilt)",
      example="2023-05-16 21:24:13,031 INFO Reducer buckets have been rebuilt in this iteration.",
      source="torch/nn/parallel/distributed.py (DistributedDataParallel._pre_forward, logger.info after the first "
             "iteration's backward); mmcv's MMDistributedDataParallel prints the same line"),
    # DeepSpeed's engine every steps_per_print optimizer steps (runtime/engine.py _report_progress, rank 0)
    S(id="deepspeed.step_report", cls=None, kind="progress", needles=(b", skipped=",),
      pattern=r"\bstep=\d+, skipped=\d+, lr=",
      title="DeepSpeed reported optimizer steps",
      example="[2024-01-05 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, lr=[0.0001], "
              "mom=[(0.9, 0.999)]",
      source="deepspeed/runtime/engine.py (DeepSpeedEngine._report_progress: log_dist('step={step}, "
             "skipped={self.skipped_steps}, lr={lr}, mom={mom}', ranks=[0]))"),
    S(id="train.metric", cls=None, kind="progress", needles=(b"acc", b"Acc"),
      pattern=r"\b(?:best|val|valid|eval|train|test)?_?[Aa]cc(?:uracy)?(?:@\d+)?['\"]?\s*[:=]\s*-?\d",
      title="an accuracy metric reported",
      example="best_acc: 83.42524509803921",
      source="https://github.com/kubeflow/pytorch-operator/issues/353 (a PyTorchJob's MNIST run); transformers "
             "eval_accuracy; Lightning val_acc"),
    S(id="nccl.init_complete", cls=None, kind="progress", needles=(b"Init COMPLETE",), pattern=r"Init COMPLETE", title="NCCL communicator initialised",
      example="simple-layoutlm:97:176 [0] NCCL INFO comm 0x7ff1ec001060 rank 0 nranks 2 cudaDev 0 busId 100000 - Init COMPLETE",
      source="https://github.com/huggingface/transformers/issues/11658 (NCCL src/init.cc)", setup=True),
    # printed once ncclTransportP2pSetup has connected every ring (tree) channel to its peers: NCCL 2.9-2.21 during
    # init, just before "Init COMPLETE"; 2.22+ (NCCL_RUNTIME_CONNECT=1, the default) at the first collective, so then
    # the connections of a real collective were made. A log cut before "Init COMPLETE" can end on it
    S(id="nccl.connected_all", cls=None, kind="progress", needles=(b"Connected all rings", b"Connected all trees"),
      pattern=r"NCCL INFO Connected all (?:rings|trees)\b", title="NCCL connected its channels to the peers",
      example="dsw-27183-759b57b4d6-kz2vc:261724:362 [0] NCCL INFO Connected all trees",
      source="https://github.com/google-research/distilling-step-by-step/issues/3 (NCCL src/init.cc 2.9-2.21, "
             "src/transport/generic.cc 2.22+: after ncclTransportP2pSetup/ncclTransportRingConnect succeed)", setup=True),
    S(id="nccltests.result_row", cls=None, kind="progress", needles=(b"float", b"half", b"bfloat16", b"double", b"int32", b"int8"),
      pattern=r"(?:^|[:\s])\d+\s+\d+\s+(?:float|half|bfloat16|double|u?int8|u?int32|u?int64)\s+(?:sum|prod|max|min|avg|none|mulsum|\d+)\s+-?\d+\s+[\d.]+"
      r"|(?:^|[:\s])\d+\s+\d+\s+(?:float|half|bfloat16|double|u?int8|u?int32|u?int64)\s+(?:sum|prod|max|min|avg|none|\d+)\s+[\d.]+\s+[\d.]+",
      title="nccl-tests result rows",
      example="   127926280      31981570     float     sum      -1   2560.7   49.96   95.75      0   2556.2   50.05   95.92      0",
      source="nccl-tests src/common.cu"),
    S(id="train.loss", cls=None, kind="progress", needles=(b"loss", b"Loss"),
      pattern=r"['\"]?\b\w*[Ll]oss\w*['\"]?\s*[:=]\s*\(?-?\d|[Ll]oss\s+-?\d+\.\d+|\bloss\b.{0,3}-?\d+\.\d+",
      title="training loss reported",
      example="{'loss': 0.0499, 'grad_norm': 1.1254302714475641, 'learning_rate': 3.591337215792852e-05, 'epoch': 1.25}",
      source="transformers Trainer log"),
    S(id="train.progress_bar", cls=None, kind="progress", needles=(b"it/s]", b"s/it]", b"it/s,", b"s/it,"),
      pattern=r"\b[1-9]\d*/\d+ \[\d+:\d\d",
      title="progress bar advancing",
      example="Training Epoch: 1:   1%|███▉      | 1/79 [00:11<14:38, 11.26s/it]",
      source="https://github.com/meta-llama/llama-cookbook/pull/691 (tqdm format)"),
    S(id="train.finished", cls=None, kind="progress", needles=(b"SUCCEEDED", b"Saving model checkpoint", b"save model", b"Running training", b"initialize [end]", b"SUCCESS", b"RunningAvgSamplesPerSec",
                                                             b"samples/s", b"tokens/s", b"global_step", b"epoch: [", b"checkpoint of size",
                                                             b"mg/sec", b"mages/sec", b"finished iteration"),
      # a state as a log prints it ('"state": "SUCCEEDED"', 'status.SUCCEEDED', "Status for job 'x': SUCCEEDED"), not a
      # sentence about one ("The job reports SUCCEEDED." in a runbook is no run that succeeded)
      pattern=r"(?<![a-z] )SUCCEEDED|Saving model checkpoint|save model|Running training|DeepSpeedZeRoOffload initialize \[end\]|SUCCESS Step|RunningAvgSamplesPerSec"
      r"|[\d.]+ (?:samples|tokens)/s(?:ec(?:ond)?)?\b|global_step|epoch: \[\d"
      r"|\b(?:Img|[Ii]mages?)/sec(?: per \w+)?:? ?[\d.]+|[\d.]+ img/sec per \w+|Total img/sec on \d+"
      r"|(?:Model|Adapter|Recipe) checkpoint of size [\d.]+ GiB saved to"   # torchtune's checkpointers
      r"|Training finished iteration \d+",   # Ray Train's report after each iteration
      title="the run progressed",
      example="Saving model checkpoint to saves/llama3-8b/lora/sft/checkpoint-500",
      source="transformers Trainer (_save_checkpoint's log line); throughput: Horovod's and BytePS's "
             "pytorch_synthetic_benchmark.py ('Iter #0: 181.2 img/sec per GPU', 'Img/sec per GPU: ...', 'Total img/sec "
             "on 16 GPU(s): ...'), tf_cnn_benchmarks ('total images/sec: ...'), a per-rank 'samples/second' "
             "(https://github.com/aws/aws-k8s-tester/pull/467); Ray Train / Tune's 'Training finished iteration N at ...'"),
)
