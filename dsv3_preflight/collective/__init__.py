"""The collective probe: torch.distributed init + all_reduce with a known sum, under a hard timeout.

Public API (importing this package does not import torch; the ranks run in child processes)::

    from dsv3_preflight.collective import probe_node, combine

    outcome = probe_node(master_addr="10.0.0.1", master_port=39500, world_size=3, node_rank=1,
                         nproc_per_node=1, rank_offset=None, backend="gloo", timeout_s=60.0,
                         sweep=False, env=None)
    verdict = combine([outcome_node0, outcome_node1, outcome_node2], expected_world=3)

``probe_node`` runs this node's ranks ``rank_offset .. rank_offset+nproc_per_node-1`` (default
``rank_offset = node_rank * nproc_per_node``) as ``python -m dsv3_preflight.collective.probes.worker``
children that the tool owns. Global rank 0 hosts the rendezvous TCPStore on ``master_port``. Each
rank goes through the phases started → imported → store_connected → all_joined → pg_up →
first_collective → steady_state → [sweep_done] → done. The workers give up on their own shortly
before ``timeout_s``; at ``timeout_s`` whatever still runs is SIGKILLed by PID (with its
children), so the call returns within ``timeout_s`` plus a fraction of a second. It never raises for a
failed probe; it returns JSON-able data:

- ``ranks``: per rank ``rank, pid, host, last_phase, phases {phase: seconds since start}, error
  {exc_type, message, phase}, findings [{kind, cause, remediation, line}] (decoded torch/Gloo/NCCL
  errors), never_joined (ranks this rank saw missing from the store), timings {import_s,
  store_connect_s, rendezvous_s, init_s, first_collective_s, steady_s, total_s}, sum_ok,
  expected_sum, got_sum, device, pci_bus_id (on GPU), nccl_interfaces (parsed from NCCL_DEBUG=INFO
  "NET/Socket : Using [0]eth0:…"), killed (why, when the tool ended it), log_tail``;
- ``rank_map`` (rank → host, pci_bus_id, as registered in the store; from the node holding rank 0),
  ``sweep`` (rows size_bytes, time_us, algbw_gbps, busbw_gbps; nccl-tests definitions),
  ``route_interface`` (the interface the kernel uses towards master_addr), ``env`` (NCCL_/GLOO_
  settings), ``elapsed_s``, ``deadline_hit``, ``ok``.

``combine(outcomes, expected_world)`` judges the outcomes that came back: ``ok``, ``summary``,
``never_joined`` (ranks no outcome covers or that never registered), ``stuck`` ({rank: last phase}),
``sum_ok``, ``findings`` (with the ranks that printed them), ``timings`` (max over ranks),
``rank_map``, ``nccl_interfaces`` by host, ``sweep``.

For a Ray gang: one actor per node (placement group STRICT_SPREAD), each calling ``probe_node`` with
its own ``node_rank`` and the same master_addr/master_port/world_size/timeout_s, then ``combine`` on
the driver with every outcome that returned (a node whose actor never ran simply has no outcome: its
ranks are reported as never joined).
"""
from __future__ import annotations

from .combine import combine
from .decode import decode, nccl_interfaces
from .probes.node import DEFAULT_SWEEP_SIZES, probe_node

__all__ = ["probe_node", "combine", "decode", "nccl_interfaces", "DEFAULT_SWEEP_SIZES"]
