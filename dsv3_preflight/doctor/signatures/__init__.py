"""The signature table: log messages → failure class, root cause, fix and the preflight check that catches it.

One keyword record per message (:class:`.record.Signature`, its fields described there), in the module of its cause
family (``benign``, ``cuda_fabric``, ``version_drift``, ``pci_rank_dup``, ``port_rendezvous``, ``nic_iface``,
``nccl_transport``, ``gpu_fault``, ``gpu_oom``, ``host_resources``, ``lora_empty``, ``config``, ``ray_train``, ``nccl_hang``,
``consequences``, ``context``, ``progress``); :mod:`.order` states the order the matcher tries them in. The collective
probe's decoder reads the same records (a record's ``decode``), so a library message is added in one place.

Signatures were written from the development part of ``tests/data/doctor/corpus`` and from the libraries' source
text (NCCL, torch, DeepSpeed, PEFT, transformers, safetensors, glibc/kernel messages), never from the held-out part
(``benchmarks/bench_doctor_accuracy.py`` measures them there).

This package re-exports every name the doctor and its tests use, so ``from dsv3_preflight.doctor.signatures import
SIGNATURES`` reads the whole table.
"""
from __future__ import annotations

from .classes import (
    ACTOR_OF,
    ACTORS,
    CLASS_ACTOR,
    CLASS_TITLES,
    CLASSES,
    EXTRA_CLASSES,
    GATE_CLASS,
    GPU_FAULT_CLASS,
    NO_PREFLIGHT_CHECK,
    RAY_TRAIN_CLASS,
)
from .derived import DERIVED_NAMES
from .lines import ERROR_NEEDLES, ERROR_RE, QUIET_RE, STOPWORDS
from .order import DERIVED, FAMILIES, SIGNATURES
from .preflight import (
    CHECK_CLASS,
    GATE_CAUSE_RE,
    GATE_ERROR_NOTE,
    GATE_LAUNCHED,
    GATE_NO_GO,
    GATE_SIGNATURES,
    gate_rerun,
    gate_signature,
)
from .record import KINDS, Decode, S, Signature
from .shared import (
    ALLREDUCE_FIX,
    DRIVER_FIX,
    DS_CONFIG_FIX,
    FM_FIX,
    GLOO_BOUND_UNREACHABLE,
    GLOO_MESH_CAUSES,
    HOROVODRUN_FIX,
    HOST_NETWORK_FIX,
    IFACE_FIX,
    LABELS,
    LAUNCH_FIX,
    LOCAL_PATH,
    OMPI_IFACE_FIX,
    RANK_DUP_FIX,
    RAY_IP_FIX,
    SHM_FIX,
    STORE_FIX,
    STORE_FIX_AT,
    UNREACHABLE_IFACE,
    VERSIONS_FIX,
    XID_APPLICATION,
    XID_FAULTS,
    xid_texts,
)

__all__ = [
    "ACTOR_OF", "ACTORS", "ALLREDUCE_FIX", "CHECK_CLASS", "CLASS_ACTOR", "CLASS_TITLES", "CLASSES", "DERIVED",
    "DERIVED_NAMES", "DRIVER_FIX", "DS_CONFIG_FIX", "Decode", "ERROR_NEEDLES", "ERROR_RE", "EXTRA_CLASSES", "FAMILIES",
    "FM_FIX", "GATE_CAUSE_RE", "GATE_CLASS", "GATE_ERROR_NOTE", "GATE_LAUNCHED", "GATE_NO_GO", "GATE_SIGNATURES",
    "GLOO_BOUND_UNREACHABLE", "GLOO_MESH_CAUSES", "GPU_FAULT_CLASS", "HOROVODRUN_FIX", "HOST_NETWORK_FIX", "IFACE_FIX",
    "KINDS", "LABELS", "LAUNCH_FIX", "LOCAL_PATH", "NO_PREFLIGHT_CHECK", "OMPI_IFACE_FIX", "QUIET_RE", "RANK_DUP_FIX",
    "RAY_IP_FIX", "RAY_TRAIN_CLASS", "S", "SHM_FIX", "SIGNATURES", "STOPWORDS", "STORE_FIX", "STORE_FIX_AT", "Signature",
    "UNREACHABLE_IFACE", "VERSIONS_FIX", "XID_APPLICATION", "XID_FAULTS", "by_id", "gate_rerun", "gate_signature",
    "xid_texts",
]


def by_id() -> dict[str, Signature]:
    return {s.id: s for s in SIGNATURES}
