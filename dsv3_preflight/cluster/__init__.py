"""Cluster mode: run the suite on every node of a Ray cluster, then the cross-node checks.

Importing this package does not import Ray; every function that needs Ray imports it.

Public API (the CLI's ``run --all-nodes`` and the launcher use exactly these)::

    from dsv3_preflight.cluster import (connect, disconnect, alive_nodes, unique_names,
                                        assign_node_ranks, run_all_nodes)

    info = connect(address=None, timeout=60)   # ConnectInfo: .gcs_address, .embedded, .message
    nodes = unique_names(alive_nodes())         # [NodeInfo(node_id, ip, hostname, is_head, is_driver, name)]
    ranked = assign_node_ranks(nodes, profile.master_addr)   # ordered by rank, .node_rank set
    outcome = run_all_nodes(registry, selected, profile, args=args, timeout=300)
    # outcome.results (node + cluster Results), outcome.nodes (document node entries),
    # outcome.extra ({"cluster": {...}}), outcome.ranked, outcome.connect
    disconnect(info)                            # stops Ray only if connect started it (embedded)

* ``connect(address, timeout)``: ``address`` or ``$RAY_ADDRESS`` or ``auto``. ``auto`` with no cluster
  on this machine starts an **embedded local Ray** (``ConnectInfo.embedded`` is True, the message says
  so); ``local`` always does. An explicit unreachable address raises ``ClusterError`` in time.
  The job's runtime_env carries ``RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES=1`` (a task asking for
  no GPU must still see the node's GPUs), ``$DSV3_PREFLIGHT_RAY_RUNTIME_ENV`` (JSON, merged) and,
  with ``DSV3_PREFLIGHT_SHIP_PACKAGE=1``, this dsv3_preflight as a ``py_modules`` entry.
* ``alive_nodes()``: the alive Ray nodes (id, IP, host name, head, the driver's node).
* ``unique_names(nodes, reported=None)``: name = the node's ``$DSV3_PREFLIGHT_NODE_NAME`` (as
  reported by its task) else its host name; names shared by several Ray nodes (one host running
  several) get ``-<6 hex digits of the Ray node id>``.
* ``assign_node_ranks(nodes, master_addr)``: node 0 holds MASTER_ADDR (its IP or host name is
  MASTER_ADDR or an address it resolves to; a loopback MASTER_ADDR means the driver's node; ties:
  driver's node, then the Ray head). The others follow by IP (numerically), host name, name,
  node id. When no node holds MASTER_ADDR the Ray head is node 0 and ``cluster.master_node`` fails.
* ``run_all_nodes``: one task per node pinned with ``NodeAffinitySchedulingStrategy(soft=False)``,
  asking for 0 CPU and 0 GPU, running ``runner.run_this_node(..., cluster_checks_here=False, wave=...)`` once
  with the profile's ``node_rank`` set to the node's rank (``node_side.NodeTask`` in, ``NodeAnswer`` out: facts and
  results, plain data on the wire, typed at both ends; a wave's parameters are a ``dsv3_preflight.wave.Wave``). Then,
  with two nodes or more and a check needing ``port_reach``, node 0 runs the temporary listener on
  MASTER_PORT while the workers run those checks (a second, short wave); with ``--probe`` the
  collective gang (``gang.py``); then the cluster-scope checks on all nodes' facts. A node that
  dies, hangs, errors, or lacks the package is an ERROR row ``cluster.node_run`` for that node with
  the cause; the others are reported; nothing waits past the overall timeout.
"""
from __future__ import annotations

from .connect import ClusterError, ConnectInfo, connect, disconnect
from .nodes import NodeInfo, alive_nodes, assign_node_ranks, unique_names


def run_all_nodes(*args, **kwargs):  # noqa: ANN002, ANN003 - see driver.run_all_nodes
    from .driver import run_all_nodes as _run

    return _run(*args, **kwargs)


__all__ = ["ClusterError", "ConnectInfo", "NodeInfo", "alive_nodes", "assign_node_ranks", "connect",
           "disconnect", "run_all_nodes", "unique_names"]
