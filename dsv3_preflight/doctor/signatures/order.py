"""The one place that states the signature table's order: the families in the order the matcher tries them.

On one line the first matching signature wins (:class:`dsv3_preflight.doctor.triage._Matcher`), so order is
meaning: benign lines come first (a cause never takes a line that only looks alarming), then the causes by family,
then what only follows a cause (consequences without a class), the context lines, and the signs of progress last.
Within a family its module's own order holds (specific entries before general ones). A new signature goes into its
family's module; a new family into ``FAMILIES`` here.
"""
from __future__ import annotations

from . import (
    benign,
    config,
    consequences,
    context,
    cuda_fabric,
    derived,
    gpu_fault,
    gpu_oom,
    host_resources,
    lora_empty,
    nccl_hang,
    nccl_transport,
    nic_iface,
    pci_rank_dup,
    port_rendezvous,
    progress,
    ray_train,
    version_drift,
)
from .preflight import GATE_NO_GO, GATE_SIGNATURES
from .record import Signature

#: the families, in the order the matcher tries them
FAMILIES: tuple[tuple[str, tuple[Signature, ...]], ...] = (
    ("benign", benign.SIGNATURES),
    ("cuda_fabric", cuda_fabric.SIGNATURES),
    ("version_drift", version_drift.SIGNATURES),
    ("pci_rank_dup", pci_rank_dup.SIGNATURES),
    ("port_rendezvous", port_rendezvous.SIGNATURES),
    ("nic_iface", nic_iface.SIGNATURES),
    ("nccl_transport", nccl_transport.SIGNATURES),
    ("gpu_fault", gpu_fault.SIGNATURES),
    ("gpu_oom", gpu_oom.SIGNATURES),
    ("host_resources", host_resources.SIGNATURES),
    ("lora_empty", lora_empty.SIGNATURES),
    ("config", config.SIGNATURES),
    ("ray_train", ray_train.SIGNATURES),
    ("nccl_hang", nccl_hang.SIGNATURES),
    ("consequences", consequences.SIGNATURES),
    ("context", context.SIGNATURES),
    ("progress", progress.SIGNATURES),
)

#: the line signatures, in matching order
SIGNATURES: tuple[Signature, ...] = tuple(sig for _family, sigs in FAMILIES for sig in sigs)

#: findings made from more than one line, then the preflight's own verdict (one per built-in check, and its NO-GO
#: line): documented and tested like the line signatures, never tried by the matcher
DERIVED: tuple[Signature, ...] = derived.SIGNATURES + GATE_SIGNATURES + (GATE_NO_GO,)
