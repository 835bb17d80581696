"""Context: lines that attribute the lines after them (which config loader, which rank).

Keyword records (:class:`.record.Signature`); their place in the table is stated in :mod:`.order`.
"""
from __future__ import annotations

from .record import S, Signature
from .shared import LABELS

SIGNATURES: tuple[Signature, ...] = (
    S(id="elastic.summary_field", cls=None, kind="context", needles=(b"  host      : ", b"  rank      : ", b"  exitcode  : ", b"  time      : "),
      pattern=r"^" + LABELS + r"(?P<field>host|rank|exitcode|time)\s+: (?P<value>\S+)(?: \(local_rank: (?P<local_rank>\d+)\))?",
      title="torchrun failure summary field", example="  rank      : 0 (local_rank: 0)",
      source="torch/distributed/elastic/multiprocessing/errors/__init__.py"),
    S(id="context.ds_config_frame", cls=None, kind="context", needles=(b"deepspeed/runtime/config.py", b"accelerate/utils/deepspeed.py",
                                                                       b"integrations/deepspeed.py", b"transformers/deepspeed.py", b"HfDeepSpeedConfig",
                                                                       b"deepspeed/runtime/zero/config.py", b"deepspeed/runtime/config_utils.py"),
      pattern=r"(?P<ds_any>(?P<ds_config>deepspeed/runtime/(?:zero/)?config(?:_utils)?\.py|accelerate/utils/deepspeed\.py|integrations/deepspeed\.py"
      r"|transformers/deepspeed\.py|HfDeepSpeedConfig))",
      title="a frame inside DeepSpeed/accelerate config loading",
      example='  File "/root/mambaforge/envs/BioReason/lib/python3.12/site-packages/accelerate/utils/deepspeed.py", line 148, in __init__',
      source="https://github.com/bowang-lab/BioReason/issues/10"),
    S(id="context.torch_load_frame", cls=None, kind="context", needles=(b"torch/serialization.py", b"_weights_only_unpickler.py"),
      pattern=r"(?P<torch_load>torch/serialization\.py\", line \d+, in \w*load|torch/_weights_only_unpickler\.py)",
      title="a frame of torch.load reading a checkpoint",
      example='  File "/usr/lib/python3/site-packages/torch/serialization.py", line 1888, in _legacy_load',
      source="torch/serialization.py (traceback frame format of CPython)"),
    S(id="context.peft_weights_frame", cls=None, kind="context", needles=(b"in load_peft_weights",),
      pattern=r"(?P<peft_weights>, in load_peft_weights)",
      title="a frame of peft loading an adapter's weights",
      example='  File "/usr/lib/python3/site-packages/peft/utils/save_and_load.py", line 731, in load_peft_weights',
      source="peft/utils/save_and_load.py (traceback frame format of CPython)"),
    S(id="context.pyspy_thread", cls=None, kind="context", needles=(b"(active): ", b"(idle): ", b"(active+gil): "),   # no quote: JSON escapes it
      pattern=r"^" + LABELS + r"(?P<pyspy>Thread (?:0x[0-9A-Fa-f]+|\d+) \((?:active|idle)[^)]*\): \")",
      title="a thread's header in a py-spy dump (its frames follow, innermost first)",
      example='Thread 71079 (active): "MainThread"',
      source="py-spy dump's output format (src/dump.rs)"),
    S(id="context.rdzv_store_frame", cls=None, kind="context", needles=(b"c10d_rendezvous_backend.py",),
      pattern=r"(?P<rdzv_store>c10d_rendezvous_backend\.py[\\\"]*, line \d+, in _call_store)",
      title="a frame of torchrun's C10d rendezvous backend calling its store",
      example='  File "/opt/conda/lib/python3.9/site-packages/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", line 113, in _call_store',
      source="torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py (traceback frame format of CPython)"),
    S(id="context.ds_engine_frame", cls=None, kind="context", needles=(b"deepspeed/runtime/", b"deepspeed/__init__.py"),
      pattern=r"(?P<ds_any>deepspeed/(?:runtime/[\w/]+\.py|__init__\.py))",
      title="a frame inside DeepSpeed's engine (where an unresolved config value is used)",
      example='  File "/opt/conda/lib/python3.8/site-packages/deepspeed/runtime/engine.py", line 1257, in _take_model_step',
      source="deepspeed/runtime/engine.py (traceback frame format of CPython)"),
)
